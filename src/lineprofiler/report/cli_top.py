"""``lineprofiler top DIR [--interval S]``: a live view of a run in progress (``report.live``).

A missing directory is an error at once (exit 2); piped, it ends when every process finished."""

from __future__ import annotations

import argparse

from lineprofiler.report.cli_report import fail
from lineprofiler.report.live import DEFAULT_INTERVAL_S, DEFAULT_TOP, run_top

EXAMPLES = """\
examples:
  lineprofiler top profile/                 refresh every 2 s; q or Ctrl-C quits
  lineprofiler top profile/ --interval 10   on a big job or a slow shared filesystem
  lineprofiler top profile/ -n 1 > now.txt  one plain-text frame (not a terminal: no redraw)
  lineprofiler top profile/ | tee top.log   piped: frames until every process has finished
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_dir", metavar="DIR", help="the run directory (Profiler's run_dir)")
    parser.add_argument(
        "--interval",
        type=float,
        default=DEFAULT_INTERVAL_S,
        metavar="S",
        help=f"seconds between refreshes (default {DEFAULT_INTERVAL_S:g})",
    )
    parser.add_argument(
        "--top",
        type=int,
        default=DEFAULT_TOP,
        metavar="N",
        help=f"dominant phases listed per role, by time in the last interval "
        f"(default {DEFAULT_TOP})",
    )
    parser.add_argument(
        "-n",
        "--iterations",
        type=int,
        default=0,
        metavar="N",
        help="stop after N refreshes (default: until q or Ctrl-C; when not on a terminal, "
        "also once every process of the run has finished)",
    )


def main(args: argparse.Namespace) -> int:
    if not args.interval > 0:
        return fail("top", f"--interval must be above 0, not {args.interval}")
    if args.top < 1:
        return fail("top", f"--top must be 1 or more, not {args.top}")
    return run_top(args.run_dir, args.interval, args.top, args.iterations)
