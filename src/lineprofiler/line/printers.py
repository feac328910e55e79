"""Text tables of a LineReport: per function (kernprof's layout), and the top lines overall."""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import TextIO

from lineprofiler.line.report import LineReport
from lineprofiler.line.stats import FunctionStats, LineStats

SORT_KEYS = ("time", "self", "hits", "line")
UNITS = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}


def _check(sort_by: str, unit: str) -> None:
    if sort_by not in SORT_KEYS:
        raise ValueError(f"sort_by must be one of {', '.join(SORT_KEYS)}; got {sort_by!r}")
    if unit not in UNITS:
        raise ValueError(f"unit must be one of {', '.join(UNITS)}; got {unit!r}")


def _short(path: str, root: str | None) -> str:
    if root:
        try:
            rel = os.path.relpath(path, root)
        except ValueError:
            return path
        if not rel.startswith(".."):
            return rel
    return path


def _order_lines(lines: Iterable[LineStats], sort_by: str) -> list[LineStats]:
    if sort_by == "time":
        return sorted(lines, key=lambda s: (-s.time_ns, s.lineno))
    if sort_by == "self":
        return sorted(lines, key=lambda s: (-s.self_time_ns, -s.time_ns, s.lineno))
    if sort_by == "hits":
        return sorted(lines, key=lambda s: (-s.hits, -s.time_ns, s.lineno))
    return sorted(lines, key=lambda s: s.lineno)


def _fmt(ns: float, unit: str, width: int) -> str:
    value = ns / UNITS[unit]
    digits = 1 if unit in ("ns", "us") else 3 if unit == "ms" else 6
    return f"{value:>{width}.{digits}f}"


def _listing(fs: FunctionStats, shown: list[LineStats], whole_body: bool) -> list[int]:
    """The source lines to print: the whole body, or the shown lines with their statements'
    continuation lines (a multi-line statement is printed in full)."""
    if whole_body:
        return list(fs.body_lines())
    out: list[int] = []
    for s in shown:
        out.extend(range(s.lineno, fs.statement_end(s.lineno) + 1))
    return list(dict.fromkeys(out))


def print_function_stats(
    report: LineReport,
    *,
    min_time_us: float = 0.0,
    top_n_lines: int | None = None,
    sort_by: str = "line",
    unit: str = "us",
    stream: TextIO,
) -> None:
    """One table per function (kernprof's layout). In source order with no filter, the whole
    body is listed, lines that never ran included; otherwise the selected lines, each statement
    in full."""
    _check(sort_by, unit)
    min_ns = min_time_us * 1000.0
    functions: list[FunctionStats] = list(report.functions.values())
    if sort_by == "line":
        functions.sort(key=lambda f: (f.filename, f.first_lineno))
    elif sort_by == "hits":
        functions.sort(key=lambda f: -f.total_hits)
    elif sort_by == "self":
        functions.sort(key=lambda f: -f.self_time_ns)
    else:
        functions.sort(key=lambda f: -f.total_time_ns)
    stream.write(report.header() + "\n")
    root = report.project_folder
    shown_any = False
    for fs in functions:
        total = fs.total_time_ns
        lines = [s for s in fs.lines.values() if s.time_ns >= min_ns]
        if not lines:
            continue
        whole_body = sort_by == "line" and top_n_lines is None and min_ns <= 0
        if top_n_lines is not None:
            rank = sort_by if sort_by in ("hits", "self") else "time"
            lines = _order_lines(lines, rank)[: max(0, top_n_lines)]
        lines = _order_lines(lines, sort_by)
        shown_any = True
        stream.write(f"\nFile: {_short(fs.filename, root)}\n")
        stream.write(f"Function: {fs.name} at line {fs.first_lineno}\n")
        stream.write(f"Total time: {total / 1e9:.6f} s\n\n")
        stream.write(
            f"{'Line #':>6} {'Hits':>10} {f'Time ({unit})':>12} {f'Self ({unit})':>12} "
            f"{'Per Hit':>10} {'% Time':>7}  Line Contents\n"
        )
        stream.write("=" * 90 + "\n")
        by_line = {s.lineno: s for s in lines}
        for lineno in _listing(fs, lines, whole_body):
            s = by_line.get(lineno)
            text = fs.source_line(lineno)
            if s is None:
                stream.write(f"{lineno:>6} {'':>10} {'':>12} {'':>12} {'':>10} {'':>7}  {text}\n")
                continue
            pct = 100.0 * s.time_ns / total if total else 0.0
            stream.write(
                f"{lineno:>6} {s.hits:>10} {_fmt(s.time_ns, unit, 12)} "
                f"{_fmt(s.self_time_ns, unit, 12)} {_fmt(s.per_hit_ns, unit, 10)} "
                f"{pct:>7.1f}  {text}\n"
            )
    if not shown_any:
        stream.write("(no line above the threshold was traced)\n")


