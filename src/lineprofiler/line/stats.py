"""Per-line and per-function statistics of a LineProfiler, and their JSON form."""

from __future__ import annotations

import linecache
from dataclasses import dataclass, field
from types import CodeType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lineprofiler.line._calibrate import Overhead

FunctionKey = tuple[str, int, str]  # (filename, first line, qualified name)
# The tracer's results: per code object, rows of
# (line, hits, raw ns, line events, traced calls, untraced calls).
TracerResults = list[tuple[CodeType, list[tuple[int, int, int, int, int, int]]]]


@dataclass
class LineStats:
    """One source line: hits and wall time (ns) from its line events to the next event of its
    frame, including the calls it makes. ``raw_time_ns`` is as measured; ``time_ns`` has the
    tracer's calibrated own cost subtracted (equal to raw when subtraction is off)."""

    lineno: int
    hits: int
    time_ns: int
    raw_time_ns: int

    @property
    def per_hit_ns(self) -> float:
        return self.time_ns / self.hits if self.hits else 0.0


@dataclass
class FunctionStats:
    """The traced lines of one function (all code objects with the same file, line and name)."""

    filename: str
    name: str
    first_lineno: int
    lines: dict[int, LineStats] = field(default_factory=dict)

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
    def total_hits(self) -> int:
        return sum(s.hits for s in self.lines.values())

    def source_line(self, lineno: int) -> str:
        return linecache.getline(self.filename, lineno).rstrip("\n")

    def to_dict(self) -> dict[str, Any]:
        return {
            "file": self.filename,
            "function": self.name,
            "first_line": self.first_lineno,
            "total_time_ns": self.total_time_ns,
            "raw_total_time_ns": self.raw_total_time_ns,
            "lines": [
                {
                    "line": s.lineno,
                    "hits": s.hits,
                    "time_ns": s.time_ns,
                    "raw_time_ns": s.raw_time_ns,
                    "source": self.source_line(s.lineno),
                }
                for s in sorted(self.lines.values(), key=lambda s: s.lineno)
            ],
        }


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
        for lineno, hits, raw_ns, n_lines, n_calls, n_foreign in rows:
            own = overhead.of(n_lines, n_calls, n_foreign) if overhead is not None else 0.0
            time_ns = max(0, int(raw_ns - own))
            prev = fs.lines.get(lineno)
            if prev is None:
                fs.lines[lineno] = LineStats(lineno, hits, time_ns, raw_ns)
            else:
                prev.hits += hits
                prev.time_ns += time_ns
                prev.raw_time_ns += raw_ns
    return out
