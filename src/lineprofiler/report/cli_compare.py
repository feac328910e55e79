"""``lineprofiler compare A B [--json]``: two runs, per role, phase by phase.

Reads phases only (never resource samples). Exit status 2 when either directory cannot be
reported; a run with unreadable workers still compares, and its caveats are printed.
"""

from __future__ import annotations

import argparse

from lineprofiler.report.cli_report import emit, fail, internal_error
from lineprofiler.report.compare import DEFAULT_COMPARE_TOP
from lineprofiler.report.merge import RunError, merge_run

HELP = "Compare two run directories: time, share, p50/p99 and counter rates per phase."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_a", metavar="A", help="the baseline run directory")
    parser.add_argument("run_b", metavar="B", help="the run directory compared against it")
    parser.add_argument("--json", action="store_true", help="print the comparison as JSON")
    parser.add_argument(
        "--top",
        type=int,
        default=DEFAULT_COMPARE_TOP,
        metavar="N",
        help=f"nested phases shown per role, by self time (default {DEFAULT_COMPARE_TOP}; 0: all)"
        "; top-level and one-sided phases are always shown",
    )


def main(args: argparse.Namespace) -> int:
    if args.top < 0:
        return fail("compare", f"--top must be 0 or more, not {args.top}")
    try:
        from lineprofiler.report.compare import (
            compare_runs,
            render_compare_json,
            render_compare_text,
        )

        a = merge_run(args.run_a, with_samples=False)
        b = merge_run(args.run_b, with_samples=False)
        c = compare_runs(a, b, args.top)
        out = render_compare_json(c) if args.json else render_compare_text(c)
    except RunError as exc:
        return fail("compare", str(exc))
    except Exception as exc:  # never a traceback on a user's terminal
        return internal_error("compare", exc)
    return emit(out)