def print_top_lines(
    report: LineReport,
    *,
    top_n: int = 20,
    min_time_us: float = 0.0,
    sort_by: str = "time",
    unit: str = "us",
    stream: TextIO,
) -> None:
    """The top_n lines over all functions; % is of the wall time spent inside the block(s).
    sort_by="self" ranks by self time (a call site is ranked by its own work only)."""
    _check(sort_by, unit)
    min_ns = min_time_us * 1000.0
    rows = [
        (fs, s)
        for fs in report.functions.values()
        for s in fs.lines.values()
        if s.time_ns >= min_ns
    ]
    if sort_by == "hits":
        rows.sort(key=lambda r: (-r[1].hits, -r[1].time_ns))
    elif sort_by == "self":
        rows.sort(key=lambda r: (-r[1].self_time_ns, -r[1].time_ns, r[0].filename, r[1].lineno))
    else:
        rows.sort(key=lambda r: (-r[1].time_ns, r[0].filename, r[1].lineno))
    rows = rows[: max(0, top_n)]
    if sort_by == "line":
        rows.sort(key=lambda r: (r[0].filename, r[1].lineno))
    block_ns = report.block_ns
    stream.write(report.header() + "\n")
    stream.write(
        f"{'#':>3} {f'Time ({unit})':>12} {f'Self ({unit})':>12} {'% Block':>7} {'Hits':>10} "
        f"{'Per Hit':>10}  Location / Line Contents\n"
    )
    stream.write("=" * 90 + "\n")
    if not rows:
        stream.write("(no line above the threshold was traced)\n")
    for i, (fs, s) in enumerate(rows, 1):
        pct = f"{100.0 * s.time_ns / block_ns:>7.1f}" if block_ns > 0 else f"{'-':>7}"
        loc = f"{_short(fs.filename, report.project_folder)}:{s.lineno} ({fs.name})"
        stream.write(
            f"{i:>3} {_fmt(s.time_ns, unit, 12)} {_fmt(s.self_time_ns, unit, 12)} {pct} "
            f"{s.hits:>10} {_fmt(s.per_hit_ns, unit, 10)}  {loc}\n"
        )
        for n in range(s.lineno, fs.statement_end(s.lineno) + 1):
            stream.write(f"{'':>59}{fs.source_line(n).strip()}\n")


def print_cli_views(report: LineReport, args: object, stream: TextIO) -> None:
    """What ``run`` and ``show`` print: the top lines, then (``--per-function``) each function.

    ``args`` carries the shared options: top, min_time_us, sort, unit, per_function.
    """
    print_top_lines(
        report,
        top_n=args.top,  # type: ignore[attr-defined]
        min_time_us=args.min_time_us,  # type: ignore[attr-defined]
        sort_by=args.sort,  # type: ignore[attr-defined]
        unit=args.unit,  # type: ignore[attr-defined]
        stream=stream,
    )
    if args.per_function:  # type: ignore[attr-defined]
        print_function_stats(  # in source order (kernprof's habit): only the top list is ranked
            report,
            min_time_us=args.min_time_us,  # type: ignore[attr-defined]
            sort_by="line",
            unit=args.unit,  # type: ignore[attr-defined]
            stream=stream,
        )
