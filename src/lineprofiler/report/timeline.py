"""The sampler's rows over wall time: the HTML report's timelines and ``top``'s last interval.

Beside ``report.resources`` (which reduces the rows to totals and peaks while merging): a
``TimelineBuilder`` bins each worker's rows by the Unix time their interval ended, one worker at a
time, so memory is one worker's columns plus the bins. ``merge_run(timeline_bins=...)`` (what
``report --html`` calls) hands it each sidecar as it reads it; ``build_timeline`` reads the
sidecars of a run merged without it.

Per bin (``bins`` equal slices of [start, end] in Unix ns):

- ``rss``: the run's resident memory, the sum over processes of each one's mean RSS over its rows
  in the bin (a process with no row in a bin counts 0 there);
- ``read``/``write``: disk bytes (``read_bytes``/``write_bytes`` deltas) summed over processes;
- ``gpu_busy[(host, k)]``: the dt-weighted mean of NVML's device busy %;
  ``gpu_mine[(host, k)]``: the sum over the run's processes of their pid's SM % (weighted mean);
- ``phase``: the phase path open for the most process-time in the bin (tag of each row), or None.
"""

from __future__ import annotations

import os
import struct
import sys
from array import array
from bisect import bisect_right
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from itertools import accumulate, compress, repeat
from operator import add, and_, eq, itemgetter, le, mul, ne, sub, truediv
from pathlib import Path

