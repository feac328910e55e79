"""The reduced resource samples of a run: what the I/O, MEMORY and GPU blocks print.

Filled by ``report.resources`` while merging (``merge_run(with_samples=True)``); plain data.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from lineprofiler.report.caveat import Caveat
from lineprofiler.runfile.samples import NO_PHASE

SPARK_WIDTH = 40


@dataclass
class IoTotals:
    read_bytes: int = 0
    write_bytes: int = 0
    read_chars: int = 0
    write_chars: int = 0

    @property
    def page_cache_bytes(self) -> int:
        return max(0, self.read_chars - self.read_bytes)

    def add(self, rb: int, wb: int, rc: int, wc: int) -> None:
        self.read_bytes += rb
        self.write_bytes += wb
        self.read_chars += rc
        self.write_chars += wc


@dataclass
class GpuDevice:
    host: str
    index: int
    busy_weighted: float = 0.0  # sum of busy% x dt_ns
    busy_dt_ns: int = 0
    pid_weighted: float = 0.0  # sum over processes of pid% x dt_ns
    first_ns: int | None = None
    last_ns: int | None = None
    attributed: bool = False
    windows: int = 0
    failed_windows: int = 0

    @property
    def busy(self) -> float | None:
        """Fraction of time any process had a kernel on the device, or None if never read."""
        return self.busy_weighted / self.busy_dt_ns / 100.0 if self.busy_dt_ns else None

    @property
    def this_run(self) -> float | None:
        """Fraction attributed to the run's pids; None (n/a) when never attributed."""
        if not self.attributed or self.first_ns is None or self.last_ns is None:
            return None
        span = self.last_ns - self.first_ns
        return self.pid_weighted / span / 100.0 if span > 0 else None

    @property
    def idle(self) -> float | None:
        b = self.busy
        return None if b is None else max(0.0, 1.0 - b)


@dataclass
class ProcessMemory:
    role: str
    label: str
    rss_peak: int | None
    cuda_allocated_peak: int | None
    cuda_reserved_peak: int | None


@dataclass
class RunResources:
    """The reduced samples of one run: what the I/O, MEMORY and GPU blocks print."""

    workers_with_samples: int = 0
    rows: int = 0
    dropped: int = 0
    io_rows: int = 0
    io_source: bool = False
    io: IoTotals = field(default_factory=IoTotals)
    by_tag: dict[tuple[str, ...], IoTotals] = field(default_factory=dict)
    # Per Unix second of wall time, summed over the run's processes (an interval's bytes land in
    # the second its interval ended): the basis of both the rate and the peak.
    read_per_s: dict[int, int] = field(default_factory=dict)  # -> read_bytes
    write_per_s: dict[int, int] = field(default_factory=dict)  # -> write_bytes
    own_write_bytes: int = 0
    memory: list[ProcessMemory] = field(default_factory=list)
    gpus: dict[tuple[str, int], GpuDevice] = field(default_factory=dict)
    gpu_errors: dict[str, str] = field(default_factory=dict)  # worker label -> why no NVML
    caveats: list[Caveat] = field(default_factory=list)

    @property
    def no_phase_share(self) -> float | None:
        """The share of disk bytes (read_bytes + write_bytes, the I/O block's disk columns) that
        moved in intervals with no phase open; None when no disk byte moved."""
        total = self.io.read_bytes + self.io.write_bytes
        if total <= 0:
            return None
        t = self.by_tag.get(NO_PHASE)
        return ((t.read_bytes + t.write_bytes) / total) if t else 0.0

    @property
    def read_bytes_per_s(self) -> float | None:
        """Disk reads per second of wall time in which any process read (None: none did)."""
        return _rate(self.read_per_s)

    @property
    def write_bytes_per_s(self) -> float | None:
        """Disk writes per second of wall time in which any process wrote (None: none did)."""
        return _rate(self.write_per_s)

    @property
    def read_peak_per_s(self) -> int | None:
        """The busiest second's disk reads, summed over processes (never below the rate)."""
        return max(self.read_per_s.values(), default=None)

    @property
    def write_peak_per_s(self) -> int | None:
        """The busiest second's disk writes, summed over processes (never below the rate)."""
        return max(self.write_per_s.values(), default=None)

    def sparkline_bins(
        self, width: int = SPARK_WIDTH, start: float | None = None, end: float | None = None
    ) -> list[int]:
        """Write bytes per column over [start, end] (Unix s; default: the seconds with writes)."""
        if not self.write_per_s:
            return []
        lo, hi = min(self.write_per_s), max(self.write_per_s)
        if start is not None and end is not None and end >= start:
            lo, hi = min(lo, int(start)), max(hi, int(end))
        span = hi - lo + 1
        bins = [0] * min(width, span)
        n = len(bins)
        for s, b in self.write_per_s.items():
            bins[min(n - 1, (s - lo) * n // span)] += b
        return bins


def _rate(per_s: dict[int, int]) -> float | None:
    moving = [b for b in per_s.values() if b > 0]
    return sum(moving) / len(moving) if moving else None
