"""The resource merge and blocks: synthetic sidecars whose every reduced number is arithmetic on
columns the test chose, plus one end-to-end run through a real sampler and a fake NVML."""

from __future__ import annotations

import json
import os
import time

import pytest

from lineprofiler.accounting import Profiler, merge_run
from lineprofiler.report.json import to_document
from lineprofiler.report.text import render_text
from lineprofiler.runfile.samples import (
    BASE_WORDS,
    F_CUDA,
    F_GPU,
    F_IO,
    F_RSS,
    GPU_PID_ABSENT,
    W_CUDA_ALLOC,
    W_CUDA_RES,
    W_DT,
    W_FLAGS,
    W_RB,
    W_RC,
    W_RSS,
    W_T,
    W_TAG,
    W_WB,
    W_WC,
)
from tests.report.synth import T0, Ph, worker_doc, write_worker
from tests.resources.synth_samples import S, attach_samples
from tests.resources.test_sampler import fake_nvml  # noqa: F401  (fixture)

T0_NS = int(T0 * 1e9)
MB = 1_000_000


def _worker(run_dir, role, pid, host="node01", phases=()):
    doc = worker_doc(
        role=role, pid=pid, host=host, threads=list(phases) or [Ph(("iteration",), [S])]
    )
    return doc, write_worker(run_dir, doc)


def _times(n):
    return [T0_NS + (i + 1) * S for i in range(n)], [S] * n


def test_rate_and_peak_are_the_runs_throughput_in_one_second_bins(tmp_path):
    # Two processes write 10 MB in each of the same 3 seconds; a third writes 30 MB in one other
    # second. The run moved bytes in 4 seconds: 90 MB / 4 s, and its busiest second is 30 MB.
    run = tmp_path / "run"
    for pid in (21, 22):
        doc, path = _worker(run, "actor", pid)
        t, dt = _times(3)
        attach_samples(doc, path, {W_T: t, W_DT: dt, W_FLAGS: [F_IO] * 3, W_WB: [10 * MB] * 3}, 3)
    doc, path = _worker(run, "learner", 23)
    t, dt = _times(5)
    attach_samples(doc, path, {W_T: t, W_DT: dt, W_FLAGS: [F_IO] * 5, W_WB: [0] * 4 + [30 * MB]}, 5)
    io = to_document(merge_run(run))["resources"]["io"]
    assert io["write_bytes_per_s"] == pytest.approx(90 * MB / 4)
    assert io["write_peak_bytes_per_s"] == 30 * MB
    assert io["write_peak_bytes_per_s"] >= io["write_bytes_per_s"]
    assert io["read_bytes_per_s"] is None and io["read_peak_bytes_per_s"] is None


