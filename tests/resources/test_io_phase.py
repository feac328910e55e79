"""phase(name, io=True): exact bytes against ground truth the test itself knows or reads.

The counters are the calling thread's (/proc/thread-self/io), read at the entry's own boundaries.
Ground truth: the bytes the test hands to write()/gets from read(), and the test's own reading of
/proc/thread-self/io around the with block (the disk layer, which only the kernel knows).
"""

from __future__ import annotations

import json
import os
import shutil
import threading
from pathlib import Path

import pytest

from lineprofiler import _core
from lineprofiler.accounting import Profiler
from tests.helpers import quiet_profiler, read_worker, run_python

PAGE = os.sysconf("SC_PAGESIZE")


def make(tmp_path, **kw) -> Profiler:
    return quiet_profiler(tmp_path / "run", **kw)


def thread_io() -> dict[str, int]:
    with open("/proc/thread-self/io", "rb", buffering=0) as f:
        text = f.read().decode()
    return {k: int(v) for k, v in (line.split(":") for line in text.splitlines())}


def io_of(doc, path, thread_name=None) -> dict | None:
    for t in doc["threads"]:
        if thread_name is not None and t["name"] != thread_name:
            continue
        for ph in t["phases"]:
            if ph["path"] == list(path):
                return ph.get("io")
    raise AssertionError(f"no phase {path} in {thread_name or 'any thread'}")


def write_fsync(path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)


def read_all(path) -> int:
    n = 0
    with open(path, "rb", buffering=0) as f:
        while chunk := f.read(1 << 20):
            n += len(chunk)
    return n


