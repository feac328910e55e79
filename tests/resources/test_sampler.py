"""The resource sampler, driven step by step (sample_now) against scripted counters and a fake
NVML library, and once against the real /proc to prove its own writes are excluded.

Scripted sources are ground truth the test chose: the counters a fake /proc io file holds, the
utilisation a fake libnvidia-ml reports. Rows are read back with the merge's own reader.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lineprofiler import _core
from lineprofiler.accounting import Profiler
from lineprofiler.runfile.samples import (
    BASE_WORDS,
    F_GPU,
    F_IO,
    F_RSS,
    GPU_PID_ABSENT,
    W_DT,
    W_FLAGS,
    W_RB,
    W_RC,
    W_RSS,
    W_TAG,
    W_WB,
    W_WC,
    read_samples,
    read_tags,
)
from tests.helpers import read_worker

HERE = Path(__file__).parent


class ScriptedIo:
    """A fake /proc/self/io; the sampler keeps its fd open, so it is rewritten in place."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.c = {"rchar": 0, "wchar": 0, "read_bytes": 0, "write_bytes": 0}
        self.write()

    def write(self, valid: bool = True) -> None:
        c = self.c
        text = (
            f"rchar: {c['rchar']}\nwchar: {c['wchar']}\nsyscr: 0\nsyscw: 0\n"
            f"read_bytes: {c['read_bytes']}\nwrite_bytes: {c['write_bytes']}\n"
            "cancelled_write_bytes: 0\n"
            if valid
            else "rchar: oops\n"
        )
        with open(self.path, "r+b" if self.path.exists() else "wb") as f:
            f.write(text.encode())
            f.truncate()

    def add(self, **deltas: int) -> None:
        for k, v in deltas.items():
            self.c[k] += v
        self.write()


@pytest.fixture
def scripted(tmp_path):
    io = ScriptedIo(tmp_path / "proc_io")
    _core._set_io_counter_paths("", str(io.path))
    try:
        yield io
    finally:
        _core._set_io_counter_paths("", "")


def recorder(tmp_path, gpu: bool = False):
    return _core.Recorder(
        str(tmp_path / "w.json"),
        "{}",
        True,
        0,
        samples_path=str(tmp_path / "w.samples"),
        sample_interval_ns=0,
        sample_gpu=gpu,
    )


def gpu_status(tmp_path) -> dict:
    """The sampler's status after two samples of a recorder that samples the GPU."""
    rec = recorder(tmp_path, gpu=True)
    rec.sample_now()
    rec.sample_now()
    return json.loads(rec.sampler_status())


def rows(tmp_path):
    t = read_samples(tmp_path / "w.samples")
    tags = read_tags(tmp_path / "w.tags")
    return t, tags


def test_interval_is_billed_to_the_phase_open_at_its_start(tmp_path, scripted):
    rec = recorder(tmp_path)
    load = rec.phase("load")
    load.__enter__()
    rec.sample_now()  # baseline: "load" is open
    # A slow interval: the phase closes early, the bytes move, the next phase opens; all of it
    # lands on "load", the phase open when the interval began.
    scripted.add(read_bytes=4096, rchar=10_000)
    load.__exit__(None, None, None)
    time.sleep(0.2)
    save = rec.phase("save")
    save.__enter__()
    scripted.add(write_bytes=8192, wchar=5000)
    rec.sample_now()
    scripted.add(wchar=300, write_bytes=4096)
    save.__exit__(None, None, None)
    rec.sample_now()  # billed to "save"
    scripted.add(rchar=77)
    rec.sample_now()  # nothing open at its start
    t, tags = rows(tmp_path)
    assert t.rows == 3
    c = t.cols
    assert [tags[g] for g in c[W_TAG]] == [("load",), ("save",), ()]
    assert list(c[W_RB]) == [4096, 0, 0]
    assert list(c[W_RC]) == [10_000, 0, 77]
    assert list(c[W_WB]) == [8192, 4096, 0]
    assert list(c[W_WC]) == [5000, 300, 0]
    assert c[W_DT][0] >= 200_000_000  # the slow interval's length is its real length
    assert all(f & F_IO and f & F_RSS for f in c[W_FLAGS])
    assert all(r > 0 for r in c[W_RSS])
    status = json.loads(rec.sampler_status())
    assert status["rows"] == 3 and status["dropped"] == 0


