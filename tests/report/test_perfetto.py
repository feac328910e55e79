"""``export --perfetto``: a real multi-process run's trace, every track's events against a
row-by-row reading of the same rows (the test's own reference), and the size of a 12-hour worker."""

from __future__ import annotations

import io
import json
from array import array

from lineprofiler.report.perfetto import MAX_POINTS, _points, export_perfetto, worker_bound_bytes
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
    SampleTable,
)
from tests.helpers import run_python
from tests.report.synth import T0, Ph, worker_doc, write_worker
from tests.resources.synth_samples import S, attach_samples

CLI = "from lineprofiler.cli import main; raise SystemExit(main())"

# A parent ("learner") and two spawned "actor" workers, sampled every 50 ms. Actor 1 holds an
# extra 150 MB while in "alloc"; each process records its own pid and the RSS it measured.
WORKLOAD = """
    import json, multiprocessing as mp, os, time
    from lineprofiler.accounting import Profiler

    def rss():
        for line in open("/proc/self/status"):
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024

    def actor(k):
        p = Profiler(role="actor", sample_interval_s=0.05, snapshot_interval_s=None)
        peak = 0
        for _ in range(3):
            with p.phase("act"):
                time.sleep(0.1)
            if k == 1:
                with p.phase("alloc"):
                    block = bytearray(150_000_000)
                    block[::4096] = b"x" * len(block[::4096])
                    peak = max(peak, rss())
                    time.sleep(0.15)
                    del block
        p.close()
        json.dump({"pid": os.getpid(), "peak": peak}, open(f"actor{k}.json", "w"))

    if __name__ == "__main__":
        p = Profiler(run_dir="run", role="learner", enabled=True, sample_interval_s=0.05,
                     snapshot_interval_s=None)
        ctx = mp.get_context("spawn")
        procs = [ctx.Process(target=actor, args=(k,)) for k in range(2)]
        with p.phase("wait_actors"):
            for q in procs:
                q.start()
            for q in procs:
                q.join()
        p.close()
"""


def test_export_of_a_real_multiprocess_run(tmp_path):
    run_python(WORKLOAD, cwd=tmp_path, timeout=90)
    truth = {k: json.loads((tmp_path / f"actor{k}.json").read_text()) for k in (0, 1)}
    proc = run_python(CLI, cwd=tmp_path, args=["export", "run", "--perfetto", "t.json"])
    assert "3 worker track(s)" in proc.stderr, proc.stderr
    trace = json.loads((tmp_path / "t.json").read_text())
    events = trace["traceEvents"]
    names = {
        e["pid"]: e["args"]["name"]
        for e in events
        if e["ph"] == "M" and e["name"] == "process_name"
    }
    assert len(names) == 3
    by_real = {int(n.split()[1]): (tid, n) for tid, n in names.items()}
    for k in (0, 1):
        tid, name = by_real[truth[k]["pid"]]
        role, pid, host, rank = name.split()
        assert role == "actor" and int(pid) == truth[k]["pid"] and host and rank == "-"
    assert sum(n.startswith("learner ") for n in names.values()) == 1

    # per track (a worker's slices, each of its counters): timestamps never go back; every B
    # has its E; slices name the phases
    slices: dict[int, list[str]] = {}
    for tid in names:
        mine = [e for e in events if e["pid"] == tid and e["ph"] != "M"]
        assert mine, tid
        for track in {"slices" if e["ph"] in "BE" else e["name"] for e in mine}:
            ts = [e["ts"] for e in mine if ("slices" if e["ph"] in "BE" else e["name"]) == track]
            assert ts == sorted(ts) and ts, (tid, track)
        mine = [e for e in mine if e["ph"] in "BE"]
        depth = 0
        for e in mine:
            if e["ph"] == "B":
                assert depth == 0
                depth = 1
                slices.setdefault(tid, []).append(e["name"])
            elif e["ph"] == "E":
                assert depth == 1
                depth = 0
        assert depth == 0
    tid1 = by_real[truth[1]["pid"]][0]
    assert "alloc" in slices[tid1] and "act" in slices[tid1]
    assert set(slices[by_real[truth[0]["pid"]][0]]) == {"act"}

    # counters: RSS on every track; actor 1's RSS peak sees the 150 MB it measured itself
    rss = {
        tid: [e["args"]["rss"] for e in events if e["pid"] == tid and e.get("name") == "RSS (MB)"]
        for tid in names
    }
    assert all(rss.values())
    assert max(rss[tid1]) * 1e6 >= 0.8 * truth[1]["peak"]
    assert max(rss[tid1]) - min(rss[tid1]) > 100  # the block came and went
    assert any(e.get("name") == "I/O (MB/s)" for e in events if e["ph"] == "C")


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


