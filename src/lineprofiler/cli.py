"""The ``lineprofiler`` command: record, report, compare, attempts, reduce, top, export, serve,
run and show.

The protocol: each subcommand is a ``Command`` below (its module's dotted name and its one-line
help) and a module exposing ``add_arguments(parser)`` and ``main(args) -> int`` (optionally
``EXAMPLES``, shown under its ``--help``, and ``split_argv(argv)``, for a command whose trailing
arguments belong to something else). A module is imported only when its command runs: ``lineprofiler
run script.py`` loads nothing of the reading side into the process it profiles. This file only
dispatches, and says what was meant when a subcommand or option is mistyped.
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import re
import sys
from collections.abc import Sequence
from typing import NamedTuple, NoReturn

from lineprofiler import __version__


class Command(NamedTuple):
    module: str  # the module implementing it, imported only when the command runs
    help: str  # its line in ``lineprofiler --help``, and its description under its own --help


COMMANDS: dict[str, Command] = {
    "record": Command(
        "lineprofiler.report.cli_record",
        "Run a command with profiling enabled, then print the report of its run.",
    ),
    "report": Command(
        "lineprofiler.report.cli_report",
        "Report a run directory: time by role and phase, stragglers, caveats.",
    ),
    "compare": Command(
        "lineprofiler.report.cli_compare",
        "Compare two run directories: time, share, p50/p99 and counter rates per phase.",
    ),
    "attempts": Command(
        "lineprofiler.report.cli_attempts",
        "List a run directory's attempts (the processes that ran together), oldest first, each "
        "with why its files were grouped (overlapping lifetimes, a parent, a claimed id, the "
        "launcher).",
    ),
    "reduce": Command(
        "lineprofiler.report.cli_reduce",
        "Fold each host's worker files into a summary that report reads instead (big jobs).",
    ),
    "top": Command(
        "lineprofiler.report.cli_top",
        "Watch a run in progress: phases, rates and processes, refreshed every interval.",
    ),
    "export": Command(
        "lineprofiler.report.cli_export",
        "Export a run's sampled timeline (RSS, I/O, GPU, open phase) as a Perfetto/Chrome trace.",
    ),
    "serve": Command(
        "lineprofiler.report.cli_serve",
        "Serve a run directory's phases as Prometheus metrics (one endpoint for the whole run).",
    ),
    "run": Command(
        "lineprofiler.line.cli_run",
        "Run a script (or -m module) under the line profiler and print its slowest lines.",
    ),
    "show": Command(
        "lineprofiler.show",
        "Print a line profile saved with --json (or LineProfiler.dump_json) again, or a run "
        "directory's traced phase (lines=) for one role, in the same tables.",
    ),
}

EXAMPLES = """\
examples:
  lineprofiler record -- python train.py          profile a run, then print its report
  lineprofiler report profile/                    the report of a run directory
  lineprofiler report profile/ --json             the same as data (CI gates, diffs)
  lineprofiler report profile/ --html run.html    charts in one self-contained HTML file
  lineprofiler top profile/                       watch a run in progress
  lineprofiler compare base/ new/                 two runs, phase by phase
  lineprofiler compare base/ new/ --fail-over 20  a CI gate: exit 1 on a >20% slower phase
  lineprofiler export profile/ --perfetto t.json  the sampled timeline for ui.perfetto.dev
  lineprofiler serve profile/ --port 9464         a Prometheus scrape endpoint over the run
  lineprofiler run -m mypackage.train --top 20    line by line, under the line profiler
"""


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors suggest the nearest subcommand or option."""

    def error(self, message: str) -> NoReturn:
        hint = self._suggestion(message)
        super().error(message + (f" (did you mean {hint}?)" if hint else ""))

    def _suggestion(self, message: str) -> str | None:
        m = re.search(r"invalid choice: '([^']*)'", message)
        if m:
            choices = [c for a in self._actions for c in (getattr(a, "choices", None) or ())]
            got = difflib.get_close_matches(m.group(1), [str(c) for c in choices], n=1)
            return got[0] if got else None
        m = re.search(r"unrecognized arguments: (\S+)", message)
        if m and m.group(1).startswith("-"):
            flag = m.group(1).split("=", 1)[0]
            options = [o for a in self._actions for o in a.option_strings]
            got = difflib.get_close_matches(flag, options, n=1)
            return got[0] if got else None
        return None


def chosen_command(argv: Sequence[str]) -> str | None:
    """The subcommand named on the command line: the first word that is not one of our options."""
    for word in argv:
        if not word.startswith("-"):
            return word if word in COMMANDS else None
    return None


def build_parser(chosen: str | None = None) -> argparse.ArgumentParser:
    """The parser; only ``chosen``'s module is imported (its options, examples and main)."""
    parser = _Parser(
        prog="lineprofiler",
        description="Reports of lineprofiler.accounting runs, and the line profiler's runner.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"lineprofiler {__version__}")
    # The C++ API's build flags (as pybind11's): for a compiler command line or a build script.
    parser.add_argument(
        "--includes",
        action="store_true",
        help="print the -I flags for Python's headers and the C++ API's, then exit",
    )
    parser.add_argument(
        "--cmake-dir",
        action="store_true",
        help="print the directory of lineprofilerConfig.cmake (find_package), then exit",
    )
    # Not dest="command": a subcommand's own positional of that name (record's) would overwrite it.
    sub = parser.add_subparsers(dest="_command", metavar="COMMAND")
    commands: dict[str, argparse.ArgumentParser] = {}
    parser.set_defaults(_commands=commands)
    for name, command in COMMANDS.items():
        module = importlib.import_module(command.module) if name == chosen else None
        p = sub.add_parser(
            name,
            help=command.help,
            description=command.help,
            epilog=getattr(module, "EXAMPLES", None),
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        if module is not None:
            module.add_arguments(p)
            p.set_defaults(_main=module.main)
        commands[name] = p
    return parser


def _build_paths(args: argparse.Namespace) -> str:
    """What --includes / --cmake-dir print: flags on one line, or the directory."""
    import sysconfig

    import lineprofiler

    if args.cmake_dir:
        return lineprofiler.get_cmake_dir()
    dirs = [sysconfig.get_path("include"), sysconfig.get_path("platinclude")]
    dirs.append(lineprofiler.get_include())
    return " ".join(f"-I{d}" for d in dict.fromkeys(dirs))


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    chosen = chosen_command(argv)
    parser = build_parser(chosen)
    target_argv = None
    if argv and argv[0] == chosen:  # `run`: what follows the script belongs to the script
        split = getattr(importlib.import_module(COMMANDS[chosen].module), "split_argv", None)
        if split is not None:
            own, target_argv = split(argv[1:])
            argv = [argv[0], *own]
    args, extra = parser.parse_known_args(argv)
    if extra:  # said by the subcommand's parser, which knows its options
        args._commands.get(args._command, parser).error(
            f"unrecognized arguments: {' '.join(extra)}"
        )
    if target_argv is not None:
        args.target_argv = target_argv
    if args._command is None and (args.includes or args.cmake_dir):
        print(_build_paths(args))
        return 0
    if not getattr(args, "_main", None):
        parser.print_help(sys.stderr)
        return 2
    try:
        return int(args._main(args) or 0)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0