def test_a_failed_read_drops_intervals_and_never_differences_across_the_gap(tmp_path, scripted):
    rec = recorder(tmp_path)
    rec.sample_now()
    scripted.add(read_bytes=100)
    rec.sample_now()  # row 0: 100
    scripted.add(read_bytes=5_000_000)
    scripted.write(valid=False)
    rec.sample_now()  # row 1: unreadable -> dropped
    scripted.add(read_bytes=1)  # valid again (cumulative 5_000_101)
    rec.sample_now()  # row 2: no baseline across the gap -> dropped, not 5_000_001
    scripted.add(read_bytes=7)
    rec.sample_now()  # row 3: 7
    t, _ = rows(tmp_path)
    c = t.cols
    assert [bool(f & F_IO) for f in c[W_FLAGS]] == [True, False, False, True]
    assert list(c[W_RB]) == [100, 0, 0, 7]
    assert json.loads(rec.sampler_status())["dropped"] == 2


def test_counters_going_backwards_are_dropped_not_wrapped(tmp_path, scripted):
    rec = recorder(tmp_path)
    scripted.add(wchar=1000)
    rec.sample_now()
    scripted.add(wchar=-10)
    rec.sample_now()
    scripted.add(wchar=20)
    rec.sample_now()
    t, _ = rows(tmp_path)
    assert list(t.cols[W_WC]) == [0, 0]
    assert [bool(f & F_IO) for f in t.cols[W_FLAGS]] == [False, False]


def test_unreadable_process_counters_from_the_start(tmp_path):
    _core._set_io_counter_paths("", str(tmp_path / "missing"))
    try:
        rec = recorder(tmp_path)
        rec.sample_now()
        rec.sample_now()
        rec.sample_now()
    finally:
        _core._set_io_counter_paths("", "")
    status = json.loads(rec.sampler_status())
    assert status["io_source"] is None and status["dropped"] == 2
    t, _ = rows(tmp_path)
    assert t.rows == 2 and not any(f & F_IO for f in t.cols[W_FLAGS])
    assert all(f & F_RSS for f in t.cols[W_FLAGS])  # RSS is still sampled


def test_no_nvml_means_no_gpu_columns_and_no_error_raised(tmp_path, scripted, monkeypatch):
    monkeypatch.setenv("LINEPROFILER_NVML_LIBRARY", str(tmp_path / "no-such-libnvidia-ml.so"))
    status = gpu_status(tmp_path)
    assert status["gpu_devices"] == 0 and "cannot load NVML" in status["gpu_error"]
    t, _ = rows(tmp_path)
    assert t.n_gpu == 0 and len(t.cols) == BASE_WORDS


@pytest.fixture(scope="module")
def fake_nvml(tmp_path_factory) -> Path:
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        pytest.skip("no C compiler to build the fake NVML library")
    out = tmp_path_factory.mktemp("nvml") / "libfake_nvml.so"
    subprocess.run(
        [cc, "-shared", "-fPIC", "-O1", "-o", str(out), str(HERE / "fake_nvml.c")], check=True
    )
    return out


