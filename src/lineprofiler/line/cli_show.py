"""``lineprofiler show FILE.json``: prints a saved line profile (``run --json``, ``dump_json``)
again, ranked and filtered like ``run`` prints it."""

from __future__ import annotations

import argparse
import json
import sys

from lineprofiler.line.cli_run import add_view_arguments

EXAMPLES = """\
examples:
  lineprofiler show prof.json                      the saved profile's slowest lines
  lineprofiler show prof.json --by self --top 10   ranked by self time instead
  lineprofiler show prof.json --per-function --unit ms
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", metavar="FILE.json", help="the saved line profile")
    add_view_arguments(parser)


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
