"""The merged line statistics of traced phases (issue 32): what report.lines_merge builds per role
and phase path, and what the views read (report.view)."""

from __future__ import annotations

from dataclasses import dataclass, field

from lineprofiler.runfile.worker_doc import Path_

LineKey = tuple[str, int]  # (file, line)
FunctionKey = tuple[str, int, str]  # (file, first line, function)
ProcessKey = tuple[str, int, str]  # Worker.process_key


@dataclass
class MergedLine:
    """One source line of a traced phase, summed over the role's processes."""

    file: str
    line: int
    end_line: int
    function: str
    first_line: int  # of its function
    source: str
    hits: int = 0
    time_ns: int = 0
    raw_time_ns: int = 0
    self_ns: int = 0
    seen_in: set[ProcessKey] = field(default_factory=set, repr=False)

    @property
    def processes(self) -> int:
        return len(self.seen_in)


@dataclass
class MergedFunction:
    """A function's source as the traced processes gave it (for the annotated listings)."""

    file: str
    function: str
    first_line: int
    last_line: int
    body: list[str] = field(default_factory=list)


@dataclass
class MergedPhaseLines:
    """One traced phase path of a role: entry counts and walls summed, lines merged."""

    path: Path_
    requested: str
    entries: int = 0
    traced_entries: int = 0
    traced_wall_ns: int = 0
    untraced_wall_ns: int = 0
    traced_by: set[ProcessKey] = field(default_factory=set, repr=False)
    lines: dict[LineKey, MergedLine] = field(default_factory=dict)
    functions: dict[FunctionKey, MergedFunction] = field(default_factory=dict)
    project_folders: set[str] = field(default_factory=set)
    overhead: list[dict[str, float] | None] = field(default_factory=list, repr=False)
    mechanisms: set[str] = field(default_factory=set)

    @property
    def processes(self) -> int:
        """Processes whose sidecar holds this path."""
        return len(self.traced_by)

    @property
    def project_folder(self) -> str | None:
        """The tracer's scope when every process had the same one (file names are shown
        relative to it), else None."""
        return next(iter(self.project_folders)) if len(self.project_folders) == 1 else None
