"""``export --perfetto``: the sampler's timeline as a Chrome JSON trace (Perfetto, chrome://tracing).

One process track per worker, named ``role pid host rank`` (track ids are the workers' order in
the merge, since pids collide across nodes; the name carries the real pid). Per sample interval
(the sampler's rows, docs/worker-file.md):

- counter tracks ("C" events): ``RSS (MB)`` (to 0.1 MB), ``I/O (MB/s)`` with ``read`` and ``write`` (the
  interval's bytes over its length, syscall layer excluded: storage bytes), and per GPU
  ``GPU k (%)`` with ``busy`` (device utilisation) and ``this run`` (this pid's SM share, 0 when
  NVML had no sample for it);
- slices ("B"/"E" events) on the ``phases`` thread: the phase open when each interval began
  (the row's tag), consecutive intervals with the same phase joined into one slice; a phase run
  attached to another thread's (a path through ``[threads]``) has ``"on_threads": true`` in its
  args.

Every track's events are written in timestamp order (a timestamp never goes back on a track: a
row whose clock stepped back is clamped to its predecessor's end); a worker's tracks are written
one after another (its slices, then each counter track), which the trace format allows ("events
do not have to be in timestamp-sorted order") and Perfetto sorts on import.

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
from array import array
from collections.abc import Iterator
from itertools import accumulate, chain, compress, islice, repeat
from operator import add, and_, floordiv, ge, mod, mul, ne, or_, sub
from pathlib import Path
from typing import IO, Any

from lineprofiler.report.merge import merge_run
from lineprofiler.report.model import MergedRun, Worker
from lineprofiler.runfile.layout import THREADS_MARK
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

try:  # the tracks' text in C++ where the compiled core is here (not on the pure install)
    from lineprofiler._core import perfetto_tracks as _native_tracks
except ImportError:
    _native_tracks = None

MAX_POINTS = 43_200  # a worker's points at most: 12 hours at the default 1 s interval
# Upper bounds of one point's JSON text (an E, a B, an RSS and an I/O event; track ids below 10^7,
# timestamps below 10^13 us (115 days into a run), values of at most 20 characters, a slice name
# of at most MAX_SLICE_NAME UTF-8 bytes, 240 once quotes are escaped, and a B event's on_threads
# args): 610 and 100 bytes.
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


def _rows_with(n: int, flags: Any, bit: int, col: Any, lo: int) -> tuple[list[int], bool]:
    """The rows whose flags hold ``bit`` and whose ``col`` value is at least ``lo``; and whether
    that is every row (then the columns need no gathering)."""
    if n and min(map(and_, flags, repeat(bit))) and min(col) >= lo:
        return list(range(n)), True
    return [i for i in compress(range(n), map(and_, flags, repeat(bit))) if col[i] >= lo], False


def _changed(idx: list[int], every: bool, *cols: Any) -> list[int]:
    """The indices of ``idx`` whose values (one per column) differ from the previous index's (the
    first always): a counter track needs a point only where its value changed. ``every``: idx
    is every row."""
    if not idx:
        return []
    keep: Any = None
    for col in cols:
        vals = col if every else [col[i] for i in idx]
        ne_ = map(ne, vals, chain((None,), vals))
        keep = ne_ if keep is None else map(or_, keep, ne_)
    return list(compress(idx, keep))


def _counter_text(template: str, *cols: Any, at: list[int]) -> str:
    """``template`` (one event, its values as ``%`` fields, ending ",\n") for each index of
    ``at``, formatted in one ``%`` over the whole track: a field per column."""
    if not at:
        return ""
    if len(at) == len(cols[0]):  # a point at every row: the columns as they are
        rows = zip(*cols, strict=True)
    else:
        rows = zip(*([c[i] for i in at] for c in cols), strict=True)
    return (template * len(at)) % tuple(chain.from_iterable(rows))


# The decimals of a fixed-point value, written as repr writes a rounded float: the shortest
# (5.1, not 5.100; 5, not 5.0). Index: the fractional units.
_DECIMALS = {
    10: [""] + [f".{i}" for i in range(1, 10)],
    1000: [""] + [f".{i:03d}".rstrip("0") for i in range(1, 1000)],
}


def _fixed(units: Any, per: int) -> tuple[list[int], list[str]]:
    """Whole parts and decimals (text) of values counted in 1/per units (never negative)."""
    return (
        list(map(floordiv, units, repeat(per))),
        list(map(_DECIMALS[per].__getitem__, map(mod, units, repeat(per)))),
    )


def _columns(t: SampleTable) -> list[Any]:
    """The columns the tracks are written from (end ns, dt ns, tag, flags, read bytes, write
    bytes, RSS bytes, then per GPU busy % and this pid's SM %): the table's own arrays for one
    point per row, else _points' merged points, transposed."""
    if t.rows <= MAX_POINTS:
        c = t.cols
        gpu = [c[BASE_WORDS + j] for j in range(2 * t.n_gpu)]
        return [c[W_T], c[W_DT], c[W_TAG], c[W_FLAGS], c[W_RB], c[W_WB], c[W_RSS], *gpu]
    pts = list(_points(t))
    cols: list[Any] = list(zip(*pts, strict=True))[:7]
    gpus = [p[7] for p in pts]
    del pts
    return cols + [[g[j] for g in gpus] for j in range(2 * t.n_gpu)]


def _name_text(path: tuple[str, ...]) -> str:
    """A phase path as a B event's name field, JSON text (with its args where the path ran on
    another thread's phase, issue 33)."""
    name = json.dumps(slice_name(path), ensure_ascii=False)
    return name + ',"args":{"on_threads":true}' if THREADS_MARK in path else name


UNKNOWN_PHASE = ("(unknown phase)",)  # a row's tag that the .tags sidecar does not name
_UNKNOWN_NAME = _name_text(UNKNOWN_PHASE)


def _native_text(
    tid: int, cols: list[Any], n_gpu: int, tags: dict[int, tuple[str, ...]], origin_ns: int
) -> tuple[str, str, int] | None:
    """_tracks_text's result from _core's perfetto_tracks (the same bytes, in C++); None where it
    cannot take this worker (no _core, a merged column or origin beyond int64, a name that is not
    UTF-8)."""
    if _native_tracks is None or not -(2**63) <= origin_ns < 2**63:
        return None
    try:
        arrays = [c if isinstance(c, array) else array("q", c) for c in cols]
    except OverflowError:  # merged sums beyond int64 (only a forged sidecar has them)
        return None
    # the names of the tags the rows use only (a .tags file may name millions)
    names = {t: _name_text(tags[t]) for t in set(arrays[2]) if t in tags}
    return _native_tracks(tid, origin_ns, arrays, n_gpu, names, _UNKNOWN_NAME)


def _tracks_text(
    tid: int, cols: list[Any], n_gpu: int, tags: dict[int, tuple[str, ...]], origin_ns: int
) -> tuple[str, str, int]:
    """A worker's phase slices and counter events as JSON text, each event joined by ",\n" (the
    slices; the counter tracks one after another), and how many events: the reference rules,
    written column-wise (C-level maps over the columns, one ``%`` per track)."""
    ends, dts, tags_, flags_, rbs, wbs, rsss = cols[:7]
    gw = cols[7:]
    n = len(ends)
    # A point starts where its row began, never before the previous point's end (a clock that
    # stepped back is clamped), and ends no earlier than it starts: end_us is the running max.
    since = list(map(sub, ends, repeat(origin_ns)))
    raw_start = list(map(floordiv, map(sub, since, dts), repeat(1000)))
    raw_end = list(map(floordiv, since, repeat(1000)))
    del since
    if (
        raw_start[0] >= 0
        and all(map(ge, raw_end, raw_start))
        and all(map(ge, islice(raw_start, 1, None), raw_end))
    ):  # the usual rows: each begins where (or after) the previous one ended, none reversed
        start_us, end_us = raw_start, raw_end[-1]
    else:
        end_acc = list(accumulate(map(max, raw_end, raw_start), max, initial=0))
        start_us = list(map(max, raw_start, end_acc))  # end_acc[i]: the previous point's end
        end_us = end_acc[-1]
    del raw_end

    # Slices: the phase (the row's tag) changes only every so often; each change ends the open
    # slice and begins the next where that row began.
    slices: list[str] = []
    names: dict[int, str] = {}
    open_tag = 0
    for i in compress(range(n), map(ne, tags_, chain((0,), tags_))):
        tag, ts = tags_[i], start_us[i]
        if open_tag:
            slices.append(f'{{"ph":"E","pid":{tid},"tid":1,"ts":{ts}}}')
        if tag:
            name = names.get(tag)
            if name is None:
                name = names[tag] = _name_text(tags.get(tag, UNKNOWN_PHASE))
            slices.append(f'{{"ph":"B","pid":{tid},"tid":1,"name":{name},"ts":{ts}}}')
        open_tag = tag
    if open_tag:
        slices.append(f'{{"ph":"E","pid":{tid},"tid":1,"ts":{end_us}}}')

    # Counters: a point where the track's flag is set and its rounded value changed since the
    # last point written. Values in integer units, rounded half up: RSS in 0.1 MB (100 kB), I/O
    # in 0.001 MB/s (bytes per dt_ns x 10^6 / 1000); written as the shortest decimal.
    c_head = f'{{"ph":"C","pid":{tid},"name":'
    dt_pos = [d if d > 0 else 1 for d in dts]  # dt <= 0: no I/O point is written
    rss_units = list(map(floordiv, map(add, rsss, repeat(50_000)), repeat(100_000)))
    if min(rbs, default=0) < 0 or min(wbs, default=0) < 0:  # (never written by the sampler)
        rbs = list(map(max, rbs, repeat(0)))
        wbs = list(map(max, wbs, repeat(0)))
    two_dt = list(map(mul, dt_pos, repeat(2)))
    rd_units = list(map(floordiv, map(add, map(mul, rbs, repeat(2_000_000)), dt_pos), two_dt))
    wr_units = list(map(floordiv, map(add, map(mul, wbs, repeat(2_000_000)), dt_pos), two_dt))
    with_rss, every = _rows_with(n, flags_, F_RSS, rsss, 0)
    rss_at = _changed(with_rss, every, rss_units)
    with_io, every = _rows_with(n, flags_, F_IO, dts, 1)
    io_at = _changed(with_io, every, rd_units, wr_units)
    rss_text = _counter_text(
        c_head + '"RSS (MB)","ts":%d,"args":{"rss":%d%s}},\n',
        start_us,
        *_fixed(rss_units, 10),
        at=rss_at,
    )
    io_text = _counter_text(
        c_head + '"I/O (MB/s)","ts":%d,"args":{"read":%d%s,"write":%d%s}},\n',
        start_us,
        *_fixed(rd_units, 1000),
        *_fixed(wr_units, 1000),
        at=io_at,
    )  # fmt: skip
    counters = rss_text + io_text
    n_events = len(slices) + len(rss_at) + len(io_at)
    for k in range(n_gpu):
        busy_col, mine_col = gw[2 * k], gw[2 * k + 1]
        mine = list(map(max, repeat(0), mine_col))
        with_gpu, every = _rows_with(n, flags_, F_GPU, busy_col, 0)
        at = _changed(with_gpu, every, busy_col, mine)
        n_events += len(at)
        counters += _counter_text(
            c_head + f'"GPU {k} (%%)","ts":%d,"args":{{"busy":%d,"this run":%d}}}},\n',
            start_us,
            busy_col,
            mine,
            at=at,
        )
    return ",\n".join(slices), counters[:-2], n_events  # counters less its last ",\n"


def worker_events(
    tid: int,
    w: Worker,
    t: SampleTable,
    tags: dict[int, tuple[str, ...]],
    origin_ns: int,
    native: bool = True,
) -> tuple[list[str], int]:
    """One worker's events as JSON text: chunks, each of events joined by ",\n" (its metadata, its
    phase slices, then each counter track), every track in timestamp order; and how many events.
    The tracks come from _core's C++ (perfetto_tracks) where it is here and ``native``, else from
    _tracks_text: the same bytes (tests/report/test_perfetto_native.py)."""
    meta = [
        _dump({"ph": "M", "pid": tid, "name": "process_name", "args": {"name": track_name(w)}}),
        _dump({"ph": "M", "pid": tid, "name": "process_sort_index", "args": {"sort_index": tid}}),
        _dump({"ph": "M", "pid": tid, "tid": 1, "name": "thread_name", "args": {"name": "phases"}}),
    ]
    if t.rows == 0:
        return [",\n".join(meta)], len(meta)
    cols = _columns(t)
    text = _native_text(tid, cols, t.n_gpu, tags, origin_ns) if native else None
    slices, counters, n_events = text or _tracks_text(tid, cols, t.n_gpu, tags, origin_ns)
    chunks = [",\n".join(meta)]
    if slices:
        chunks.append(slices)
    if counters:
        chunks.append(counters)
    return chunks, len(meta) + n_events


def export_perfetto(run_dir: str | Path, out: IO[str], native: bool = True) -> dict[str, Any]:
    """Writes the run's trace to ``out``; returns what was written (workers, events, skipped).
    ``native=False``: the tracks written as the pure install writes them (Python)."""
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
        chunks, n_events = worker_events(tid, w, table, tags, origin_ns, native)
        del table
        out.write(("" if first else ",\n") + ",\n".join(chunks))
        first = False
        info["events"] += n_events
        del chunks
    out.write("\n]}\n")
    return info
