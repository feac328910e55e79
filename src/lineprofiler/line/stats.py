"""Per-line and per-function statistics of a LineProfiler, and their JSON form."""

from __future__ import annotations

import ast
import linecache
from dataclasses import dataclass, field
from types import CodeType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lineprofiler.line._calibrate import Overhead

FunctionKey = tuple[str, int, str]  # (filename, first line, qualified name)
# The tracer's results: per code object, rows of (line, hits, raw ns, line events, traced calls,
# untraced calls, then the same ns and counts for the part spent in traced callees).
TracerRow = tuple[int, int, int, int, int, int, int, int, int, int]
TracerResults = list[tuple[CodeType, list[TracerRow]]]


@dataclass
class LineStats:
    """One source line: hits and wall time (ns) from its line events to the next event of its
    frame, including the calls it makes. ``raw_time_ns`` is as measured; ``time_ns`` has the
    tracer's calibrated own cost subtracted (equal to raw when subtraction is off);
    ``self_time_ns`` is ``time_ns`` less the time of the traced functions it called."""

    lineno: int
    hits: int
    time_ns: int
    raw_time_ns: int
    self_time_ns: int = 0

    @property
    def per_hit_ns(self) -> float:
        return self.time_ns / self.hits if self.hits else 0.0

    def add(self, other: LineStats) -> None:
        self.hits += other.hits
        self.time_ns += other.time_ns
        self.raw_time_ns += other.raw_time_ns
        self.self_time_ns += other.self_time_ns


@dataclass
class FunctionStats:
    """The traced lines of one function (all code objects with the same file, line and name).

    ``last_lineno`` is the function's last source line and ``extents`` maps a statement's first
    line to its last when it spans several (both from the code objects' positions), so that
    listings show whole bodies and whole statements. ``source`` holds source lines read back
    from JSON (``lineprofiler show``); otherwise lines come from the file."""

    filename: str
    name: str
    first_lineno: int
    lines: dict[int, LineStats] = field(default_factory=dict)
    last_lineno: int = 0
    extents: dict[int, int] = field(default_factory=dict)
    source: dict[int, str] = field(default_factory=dict)

    @property
    def key(self) -> FunctionKey:
        return (self.filename, self.first_lineno, self.name)

    @property
    def total_time_ns(self) -> int:
        """Sum of the function's line times (a recursive function counts its inner calls again)."""
        return sum(s.time_ns for s in self.lines.values())

    @property
    def raw_total_time_ns(self) -> int:
        return sum(s.raw_time_ns for s in self.lines.values())

    @property
    def self_time_ns(self) -> int:
        return sum(s.self_time_ns for s in self.lines.values())

    @property
    def total_hits(self) -> int:
        return sum(s.hits for s in self.lines.values())

    def source_line(self, lineno: int) -> str:
        if lineno in self.source:
            return self.source[lineno]
        return linecache.getline(self.filename, lineno).rstrip("\n")

    def statement_end(self, lineno: int) -> int:
        """The last line of the statement starting at lineno."""
        return self.extents.get(lineno, lineno)

    def body_lines(self) -> range:
        """Every source line of the function, from its first to its last."""
        last = max(self.last_lineno, self.first_lineno, *self.lines, *self.extents.values())
        return range(self.first_lineno, last + 1)

    def merge(self, other: FunctionStats) -> None:
        """Adds other's statistics (the same function, another process or run)."""
        for lineno, s in other.lines.items():
            mine = self.lines.get(lineno)
            if mine is None:
                self.lines[lineno] = LineStats(
                    s.lineno, s.hits, s.time_ns, s.raw_time_ns, s.self_time_ns
                )
            else:
                mine.add(s)
        self.last_lineno = max(self.last_lineno, other.last_lineno)
        for start, end in other.extents.items():
            self.extents[start] = max(end, self.extents.get(start, end))
        for lineno, text in other.source.items():
            self.source.setdefault(lineno, text)

    def to_dict(self) -> dict[str, Any]:
        body = self.body_lines()
        return {
            "file": self.filename,
            "function": self.name,
            "first_line": self.first_lineno,
            "last_line": body[-1],
            "total_time_ns": self.total_time_ns,
            "raw_total_time_ns": self.raw_total_time_ns,
            "self_time_ns": self.self_time_ns,
            "lines": [
                {
                    "line": s.lineno,
                    "end_line": self.statement_end(s.lineno),
                    "hits": s.hits,
                    "time_ns": s.time_ns,
                    "raw_time_ns": s.raw_time_ns,
                    "self_time_ns": s.self_time_ns,
                    "source": self.source_line(s.lineno),
                }
                for s in sorted(self.lines.values(), key=lambda s: s.lineno)
            ],
            "body": [self.source_line(n) for n in body],
        }

    @classmethod
    def from_dict(cls, doc: dict[str, Any]) -> FunctionStats:
        fs = cls(doc["file"], doc["function"], int(doc["first_line"]))
        fs.last_lineno = int(doc.get("last_line") or fs.first_lineno)
        for n, text in enumerate(doc.get("body") or [], fs.first_lineno):
            fs.source[n] = text
        for row in doc["lines"]:
            lineno = int(row["line"])
            time_ns = int(row["time_ns"])
            fs.lines[lineno] = LineStats(
                lineno,
                int(row["hits"]),
                time_ns,
                int(row.get("raw_time_ns", time_ns)),
                int(row.get("self_time_ns", time_ns)),
            )
            end = int(row.get("end_line") or lineno)
            if end > lineno:
                fs.extents[lineno] = end
            if "source" in row:
                fs.source.setdefault(lineno, row["source"])
        return fs