def test_io_memory_blocks_from_known_columns(tmp_path):
    run = tmp_path / "run"
    # actor: 10 one-second intervals
    doc, path = _worker(run, "actor", 11)
    t, dt = _times(10)
    tag = [1] * 5 + [0] * 3 + [2] * 2
    flags = [F_IO | F_RSS] * 10
    flags[6] = F_RSS  # dropped: counters unreadable
    rb = [100 * MB] * 5 + [0] * 5
    rc = [150 * MB] * 5 + [0, 0, 3 * MB, 0, 0]  # 50 MB/interval from page cache; 3 MB unphased
    wb = [0] * 8 + [40 * MB, 10]
    wc = [0] * 5 + [2 * MB, 0, 0, 40 * MB, 10]
    rss = [100 * MB + i * MB for i in range(10)]
    attach_samples(
        doc,
        path,
        {
            W_T: t,
            W_DT: dt,
            W_TAG: tag,
            W_FLAGS: flags,
            W_RB: rb,
            W_RC: rc,
            W_WB: wb,
            W_WC: wc,
            W_RSS: rss,
        },
        10,
        tags={1: ("iteration", "load"), 2: ("iteration", "save")},
        dropped=1,
    )
    # learner: 4 intervals, only RSS
    doc2, path2 = _worker(run, "learner", 12)
    t2, dt2 = _times(4)
    attach_samples(
        doc2,
        path2,
        {W_T: t2, W_DT: dt2, W_FLAGS: [F_IO | F_RSS] * 4, W_RSS: [2000 * MB] * 4},
        4,
    )
    merged = merge_run(run)
    res = merged.samples
    assert (res.io.read_bytes, res.io.read_chars) == (500 * MB, 753 * MB)
    assert (res.io.write_bytes, res.io.write_chars) == (40 * MB + 10, 42 * MB + 10)
    assert res.io.page_cache_bytes == 253 * MB
    assert res.dropped == 1 and res.rows == 14
    load = res.by_tag[("iteration", "load")]
    assert (load.read_bytes, load.read_chars) == (500 * MB, 750 * MB)
    assert res.by_tag[("iteration", "save")].write_bytes == 40 * MB + 10
    # (no phase open): 3 MB read (page cache) + 2 MB written (syscall layer), no disk byte of the
    # 540 MB + 10 B read from or written to disk: the share is of the disk columns the table shows
    assert res.no_phase_share == 0.0
    assert res.write_peak_per_s == 40 * MB
    # rates "while moving": 500 MB over the 5 s in which read_bytes moved
    doc_json = to_document(merged)["resources"]
    assert doc_json["io"]["read_bytes_per_s"] == pytest.approx(100 * MB)
    assert doc_json["io"]["write_bytes_per_s"] == pytest.approx((40 * MB + 10) / 2)
    assert doc_json["io"]["dropped_intervals"] == 1
    assert doc_json["memory"]["roles"] == {"actor": 109 * MB, "learner": 2000 * MB}
    assert doc_json["gpu"] is None
    text = render_text(merged)
    assert "Read (from disk)                  500.0 MB      100.0 MB/s" in text
    assert "Read (from page cache)            253.0 MB" in text
    assert "0.0% of disk bytes (read + written) landed with (no phase open)" in text
    assert "1 of 14 intervals dropped" in text
    assert "peak 40.0 MB/s" in text
    # the sparkline spans the run (10 minutes), the writes sit in its first column
    spark = next(line for line in text.splitlines() if line.startswith("  write "))
    assert spark.startswith("  write █") and len(doc_json["io"]["write_sparkline_bytes"]) == 40
    assert "LEARNER                 x1  max     2.0 GB" in text
    assert any(c.kind == "io_dropped" for c in merged.caveats)
    assert "GPU" not in text.split("MEMORY")[1].split("\n\n")[0]


def test_gpu_block_busy_this_run_and_na(tmp_path):
    run = tmp_path / "run"
    n = 10
    t, dt = _times(n)
    absent = [GPU_PID_ABSENT] * n

    def gpu_cols(pairs):
        cols = {}
        for k, (busy, mine) in enumerate(pairs):
            cols[BASE_WORDS + 2 * k] = busy
            cols[BASE_WORDS + 2 * k + 1] = mine
        return cols

    base = {W_T: t, W_DT: dt, W_FLAGS: [F_IO | F_RSS | F_GPU] * n, W_RSS: [MB] * n}
    # node-a: three processes share GPU 0 (busy 80%); GPU 1 is 10% busy with none of ours
    cols1 = {**base, **gpu_cols([([80] * n, [30] * n), ([10] * n, absent)])}
    cols1[W_FLAGS] = [F_IO | F_RSS | F_GPU | F_CUDA] * n
    cols1[W_CUDA_ALLOC] = [int(6.1e9)] + [MB] * (n - 1)
    cols1[W_CUDA_RES] = [int(8.4e9)] * n
    # its utilisation read failed in 2 windows: those carry no busy, and a caveat says so
    cols2 = {
        **base,
        **gpu_cols([([-1, -1] + [80] * (n - 2), [100] + absent[1:]), ([10] * n, absent)]),
    }
    cols3 = {**base, **gpu_cols([([80] * n, [-1] * n), ([10] * n, absent)])}
    # node-b: GPU 0 measured idle, our pid attributed at 0%
    cols4 = {**base, **gpu_cols([([0] * n, [0] * n)])}
    for pid, cols, host, ngpu in (
        (21, cols1, "node-a", 2),
        (22, cols2, "node-a", 2),
        (23, cols3, "node-a", 2),
        (31, cols4, "node-b", 1),
    ):
        doc, path = _worker(run, "actor", pid, host=host)
        attach_samples(doc, path, cols, n, n_gpu=ngpu)
    merged = merge_run(run)
    gpu = to_document(merged)["resources"]["gpu"]
    devs = {(d["host"], d["index"]): d for d in gpu["devices"]}
    a0, a1, b0 = devs[("node-a", 0)], devs[("node-a", 1)], devs[("node-b", 0)]
    assert a0["busy"] == pytest.approx(0.80) and a0["idle"] == pytest.approx(0.20)
    # 30% for 10 s by one process + 100% for 1 s of 10 by another (absent = 0 elsewhere)
    assert a0["this_run"] == pytest.approx(0.40)
    assert a1["busy"] == pytest.approx(0.10) and a1["this_run"] is None  # n/a
    assert b0["busy"] == 0.0 and b0["this_run"] == 0.0  # measured idle, not n/a
    assert gpu["vram_allocated_peak_bytes"] == int(6.1e9)
    assert gpu["vram_reserved_peak_bytes"] == int(8.4e9)
    text = render_text(merged)
    assert "node-a GPU 0                   80.0%      40.0%    20.0%" in text
    assert "node-a GPU 1                   10.0%        n/a    90.0%" in text
    assert "node-b GPU 0                    0.0%       0.0%   100.0%" in text
    assert "VRAM allocated (peak)               6.1 GB" in text
    assert "VRAM reserved (peak)                8.4 GB" in text
    assert a0["failed_windows"] == 2
    assert [c.kind for c in merged.caveats] == ["gpu_read_failed"]