def test_perfetto_tracks_hold_exactly_the_row_by_row_events(tmp_path, perfetto_path):
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
    tags = {1: ["load"], 2: ["train", "step"], 3: ["step", "[threads]", "work"]}
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


def _twelve_hours(tmp_path, rows, n_gpu):
    """A worker whose every row changes everything: a new phase, RSS, I/O and GPU reading."""
    run = tmp_path / "run"
    doc = worker_doc(role="actor", pid=4242, threads=[Ph(("step",), [S])])
    path = write_worker(run, doc)
    cols = {
        W_T: [int(T0 * 1e9) + (i + 1) * S for i in range(rows)],
        W_DT: [S] * rows,
        W_TAG: [1 + i % 2 for i in range(rows)],
        W_FLAGS: [F_IO | F_RSS | (F_GPU if n_gpu else 0)] * rows,
        W_RB: [123_456_789 + i for i in range(rows)],
        W_WB: [987_654_321 + i for i in range(rows)],
        W_RSS: [10_000_000_000 + 177_777 * i for i in range(rows)],  # >0.1 MB a row
    }
    for k in range(n_gpu):  # GPU k: busy %, this pid's SM %
        cols[BASE_WORDS + 2 * k] = [i % 101 for i in range(rows)]
        cols[BASE_WORDS + 2 * k + 1] = [(i * 7) % 101 for i in range(rows)]
    long_name = ['"\\é' * 40, "y" * 100]  # cut to 120 bytes, quotes and backslashes escaped
    attach_samples(doc, path, cols, rows, n_gpu=n_gpu, tags={1: long_name, 2: ["train", "step"]})
    return run


def test_twelve_hour_worker_is_within_the_documented_bound(tmp_path):
    rows = 12 * 3600  # the default 1 s interval
    run = _twelve_hours(tmp_path, rows, n_gpu=1)
    (run / "backend").mkdir()
    (run / "backend" / "torch_trace.json").write_text("{}")  # a backend="torch" window's trace
    proc = run_python(
        CLI, cwd=tmp_path, args=["export", str(run), "--perfetto", "t.json"], timeout=120
    )
    assert "kernel-level view:" in proc.stderr and "torch_trace.json" in proc.stderr
    size = (tmp_path / "t.json").stat().st_size
    header = 300  # the trace's opening and otherData
    assert size <= worker_bound_bytes(rows, n_gpu=1) + header, size
    assert size / 12 <= 1.5e6  # the README's per-worker-hour figure (worst case, 1 GPU)
    trace = json.loads((tmp_path / "t.json").read_text())
    assert trace["otherData"]["torch_trace"] == str(run / "backend" / "torch_trace.json")
    events = trace["traceEvents"]
    assert sum(e["ph"] == "B" for e in events) == rows  # nothing merged at 12 h
    assert rows == MAX_POINTS


def test_a_longer_worker_is_merged_down_to_max_points():
    """36 h at 1 s: rows merged 3 at a time; bytes are conserved, nothing is lost at the end."""
    rows = 3 * MAX_POINTS
    words = BASE_WORDS
    cols = [array("q", bytes(8 * rows)) for _ in range(words)]
    cols[W_T] = array("q", ((i + 1) * S for i in range(rows)))
    cols[W_DT] = array("q", [S] * rows)
    cols[W_RB] = array("q", (i % 7 for i in range(rows)))
    cols[W_RSS] = array("q", (i for i in range(rows)))
    t = SampleTable(pid=1, interval_ns=S, n_gpu=0, start_unix_ns=0, rows=rows, cols=cols)
    points = list(_points(t))
    assert len(points) == MAX_POINTS
    assert sum(p[4] for p in points) == sum(cols[W_RB])
    assert sum(p[1] for p in points) == rows * S and points[-1][0] == rows * S
    assert points[-1][6] == rows - 1  # the max RSS of the last three rows
