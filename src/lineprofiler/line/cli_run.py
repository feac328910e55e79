"""``lineprofiler run script.py [args]`` / ``lineprofiler run -m module [args]``.

Runs a script or module under a LineProfiler scoped to the project folder and prints the top
lines across all functions (and, with --per-function, one table per function).
"""

from __future__ import annotations

import argparse
import os
import runpy
import sys
import traceback

HELP = "run a script (or -m module) under the line profiler and print its slowest lines"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-m", dest="module", metavar="MODULE", help="run a module like python -m")
    parser.add_argument(
        "--project-folder",
        metavar="DIR",
        help="trace code under DIR (default: the nearest .git above the working directory)",
    )
    parser.add_argument("--top", type=int, default=30, metavar="N", help="lines to show (30)")
    parser.add_argument(
        "--min-time-us", type=float, default=0.0, metavar="US", help="hide faster lines"
    )
    parser.add_argument("--sort", choices=("time", "hits", "line"), default="time")
    parser.add_argument(
        "--per-function", action="store_true", help="also print one table per function"
    )
    parser.add_argument("--json", metavar="PATH", help="also write the statistics as JSON")
    parser.add_argument(
        "--raw", action="store_true", help="do not subtract the tracer's calibrated cost"
    )
    parser.add_argument("target", nargs="?", help="the script to run")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="arguments for the script")


def main(args: argparse.Namespace) -> int:
    from lineprofiler.line import LineProfiler

    if not args.module and not args.target:
        print("lineprofiler run: give a script or -m MODULE", file=sys.stderr)
        return 2
    argv_rest = list(args.args)
    if args.module and args.target:  # `run -m mod arg1 ...`: the first arg landed in target
        argv_rest.insert(0, args.target)
    profiler = LineProfiler(args.project_folder, subtract_overhead=not args.raw)
    saved_argv, saved_path0 = sys.argv[:], sys.path[0] if sys.path else None
    exit_code = 0
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
        sys.argv = saved_argv
        if saved_path0 is not None and sys.path and sys.path[0] != saved_path0:
            sys.path.pop(0)
    sys.stdout.flush()
    out = sys.stdout
    out.write("\n")
    profiler.print_global_top_stats(
        top_n=args.top, min_time_us=args.min_time_us, sort_by=args.sort, stream=out
    )
    if args.per_function:
        profiler.print_stats(min_time_us=args.min_time_us, sort_by="line", stream=out)
    if args.json:
        profiler.dump_json(args.json)
    return exit_code
