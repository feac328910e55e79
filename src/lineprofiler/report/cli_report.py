"""``lineprofiler report DIR [--json | --html FILE] [--no-samples]``: one run, merged, as text,
JSON or a self-contained HTML file.

Exit status: 0 with a report (whose CAVEATS name any worker that could not be read), 2 when the
directory cannot be reported at all (missing, empty, not a run, nothing readable).
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback

from lineprofiler.report.merge import MergedRun, RunError, merge_run
from lineprofiler.report.timeline import DEFAULT_BINS
from lineprofiler.report.units import terminal_safe
from lineprofiler.report.view import DEFAULT_LINES_TOP, DEFAULT_TOP
from lineprofiler.safe_write import write_output

EXAMPLES = """\
examples:
  lineprofiler report profile/                     the report of a run directory
  lineprofiler report profile/ --json              the same as data (CI gates, diffs)
  lineprofiler report profile/ --html run.html     charts in one self-contained HTML file
  lineprofiler report profile/ --iteration step    ITERATIONS from the phase named step
  lineprofiler report profile/ --attempt all       every launch into the directory, summed
"""
ITERATION_HELP = (
    "the loop's phase, whose entries the ITERATIONS block describes: a name (step) or a path "
    "(train/step) (default: a phase named iteration, else each role's most-entered top-level "
    "phase)"
)
ENV_DEBUG = "LINEPROFILER_DEBUG"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_dir", metavar="DIR", help="the run directory (Profiler's run_dir)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument(
        "--html",
        metavar="FILE",
        help="write the report as one self-contained HTML file (charts; nothing fetched)",
    )
    parser.add_argument(
        "--no-samples",
        action="store_true",
        help="phases only: skip the resource samples (much less memory on a large run)",
    )
    parser.add_argument(
        "--top",
        type=int,
        default=DEFAULT_TOP,
        metavar="N",
        help=f"dominant phases listed per role (default {DEFAULT_TOP}; 0: all)",
    )
    parser.add_argument(
        "--attempt",
        metavar="ID",
        help="report this attempt instead of the newest (ids: lineprofiler attempts DIR); "
        "'all' sums every attempt",
    )
    parser.add_argument("--iteration", metavar="NAME", help=ITERATION_HELP)
    parser.add_argument(
        "--lines-top",
        type=int,
        default=DEFAULT_LINES_TOP,
        metavar="N",
        help="lines listed per traced phase (Profiler(lines=...)) in the text report "
        f"(default {DEFAULT_LINES_TOP}; 0: all)",
    )


def fail(prog: str, message: str) -> int:
    print(f"lineprofiler {prog}: error: {terminal_safe(message)}", file=sys.stderr)
    return 2


def internal_error(prog: str, exc: BaseException) -> int:
    """A bug, not bad input: say so in one paragraph (traceback only with LINEPROFILER_DEBUG)."""
    if os.environ.get(ENV_DEBUG):
        traceback.print_exc()
    print(
        f"lineprofiler {prog}: internal error: {type(exc).__name__}: {terminal_safe(str(exc))}\n"
        f"(this is a bug in lineprofiler; rerun with {ENV_DEBUG}=1 for the traceback)",
        file=sys.stderr,
    )
    return 1


def emit(text: str) -> int:
    """Writes the report to stdout; a reader that went away (``| head``) is not an error."""
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # so the exit-time flush does not complain
        os.close(devnull)
    return 0


def render_report(
    run: MergedRun,
    as_json: bool,
    top: int = DEFAULT_TOP,
    iteration: str | None = None,
    lines_top: int = DEFAULT_LINES_TOP,
) -> str:
    """The report of a merged run as the printed formats have it: JSON, else text (``report``
    and ``record`` both print through here)."""
    if as_json:
        from lineprofiler.report.json import render_json

        return render_json(run, top, iteration)
    from lineprofiler.report.text import render_text

    return render_text(run, top, iteration, lines_top)


def main(args: argparse.Namespace) -> int:
    if args.html and args.json:
        return fail("report", "--html and --json: choose one")
    if args.top < 0:
        return fail("report", f"--top must be 0 or more, not {args.top}")
    if args.lines_top < 0:
        return fail("report", f"--lines-top must be 0 or more, not {args.lines_top}")
    try:
        run = merge_run(
            args.run_dir,
            with_samples=not args.no_samples,
            attempt=args.attempt,
            timeline_bins=DEFAULT_BINS if args.html else 0,
        )
        if args.html:
            from lineprofiler.report.html import render_html

            page = render_html(run, args.top, iteration=args.iteration)
            try:
                write_output(args.html, page)
            except OSError as exc:
                return fail("report", f"{args.html}: cannot write it ({exc.strerror or exc})")
            print(
                f"lineprofiler report: wrote {terminal_safe(args.html)} "
                f"({len(page.encode()):,} bytes)"
            )
            return 0
        out = render_report(run, args.json, args.top, args.iteration, args.lines_top)
    except RunError as exc:
        return fail("report", str(exc))
    except Exception as exc:  # never a traceback on a user's terminal
        return internal_error("report", exc)
    return emit(out)
