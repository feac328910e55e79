"""``export --perfetto``: the sampler's timeline as a Chrome JSON trace (Perfetto, chrome://tracing).

One process track per worker, named ``role pid host rank`` (track ids are the workers' order in
the merge, since pids collide across nodes; the name carries the real pid). Per sample interval
(the sampler's rows, docs/worker-file.md):

- counter tracks ("C" events): ``RSS (MB)`` (to 0.1 MB), ``I/O (MB/s)`` with ``read`` and ``write`` (the
  interval's bytes over its length, syscall layer excluded: storage bytes), and per GPU
  ``GPU k (%)`` with ``busy`` (device utilisation) and ``this run`` (this pid's SM share, 0 when
  NVML had no sample for it);
- slices ("B"/"E" events) on the ``phases`` thread: the phase open when each interval began
  (the row's tag), consecutive intervals with the same phase joined into one slice.

Every worker's events are written in timestamp order (a timestamp never goes back on a track:
a row whose clock stepped back is clamped to its predecessor's end).

This is the interval-resolution view; ``Profiler(backend="torch")`` windows give the kernel-level
one (``backend/torch_trace.json``, referenced in the trace's ``otherData`` when present).

Size bound: a counter event is written only when its value changed (counters are steps), and a
worker with more than ``MAX_POINTS`` rows has consecutive rows merged (2, 3, ... at a time) so it
never writes more than ``MAX_POINTS`` points. A point costs at most ``BYTES_PER_POINT`` plus
``BYTES_PER_GPU_POINT`` per GPU, so a worker is bounded by ``worker_bound_bytes`` whatever its
length. Measured worst case (every value and the phase changing every row, one GPU, 120-byte
names): 1.30 MB per worker-hour at the default 1 s interval, 15.6 MB for a 12-hour worker.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from itertools import repeat
from operator import truediv
from pathlib import Path
from typing import IO, Any

from lineprofiler.report.merge import merge_run
from lineprofiler.report.model import MergedRun, Worker
from lineprofiler.runfile.samples import (
    BASE_WORDS,
    F_GPU,
    F_IO,
    F_RSS,
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
    sidecar_name_ok,
)
from lineprofiler.runfile.worker_doc import WorkerFileError, load_worker_doc

MAX_POINTS = 43_200  # a worker's points at most: 12 hours at the default 1 s interval
# Upper bounds of one point's JSON text (an E, a B, an RSS and an I/O event; track ids below 10^7,
# timestamps below 10^13 us (115 days into a run), values of at most 20 characters, a slice name
# of at most MAX_SLICE_NAME UTF-8 bytes, 240 once quotes are escaped): 583 and 100 bytes.
BYTES_PER_POINT = 620
BYTES_PER_GPU_POINT = 110
MAX_SLICE_NAME = 120  # UTF-8 bytes of a slice's name (longer phase paths are cut)
BACKEND_TORCH_TRACE = "backend/torch_trace.json"  # accounting/backends.py's artifact for "torch"


def worker_bound_bytes(points: int, n_gpu: int = 0) -> int:
    """The most text one worker can add to the trace for ``points`` rows (capped at MAX_POINTS)."""
    return 400 + min(points, MAX_POINTS) * (BYTES_PER_POINT + n_gpu * BYTES_PER_GPU_POINT)


def track_name(w: Worker) -> str:
    """``role pid host rank`` (rank ``-`` when the worker had none)."""
    rank = "-" if w.rank is None else str(w.rank)
    return f"{w.role} {w.pid} {w.host} {rank}"


def slice_name(path: tuple[str, ...]) -> str:
    """A phase path as a slice name: control characters as ``?``, cut to MAX_SLICE_NAME bytes."""
    name = "".join(ch if ch.isprintable() else "?" for ch in "/".join(path))
    return name.encode("utf-8")[:MAX_SLICE_NAME].decode("utf-8", "ignore")


def _sidecars(w: Worker, within: str) -> tuple[Path, Path | None] | None:
    """The worker's ``.samples`` and ``.tags`` files, from its document's sampler status."""
    try:
        status = load_worker_doc(Path(w.file), within).samples
    except WorkerFileError:
        return None
    if not isinstance(status, dict):
        return None
    name, tags = status.get("file"), status.get("tags_file")
    if not sidecar_name_ok(name):
        return None
    side = Path(w.file).with_name(name)
    tag_path = side.with_name(tags) if sidecar_name_ok(tags) else None
    return side, tag_path


def _compact(x: float) -> float | int:
    """A compact number (``x`` already rounded): integers stay integers, others as they are."""
    if x.is_integer() and -1e15 < x < 1e15:
        return int(x)
    return x


def _points(t: SampleTable) -> Iterator[tuple[int, int, int, int, int, int, int, list[int]]]:
    """(end_ns, dt_ns, tag, flags, read_bytes, write_bytes, rss, gpu words) per point; rows are
    merged ``k`` at a time when there are more than MAX_POINTS (sums of bytes and dt, the max
    RSS, the last GPU reading, the first row's tag: the phase open when the point began)."""
    c = t.cols
    n = t.rows
    k = max(1, -(-n // MAX_POINTS))
    gw = [c[BASE_WORDS + j] for j in range(2 * t.n_gpu)]
    if k == 1:  # one point per row: no slicing
        base = (c[W_T], c[W_DT], c[W_TAG], c[W_FLAGS], c[W_RB], c[W_WB], c[W_RSS])
        for i, (ts, dt, tag, fl, rb, wb, rss) in enumerate(zip(*base, strict=True)):
            yield ts, dt, tag, fl, rb, wb, rss, [g[i] for g in gw]
        return
    for i in range(0, n, k):
        j = min(n, i + k)
        flags = 0
        for f in c[W_FLAGS][i:j]:
            flags |= f
        yield (
            c[W_T][j - 1],
            sum(c[W_DT][i:j]),
            c[W_TAG][i],
            flags,
            sum(c[W_RB][i:j]),
            sum(c[W_WB][i:j]),
            max(c[W_RSS][i:j]),
            [g[j - 1] for g in gw],
        )


def _dump(obj: dict[str, Any]) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def worker_events(
    tid: int, w: Worker, t: SampleTable, tags: dict[int, tuple[str, ...]], origin_ns: int
) -> Iterator[str]:
    """One worker's events as JSON texts, in timestamp order."""
    yield _dump({"ph": "M", "pid": tid, "name": "process_name", "args": {"name": track_name(w)}})
    yield _dump({"ph": "M", "pid": tid, "name": "process_sort_index", "args": {"sort_index": tid}})
    yield _dump(
        {"ph": "M", "pid": tid, "tid": 1, "name": "thread_name", "args": {"name": "phases"}}
    )
    # Events are formatted directly (numbers only; names encoded once), the hot loop of export.
    open_tag = 0  # the phase slice open on the track (0: none)
    end_us = 0
    names: dict[int, str] = {}
    last_rss: Any = None
    last_io: Any = None
    last_gpu: list[Any] = [None] * t.n_gpu
    c_head = f'{{"ph":"C","pid":{tid},"name":'
    n_gpu = t.n_gpu
    if t.rows == 0:
        return
    # The per-point numbers are computed column-wise (C-level map loops, the same operations in
    # the same order as one point at a time); the loop below only compares and formats. One
    # point per row: the table's own columns; else _points' merged points, transposed.
    if t.rows <= MAX_POINTS:
        c = t.cols
        ends, dts, tags_, flags_ = c[W_T], c[W_DT], c[W_TAG], c[W_FLAGS]
        rbs, wbs, rsss = c[W_RB], c[W_WB], c[W_RSS]
        gw = [c[BASE_WORDS + j] for j in range(2 * n_gpu)]
        gpus: Any = list(zip(*gw, strict=True)) if gw else [()] * t.rows
    else:
        pts = list(_points(t))
        ends, dts, tags_, flags_, rbs, wbs, rsss, gpus = zip(*pts, strict=True)
        del pts
    rss_mb = list(map(round, map(truediv, rsss, repeat(1e6)), repeat(1)))
    secs = [d / 1e9 if d > 0 else 1.0 for d in dts]  # dt <= 0: no I/O point is written
    rd_mbs = list(map(round, map(truediv, map(truediv, rbs, repeat(1e6)), secs), repeat(3)))
    wr_mbs = list(map(round, map(truediv, map(truediv, wbs, repeat(1e6)), secs), repeat(3)))
    for end_ns, dt_ns, tag, flags, rss, gpu, v, rd, wr in zip(
        ends, dts, tags_, flags_, rsss, gpus, rss_mb, rd_mbs, wr_mbs, strict=True
    ):
        start_us = (end_ns - dt_ns - origin_ns) // 1000
        if start_us < end_us:
            start_us = end_us
        end_us = (end_ns - origin_ns) // 1000
        if end_us < start_us:
            end_us = start_us
        if tag != open_tag:
            if open_tag:
                yield f'{{"ph":"E","pid":{tid},"tid":1,"ts":{start_us}}}'
            if tag:
                name = names.get(tag)
                if name is None:
                    text = slice_name(tags.get(tag, ("(unknown phase)",)))
                    name = names[tag] = json.dumps(text, ensure_ascii=False)
                yield f'{{"ph":"B","pid":{tid},"tid":1,"name":{name},"ts":{start_us}}}'
            open_tag = tag
        # A rounded value is compared with the last one written (5.0 == 5), and only made
        # compact when it is written.
        if flags & F_RSS and rss >= 0 and v != last_rss:
            last_rss = v
            yield f'{c_head}"RSS (MB)","ts":{start_us},"args":{{"rss":{_compact(v)}}}}}'
        if flags & F_IO and dt_ns > 0:
            io = (rd, wr)
            if io != last_io:
                last_io = io
                yield (
                    f'{c_head}"I/O (MB/s)","ts":{start_us},'
                    f'"args":{{"read":{_compact(rd)},"write":{_compact(wr)}}}}}'
                )
        if flags & F_GPU:
            for k in range(n_gpu):
                busy, mine = gpu[2 * k], max(0, gpu[2 * k + 1])
                if busy >= 0 and (busy, mine) != last_gpu[k]:
                    last_gpu[k] = (busy, mine)
                    yield (
                        f'{c_head}"GPU {k} (%)","ts":{start_us},'
                        f'"args":{{"busy":{busy},"this run":{mine}}}}}'
                    )
    if open_tag:
        yield f'{{"ph":"E","pid":{tid},"tid":1,"ts":{end_us}}}'


def export_perfetto(run_dir: str | Path, out: IO[str]) -> dict[str, Any]:
    """Writes the run's trace to ``out``; returns what was written (workers, events, skipped)."""
    run: MergedRun = merge_run(run_dir, with_samples=False)
    origin_ns = int((run.start_time or 0.0) * 1e9)
    info: dict[str, Any] = {"workers": 0, "events": 0, "without_samples": []}
    torch = Path(run.run_dir) / BACKEND_TORCH_TRACE
    other = {"run_dir": run.run_dir, "run_id": run.run_id, "origin_unix_ns": origin_ns}
    if torch.is_file():
        other["torch_trace"] = str(torch)
        info["torch_trace"] = str(torch)
    out.write('{"displayTimeUnit":"ms","otherData":' + _dump(other) + ',"traceEvents":[\n')
    first = True
    for tid, w in enumerate(run.workers, start=1):
        files = _sidecars(w, run.run_dir)
        try:
            if files is None:
                raise SamplesError("no sampler sidecar")
            table = read_samples(files[0], run.run_dir)
        except (OSError, SamplesError):
            info["without_samples"].append(track_name(w))
            continue
        tags = read_tags(files[1], run.run_dir) if files[1] is not None else {0: ()}
        info["workers"] += 1
        # one write per worker: its events joined (the text of one worker, as its table is)
        events = list(worker_events(tid, w, table, tags, origin_ns))
        del table
        if events:
            out.write(("" if first else ",\n") + ",\n".join(events))
            first = False
            info["events"] += len(events)
        del events
    out.write("\n]}\n")
    return info
