"""Text tables of a LineProfiler's statistics: per function, and the top lines overall."""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import TextIO

from lineprofiler.line.stats import FunctionKey, FunctionStats, LineStats

SORT_KEYS = ("time", "hits", "line")


def _check_sort(sort_by: str) -> None:
    if sort_by not in SORT_KEYS:
        raise ValueError(f"sort_by must be one of {', '.join(SORT_KEYS)}; got {sort_by!r}")


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
    if sort_by == "hits":
        return sorted(lines, key=lambda s: (-s.hits, -s.time_ns, s.lineno))
    return sorted(lines, key=lambda s: s.lineno)


def print_function_stats(
    stats: dict[FunctionKey, FunctionStats],
    *,
    min_time_us: float = 0.0,
    top_n_lines: int | None = None,
    sort_by: str = "line",
    header: str = "",
    root: str | None = None,
    stream: TextIO,
) -> None:
    """One table per function (most total time first): line, hits, time, per hit, %, source."""
    _check_sort(sort_by)
    min_ns = min_time_us * 1000.0
    functions: list[FunctionStats] = list(stats.values())
    if sort_by == "line":
        functions.sort(key=lambda f: (f.filename, f.first_lineno))
    elif sort_by == "hits":
        functions.sort(key=lambda f: -f.total_hits)
    else:
        functions.sort(key=lambda f: -f.total_time_ns)
    if header:
        stream.write(header + "\n")
    shown = 0
    for fs in functions:
        total = fs.total_time_ns
        lines = [s for s in fs.lines.values() if s.time_ns >= min_ns]
        if not lines:
            continue
        if top_n_lines is not None:
            rank = "hits" if sort_by == "hits" else "time"
            lines = _order_lines(lines, rank)[: max(0, top_n_lines)]
        lines = _order_lines(lines, sort_by)
        shown += 1
        stream.write(f"\nFile: {_short(fs.filename, root)}\n")
        stream.write(f"Function: {fs.name} at line {fs.first_lineno}\n")
        stream.write(f"Total time: {total / 1e9:.6f} s\n\n")
        stream.write(
            f"{'Line #':>6} {'Hits':>10} {'Time (us)':>12} {'Per Hit':>10} {'% Time':>7}  "
            "Line Contents\n"
        )
        stream.write("=" * 78 + "\n")
        for s in lines:
            pct = 100.0 * s.time_ns / total if total else 0.0
            stream.write(
                f"{s.lineno:>6} {s.hits:>10} {s.time_ns / 1e3:>12.1f} {s.per_hit_ns / 1e3:>10.2f} "
                f"{pct:>7.1f}  {fs.source_line(s.lineno)}\n"
            )
    if not shown:
        stream.write("(no line above the threshold was traced)\n")


def print_top_lines(
    stats: dict[FunctionKey, FunctionStats],
    *,
    top_n: int = 20,
    min_time_us: float = 0.0,
    sort_by: str = "time",
    block_ns: int = 0,
    header: str = "",
    root: str | None = None,
    stream: TextIO,
) -> None:
    """The top_n lines over all functions; % is of the wall time spent inside the block(s)."""
    _check_sort(sort_by)
    min_ns = min_time_us * 1000.0
    rows = [(fs, s) for fs in stats.values() for s in fs.lines.values() if s.time_ns >= min_ns]
    rank = "hits" if sort_by == "hits" else "time"
    if rank == "hits":
        rows.sort(key=lambda r: (-r[1].hits, -r[1].time_ns))
    else:
        rows.sort(key=lambda r: (-r[1].time_ns, r[0].filename, r[1].lineno))
    rows = rows[: max(0, top_n)]
    if sort_by == "line":
        rows.sort(key=lambda r: (r[0].filename, r[1].lineno))
    if header:
        stream.write(header + "\n")
    stream.write(
        f"{'#':>3} {'Time (us)':>12} {'% Block':>7} {'Hits':>10} {'Per Hit':>10}  "
        "Location / Line Contents\n"
    )
    stream.write("=" * 78 + "\n")
    if not rows:
        stream.write("(no line above the threshold was traced)\n")
    for i, (fs, s) in enumerate(rows, 1):
        pct = f"{100.0 * s.time_ns / block_ns:>7.1f}" if block_ns > 0 else f"{'-':>7}"
        loc = f"{_short(fs.filename, root)}:{s.lineno} ({fs.name})"
        stream.write(
            f"{i:>3} {s.time_ns / 1e3:>12.1f} {pct} {s.hits:>10} {s.per_hit_ns / 1e3:>10.2f}  "
            f"{loc}\n"
        )
        stream.write(f"{'':>46}{fs.source_line(s.lineno).strip()}\n")