def test_gpu_rows_from_a_fake_nvml(tmp_path, scripted, fake_nvml, monkeypatch):
    state = tmp_path / "nvml_state"
    log = tmp_path / "nvml_log"
    me = os.getpid()
    monkeypatch.setenv("LINEPROFILER_NVML_LIBRARY", str(fake_nvml))
    monkeypatch.setenv("FAKE_NVML_STATE", str(state))
    monkeypatch.setenv("FAKE_NVML_LOG", str(log))
    state.write_text("device 10\ndevice 0\ndevice 50\n")
    rec = recorder(tmp_path, gpu=True)
    rec.sample_now()  # loads NVML: 3 devices
    # window 1: device 0 runs us (40%) and a foreign pid; device 1 idle; device 2 only foreign
    state.write_text(f"device 90 {me}:40 999999:50\ndevice 0\ndevice 50 424242:50\n")
    rec.sample_now()
    # window 2: device 0's utilisation read fails; our pid is absent there (counts as 0)
    state.write_text("device -1 999999:70\ndevice 5\ndevice 60 424242:60\n")
    rec.sample_now()
    # window 3: the per-process read fails on device 2
    state.write_text(f"device 30 {me}:20\ndevice 5\ndevice 60\nprocfail 2\n")
    rec.sample_now()
    t, _ = rows(tmp_path)
    assert t.n_gpu == 3 and t.rows == 3
    busy = [list(t.cols[BASE_WORDS + 2 * k]) for k in range(3)]
    mine = [list(t.cols[BASE_WORDS + 2 * k + 1]) for k in range(3)]
    assert busy == [[90, -1, 30], [0, 5, 5], [50, 60, 60]]
    assert mine == [
        [40, GPU_PID_ABSENT, 20],
        [GPU_PID_ABSENT, GPU_PID_ABSENT, GPU_PID_ABSENT],
        [GPU_PID_ABSENT, GPU_PID_ABSENT, -1],
    ]
    assert all(f & F_GPU for f in t.cols[W_FLAGS])
    # each device's window starts where its previous samples ended (no sample read twice)
    seen: dict[int, list[int]] = {}
    for line in log.read_text().split("\n"):
        if line:
            dev, last = map(int, line.split())
            seen.setdefault(dev, []).append(last)
    assert seen[0][1] == seen[0][0] + 1_000_000  # advanced past window 1's sample
    assert all(b >= a for v in seen.values() for a, b in zip(v, v[1:], strict=False))


def test_nvml_init_failure_is_no_gpu(tmp_path, scripted, fake_nvml, monkeypatch):
    state = tmp_path / "nvml_state"
    state.write_text("init fail\ndevice 50\n")
    monkeypatch.setenv("LINEPROFILER_NVML_LIBRARY", str(fake_nvml))
    monkeypatch.setenv("FAKE_NVML_STATE", str(state))
    status = gpu_status(tmp_path)
    assert status["gpu_devices"] == 0 and "nvmlInit failed" in status["gpu_error"]


def test_own_snapshot_and_sample_writes_are_excluded(tmp_path):
    """Against the real /proc/self/io: the profiler writes its files many times while the program
    writes exactly N bytes; the sampled total is N (and 0 while the program is idle)."""
    n = 123_457
    p = Profiler(
        run_dir=tmp_path / "run", enabled=True, snapshot_interval_s=0.02, sample_interval_s=0.01
    )
    try:
        time.sleep(0.3)
        with open(tmp_path / "mine.bin", "wb", buffering=0) as f:
            f.write(b"m" * n)
        time.sleep(0.3)
    finally:
        p.close()
    doc = read_worker(p.worker_path)
    status = doc["samples"]
    t = read_samples(p.worker_path.with_suffix(".samples"))
    assert status["dropped"] == 0 and t.rows >= 10
    assert sum(t.cols[W_WC]) == n
    assert sum(t.cols[W_RC]) == 0
    assert doc["snapshot_seq"] >= 5  # it did write, many times
    own = status["own_io"]
    assert own["write_chars"] > 5 * 500 and own["read_chars"] > 0


