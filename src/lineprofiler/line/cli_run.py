"""``lineprofiler run [options] script.py [args]`` / ``lineprofiler run [options] -m module [args]``.

Runs a script or module under a LineProfiler scoped to the project folder and prints the top
lines across all functions (and, with --per-function, one table per function). As with
``python`` and kernprof, everything after the script or ``-m MODULE`` belongs to it: only the
options before it are ours (``split_argv``).
"""

from __future__ import annotations

import argparse
import os
import runpy
import sys
import traceback
from collections.abc import Callable, Sequence

EXAMPLES = """\
examples:
  lineprofiler run train.py --epochs 3            the slowest lines of the project's code
  lineprofiler run -m mypackage.train --top 20    a module, like python -m
  lineprofiler run --per-function --by self app.py
                                                  one table per function, by self time
  lineprofiler run --json prof.json train.py      also save it: lineprofiler show prof.json

Only the options before the script (or -m MODULE) are run's; the rest are the script's.
"""

# Our options that take a value (the value is not the script).
_WITH_VALUE = {
    "--project-folder",
    "--path",
    "--top",
    "--min-time-us",
    "--sort",
    "--by",
    "--json",
    "--unit",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-m", dest="module", metavar="MODULE", help="run a module, like python -m")
    parser.add_argument(
        "--project-folder",
        metavar="DIR",
        help="trace code under DIR (default: the nearest .git above the working directory)",
    )
    parser.add_argument(
        "--path",
        dest="paths",
        action="append",
        metavar="DIR",
        help="trace code under DIR too (repeatable; site-packages folders included)",
    )
    add_view_arguments(parser)
    parser.add_argument("--json", metavar="PATH", help="also write the statistics as JSON")
    parser.add_argument(
        "--raw", action="store_true", help="do not subtract the tracer's calibrated cost"
    )
    parser.add_argument(
        "--no-follow",
        action="store_true",
        help="do not trace child Python processes (multiprocessing, subprocess)",
    )
    parser.add_argument("target", nargs="?", help="the script to run, then its arguments")


def add_view_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of what is printed, shared by ``run`` and ``show``: top, unit, ranking."""
    parser.add_argument(
        "--top",
        type=int,
        default=30,
        metavar="N",
        help="lines listed in the top list, across all functions, ranked by --by (default 30)",
    )
    parser.add_argument(
        "--min-time-us",
        type=float,
        default=0.0,
        metavar="US",
        help="hide lines that took less than US microseconds (default 0: none hidden)",
    )
    parser.add_argument(
        "--by",
        "--sort",
        dest="sort",
        choices=("time", "self", "hits", "line"),
        default="time",
        help="rank lines by time (with callees), self time (without traced callees), hits or "
        "line (default: time)",
    )
    parser.add_argument(
        "--unit", choices=("ns", "us", "ms", "s"), default="us", help="time unit (default: us)"
    )
    parser.add_argument(
        "--per-function", action="store_true", help="also print one table per function"
    )


def split_argv(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """(our arguments incl. the script or -m MODULE, the target's arguments)."""
    argv = list(argv)
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            return argv[: i + 2], argv[i + 2 :]
        if arg == "-m":
            return argv[: i + 2], argv[i + 2 :]
        if arg.startswith("-m") and not arg.startswith("--"):  # -mMODULE
            return argv[: i + 1], argv[i + 1 :]
        if arg in _WITH_VALUE:
            i += 2
            continue
        if not arg.startswith("-") or arg == "-":
            return argv[: i + 1], argv[i + 1 :]
        i += 1
    return argv, []


def main(args: argparse.Namespace) -> int:
    from lineprofiler.line import LineProfiler, _follow

    if not args.module and not args.target:
        print("lineprofiler run: give a script or -m MODULE", file=sys.stderr)
        return 2
    argv_rest = list(getattr(args, "target_argv", None) or [])
    profiler = LineProfiler(
        args.project_folder, paths=args.paths or (), subtract_overhead=not args.raw
    )
    follow = None if args.no_follow else _follow.Follow(profiler)
    pid = os.getpid()
    saved_argv, saved_path0 = sys.argv[:], sys.path[0] if sys.path else None
    stdout = sys.stdout
    try:  # the target may close sys.stdout (json.tool does): keep a way to print after it
        saved_fd: int | None = os.dup(stdout.fileno())
    except (OSError, ValueError, AttributeError):
        saved_fd = None
    exit_code = 0
    restore_profile = _install_profile_builtin(profiler)
    try:
        if args.module:
            sys.argv = [args.module, *argv_rest]
            sys.path.insert(0, os.getcwd())
            with profiler:
                runpy.run_module(args.module, run_name="__main__", alter_sys=True)
        else:
            script = os.path.abspath(args.target)
            sys.argv = [script, *argv_rest]
            sys.path.insert(0, os.path.dirname(script))
            with profiler:
                runpy.run_path(script, run_name="__main__")
    except SystemExit as exc:
        code = exc.code
        exit_code = code if isinstance(code, int) else (0 if code is None else 1)
        if not isinstance(code, int) and code is not None:
            print(code, file=sys.stderr)
    except Exception:
        traceback.print_exc()
        exit_code = 1
    finally:
        restore_profile()
        sys.argv = saved_argv
        if saved_path0 is not None and sys.path and sys.path[0] != saved_path0:
            sys.path.pop(0)
    if os.getpid() != pid:  # a child forked by the target (os.fork) ended: save, do not print
        if saved_fd is not None:
            os.close(saved_fd)
        _follow.finish_child()
        return exit_code
    out = sys.stdout if not sys.stdout.closed else stdout
    if out.closed and saved_fd is not None:
        out = open(saved_fd, "w", closefd=True)  # noqa: SIM115 - closed below
        saved_fd = None
    elif saved_fd is not None:
        os.close(saved_fd)
        saved_fd = None
    report = profiler.report()
    if follow is not None:
        for child in follow.collect():
            report.merge(child)
    try:
        exit_code = _print(report, args, out, exit_code)
    finally:
        if out is not sys.stdout and out is not stdout:
            out.close()
    return exit_code


def _install_profile_builtin(profiler) -> Callable[[], None]:
    """Makes ``profile`` a builtin while the target runs, as kernprof does, so that a script
    decorated with a bare ``@profile`` runs unchanged: it marks the function to trace (wherever
    it lives, like ``@lp.profile``) and returns it as it is (the whole run is traced already).
    Returns what puts the previous builtin back."""
    import builtins

    missing = object()
    previous = builtins.__dict__.get("profile", missing)

    def profile(func):
        profiler._add(func, stacklevel=3)
        return func

    builtins.profile = profile  # type: ignore[attr-defined]

    def restore() -> None:
        if previous is missing:
            builtins.__dict__.pop("profile", None)
        else:
            builtins.profile = previous  # type: ignore[attr-defined]

    return restore


def _print(report, args: argparse.Namespace, out, exit_code: int) -> int:
    from lineprofiler.line.printers import print_cli_views

    out.flush()
    out.write("\n")
    print_cli_views(report, args, out)
    if args.json:
        report.dump(args.json)
    return exit_code
