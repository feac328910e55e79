"""Issue 33's leftovers: Perfetto and Prometheus carry the ``[threads]`` flag (work handed to other
threads), ``thread_names=True`` nests attached work under the thread that handed it out (or, when
the file cannot tell which, under its own); and the Perfetto trace written track by track holds
exactly the events a row-by-row reading of the same rows gives (the test's own reference)."""

from __future__ import annotations

import io
import json

import pytest

from lineprofiler.report.merge import merge_run
from lineprofiler.report.perfetto import export_perfetto
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
)
from tests.report.synth import MS, T0, Ph, worker_doc, write_worker
from tests.resources.synth_samples import S, attach_samples

MARK = "[threads]"


def test_perfetto_slices_of_attached_work_say_so_in_their_args(tmp_path):
    doc = worker_doc(role="w", pid=3, threads=[Ph(("step",), [S])])
    path = write_worker(tmp_path, doc)
    cols = {
        W_T: [int(T0 * 1e9) + e * S for e in (1, 2, 3)],
        W_DT: [S] * 3,
        W_TAG: [1, 2, 1],
        W_FLAGS: [F_RSS] * 3,
        W_RB: [0] * 3,
        W_WB: [0] * 3,
        W_RSS: [10**8] * 3,
    }
    attach_samples(doc, path, cols, 3, tags={1: ["step"], 2: ["step", MARK, "work"]})
    write_worker(tmp_path, doc)
    out = io.StringIO()
    export_perfetto(tmp_path, out)
    begins = [e for e in json.loads(out.getvalue())["traceEvents"] if e["ph"] == "B"]
    assert [(e["name"], e.get("args")) for e in begins] == [
        ("step", None),
        (f"step/{MARK}/work", {"on_threads": True}),
        ("step", None),
    ]


def test_prometheus_labels_work_on_other_threads(tmp_path):
    pytest.importorskip("prometheus_client")
    from lineprofiler.report.prometheus import families

    main = ("MainThread", [Ph(("step",), [10 * MS] * 4)])
    pool = [(f"pool-{k}", [Ph(("step", MARK, "work"), [2 * MS] * 3)]) for k in range(3)]
    write_worker(tmp_path, worker_doc(role="r", pid=1, threads=[main, *pool]))
    fams = {f.name: f for f in families(merge_run(tmp_path))}
    calls = {
        (s.labels["phase"], s.labels["on_threads"]): s.value
        for s in fams["lineprofiler_phase_calls"].samples
    }
    assert calls == {("step", "false"): 4, (f"step/{MARK}/work", "true"): 9}
    (threads,) = fams["lineprofiler_phase_threads"].samples
    assert threads.labels["phase"] == f"step/{MARK}/work" and threads.value == 3
    for name in ("lineprofiler_phase_seconds", "lineprofiler_phase_duration_seconds"):
        assert all("on_threads" in s.labels for s in fams[name].samples)


def test_thread_names_nest_attached_work_under_the_one_handing_thread(tmp_path):
    main = ("driver", [Ph(("step",), [10 * MS] * 4)])
    pool = [(f"pool-{k}", [Ph(("step", MARK, "work"), [2 * MS] * 3)]) for k in range(2)]
    write_worker(tmp_path, worker_doc(role="r", pid=1, thread_names=True, threads=[main, *pool]))
    tree = merge_run(tmp_path).tree
    work = tree[("driver", "step", MARK, "work")]
    assert work.calls == 6 and work.threads == 2
    assert sorted(p for p in tree if len(p) == 1) == [("driver",)]


def test_thread_names_ambiguous_handing_thread_keeps_the_running_threads_name(tmp_path):
    """Two threads each hold a ``step``: which one handed the work out is not in the file, so it
    stays under the pool thread's own name (as before), never summed under a guessed one."""
    a = ("a", [Ph(("step",), [10 * MS])])
    b = ("b", [Ph(("step",), [10 * MS])])
    pool = ("pool-0", [Ph(("step", MARK, "work"), [2 * MS])])
    write_worker(tmp_path, worker_doc(role="r", pid=1, thread_names=True, threads=[a, b, pool]))
    tree = merge_run(tmp_path).tree
    assert tree[("pool-0", "step", MARK, "work")].calls == 1
    assert ("a", "step", MARK, "work") not in tree and ("b", "step", MARK, "work") not in tree