def test_forked_child_samples_into_its_own_sidecar(tmp_path):
    """The lifecycle stops both threads around fork through stop_thread()/start_thread(); the
    child's reset_after_fork() gives the sampler a new sidecar, its own pid and fresh baselines."""
    p = Profiler(
        run_dir=tmp_path / "run", enabled=True, snapshot_interval_s=None, sample_interval_s=0.01
    )
    try:
        rec = p._rec
        rec.stop_thread()
        assert not rec.thread_running()
        child_json = tmp_path / "run" / "child.json"
        pid = os.fork()
        if pid == 0:  # child: no pytest machinery, exit hard
            code = 1
            try:
                rec.reset_after_fork(str(child_json), "{}")
                rec.start_thread()
                with open(tmp_path / "child.bin", "wb", buffering=0) as f:
                    f.write(b"c" * 4321)
                time.sleep(0.1)
                rec.stop_thread()
                rec.flush(True)
                code = 0
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        rec.start_thread()
        time.sleep(0.05)
    finally:
        p.close()
    child = read_worker(child_json)
    assert child["samples"]["file"] == "child.samples"
    t = read_samples(child_json.with_suffix(".samples"))
    assert t.pid == pid and t.rows >= 2
    assert sum(t.cols[W_WC]) == 4321  # the child's own bytes, none of the parent's
    parent = read_samples(p.worker_path.with_suffix(".samples"))
    assert parent.pid == os.getpid() and sum(parent.cols[W_WC]) == 0


def test_reaped_children_io_is_not_billed_to_the_parent(tmp_path):
    """The kernel folds a reaped child's I/O into the parent's /proc/self/io at wait(); the
    sampler keeps it out (the child reports its own if it profiles) and says how much."""
    n = 1_000_000
    p = Profiler(
        run_dir=tmp_path / "run", enabled=True, snapshot_interval_s=None, sample_interval_s=0.02
    )
    try:
        time.sleep(0.05)
        subprocess.run(
            [sys.executable, "-c", f"open({str(tmp_path / 'kid.bin')!r}, 'wb').write(b'k' * {n})"],
            check=True,
            env={k: v for k, v in os.environ.items() if not k.startswith("LINEPROFILER_")},
        )
        with open(tmp_path / "mine.bin", "wb", buffering=0) as f:
            f.write(b"m" * 777)
        time.sleep(0.1)
    finally:
        p.close()
    status = read_worker(p.worker_path)["samples"]
    t = read_samples(p.worker_path.with_suffix(".samples"))
    assert sum(t.cols[W_WC]) == 777
    assert status["reap_intervals"] >= 1
    assert status["children_io_excluded"]["write_chars"] >= n


def test_an_nvml_library_lacking_functions_is_no_gpu(tmp_path, scripted, monkeypatch):
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        pytest.skip("no C compiler")
    src = tmp_path / "partial.c"
    src.write_text("int nvmlInit_v2(void) { return 0; }\n")
    lib = tmp_path / "libpartial.so"
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(lib), str(src)], check=True)
    monkeypatch.setenv("LINEPROFILER_NVML_LIBRARY", str(lib))
    status = gpu_status(tmp_path)
    assert status["gpu_devices"] == 0 and "lacks the functions" in status["gpu_error"]


def test_tags_follow_the_constructing_thread_not_the_first_to_record(tmp_path):
    p = Profiler(
        run_dir=tmp_path / "run", enabled=True, snapshot_interval_s=None, sample_interval_s=3600
    )
    import threading

    opened, release = threading.Event(), threading.Event()

    def background() -> None:
        with p.phase("bg"):
            opened.set()
            release.wait(10)

    t = threading.Thread(target=background)
    try:
        t.start()
        opened.wait(10)  # the background thread recorded first
        with p.phase("train"):
            p._rec.sample_now()  # closes the interval begun at construction (nothing open)
            p._rec.sample_now()  # an interval begun with "train" open on the main thread
        release.set()
        t.join(10)
    finally:
        release.set()
        p.close()
    table = read_samples(p.worker_path.with_suffix(".samples"))
    tags = read_tags(p.worker_path.with_suffix(".tags"))
    assert [tags[g] for g in table.cols[W_TAG]][:2] == [(), ("train",)]
