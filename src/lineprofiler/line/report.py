"""LineReport: a LineProfiler's results as plain data (what the printers, --json and ``show``
use), built from a live profiler or read back from its JSON."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lineprofiler.line.stats import FunctionKey, FunctionStats

JSON_SCHEMA_VERSION = 2


@dataclass
class LineReport:
    """The statistics and what the header says about them (times in ns)."""

    project_folder: str
    functions: dict[FunctionKey, FunctionStats] = field(default_factory=dict)
    block_wall_ns: int = 0  # wall time inside the block(s), as measured
    block_ns: int = 0  # the same less the tracer's estimated cost
    events: dict[str, int] = field(default_factory=dict)
    gaps: dict[str, int] = field(default_factory=dict)
    overhead_ns_per_event: dict[str, float] | None = None  # None: raw times
    python: str = ""
    mechanism: str = ""
    clock: str = ""
    paths: list[str] = field(default_factory=list)
    processes: int = 1

    def header(self) -> str:
        ov = self.overhead_ns_per_event
        note = (
            "times less a lower bound of the tracer's cost "
            f"({ov['line']:.0f} ns/line, {ov['call']:.0f} ns/call)"
            if ov is not None
            else "raw times (tracer cost included)"
        )
        where = self.project_folder + "".join(f" + {p}" for p in self.paths)
        procs = f" | {self.processes} processes merged" if self.processes > 1 else ""
        lines = [f"LineProfiler: {where} | block {self.block_ns / 1e6:.3f} ms{procs} | {note}"]
        displaced = self.gaps.get("displacements", 0)
        skipped = self.gaps.get("threads_skipped", 0)
        if displaced:
            lines.append(
                f"GAP: another trace function displaced the tracer {displaced} time(s); "
                "code run meanwhile is missing"
            )
        if skipped:
            lines.append(f"GAP: {skipped} thread(s) running another trace function were not traced")
        return "\n".join(lines)

    def merge(self, other: LineReport) -> None:
        """Adds another process's report (same scope) to this one."""
        for key, fs in other.functions.items():
            mine = self.functions.get(key)
            if mine is None:
                self.functions[key] = fs
            else:
                mine.merge(fs)
        self.block_wall_ns += other.block_wall_ns
        self.block_ns += other.block_ns
        for name in ("events", "gaps"):
            mine_d, theirs = getattr(self, name), getattr(other, name)
            for k, v in theirs.items():
                mine_d[k] = mine_d.get(k, 0) + v
        self.processes += other.processes
        if other.overhead_ns_per_event is None:
            self.overhead_ns_per_event = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": JSON_SCHEMA_VERSION,
            "project_folder": self.project_folder,
            "paths": self.paths,
            "python": self.python,
            "mechanism": self.mechanism,
            "clock": self.clock,
            "processes": self.processes,
            "block_wall_ns": self.block_wall_ns,
            "block_ns": self.block_ns,
            "events": self.events,
            "gaps": self.gaps,
            "overhead_subtracted": self.overhead_ns_per_event is not None,
            "overhead_ns_per_event": self.overhead_ns_per_event,
            "functions": [
                fs.to_dict()
                for fs in sorted(self.functions.values(), key=lambda f: -f.total_time_ns)
            ],
        }

    @classmethod
    def from_dict(cls, doc: dict[str, Any]) -> LineReport:
        functions = {}
        for f in doc.get("functions", []):
            fs = FunctionStats.from_dict(f)
            functions[fs.key] = fs
        block_wall = int(doc.get("block_wall_ns", 0))
        return cls(
            project_folder=str(doc.get("project_folder", "")),
            functions=functions,
            block_wall_ns=block_wall,
            block_ns=int(doc.get("block_ns", block_wall)),
            events=dict(doc.get("events") or {}),
            gaps=dict(doc.get("gaps") or {}),
            overhead_ns_per_event=doc.get("overhead_ns_per_event"),
            python=str(doc.get("python", "")),
            mechanism=str(doc.get("mechanism", "")),
            clock=str(doc.get("clock", "")),
            paths=list(doc.get("paths") or []),
            processes=int(doc.get("processes", 1)),
        )

    def dump(self, path: str | os.PathLike[str]) -> None:
        """Writes the JSON to path (atomically, never through another user's planted link:
        ``lineprofiler.safe_write``)."""
        from lineprofiler.safe_write import write_output

        write_output(path, json.dumps(self.to_dict(), indent=2))

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> LineReport:
        return cls.from_dict(json.loads(Path(path).read_text()))
