"""The sampler's rows over wall time: the HTML report's timelines and ``top``'s last interval.

An additive reader beside ``report.resources`` (which reduces the rows to totals and peaks while
merging): this one reads each worker's ``.samples``/``.tags`` sidecars again and bins the rows by
the Unix time their interval ended, one worker at a time, so memory is one worker's columns plus
the bins.

Per bin (``bins`` equal slices of [start, end] in Unix ns):

- ``rss``: the run's resident memory, the sum over processes of each one's mean RSS over its rows
  in the bin (a process with no row in a bin counts 0 there);
- ``read``/``write``: disk bytes (``read_bytes``/``write_bytes`` deltas) summed over processes;
- ``gpu_busy[(host, k)]``: the dt-weighted mean of NVML's device busy %;
  ``gpu_mine[(host, k)]``: the sum over the run's processes of their pid's SM % (weighted mean);
- ``phase``: the phase path open for the most process-time in the bin (tag of each row), or None.
"""

from __future__ import annotations

import sys
from array import array
from bisect import bisect_right
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import compress, repeat
from operator import le, mul, ne
from pathlib import Path

from lineprofiler.report.model import MergedRun, Worker
from lineprofiler.runfile.layout import TAGS_SUFFIX, samples_path
from lineprofiler.runfile.safe_read import UnsafeFile, open_regular, read_head, read_range
from lineprofiler.runfile.samples import (
    BASE_WORDS,
    F_IO,
    F_RSS,
    HEADER_BYTES,
    MAX_SAMPLES_BYTES,
    NO_PHASE,
    W_DT,
    W_FLAGS,
    W_RB,
    W_RSS,
    W_T,
    W_TAG,
    W_WB,
    SamplesError,
    SampleTable,
    read_samples,
    read_tags,
)

DEFAULT_BINS = 240
# The most rows ``recent`` reads of one sidecar's tail: a 10 s window at a 1 ms interval. A header
# claiming a finer interval cannot make a refresh parse the whole file.
RECENT_MAX_ROWS = 10_000


@dataclass
class Timeline:
    """Binned resource series of a run (see the module docstring for each series)."""

    start_ns: int
    end_ns: int
    bins: int
    rss: list[float] = field(default_factory=list)
    read: list[int] = field(default_factory=list)
    write: list[int] = field(default_factory=list)
    gpu_busy: dict[tuple[str, int], list[float | None]] = field(default_factory=dict)
    gpu_mine: dict[tuple[str, int], list[float | None]] = field(default_factory=dict)
    phase: list[tuple[str, ...] | None] = field(default_factory=list)
    has_rss: bool = False
    has_io: bool = False
    workers: int = 0  # workers whose rows were read

    @property
    def bin_ns(self) -> float:
        return max(1, self.end_ns - self.start_ns) / self.bins


def _table(w: Worker, within: str) -> tuple[SampleTable, dict[int, tuple[str, ...]]] | None:
    if not w.file:
        return None
    side = samples_path(Path(w.file))
    if side.is_symlink():
        return None
    try:
        table = read_samples(side, within)
    except (OSError, SamplesError):
        return None
    return table, read_tags(side.with_suffix(TAGS_SUFFIX), within)


def compress_or_zero(col: Iterable[int], keep: list[bool]) -> Iterable[int]:
    """``col`` with the values ``keep`` does not vouch for replaced by 0."""
    return (v if k else 0 for v, k in zip(col, keep, strict=True))


def _interval_ns(run: MergedRun) -> int | None:
    """The first sampled worker's row interval (its sidecar header), or None."""
    for w in run.workers:
        if not w.file:
            continue
        try:
            head = read_head(
                samples_path(Path(w.file)), HEADER_BYTES, MAX_SAMPLES_BYTES, run.run_dir
            )
        except UnsafeFile:
            continue
        if len(head) >= 32:
            return int.from_bytes(head[24:32], "little") or None
    return None