def evict(path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


@pytest.fixture
def accounted_fs(tmp_path):
    """Skips where tmp_path's filesystem does not account disk bytes (tmpfs, some overlays)."""
    probe = tmp_path / "probe.bin"
    write_fsync(probe, b"p" * (16 * PAGE))
    evict(probe)
    before = thread_io()
    read_all(probe)
    after = thread_io()
    if after["read_bytes"] - before["read_bytes"] < 16 * PAGE:
        pytest.skip("this filesystem does not account read_bytes (tmpfs/overlay?)")
    return tmp_path


def test_write_and_fsync_exact(accounted_fs):
    n = 3 * 1024 * 1024 + 123  # not page aligned: write_chars is exact to the byte
    data = os.urandom(n)
    p = make(accounted_fs)
    try:
        before = thread_io()
        with p.phase("checkpoint", io=True):
            write_fsync(accounted_fs / "ckpt.bin", data)
        after = thread_io()
    finally:
        p.close()
    io = io_of(read_worker(p.worker_path), ("checkpoint",))
    assert io["calls"] == 1 and io["failed"] == 0
    assert io["write_chars"] == n
    assert io["read_chars"] == 0
    # Disk layer: every dirtied page, plus whatever metadata the filesystem dirtied in our
    # context; the test's own reading of the same counters around the block is the ground truth
    # (its reads add to rchar only).
    assert io["write_bytes"] == after["write_bytes"] - before["write_bytes"]
    assert io["read_bytes"] == after["read_bytes"] - before["read_bytes"]
    assert io["write_bytes"] >= -(-n // PAGE) * PAGE


def test_read_from_disk_then_from_page_cache(accounted_fs):
    n = 4 * 1024 * 1024  # page aligned: a cold read fetches exactly n from the device
    path = accounted_fs / "shard.bin"
    write_fsync(path, os.urandom(n))
    p = make(accounted_fs)
    try:
        evict(path)
        with p.phase("cold", io=True):
            assert read_all(path) == n
        with p.phase("warm", io=True):
            assert read_all(path) == n
    finally:
        p.close()
    doc = read_worker(p.worker_path)
    cold, warm = io_of(doc, ("cold",)), io_of(doc, ("warm",))
    assert cold["read_bytes"] == n and cold["read_chars"] == n  # page cache: 0
    assert warm["read_bytes"] == 0 and warm["read_chars"] == n  # page cache: n
    assert cold["write_chars"] == warm["write_chars"] == 0


def test_two_threads_at_once_each_see_only_their_own(tmp_path):
    """The counters are per thread: another thread's concurrent I/O is not billed to the phase."""
    sizes = {"alpha": 700_001, "beta": 1_300_003}
    outsider = 2_000_000
    barrier = threading.Barrier(3)
    p = make(tmp_path)

    def worker(name: str) -> None:
        with p.phase("save", io=True):
            barrier.wait()  # all three threads are inside their I/O at the same time
            with open(tmp_path / f"{name}.bin", "wb", buffering=0) as f:
                for _ in range(2):
                    f.write(b"x" * (sizes[name] // 2))
                    barrier.wait()
                f.write(b"x" * (sizes[name] - 2 * (sizes[name] // 2)))
            os.fsync(os.open(tmp_path / f"{name}.bin", os.O_RDONLY))

    def unphased() -> None:
        barrier.wait()
        with open(tmp_path / "outsider.bin", "wb", buffering=0) as f:
            for _ in range(2):
                f.write(b"y" * (outsider // 2))
                barrier.wait()

    threads = [threading.Thread(target=worker, args=(k,), name=k) for k in sizes]
    threads.append(threading.Thread(target=unphased, name="outsider"))
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
    finally:
        p.close()
    doc = read_worker(p.worker_path)
    for name, n in sizes.items():
        io = io_of(doc, ("save",), thread_name=name)
        assert io["write_chars"] == n, name
        assert io["read_chars"] == 0, name


def test_nested_io_phases_do_not_bill_the_profilers_own_reads(tmp_path):
    p = make(tmp_path)
    path = tmp_path / "f.bin"
    path.write_bytes(b"z" * 10_000)
    try:
        with p.phase("outer", io=True):
            for _ in range(5):
                with p.phase("inner", io=True):
                    pass
            assert read_all(path) == 10_000
    finally:
        p.close()
    doc = read_worker(p.worker_path)
    assert io_of(doc, ("outer",))["read_chars"] == 10_000
    inner = io_of(doc, ("outer", "inner"))
    assert inner["calls"] == 5 and inner["read_chars"] == 0


def test_io_false_records_no_io(tmp_path):
    p = make(tmp_path)
    try:
        with p.phase("plain"):
            (tmp_path / "a").write_bytes(b"1" * 1000)
    finally:
        p.close()
    assert io_of(read_worker(p.worker_path), ("plain",)) is None


@pytest.fixture
def scripted_thread_io(tmp_path):
    """Points the thread counters at a file the test writes; restores /proc afterwards."""
    f = tmp_path / "thread_io"

    def script(rchar: int, wchar: int, rb: int, wb: int, valid: bool = True) -> int:
        text = (
            f"rchar: {rchar}\nwchar: {wchar}\nsyscr: 1\nsyscw: 1\n"
            f"read_bytes: {rb}\nwrite_bytes: {wb}\ncancelled_write_bytes: 0\n"
            if valid
            else "garbage\n"
        )
        with open(f, "r+b" if f.exists() else "wb") as out:  # same inode: the kept fd sees it
            out.write(text.encode())
            out.truncate()
        return len(text)

    _core._set_io_counter_paths(str(f), "")
    try:
        yield script
    finally:
        _core._set_io_counter_paths("", "")


def test_scripted_counters_and_own_read_subtraction(tmp_path, scripted_thread_io):
    p = make(tmp_path)
    try:
        first_len = scripted_thread_io(1000, 2000, 300, 400)
        scope = p.phase("load", io=True)
        scope.__enter__()
        scripted_thread_io(1000 + first_len + 5000, 2000 + 70, 300 + 4096, 400 + 8192)
        scope.__exit__(None, None, None)
    finally:
        p.close()
    io = io_of(read_worker(p.worker_path), ("load",))
    # The entry read's own bytes (first_len) land in rchar and are taken back out.
    assert io == {
        "calls": 1,
        "failed": 0,
        "read_bytes": 4096,
        "write_bytes": 8192,
        "read_chars": 5000,
        "write_chars": 70,
    }


def test_failed_exit_read_records_nothing(tmp_path, scripted_thread_io):
    p = make(tmp_path)
    try:
        scripted_thread_io(1, 2, 3, 4)
        with p.phase("save", io=True):
            scripted_thread_io(0, 0, 0, 0, valid=False)
        scripted_thread_io(10, 20, 30, 40)
        with p.phase("save", io=True):
            scripted_thread_io(10 + 200, 20 + 5, 30, 40)
        # counters that went backwards are a failed read too, never a huge unsigned delta
        with p.phase("save", io=True):
            scripted_thread_io(0, 0, 0, 0)
    finally:
        p.close()
    doc = read_worker(p.worker_path)
    io = io_of(doc, ("save",))
    assert io["calls"] == 1 and io["failed"] == 2
    assert io["write_chars"] == 5
    phase = next(ph for ph in doc["threads"][0]["phases"] if ph["path"] == ["save"])
    assert phase["calls"] == 3  # the time of every entry is still recorded


def test_unopenable_counters_record_nothing(tmp_path):
    _core._set_io_counter_paths(str(tmp_path / "missing"), "")
    try:
        p = make(tmp_path)
        try:
            for _ in range(3):
                with p.phase("save", io=True):
                    (tmp_path / "x").write_bytes(b"1" * 100)
        finally:
            p.close()
    finally:
        _core._set_io_counter_paths("", "")
    io = io_of(read_worker(p.worker_path), ("save",))
    assert io["calls"] == 0 and io["failed"] == 3
    assert io["read_bytes"] == io["write_bytes"] == io["read_chars"] == io["write_chars"] == 0


def test_out_of_order_exit_records_no_bytes(tmp_path):
    p = make(tmp_path)
    try:
        outer = p.phase("outer", io=True)
        outer.__enter__()
        inner = p.phase("inner", io=True)
        inner.__enter__()
        (tmp_path / "x").write_bytes(b"1" * 100)
        outer.__exit__(None, None, None)  # closes inner too
        inner.__exit__(None, None, None)  # no longer open: ignored
    finally:
        p.close()
    doc = read_worker(p.worker_path)
    assert io_of(doc, ("outer",)) == {
        "calls": 0,
        "failed": 1,
        "read_bytes": 0,
        "write_bytes": 0,
        "read_chars": 0,
        "write_chars": 0,
    }
    assert io_of(doc, ("outer", "inner")) is None


def test_sampled_io_phase_scales_bytes_like_its_time(tmp_path):
    """phase(io=True, sample=0.5): one entry in two is measured, and its bytes stand for two."""
    p = make(tmp_path)
    try:
        for _ in range(6):
            with p.phase("chunk", io=True, sample=0.5):
                with open(tmp_path / "c.bin", "wb", buffering=0) as f:
                    f.write(b"c" * 1000)
    finally:
        p.close()
    io = io_of(read_worker(p.worker_path), ("chunk",))
    assert io["calls"] == 6 and io["failed"] == 0
    assert io["write_chars"] == 6000  # 3 measured entries x 1000 bytes x 2


REUSED_TID_CHILD = """
    import json, os, sys, threading, time
    from lineprofiler.accounting import Profiler

    p = Profiler(run_dir="run", enabled=True, snapshot_interval_s=None, sample_interval_s=None)
    seen = {}

    def work(i, out):
        out.append(threading.get_native_id())
        with p.phase("save", io=True):
            os.write(fd, b"z" * (1000 + i))

    fd = os.open("out.bin", os.O_WRONLY | os.O_CREAT)
    for i in range(2000):
        out = []
        t = threading.Thread(target=work, args=(i, out), name=f"t{i}")
        for attempt in range(100):  # the few pids left may still be held by exiting threads
            try:
                t.start()
                break
            except RuntimeError:
                time.sleep(0.01)
        t.join()
        # join() returns before the thread's exit hooks run (a busy machine can delay them past
        # the next thread's start): wait until its task is gone, so each thread has exited
        deadline = time.monotonic() + 10
        while str(out[0]) in os.listdir("/proc/self/task") and time.monotonic() < deadline:
            time.sleep(0.001)
        if out[0] in seen:
            break
        seen[out[0]] = i
    else:
        sys.exit("no thread id was reused")
    p.close()
    print(json.dumps({"tid": out[0], "first": seen[out[0]], "second": i,
                      "worker": str(p.worker_path)}))
"""


@pytest.mark.timing
def test_a_thread_reusing_an_exited_threads_tid_gets_its_own_state(tmp_path):
    """Linux hands an exited thread's tid to a later thread: that thread must not inherit the
    dead one's state (its name, its stack, its already-open /proc/<tid>/io, which now fails)."""
    if os.geteuid() != 0 or not shutil.which("unshare"):
        pytest.skip("needs root and unshare(1) for a pid namespace with a small pid_max")
    # A fresh pid namespace whose pid_max (per namespace since Linux 6.14) is tiny, so thread ids
    # come round again within a few hundred threads.
    namespace = ["unshare", "--pid", "--fork", "--mount-proc", "sh", "-c"]
    namespace += ['echo 310 > /proc/sys/kernel/pid_max && exec "$0" "$@"']
    proc = run_python(REUSED_TID_CHILD, cwd=tmp_path, wrapper=namespace, check=False)
    if "pid_max" in proc.stderr and proc.returncode != 0:
        pytest.skip(f"no per-namespace pid_max here: {proc.stderr.strip()}")
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    doc = read_worker(Path(got["worker"]))
    # Every thread has exited: each was folded into the exited threads' records when it did, its
    # state (and its /proc/<tid>/io fd) freed, so the thread that got its tid again started
    # afresh. Summed over the records, every entry is there with its own bytes.
    n = got["second"] + 1
    saves = [ph for t in doc["threads"] for ph in t["phases"] if ph["path"] == ["save"]]
    # (the child waits for each thread's task to end, so none is live; one that outlived the
    # child's 10 s wait for it would be)
    assert len([t for t in doc["threads"] if t["phases"] and not t.get("exited_threads")]) <= 1
    assert sum(ph["calls"] for ph in saves) == n
    assert sum(ph["io"]["failed"] for ph in saves) == 0
    assert sum(ph["io"]["write_chars"] for ph in saves) == sum(1000 + k for k in range(n))
