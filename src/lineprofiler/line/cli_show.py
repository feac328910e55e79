"""``lineprofiler show FILE.json``: prints a saved line profile (``run --json``, ``dump_json``)
again, ranked and filtered like ``run`` prints it."""

from __future__ import annotations

import argparse
import json
import sys

HELP = "print a line profile saved with --json (or LineProfiler.dump_json) again"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", metavar="FILE.json", help="the saved line profile")
    parser.add_argument("--top", type=int, default=30, metavar="N", help="lines to show (30)")
    parser.add_argument(
        "--min-time-us", type=float, default=0.0, metavar="US", help="hide faster lines"
    )
    parser.add_argument(
        "--by",
        "--sort",
        dest="sort",
        choices=("time", "self", "hits", "line"),
        default="time",
        help="rank lines by time (with callees), self time, hits or line (default: time)",
    )
    parser.add_argument(
        "--unit", choices=("ns", "us", "ms", "s"), default="us", help="time unit (default: us)"
    )
    parser.add_argument(
        "--per-function", action="store_true", help="also print one table per function"
    )


def main(args: argparse.Namespace) -> int:
    from lineprofiler.line.printers import print_cli_views
    from lineprofiler.line.report import LineReport

    try:
        report = LineReport.load(args.file)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        print(f"lineprofiler show: cannot read {args.file}: {exc}", file=sys.stderr)
        return 2
    except json.JSONDecodeError as exc:  # pragma: no cover - a ValueError already
        print(f"lineprofiler show: {args.file} is not JSON: {exc}", file=sys.stderr)
        return 2
    print_cli_views(report, args, sys.stdout)
    return 0
