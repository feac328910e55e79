"""Reading the sampler's sidecars and reducing them while merging (``merge_run(with_samples=True)``).

Each worker's sampler appends fixed-width binary rows to ``w_<...>.samples`` and the phase paths
its rows are tagged with to ``w_<...>.tags`` (format: docs/worker-file.md). Merging reads one
worker's sidecar at a time, reduces it into small run-level accumulators and drops it, so memory
is one worker's columns plus the accumulators (a per-second write series, per-tag byte sums,
peaks), never every worker's rows at once.

Definitions (the report's I/O, MEMORY and GPU blocks):

- I/O totals sum the rows' deltas (the profiler's own I/O is already excluded by the sampler);
  an interval whose counters could not be read carries no bytes and is counted as dropped.
- A rate is bytes per second of wall time in which any of the run's processes moved them: each
  interval's bytes land in the Unix second its interval ended, summed over processes, and the
  rate is the mean over the seconds with bytes; the peak is the busiest such second, so it is
  never below the rate (both in the same terms: the run's throughput).
- The page-cache layer is ``read_chars - read_bytes`` (clamped at 0).
- ``(no phase open)`` is tag 0; its share is of all syscall-layer traffic (read + write chars).
- GPU ``busy``: the time-weighted mean of nvmlDeviceGetUtilizationRates over every row that read
  it; ``this run``: the sum over the run's processes of (their pid's SM % x window) over the span
  the device was observed, a window without a sample for the pid counting 0; None (n/a) when NVML
  never attributed a sample to any of the run's pids on that device.
- Devices are keyed by (host, NVML index): GPU 0 of one node is not GPU 0 of another.
"""

from __future__ import annotations

import os
from array import array
from collections.abc import Callable, Iterable, Mapping
from itertools import compress, repeat
from operator import and_, eq, le, mul, ne
from typing import Any

from lineprofiler.report.model import Caveat, MergedRun, Worker
from lineprofiler.report.resource_model import GpuDevice, IoTotals, ProcessMemory, RunResources
from lineprofiler.runfile.samples import (
    BASE_WORDS,
    F_CUDA,
    F_IO,
    F_RSS,
    NO_PHASE,
    W_CUDA_ALLOC,
    W_CUDA_RES,
    W_DT,
    W_FLAGS,
    W_OWN_WB,
    W_RB,
    W_RC,
    W_RSS,
    W_T,
    W_TAG,
    W_WB,
    W_WC,
    SamplesError,
    SampleTable,
    read_samples,
    read_tags,
    sidecar_name_ok,
)


def _resources(run: MergedRun) -> RunResources:
    if run.samples is None:
        run.samples = RunResources()
    return run.samples


def _flag_mask(flags: array, bit: int) -> Iterable[Any]:
    """A truthy-per-row mask of ``flags & bit``."""
    return map(and_, flags, repeat(bit))


