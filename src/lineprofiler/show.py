"""``lineprofiler show FILE.json | DIR --role R [--phase P]``: a saved line profile again
(``line.cli_show``), or one role's lines of a traced phase of a run directory (issue 32) in
LineProfiler's own tables.

It sits above both sides: the run is merged by the reading side (``report``), its lines turned
into a LineProfiler JSON document (summed over the role's processes that traced the phase) and
printed by the line profiler's printers (``line``), which neither side may import of the other.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from lineprofiler.line.cli_run import add_view_arguments

EXAMPLES = """\
examples:
  lineprofiler show prof.json                      the saved profile's slowest lines
  lineprofiler show prof.json --by self --top 10   ranked by self time instead
  lineprofiler show profile/ --role learner        a run's traced phase, the learner's lines
  lineprofiler show profile/ --role learner --phase train_step --per-function
"""


MAX_SPAN = 100_000  # source lines of one function at most


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "file",
        metavar="FILE.json|DIR",
        help="a saved line profile, or a run directory whose phases were traced (lines=)",
    )
    parser.add_argument("--role", help="with a run directory: the role whose lines are shown")
    parser.add_argument(
        "--phase",
        help="with a run directory: the traced phase, by name or path (default: every traced "
        "phase of the role)",
    )
    add_view_arguments(parser)


def line_profile_doc(lv: Any, safe: Any) -> dict[str, Any]:
    """A traced phase's merged lines (``report.view.PhaseLinesView``) as a LineProfiler JSON
    document (``LineReport.from_dict``); ``safe`` escapes what the sidecars named (source text,
    files, functions) for the terminal: LineProfiler's printers print them as they are."""
    m = lv.merged
    by_fn: dict[tuple[str, int, str], list[Any]] = {}
    for row in lv.rows:
        ml = row.line
        by_fn.setdefault((ml.file, ml.first_line, ml.function), []).append(ml)
    functions = []
    for key, lines in by_fn.items():
        fn = m.functions.get(key)
        first = key[1]
        body = list(fn.body[:MAX_SPAN]) if fn is not None else []
        # A line far from its function (a hostile number) is left out, and every listed line
        # gets its text here: the printers would otherwise read a missing one from the file the
        # sidecar names (linecache), and list a whole body up to any line number claimed.
        rows = [ml for ml in lines if first <= ml.line < first + MAX_SPAN]
        ends = {ml.line: min(max(ml.end_line, ml.line), first + MAX_SPAN - 1) for ml in rows}
        last = max([first + len(body) - 1, *ends.values(), first])
        starts = {ml.line: ml.source for ml in rows}
        text = [
            body[n - first] if n - first < len(body) else starts.get(n, "")
            for n in range(first, last + 1)
        ]
        functions.append(
            {
                "file": safe(key[0]),
                "function": safe(key[2]),
                "first_line": first,
                "last_line": last,
                "body": [safe(t) for t in text],
                "lines": [
                    {
                        "line": ml.line,
                        "end_line": ends[ml.line],
                        "hits": ml.hits,
                        "time_ns": ml.time_ns,
                        "raw_time_ns": ml.raw_time_ns,
                        "self_time_ns": ml.self_ns,
                        "source": safe(ml.source),
                    }
                    for ml in rows
                ],
            }
        )
    # the header names one process's calibration; raw when some process's times are raw
    known = [o for o in m.overhead if o is not None and "line" in o and "call" in o]
    overhead = known[0] if known and len(known) == len(m.overhead) else None
    return {
        "project_folder": safe(m.project_folder or ""),
        "mechanism": safe(", ".join(sorted(m.mechanisms))),
        "processes": max(1, m.processes),
        "block_wall_ns": m.traced_wall_ns,
        "block_ns": m.traced_wall_ns,
        "overhead_ns_per_event": overhead,
        "functions": functions,
    }


def _show_run(args: argparse.Namespace) -> int:
    from lineprofiler.line.printers import print_cli_views
    from lineprofiler.line.report import LineReport
    from lineprofiler.report.merge import RunError, merge_run
    from lineprofiler.report.units import path_label, terminal_safe
    from lineprofiler.report.view import role_view

    def fail(message: str) -> int:
        print(f"lineprofiler show: {terminal_safe(message)}", file=sys.stderr)
        return 2

    try:
        run = merge_run(args.file, with_samples=False)
    except RunError as exc:
        return fail(str(exc))
    traced = sorted(n for n, r in run.roles.items() if r.lines)
    if args.role is None:
        return fail(
            f"{args.file}: a run directory: name a role with --role "
            f"(roles with traced lines: {', '.join(traced) or 'none'})"
        )
    role = run.roles.get(args.role)
    if role is None:
        return fail(f"{args.file}: no role {args.role!r} (roles: {', '.join(run.roles)})")
    rv = role_view(role, lines_top=0)
    chosen = [
        lv
        for p, lv in rv.lines.items()
        if args.phase is None
        or p[-1] == args.phase
        or args.phase in ("/".join(p), "/".join(lv.merged.path))
    ]
    if not chosen:
        known = ", ".join(path_label(p) for p in rv.lines) or "none"
        what = "traced phase" if args.phase is None else f"traced phase {args.phase!r}"
        return fail(
            f"{args.file}: role {args.role!r} has no {what} (traced: {known}; phases are traced "
            "with Profiler(lines=...) or LINEPROFILER_LINES)"
        )
    for i, lv in enumerate(chosen):
        if i:
            sys.stdout.write("\n")
        title = f"LINES IN {path_label(lv.path)} (role {args.role}): {lv.note()}"
        sys.stdout.write(terminal_safe(title) + "\n")
        report = LineReport.from_dict(line_profile_doc(lv, terminal_safe))
        print_cli_views(report, args, sys.stdout)
    for c in run.caveats:
        if c.kind == "lines_unreadable":
            print(f"lineprofiler show: caveat: {terminal_safe(c.message)}", file=sys.stderr)
    return 0


def main(args: argparse.Namespace) -> int:
    if os.path.isdir(args.file):
        return _show_run(args)
    if args.role is not None or args.phase is not None:
        print(
            "lineprofiler show: --role and --phase go with a run directory, not a saved profile",
            file=sys.stderr,
        )
        return 2
    from lineprofiler.line.cli_show import main as show_file

    return show_file(args)