def _reference(rows, n_gpu, origin_ns, tags):
    """Each track's events, read one row at a time (the format's rules, written plainly)."""
    tracks: dict[str, list] = {}
    open_tag, end_us = 0, 0
    last: dict[str, object] = {}
    for end_ns, dt, tag, flags, rb, wb, rss, gpu in rows:
        start_us = max((end_ns - dt - origin_ns) // 1000, end_us)
        end_us = max((end_ns - origin_ns) // 1000, start_us)
        if tag != open_tag:
            if open_tag:
                tracks.setdefault("slices", []).append(("E", start_us))
            if tag:
                tracks.setdefault("slices", []).append(("B", start_us, "/".join(tags[tag])))
            open_tag = tag
        v = (rss + 50_000) // 100_000 / 10  # MB to 0.1, half up
        if flags & F_RSS and rss >= 0 and v != last.get("rss"):
            last["rss"] = v
            tracks.setdefault("RSS (MB)", []).append((start_us, {"rss": v}))
        if flags & F_IO and dt > 0:
            # MB/s to 0.001, half up
            io_ = (
                (2 * rb * 10**6 + dt) // (2 * dt) / 1000,
                (2 * wb * 10**6 + dt) // (2 * dt) / 1000,
            )
            if io_ != last.get("io"):
                last["io"] = io_
                tracks.setdefault("I/O (MB/s)", []).append(
                    (start_us, {"read": io_[0], "write": io_[1]})
                )
        for k in range(n_gpu):
            busy, mine = gpu[2 * k], max(0, gpu[2 * k + 1])
            if flags & F_GPU and busy >= 0 and (busy, mine) != last.get(k):
                last[k] = (busy, mine)
                tracks.setdefault(f"GPU {k} (%)", []).append(
                    (start_us, {"busy": busy, "this run": mine})
                )
    if open_tag:
        tracks["slices"].append(("E", end_us))
    return tracks


def test_perfetto_tracks_hold_exactly_the_row_by_row_events(tmp_path):
    """Rows with a clock that steps back, dt <= 0, flags off, RSS unread (-1), GPU not sampled
    (-1), repeated values, integral and fractional MB: every track's events, in order, are those
    of the reference reading."""
    n, n_gpu = 400, 2
    t0 = int(T0 * 1e9)
    ends, dts = [], []
    for i in range(n):
        ends.append(t0 + (i + 1) * S - (3 * S if i % 97 == 50 else 0))  # a step back now and then
        dts.append(0 if i % 41 == 7 else (-S if i % 53 == 9 else S * (1 + i % 3)))
    tag = [0 if i % 60 < 5 else 1 + (i // 20) % 3 for i in range(n)]
    flags = [(F_RSS if i % 7 else 0) | (F_IO if i % 5 else 0) | (F_GPU if i % 3 else 0) for i in range(n)]  # fmt: skip
    rb = [(i // 4) * 1_000_000 + (i % 3) * 1234 for i in range(n)]
    wb = [(i // 9) * 2_000_000 for i in range(n)]
    rss = [-1 if i % 31 == 0 else 10**9 + (i // 6) * 50_000 for i in range(n)]
    gpu = [[(i // 5) % 101 if i % 11 else -1 for i in range(n)], [(i * 7) % 101 - 3 for i in range(n)]]  # fmt: skip
    gpu += [[(i // 8) % 101 for i in range(n)], [-1] * n]
    cols = {W_T: ends, W_DT: dts, W_TAG: tag, W_FLAGS: flags, W_RB: rb, W_WB: wb, W_RSS: rss}
    for j, col in enumerate(gpu):
        cols[BASE_WORDS + j] = col
    tags = {1: ["load"], 2: ["train", "step"], 3: ["step", MARK, "work"]}
    doc = worker_doc(role="w", pid=9, threads=[Ph(("step",), [S])], start_time=T0)
    path = write_worker(tmp_path, doc)
    attach_samples(doc, path, cols, n, n_gpu=n_gpu, tags=tags)
    write_worker(tmp_path, doc)
    out = io.StringIO()
    info = export_perfetto(tmp_path, out)
    trace = json.loads(out.getvalue())
    origin = trace["otherData"]["origin_unix_ns"]
    rows = list(zip(ends, dts, tag, flags, rb, wb, rss, zip(*gpu, strict=True), strict=True))
    want = _reference(rows, n_gpu, origin, {k: tuple(v) for k, v in tags.items()})
    got: dict[str, list] = {}
    events = [e for e in trace["traceEvents"] if e["ph"] != "M"]
    for e in events:
        if e["ph"] == "B":
            got.setdefault("slices", []).append(("B", e["ts"], e["name"]))
        elif e["ph"] == "E":
            got.setdefault("slices", []).append(("E", e["ts"]))
        else:
            got.setdefault(e["name"], []).append((e["ts"], e["args"]))
    assert got == want
    assert info["events"] == len(trace["traceEvents"]) == len(events) + 3
    assert all(len(v) > 10 for v in want.values()) and len(want) == 5  # every track exercised