def test_partial_last_row_and_unreadable_sidecar(tmp_path):
    run = tmp_path / "run"
    doc, path = _worker(run, "actor", 41)
    t, dt = _times(3)
    attach_samples(doc, path, {W_T: t, W_DT: dt, W_FLAGS: [F_IO] * 3, W_WC: [5, 6, 7]}, 3)
    side = path.with_suffix(".samples")
    side.write_bytes(side.read_bytes() + b"\x01" * 20)  # a row cut by SIGKILL
    doc2, path2 = _worker(run, "actor", 42)
    attach_samples(doc2, path2, {W_T: t, W_DT: dt, W_FLAGS: [F_IO] * 3, W_WC: [1, 1, 1]}, 3)
    path2.with_suffix(".samples").write_bytes(b"not a samples file at all, definitely not")
    merged = merge_run(run)
    assert merged.samples.io.write_chars == 18
    assert [c.kind for c in merged.caveats if c.kind == "samples_unreadable"] == [
        "samples_unreadable"
    ]


def test_no_samples_no_blocks_but_io_by_phase_stays(tmp_path):
    p = Profiler(
        run_dir=tmp_path / "run", enabled=True, snapshot_interval_s=None, sample_interval_s=None
    )
    try:
        with p.phase("checkpoint", io=True):
            with open(tmp_path / "c.bin", "wb", buffering=0) as f:
                f.write(b"c" * 12_345)
    finally:
        p.close()
    assert not p.worker_path.with_suffix(".samples").exists()
    for with_samples in (True, False):
        merged = merge_run(tmp_path / "run", with_samples=with_samples)
        text = render_text(merged)
        assert "I/O BY PHASE (measured exactly)" in text
        assert "\nI/O\n" not in text and "MEMORY" not in text and "\nGPU\n" not in text
        res = to_document(merged)["resources"]
        assert res["io_by_phase"][0]["write_chars"] == 12_345
        assert res["io"] is None and res["memory"] is None and res["gpu"] is None


def test_end_to_end_sampler_with_fake_nvml(tmp_path, fake_nvml, monkeypatch):  # noqa: F811
    state = tmp_path / "nvml_state"
    state.write_text(f"device 70 {os.getpid()}:50 77777:20\ndevice 5\n")
    monkeypatch.setenv("LINEPROFILER_NVML_LIBRARY", str(fake_nvml))
    monkeypatch.setenv("FAKE_NVML_STATE", str(state))
    p = Profiler(
        run_dir=tmp_path / "run",
        role="learner",
        enabled=True,
        snapshot_interval_s=None,
        sample_interval_s=0.02,
    )
    try:
        with p.phase("train"):
            time.sleep(0.4)
    finally:
        p.close()
    merged = merge_run(tmp_path / "run")
    gpu = to_document(merged)["resources"]["gpu"]
    d0, d1 = gpu["devices"]
    assert d0["busy"] == pytest.approx(0.70)
    assert d0["this_run"] == pytest.approx(0.50, rel=0.05)
    assert d1["busy"] == pytest.approx(0.05) and d1["this_run"] is None
    text = render_text(merged)
    assert "GPU 0" in text and "MEMORY (RSS peak)" in text
    json.dumps(to_document(merged), allow_nan=False)  # JSON-clean: raises on NaN or infinity