from lineprofiler.report.model import MergedRun, Worker
from lineprofiler.runfile.layout import SAMPLES_SUFFIX, TAGS_SUFFIX, samples_path
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
        # per phase path, per sampler interval, per bin: its rows (process-time: rows x interval)
        self.phase_rows: dict[tuple[str, ...], dict[int, list[int]]] = {}
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
        self.cuts = [start + span * k // bins for k in range(1, bins)]  # where bin k-1 ends
        return tl

    def add(self, w: Worker, t: SampleTable, tags: dict[int, tuple[str, ...]]) -> None:
        """Bins one worker's rows.

        Every series is C-level passes over the worker's columns and over the bins: a prefix sum
        of each column, read at each bin's first row (``bounds``, by bisection on the
        time-ordered rows), so a bin's sum is the difference of two prefixes; nothing loops in
        Python over rows or bins (but GPU columns, per filled bin)."""
        if t.rows == 0:
            return
        tl = self.tl if self.tl is not None else self._open(t.interval_ns)
        tl.workers += 1
        c = t.cols
        ts, flags = c[W_T], c[W_FLAGS]
        distinct = set(flags)
        bounds = [0, *map(bisect_right, repeat(ts), self.cuts), t.rows]
        lower, upper = bounds[:-1], bounds[1:]
        counts = list(map(sub, upper, lower))  # rows per bin

        # each bin's first and end row, gathered from a prefix-sum list in one C call each
        at_hi, at_lo = itemgetter(*upper, 0), itemgetter(*lower, 0)  # (, 0): a tuple if 1 bin

        def per_bin(col: Iterable[int]) -> list[int]:
            pre = list(accumulate(col, initial=0))
            return list(map(sub, at_hi(pre), at_lo(pre)))[:-1]

        if any(f & F_IO for f in distinct):
            tl.has_io = True
            rb, wb = c[W_RB], c[W_WB]
            if not all(f & F_IO for f in distinct):  # columns the flag does not vouch for: 0
                keep = bytes(map(bool, map(and_, flags, repeat(F_IO))))
                rb, wb = map(mul, rb, keep), map(mul, wb, keep)
            tl.read = list(map(add, tl.read, per_bin(rb)))
            tl.write = list(map(add, tl.write, per_bin(wb)))
        if any(f & F_RSS for f in distinct):
            rss: Iterable[int] = c[W_RSS]
            n = counts
            if not all(f & F_RSS for f in distinct) or min(c[W_RSS], default=0) < 0:
                ok = bytes(
                    map(and_, map(bool, map(and_, flags, repeat(F_RSS))), map(le, repeat(0), rss))
                )
                rss, n = map(mul, c[W_RSS], ok), per_bin(ok)
            if any(n):  # each bin: this process's mean RSS over its rows there (none: 0)
                tl.has_rss = True
                tl.rss = list(map(add, tl.rss, map(truediv, per_bin(rss), map(max, n, repeat(1)))))
        tag = c[W_TAG]
        ids = set(tag)
        unknown = ("(unknown phase)",)
        if len(ids) <= 16:  # one pass per distinct tag (a handful) but the most frequent
            order = sorted(ids, key=tag.count)  # ... which gets the rows left in each bin
            rest = counts
            for g in order:
                hits = rest if g == order[-1] else per_bin(map(eq, tag, repeat(g)))
                if g != order[-1]:
                    rest = list(map(sub, rest, hits))
                path = tags.get(g, unknown)
                if path != NO_PHASE:  # rows are one interval each: count, weighted by it
                    self._tally(path, hits, t.interval_ns)
        else:  # many tags: a Counter per filled bin
            hits: dict[tuple[str, ...], list[int]] = {}
            for b_ in (b for b, k in enumerate(counts) if k):
                for g, k in Counter(tag[lower[b_] : upper[b_]]).items():
                    path = tags.get(g, unknown)
                    if path != NO_PHASE:
                        row = hits.get(path)
                        if row is None:
                            row = hits[path] = [0] * tl.bins
                        row[b_] += k
            for path, row in hits.items():
                self._tally(path, row, t.interval_ns)
        if t.n_gpu:
            self._add_gpus(w, t, bounds, [b for b, k in enumerate(counts) if k])

    def _tally(self, path: tuple[str, ...], rows: list[int], interval: int) -> None:
        """Adds a phase's rows per bin (each one sampler interval of the phase being open), kept
        per interval (one, usually) until ``finish`` weighs them."""
        by_interval = self.phase_rows.setdefault(path, {})
        have = by_interval.get(interval)
        by_interval[interval] = rows if have is None else list(map(add, have, rows))

    def _add_gpus(self, w: Worker, t: SampleTable, bounds: list[int], filled: list[int]) -> None:
        c, bins = t.cols, self.tl.bins if self.tl is not None else 0
        dt = c[W_DT]
        for b_ in filled:
            lo, hi = bounds[b_], bounds[b_ + 1]
            for k in range(t.n_gpu):
                key = (w.host, k)
                busy, mine, d = (
                    c[BASE_WORDS + 2 * k][lo:hi],
                    c[BASE_WORDS + 2 * k + 1][lo:hi],
                    dt[lo:hi],
                )
                ok = bytes(map(le, repeat(0), busy))
                if any(ok):
                    ba = self.busy_acc.setdefault(key, [[0.0, 0.0] for _ in range(bins)])
                    ba[b_][0] += sum(map(mul, compress(busy, ok), compress(d, ok)))
                    ba[b_][1] += sum(compress(d, ok))
                read = bytes(map(ne, mine, repeat(-1)))
                if any(read):
                    ma = self.mine_acc.setdefault(key, [[0.0, 0.0] for _ in range(bins)])
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
        # each bin's phase: the most process-time there (ties: the greater path), among the
        # phases with a row in it
        best: list[tuple[int, tuple[str, ...]] | None] = [None] * tl.bins
        for path, by_interval in self.phase_rows.items():
            rows, ns = [0] * tl.bins, [0] * tl.bins
            for interval, r in by_interval.items():
                rows = list(map(add, rows, r))
                ns = list(map(add, ns, map(mul, r, repeat(interval))))
            for b in (b for b, k in enumerate(rows) if k):
                cand = (ns[b], path)
                if best[b] is None or cand > best[b]:  # type: ignore[operator]
                    best[b] = cand
        tl.phase = [None if x is None else x[1] for x in best]
        for key, acc in self.busy_acc.items():
            tl.gpu_busy[key] = [a / d if d else None for a, d in acc]
        for key, acc in self.mine_acc.items():
            tl.gpu_mine[key] = [a if d else None for a, d in acc]
        return tl


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


@dataclass
class Recent:
    """The sampler's rows of the last ``window_s`` seconds, summed over the run's processes."""

    read_bytes: int = 0
    write_bytes: int = 0
    rss_bytes: int = 0  # the latest row's RSS of each process, summed
    workers: int = 0


# A sidecar's header words recent() needs: header bytes, words per row, interval ns (runfile/samples)
_HEAD = struct.Struct("<12xII4xQ")
_F_IO_OF = F_IO.__and__  # flags -> its I/O bit, as a C-level callable for map()


def _samples_of(worker_file: str) -> str:
    """The ``.samples`` sidecar's path beside a worker file's, as a string (no ``Path`` a worker
    a refresh)."""
    if worker_file.endswith(".json"):
        return worker_file[: -len(".json")] + SAMPLES_SUFFIX
    return str(samples_path(Path(worker_file)))


def recent(run: MergedRun, window_s: float, now_ns: int) -> Recent | None:
    """I/O of the rows that ended in (now - window, now] and current RSS, from each sidecar's tail.

    Reads only the last rows of each file (enough to cover the window), so a refresh costs the
    same in the first minute of a run and in its twelfth hour. None when no worker has rows.
    A refresh of ``top`` reads every sidecar's tail: its rows are summed by C-level passes (the
    rows after the window's start found by bisection while their times rise, as the sampler
    writes them; row by row when a clock stepped back).
    """
    out = Recent()
    window_ns = int(window_s * 1e9)
    lo = now_ns - window_ns
    within = os.fspath(run.run_dir)  # a string: safe_read's shortcut for a directory already open
    for w in run.workers:
        if not w.file:
            continue
        side = _samples_of(w.file)
        try:
            with open_regular(side, MAX_SAMPLES_BYTES, within) as (fd, size):
                head = read_range(fd, 0, HEADER_BYTES)
                if len(head) < HEADER_BYTES:
                    continue
                hb, words, interval = _HEAD.unpack_from(head)
                if words < BASE_WORDS or hb < HEADER_BYTES:
                    continue
                row = 8 * words
                rows = (size - hb) // row
                if rows <= 0:
                    continue
                want = min(rows, window_ns // max(1, interval) + 2, RECENT_MAX_ROWS)
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
        if all(map(le, ts, ts[1:])):  # times rise: the window is a suffix
            i = bisect_right(ts, lo)
            io = list(map(_F_IO_OF, flags[i:]))
            out.read_bytes += sum(compress(rb[i:], io))
            out.write_bytes += sum(compress(wb[i:], io))
        else:
            for t_, f, r, w_ in zip(ts, flags, rb, wb, strict=True):
                if t_ > lo and f & F_IO:
                    out.read_bytes += r
                    out.write_bytes += w_
        for j in range(n - 1, -1, -1):  # the last row with an RSS (usually the last row)
            if flags[j] & F_RSS and rss_col[j] >= 0:
                out.rss_bytes += rss_col[j]
                break
    return out if out.workers else None