def _last_line(code: CodeType) -> int:
    """The last source line of code's own instructions."""
    last = code.co_firstlineno
    positions = getattr(code, "co_positions", None)
    if positions is None:  # pragma: no cover - Python < 3.11
        return max([last] + [ln for _s, _e, ln in code.co_lines() if ln])
    for start, end, _col, _end_col in positions():
        if start is not None:
            last = max(last, end or start)
    return last


_extents_cache: dict[tuple[str, int], dict[int, int]] = {}


def statement_extents(filename: str) -> dict[int, int]:
    """{first line: last line} of the statements of filename that span several lines (a compound
    statement's header only: ``if (a and\n b):``), from its source as linecache has it."""
    lines = linecache.getlines(filename)
    key = (filename, hash(tuple(lines)))
    cached = _extents_cache.get(key)
    if cached is not None:
        return cached
    extents: dict[int, int] = {}
    try:
        tree = ast.parse("".join(lines))
    except (SyntaxError, ValueError):
        tree = None
    for node in ast.walk(tree) if tree is not None else ():
        if not isinstance(node, ast.stmt):
            continue
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.stmt):
            end = max(node.lineno, body[0].lineno - 1)  # the header, up to its body
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                end = node.lineno  # (decorators come before it; the signature is its own)
                end = max(end, body[0].lineno - 1)
        else:
            end = node.end_lineno or node.lineno
        if end > node.lineno:
            extents[node.lineno] = end
    if len(_extents_cache) > 256:
        _extents_cache.clear()
    _extents_cache[key] = extents
    return extents


def build_stats(
    results: TracerResults, overhead: Overhead | None
) -> dict[FunctionKey, FunctionStats]:
    """Merges the tracer's raw results into FunctionStats keyed by (file, first line, name)."""
    out: dict[FunctionKey, FunctionStats] = {}
    for code, rows in results:
        name = getattr(code, "co_qualname", code.co_name)
        key = (code.co_filename, code.co_firstlineno, name)
        fs = out.get(key)
        if fs is None:
            fs = out[key] = FunctionStats(code.co_filename, name, code.co_firstlineno)
        fs.last_lineno = max(fs.last_lineno, _last_line(code))
        extents = statement_extents(code.co_filename)
        fs.extents.update(
            (n, end) for n, end in extents.items() if fs.first_lineno <= n <= fs.last_lineno
        )
        for row in rows:
            lineno, hits, raw_ns, n_lines, n_calls, n_foreign = row[:6]
            callee_ns, c_lines, c_calls, c_foreign = row[6:10] if len(row) >= 10 else (0, 0, 0, 0)
            own = overhead.of(n_lines, n_calls, n_foreign) if overhead is not None else 0.0
            time_ns = max(0, int(raw_ns - own))
            # Self: the interval less the callees' intervals, less the tracer's callbacks that lie
            # outside those (a lower bound of them, like own).
            own_outside = (
                overhead.of(n_lines - c_lines, n_calls - c_calls, n_foreign - c_foreign)
                if overhead is not None
                else 0.0
            )
            self_ns = min(time_ns, max(0, int(raw_ns - callee_ns - own_outside)))
            stat = LineStats(lineno, hits, time_ns, raw_ns, self_ns)
            prev = fs.lines.get(lineno)
            if prev is None:
                fs.lines[lineno] = stat
            else:
                prev.add(stat)
    return out
