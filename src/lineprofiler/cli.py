"""The ``lineprofiler`` command: ``report``, ``compare``, ``reduce`` and ``run``.

Each subcommand lives in its own module exposing ``HELP``, ``add_arguments(parser)`` and
``main(args) -> int``; this file only dispatches.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

# subcommand -> module implementing it
COMMANDS: dict[str, str] = {
    "report": "lineprofiler.report.cli_report",
    "compare": "lineprofiler.report.cli_compare",
    "reduce": "lineprofiler.report.cli_reduce",
    "run": "lineprofiler.line.cli_run",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lineprofiler",
        description="Reports of lineprofiler.accounting runs, and the line profiler's runner.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, module_name in COMMANDS.items():
        module = importlib.import_module(module_name)
        p = sub.add_parser(name, help=module.HELP, description=module.HELP)
        module.add_arguments(p)
        p.set_defaults(_main=module.main)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    if not getattr(args, "_main", None):
        parser.print_help(sys.stderr)
        return 2
    try:
        return int(args._main(args) or 0)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0
