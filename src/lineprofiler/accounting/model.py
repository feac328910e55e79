"""The merged run: plain data classes that ``merge_run`` fills and the renderers read.

Nothing here touches a live profiler. Times are integer nanoseconds (``*_ns``) except the Unix
timestamps copied from worker files (``start_time``, ``written_at``: float seconds).

A phase's *time* is ``wall_ns + open_ns``: completed entries plus entries still open at the
worker's last write. Its *wait* is ``wall_ns - cpu_ns`` over completed entries only, and is None
(not zero) when CPU time was not measured.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any

from lineprofiler.accounting.stats import PhaseStats

Path_ = tuple[str, ...]


@dataclass
class MergedPhase(PhaseStats):
    """A phase path's aggregates summed over threads and processes.

    ``sample_rates`` holds each contributing record's ``sample_every`` (1: measured every entry);
    any rate above 1 makes every number of the phase an estimate. ``thread_node`` marks the
    synthetic node a thread name becomes under ``thread_names=True`` (its times are the sum of
    that thread's top-level phases; it has no entries of its own).
    """

    sample_rates: set[int] = field(default_factory=set)
    processes: int = 0
    thread_node: bool = False
    # Exact I/O of phase(io=True) entries: the record's "io" byte sums, summed; None when absent.
    io: dict[str, int] | None = None

    @property
    def time_ns(self) -> int:
        return self.wall_ns + self.open_ns

    @property
    def estimated(self) -> bool:
        return any(r > 1 for r in self.sample_rates)

    def add(self, other: PhaseStats) -> None:  # type: ignore[override]
        super().add(other)
        if isinstance(other, MergedPhase):
            self.sample_rates |= other.sample_rates
            self.processes += other.processes
            self.thread_node = self.thread_node or other.thread_node
            if other.io:
                mine = self.io if self.io is not None else {}
                for k, v in other.io.items():
                    mine[k] = mine.get(k, 0) + v
                self.io = mine
        else:
            self.sample_rates.add(1)


@dataclass
class Worker:
    """One worker file of the reported attempt (one process)."""

    path: str  # relative to the run directory
    role: str
    host: str
    pid: int
    run_id: str
    uuid: str
    start_time: float
    written_at: float
    rank: int | None = None
    local_rank: int | None = None
    job_id: str | None = None
    snapshot_seq: int = 0
    final: bool = False
    flush_errors: int = 0
    last_flush_error: str = ""
    clock_wall: str | None = None
    clock_cpu: str | None = None  # None: CPU time not measured
    own_write_bytes: int | None = None
    thread_names: bool = False
    snapshot_interval_s: float | None = None
    threads: int = 0
    folded_entries: int = 0
    depth_overflow: int = 0
    out_of_order_exits: int = 0  # exits that closed phases entered after theirs (user code)
    tree: dict[Path_, MergedPhase] = field(default_factory=dict, repr=False)
    stale_s: float | None = None  # set by the merge when the worker is named stale

    @property
    def recorded_nothing(self) -> bool:
        """The file exists but holds no phase and no counter."""
        return not self.tree

    @property
    def lifetime_ns(self) -> int:
        """From the process's start to its file's last write, in ns (never negative)."""
        return max(0, round((self.written_at - self.start_time) * 1e9))

    @property
    def busy_ns(self) -> int:
        """Sum of the time of this process's top-level phases (over its threads)."""
        return sum(s.time_ns for p, s in self.tree.items() if len(p) == 1)

    @property
    def label(self) -> str:
        """``rank 3 (node07)`` or ``pid 123 (node07)``."""
        who = f"rank {self.rank}" if self.rank is not None else f"pid {self.pid}"
        return f"{who} ({self.host})"


@dataclass
class Role:
    """All processes that share one role, and their summed tree."""

    name: str
    workers: list[Worker] = field(default_factory=list)
    tree: dict[Path_, MergedPhase] = field(default_factory=dict, repr=False)

    @property
    def processes(self) -> int:
        return len(self.workers)

    @property
    def top_level_ns(self) -> int:
        """The denominator of a phase's share: the role's top-level phases' time, summed."""
        return sum(s.time_ns for p, s in self.tree.items() if len(p) == 1)

    @property
    def imbalance(self) -> float | None:
        """Max over mean of the processes' busy time (1.00: perfectly even); None if all idle."""
        busy = [w.busy_ns for w in self.workers]
        if not busy:
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
    """A superseded attempt (an earlier run into the same directory): named, never merged."""

    run_id: str
    workers: int
    start_time: float | None


@dataclass
class Caveat:
    """Something that makes the run less than complete; ``kind`` is a stable identifier."""

    kind: str
    message: str
    workers: list[str] = field(default_factory=list)


@dataclass
class MergedRun:
    """One attempt of a run directory, merged. What ``report``, ``--json`` and tests read."""

    run_dir: str
    run_id: str | None
    workers: list[Worker]
    roles: dict[str, Role]
    tree: dict[Path_, MergedPhase]
    unreadable: list[Unreadable] = field(default_factory=list)
    superseded: list[Attempt] = field(default_factory=list)
    caveats: list[Caveat] = field(default_factory=list)
    with_samples: bool = True
    # Resource samples (I/O, memory, GPU) keyed by block name; filled only with_samples=True.
    resources: dict[str, Any] = field(default_factory=dict)

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
        """Processes, counted by worker file (pids collide across nodes)."""
        return len(self.workers)