def reduce_table(
    res: RunResources, t: SampleTable, tags: Mapping[int, tuple[str, ...]], worker: Worker
) -> None:
    """Adds one worker's rows to the run's accumulators.

    Every pass is a C-level iterator (sum/max over map/compress of array columns), so a 12-hour
    worker (43,200 rows) reduces in milliseconds without numpy.
    """
    c = t.cols
    n = t.rows
    res.workers_with_samples += 1
    res.rows += n
    flags = c[W_FLAGS]
    distinct = set(flags)
    io_rows = sum(flags.count(f) for f in distinct if f & F_IO)
    all_have = {bit: all(f & bit for f in distinct) for bit in (F_RSS, F_CUDA)}
    res.io_rows += io_rows
    res.dropped += n - io_rows
    rb, wb, rc, wc, dt, tag, ts = c[W_RB], c[W_WB], c[W_RC], c[W_WC], c[W_DT], c[W_TAG], c[W_T]
    res.io.add(sum(rb), sum(wb), sum(rc), sum(wc))
    res.own_write_bytes += sum(c[W_OWN_WB])

    # Per tag: one C-level pass per distinct tag (a handful); a loop only for many tags.
    tag_ids = set(tag)
    per_id: dict[int, list[int]] = {}
    if len(tag_ids) == 1:
        per_id[next(iter(tag_ids))] = [sum(rb), sum(wb), sum(rc), sum(wc)]
    elif len(tag_ids) <= 16:
        # The most frequent tag gets the remainder of the totals (one tag fewer to pass over).
        ids = sorted(tag_ids, key=tag.count)
        rest = [sum(rb), sum(wb), sum(rc), sum(wc)]
        for g in ids[:-1]:
            mask = bytes(map(eq, tag, repeat(g)))
            sums = per_id[g] = [sum(compress(col, mask)) for col in (rb, wb, rc, wc)]
            rest = [r - x for r, x in zip(rest, sums, strict=True)]
        per_id[ids[-1]] = rest
    else:
        for g, a, b, r, w in zip(tag, rb, wb, rc, wc, strict=True):
            acc = per_id.get(g)
            if acc is None:
                per_id[g] = [a, b, r, w]
            else:
                acc[0] += a
                acc[1] += b
                acc[2] += r
                acc[3] += w
    for g, (a, b, r, w) in per_id.items():
        if not (a or b or r or w):
            continue
        path = tags.get(g)
        if path is None:
            path = ("(unknown phase)",)
        tot = res.by_tag.get(path)
        if tot is None:
            tot = res.by_tag[path] = IoTotals()
        tot.add(a, b, r, w)

    for col, per_s in ((rb, res.read_per_s), (wb, res.write_per_s)):
        for s, b in zip(compress(ts, col), compress(col, col), strict=True):
            k = s // 1_000_000_000
            per_s[k] = per_s.get(k, 0) + b

    # A column counts only where its flag says it was measured (-1 or 0 otherwise: never a peak);
    # no mask when every row has the flag.
    def peak(col: array, bit: int) -> int:
        if all_have.get(bit):
            return max(col, default=-1)
        return max(compress(col, _flag_mask(flags, bit)), default=-1)

    rss = peak(c[W_RSS], F_RSS)
    ca = peak(c[W_CUDA_ALLOC], F_CUDA)
    cr = peak(c[W_CUDA_RES], F_CUDA)
    res.memory.append(
        ProcessMemory(
            worker.role,
            worker.label,
            rss if rss >= 0 else None,
            ca if ca >= 0 else None,
            cr if cr >= 0 else None,
        )
    )

    for k in range(t.n_gpu):
        busy = c[BASE_WORDS + 2 * k]
        mine = c[BASE_WORDS + 2 * k + 1]
        dev = res.gpus.get((worker.host, k))
        if dev is None:
            dev = res.gpus[(worker.host, k)] = GpuDevice(worker.host, k)
        dev.windows += n
        if min(busy, default=0) >= 0:  # every read succeeded: no mask needed
            dev.busy_weighted += sum(map(mul, busy, dt))
            dev.busy_dt_ns += sum(dt)
        else:
            ok = bytes(map(le, repeat(0), busy))  # busy >= 0
            dev.failed_windows += n - sum(ok)
            dev.busy_weighted += sum(map(mul, compress(busy, ok), compress(dt, ok)))
            dev.busy_dt_ns += sum(compress(dt, ok))
        if max(mine, default=-1) >= 0:  # a sample for our pid (absent = -2 counts as 0)
            dev.attributed = True
            pos = bytes(map(le, repeat(0), mine))
            dev.pid_weighted += sum(map(mul, compress(mine, pos), compress(dt, pos)))
        read = bytes(map(ne, mine, repeat(-1)))  # the per-process read succeeded
        if any(read):
            # rows are appended in time order: the first and last successful reads bound the span
            i, j = read.index(1), n - 1 - read[::-1].index(1)
            first, last = ts[i] - dt[i], ts[j]
            if dev.first_ns is None or first < dev.first_ns:
                dev.first_ns = first
            if dev.last_ns is None or last > dev.last_ns:
                dev.last_ns = last


