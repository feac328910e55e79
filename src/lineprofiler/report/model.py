"""The merged run: plain data classes that ``merge_run`` fills and the renderers read.

Nothing here touches a live profiler. Times are integer nanoseconds (``*_ns``) except the Unix
timestamps copied from worker files (``start_time``, ``written_at``: float seconds).

A phase's *time* is ``wall_ns + open_ns``: completed entries plus entries still open at the
worker's last write. Its *wait* is ``wall_ns - cpu_ns`` over completed entries only, and is None
(not zero) when CPU time was not measured.
"""

from __future__ import annotations

import statistics
from array import array
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from lineprofiler.report.caveat import Caveat
from lineprofiler.report.resource_model import RunResources
from lineprofiler.runfile.stats import PhaseStats
from lineprofiler.runfile.worker_doc import Path_, Worker

if TYPE_CHECKING:
    from lineprofiler.report.lines_model import MergedPhaseLines

__all__ = [
    "Attempt",
    "Caveat",
    "MergedPhase",
    "MergedRun",
    "Path_",
    "Role",
    "Unreadable",
    "Worker",
]


@dataclass
class MergedPhase(PhaseStats):
    """A phase path's aggregates summed over threads and processes.

    ``sample_rates`` holds each contributing record's ``sample_every`` (1: measured every entry);
    any rate above 1 makes every number of the phase an estimate. ``processes`` counts the
    workers whose tree holds the path.
    """

    sample_rates: set[int] = field(default_factory=set)
    processes: int = 0

    @property
    def estimated(self) -> bool:
        return any(r > 1 for r in self.sample_rates)

    def add(self, other: PhaseStats) -> None:
        """Adds another merged phase, or one worker's (already summed over its threads)."""
        super().add(other)
        if isinstance(other, MergedPhase):
            self.sample_rates |= other.sample_rates
            self.processes += other.processes
        else:
            self.sample_rates.add(max(1, other.sample_every))
            self.processes += 1


@dataclass
class Role:
    """All processes that share one role, and their summed tree."""

    name: str
    workers: list[Worker] = field(default_factory=list)
    tree: dict[Path_, MergedPhase] = field(default_factory=dict, repr=False)
    # Each worker's time per path (array('q') indexed by path_ids[path]; parallel to workers,
    # shorter where the path appeared after the worker was read): what the straggler view needs.
    times: list[array] = field(default_factory=list, repr=False)
    path_ids: dict[Path_, int] = field(default_factory=dict, repr=False)
    # The traced phases' line statistics (``.lines`` sidecars, report.lines_merge, lines_model), by path.
    lines: dict[Path_, MergedPhaseLines] = field(default_factory=dict, repr=False)

    def worker_time_ns(self, index: int, path: Path_) -> int:
        """Time of ``workers[index]`` in ``path`` (0 where it never entered it)."""
        i = self.path_ids.get(path)
        t = self.times[index] if index < len(self.times) else ()
        return t[i] if i is not None and i < len(t) else 0

    def process_groups(self) -> list[list[int]]:
        """Indices into ``workers`` grouped by the process that wrote them (``process_key``), in
        order of each process's first file: several profilers built in one process (one per Pool
        task, or one closed and another opened) are one process."""
        groups: dict[tuple[str, int, str], list[int]] = {}
        for i, w in enumerate(self.workers):
            groups.setdefault(w.process_key, []).append(i)
        return list(groups.values())

    @property
    def processes(self) -> int:
        """Distinct processes (host, pid, process start), not worker files."""
        return len({w.process_key for w in self.workers})

    def complete_groups(self) -> list[list[int]]:
        """``process_groups()`` less the processes known to have ended without a final write
        (killed, or ``os._exit``): their files miss an unknown part of their work, so they are
        left out of imbalance, busiest and the straggler view (the caveat says so)."""
        return [
            g for g in self.process_groups() if not any(self.workers[i].ended_unclosed for i in g)
        ]

    @property
    def left_out(self) -> int:
        """Processes left out of imbalance, busiest and stragglers (ended without a final
        write)."""
        return len(self.process_groups()) - len(self.complete_groups())

    def process_busy_ns(self) -> list[tuple[Worker, int]]:
        """Each complete process's busy time (its files' top-level phases summed), with its
        first file's worker as the one that names it."""
        return [
            (self.workers[g[0]], sum(self.workers[i].busy_ns for i in g))
            for g in self.complete_groups()
        ]

    def process_time_ns(self, group: list[int], path: Path_) -> int:
        """Time of one process (a ``process_groups()`` entry) in ``path``, over its files."""
        return sum(self.worker_time_ns(i, path) for i in group)

    @property
    def top_level_ns(self) -> int:
        """The denominator of a phase's share: the role's top-level phases' time, summed."""
        return sum(s.time_ns for p, s in self.tree.items() if len(p) == 1)

    @property
    def busiest(self) -> Worker | None:
        """The process with the most busy time (None when all are idle)."""
        best = max(self.process_busy_ns(), key=lambda wb: wb[1], default=None)
        return best[0] if best is not None and best[1] > 0 else None

    @property
    def imbalance(self) -> float | None:
        """Max over mean of the processes' busy time (1.00: perfectly even); None if all idle, or
        when processes that ended without a final write leave fewer than two to compare."""
        busy = [b for _, b in self.process_busy_ns()]
        if not busy or (len(busy) < 2 and self.left_out):
            return None
        mean = statistics.fmean(busy)
        return max(busy) / mean if mean > 0 else None


