"""``lineprofiler attempts DIR [--json]``: the attempts of a run directory, oldest first.

One line per attempt: its id (what ``report --attempt`` takes), start, end, processes and roles,
and which one ``report`` shows by default; under it, indented, why its files were grouped (the
evidence: overlapping lifetimes, a parent, one process, a claimed id, the launching process, and
for a later attempt why it is not part of the one before). ``--json`` has the same as ``why``.
Exit status as ``report``'s.
"""

from __future__ import annotations

import argparse
import json

from lineprofiler.report.cli_report import emit, fail, internal_error
from lineprofiler.report.json import attempt_doc
from lineprofiler.report.merge import RunError, merge_run
from lineprofiler.report.model import Attempt
from lineprofiler.report.units import fmt_utc, terminal_safe

EXAMPLES = """\
examples:
  lineprofiler attempts profile/                     every launch into profile/, oldest first
  lineprofiler attempts profile/ --json              the same as data
  lineprofiler report profile/ --attempt ID          then report one of them
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_dir", metavar="DIR", help="the run directory (Profiler's run_dir)")
    parser.add_argument("--json", action="store_true", help="print the list as JSON")


def render(attempts: list[Attempt]) -> str:
    lines = [f"{'ATTEMPT':<34}{'START (UTC)':<22}{'END (UTC)':<22}{'PROCS':>6}  ROLES"]
    for a in attempts:
        start = fmt_utc(a.start_time)[:19] if a.start_time is not None else "?"
        end = fmt_utc(a.end_time)[:19] if a.end_time is not None else "?"
        roles = ", ".join(f"{r} x{n}" for r, n in a.roles.items()) or "-"
        mark = "  (reported)" if a.reported else ""
        over = f"  (overlapped {', '.join(a.overlapped)})" if a.overlapped else ""
        lines.append(f"{a.run_id:<34}{start:<22}{end:<22}{a.workers:>6}  {roles}{mark}{over}")
        if a.why:
            lines.append(f"    why: {'; '.join(a.why)}")
    # every line through terminal_safe: ids, roles and reasons are the worker files' own text
    return "\n".join(terminal_safe(line) for line in lines) + "\n"


def main(args: argparse.Namespace) -> int:
    try:
        run = merge_run(args.run_dir, with_samples=False)
        if args.json:
            out = json.dumps([attempt_doc(a) for a in run.attempts], indent=2) + "\n"
        else:
            out = render(run.attempts)
    except RunError as exc:
        return fail("attempts", str(exc))
    except Exception as exc:  # never a traceback on a user's terminal
        return internal_error("attempts", exc)
    return emit(out)