def _count(value: Any) -> int:
    """A count from a worker file's ``samples`` object: a non-negative int, else 0 (a string,
    NaN or Infinity there is not something the sampler wrote)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def read_worker_samples(
    run: MergedRun,
    worker: Worker,
    status: Mapping[str, Any],
    file_path: str | os.PathLike[str],
    also: Callable[[Worker, SampleTable, dict[int, tuple[str, ...]]], None] | None = None,
) -> None:
    """Reduces one worker's sidecar into ``run.samples`` (merge_run, with_samples=True).

    ``status`` is the worker document's ``samples`` object; ``file_path`` its worker file;
    ``also``: called with the table and its tags once read (the timeline's bins), so nothing
    reads a sidecar twice.
    """
    if not isinstance(status, dict):
        return  # sampler off for this worker (sample_interval_s=None): no rows, no caveat
    res = _resources(run)
    if status.get("io_source"):
        res.io_source = True
    if status.get("gpu_error") and not _count(status.get("gpu_devices")):
        res.gpu_errors[worker.label] = str(status["gpu_error"])
    name = status.get("file")
    if not sidecar_name_ok(name):
        return
    # plain strings: three Path objects per worker were a tenth of reading its sidecars
    side = os.path.join(os.path.dirname(os.fspath(file_path)), name)
    try:
        table = read_samples(side, within=run.run_dir)
        if table.rows == 0:  # only its header, or a first row cut short: what SIGKILL leaves
            raise SamplesError(f"{name}: no complete row")
    except (OSError, SamplesError) as exc:
        if _count(status.get("rows")) > 0:
            res.caveats.append(
                Caveat(
                    "samples_unreadable",
                    f"resource samples of {worker.role} {worker.label} could not be read "
                    f"({exc}); its I/O, memory and GPU rows are missing",
                    [worker.path],
                )
            )
        return
    tags_name = status.get("tags_file")
    tags = (
        read_tags(os.path.join(os.path.dirname(side), tags_name), within=run.run_dir)
        if sidecar_name_ok(tags_name)
        else {0: NO_PHASE}
    )
    reduce_table(res, table, tags, worker)
    if also is not None:
        also(worker, table, tags)
    rss_failed = _count(status.get("rss_failed"))
    if rss_failed and table.rows > rss_failed:
        res.caveats.append(
            Caveat(
                "rss_failed",
                f"RSS could not be read in {rss_failed} interval(s) of {worker.role} "
                f"{worker.label}; its memory peak covers the others",
                [worker.path],
            )
        )


def finish_samples(run: MergedRun) -> None:
    """Run-level caveats of the resource blocks, once every worker's samples were reduced."""
    res = run.samples
    if res is None:
        return
    if res.dropped and res.io_rows:
        res.caveats.append(
            Caveat(
                "io_dropped",
                f"{res.dropped:,} sample interval(s) had unreadable I/O counters: they contribute "
                "no bytes (never differenced across the gap), so I/O totals are a lower bound",
            )
        )
    failed = sum(d.failed_windows for d in res.gpus.values())
    if failed and any(d.busy_dt_ns for d in res.gpus.values()):
        res.caveats.append(
            Caveat(
                "gpu_read_failed",
                f"NVML utilisation could not be read in {failed:,} device window(s); GPU "
                "numbers cover the others",
            )
        )


def io_by_phase(run: MergedRun) -> list[tuple[tuple[str, ...], dict[str, int], int]]:
    """(path, summed io fields, wall_ns) of every phase entered with io=True, most bytes first."""
    rows = []
    for path, stats in run.tree.items():
        io = stats.io
        if not io:
            continue
        rows.append((path, dict(io), stats.wall_ns))
    rows.sort(key=lambda r: -(r[1].get("read_chars", 0) + r[1].get("write_chars", 0)))
    return rows