class TimelineBuilder:
    """Bins workers' sampler rows as they are read, one table at a time: what the merge calls on
    each sidecar it has just read (``merge_run(timeline_bins=...)``), so ``report --html`` reads
    every sidecar once. Memory is the bins (a few numbers and a phase tally each), never rows.

    The bins are set at the first table with rows: never thinner than its sampler interval."""

    def __init__(self, start_ns: int, end_ns: int, bins: int = DEFAULT_BINS) -> None:
        self.start, self.end = start_ns, max(end_ns, start_ns + 1)
        self.want = bins
        self.tl: Timeline | None = None
        self.phase_ns: list[dict[tuple[str, ...], int]] = []
        self.cuts: list[int] = []
        self.busy_acc: dict[tuple[str, int], list[list[float]]] = {}
        self.mine_acc: dict[tuple[str, int], list[list[float]]] = {}

    @classmethod
    def for_run(cls, run: MergedRun, bins: int = DEFAULT_BINS) -> TimelineBuilder | None:
        """A builder over the run's span; None when the run has none."""
        if run.start_time is None or run.end_time is None or bins < 1:
            return None
        return cls(int(run.start_time * 1e9), int(run.end_time * 1e9), bins)

    def _open(self, interval: int) -> Timeline:
        start, end, bins = self.start, self.end, self.want
        if interval:  # never thinner than the sampler's interval (else most bins have no row)
            bins = max(1, min(bins, (end - start) // interval))
        tl = self.tl = Timeline(start, end, bins, [0.0] * bins, [0] * bins, [0] * bins)
        span = end - start
        self.phase_ns = [{} for _ in range(bins)]
        self.cuts = [start + span * k // bins for k in range(1, bins)]  # where bin k-1 ends
        return tl

    def add(self, w: Worker, t: SampleTable, tags: dict[int, tuple[str, ...]]) -> None:
        """Bins one worker's rows."""
        if t.rows == 0:
            return
        tl = self.tl if self.tl is not None else self._open(t.interval_ns)
        bins, phase_ns = tl.bins, self.phase_ns
        busy_acc, mine_acc = self.busy_acc, self.mine_acc
        tl.workers += 1
        c = t.cols
        ts, dt, flags = c[W_T], c[W_DT], c[W_FLAGS]
        distinct = set(flags)
        # Columns a flag does not vouch for are zeroed (one Python pass, only when some row lacks
        # the flag); then every bin is C-level slices of the time-ordered rows.
        rb, wb = c[W_RB], c[W_WB]
        if any(f & F_IO for f in distinct):
            tl.has_io = True
            if not all(f & F_IO for f in distinct):
                keep = [bool(f & F_IO) for f in flags]
                rb = array("q", compress_or_zero(rb, keep))
                wb = array("q", compress_or_zero(wb, keep))
        else:
            rb = wb = None
        rss = c[W_RSS]
        rss_ok: list[bool] | None = None
        if any(f & F_RSS for f in distinct):
            if not all(f & F_RSS for f in distinct) or min(rss, default=0) < 0:
                rss_ok = [bool(f & F_RSS) and v >= 0 for f, v in zip(flags, rss, strict=True)]
        else:
            rss = None
        bounds = _bounds(ts, self.cuts, t.rows)
        # only the bins holding rows: a worker of a minute in a run of hours fills a few of them
        filled = [b for b in range(bins) if bounds[b + 1] > bounds[b]]
        if not t.n_gpu and t.rows <= 2 * len(filled):  # about a row per bin: row by row
            _add_rows(tl, phase_ns, filled, bounds, rb, wb, rss, rss_ok, c[W_TAG], tags, t)
            return
        for b_ in filled:
            lo, hi = bounds[b_], bounds[b_ + 1]
            if rb is not None:
                tl.read[b_] += sum(rb[lo:hi])
                tl.write[b_] += sum(wb[lo:hi])
            if rss is not None:
                if rss_ok is None:
                    tl.rss[b_] += sum(rss[lo:hi]) / (hi - lo)
                    tl.has_rss = True
                else:
                    vals = list(compress(rss[lo:hi], rss_ok[lo:hi]))
                    if vals:
                        tl.rss[b_] += sum(vals) / len(vals)
                        tl.has_rss = True
            acc = phase_ns[b_]
            for g, n in Counter(c[W_TAG][lo:hi]).items():
                path = tags.get(g, ("(unknown phase)",))
                if path != NO_PHASE:  # rows are one interval each: count, weighted by it
                    acc[path] = acc.get(path, 0) + n * t.interval_ns
            for k in range(t.n_gpu):
                key = (w.host, k)
                busy, mine, d = (
                    c[BASE_WORDS + 2 * k][lo:hi],
                    c[BASE_WORDS + 2 * k + 1][lo:hi],
                    dt[lo:hi],
                )
                ok = bytes(map(le, repeat(0), busy))
                if any(ok):
                    ba = busy_acc.setdefault(key, [[0.0, 0.0] for _ in range(bins)])
                    ba[b_][0] += sum(map(mul, compress(busy, ok), compress(d, ok)))
                    ba[b_][1] += sum(compress(d, ok))
                read = bytes(map(ne, mine, repeat(-1)))
                if any(read):
                    ma = mine_acc.setdefault(key, [[0.0, 0.0] for _ in range(bins)])
                    pos = [max(0, v) for v in compress(mine, read)]
                    d_read = list(compress(d, read))
                    # this process's time-weighted mean; processes add up
                    ma[b_][0] += sum(map(mul, pos, d_read)) / max(1, sum(d_read))
                    ma[b_][1] = 1.0

    def finish(self) -> Timeline | None:
        """The binned series; None when no worker had rows."""
        tl = self.tl
        if tl is None or not tl.workers:
            return None
        tl.phase = [max(acc, key=lambda p: (acc[p], p)) if acc else None for acc in self.phase_ns]
        for key, acc in self.busy_acc.items():
            tl.gpu_busy[key] = [a / d if d else None for a, d in acc]
        for key, acc in self.mine_acc.items():
            tl.gpu_mine[key] = [a if d else None for a, d in acc]
        return tl


def _bounds(ts: Sequence[int], cuts: list[int], rows: int) -> list[int]:
    """Each bin's first row (and the end): the rows are in time order."""
    return [0, *[bisect_right(ts, x) for x in cuts], rows]


def build_timeline(run: MergedRun, bins: int = DEFAULT_BINS) -> Timeline | None:
    """The run's binned series, reading every worker's sidecars (a run merged without
    ``timeline_bins``); None when no worker has sampler rows."""
    builder = TimelineBuilder.for_run(run, bins)
    if builder is None:
        return None
    interval = _interval_ns(run)
    if interval:
        builder._open(interval)
    for w in run.workers:
        got = _table(w, run.run_dir)
        if got is not None:
            builder.add(w, *got)
    return builder.finish()


def _add_rows(
    tl: Timeline,
    phase_ns: list[dict[tuple[str, ...], int]],
    filled: list[int],
    bounds: list[int],
    rb: Sequence[int] | None,
    wb: Sequence[int] | None,
    rss: Sequence[int] | None,
    rss_ok: list[bool] | None,
    tag_col: Sequence[int],
    tags: dict[int, tuple[str, ...]],
    t: SampleTable,
) -> None:
    """One worker's rows added row by row, for a worker with about one row per bin (where the
    per-bin slices and sums of build_timeline cost more than the rows): the same sums in integers,
    and each bin's RSS mean of the rows it vouches for."""
    row_bin = [b for b in filled for _ in range(bounds[b + 1] - bounds[b])]
    rss_sum: dict[int, int] = {}
    rss_n: dict[int, int] = {}
    unknown = ("(unknown phase)",)
    interval = t.interval_ns
    for i, b in enumerate(row_bin):
        if rb is not None and wb is not None:
            tl.read[b] += rb[i]
            tl.write[b] += wb[i]
        if rss is not None and (rss_ok is None or rss_ok[i]):
            rss_sum[b] = rss_sum.get(b, 0) + rss[i]
            rss_n[b] = rss_n.get(b, 0) + 1
        path = tags.get(tag_col[i], unknown)
        if path != NO_PHASE:
            acc = phase_ns[b]
            acc[path] = acc.get(path, 0) + interval
    for b, total in rss_sum.items():
        tl.rss[b] += total / rss_n[b]
        tl.has_rss = True


@dataclass
class Recent:
    """The sampler's rows of the last ``window_s`` seconds, summed over the run's processes."""

    read_bytes: int = 0
    write_bytes: int = 0
    rss_bytes: int = 0  # the latest row's RSS of each process, summed
    workers: int = 0


def recent(run: MergedRun, window_s: float, now_ns: int) -> Recent | None:
    """I/O of the rows that ended in (now - window, now] and current RSS, from each sidecar's tail.

    Reads only the last rows of each file (enough to cover the window), so a refresh costs the
    same in the first minute of a run and in its twelfth hour. None when no worker has rows.
    """
    out = Recent()
    lo = now_ns - int(window_s * 1e9)
    for w in run.workers:
        if not w.file:
            continue
        side = samples_path(Path(w.file))
        try:
            with open_regular(side, MAX_SAMPLES_BYTES, run.run_dir) as (fd, size):
                head = read_range(fd, 0, HEADER_BYTES)
                if len(head) < HEADER_BYTES:
                    continue
                hb = int.from_bytes(head[12:16], "little")
                words = int.from_bytes(head[16:20], "little")
                interval = max(1, int.from_bytes(head[24:32], "little"))
                if words < BASE_WORDS or hb < HEADER_BYTES:
                    continue
                row = 8 * words
                rows = (size - hb) // row
                if rows <= 0:
                    continue
                want = min(rows, int(window_s * 1e9 // interval) + 2, RECENT_MAX_ROWS)
                data = read_range(fd, hb + (rows - want) * row, want * row)
        except UnsafeFile:
            continue
        n = len(data) // row
        if n == 0:
            continue
        flat = array("q")  # the rows' words, little-endian int64 as the sampler writes them
        flat.frombytes(memoryview(data)[: n * row])
        if sys.byteorder == "big":
            flat.byteswap()
        ts, flags = flat[W_T::words], flat[W_FLAGS::words]
        rb, wb, rss_col = flat[W_RB::words], flat[W_WB::words], flat[W_RSS::words]
        out.workers += 1
        for t_, f, r, w_ in zip(ts, flags, rb, wb, strict=True):
            if t_ > lo and f & F_IO:
                out.read_bytes += r
                out.write_bytes += w_
        rss = [v for f, v in zip(flags, rss_col, strict=True) if f & F_RSS and v >= 0]
        if rss:
            out.rss_bytes += rss[-1]
    return out if out.workers else None