@dataclass
class Unreadable:
    """A worker file that could not be used, and why."""

    path: str
    reason: str


@dataclass
class Attempt:
    """One attempt of the run directory (see ``report.attempts``), as listed; only the reported
    one is merged. ``run_id`` is the attempt's id (what ``--attempt`` takes), ``workers`` its
    worker files (readable or not), ``overlapped`` the concurrent attempts under other ids."""

    run_id: str
    workers: int
    start_time: float | None
    end_time: float | None = None
    roles: dict[str, int] = field(default_factory=dict)
    overlapped: list[str] = field(default_factory=list)
    reported: bool = False
    why: list[str] = field(default_factory=list)  # the evidence that grouped its files, in words
    unreadable: int = 0  # of ``workers``, the files that could not be read


@dataclass
class MergedRun:
    """One attempt of a run directory, merged. What ``report``, ``--json`` and tests read."""

    run_dir: str
    run_id: str | None
    workers: list[Worker]
    roles: dict[str, Role]
    tree: dict[Path_, MergedPhase]
    unreadable: list[Unreadable] = field(default_factory=list)
    superseded: list[Attempt] = field(default_factory=list)  # the other attempts, not merged
    attempts: list[Attempt] = field(default_factory=list)  # every attempt, oldest first
    duplicates: list[tuple[str, str]] = field(default_factory=list)  # (skipped, duplicated)
    misplaced: list[str] = field(default_factory=list)  # skipped files whose name/dir disagree
    # Separate launches merged into the reported attempt: (host, parent pid, its workers)
    launches: list[tuple[str, int, list[Worker]]] = field(default_factory=list, repr=False)
    attempt_asked: str | None = None  # merge_run(attempt=...): what the caller asked for
    caveats: list[Caveat] = field(default_factory=list)
    with_samples: bool = True
    # The reduced resource samples (I/O, memory, GPU blocks); None without samples.
    samples: RunResources | None = None
    # Seconds since the newest write, when no worker has closed and that write is recent (the
    # run is still going); None otherwise. Set by merge_run from the time it read the run.
    live_s: float | None = None
    # The HTML report's binned resource series (report.timeline.Timeline), when merge_run was asked
    # to bin the sidecars as it read them (``timeline_bins``); None otherwise.
    timeline: Any = None
    timeline_binned: bool = False  # whether merge_run binned them (timeline None: no rows)

    @property
    def start_time(self) -> float | None:
        return min((w.start_time for w in self.workers), default=None)

    @property
    def end_time(self) -> float | None:
        return max((w.written_at for w in self.workers), default=None)

    @property
    def runtime_ns(self) -> int:
        if self.start_time is None or self.end_time is None:
            return 0
        return max(0, int(round((self.end_time - self.start_time) * 1e9)))

    @property
    def hosts(self) -> list[str]:
        return sorted({w.host for w in self.workers})

    @property
    def processes(self) -> int:
        """Distinct processes: by host, pid and the process's own start (``Worker.process_key``),
        so pids colliding across nodes or reused on one stay apart, and several profilers in one
        process count once."""
        return len({w.process_key for w in self.workers})
