"""The recorder at its limits: thousands of short-lived threads, counters at the int64 range and
past the table, odd host names, a profiler built off the main thread, a disk that fills up."""

from __future__ import annotations

import json
import os
import shutil
import struct
from pathlib import Path

import pytest

from tests.helpers import read_worker, run_python, worker_files

CLI = "from lineprofiler.cli import main; raise SystemExit(main())"


def report(tmp_path: Path, run_dir: Path) -> str:
    proc = run_python(CLI, cwd=tmp_path, args=["report", str(run_dir)], check=False, timeout=60)
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def root_and(tool: str) -> None:
    if os.geteuid() != 0 or shutil.which(tool) is None:
        pytest.skip(f"needs root and {tool}(1)")


THREADS_CHILD = """
    import json, os, resource, threading
    from lineprofiler.accounting import Profiler

    resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))
    p = Profiler(run_dir="run", enabled=True, snapshot_interval_s=None, sample_interval_s=None)
    fds0 = len(os.listdir("/proc/self/fd"))
    cpu_clock = p._rec.cpu_clock

    def work(i):
        with p.phase("job", io=True):
            with p.phase("step"):
                p.count("items", i)

    for i in range(1100):
        t = threading.Thread(target=work, args=(i,), name=f"loader-{i % 3}")
        t.start()
        t.join()
    with open("user-file.txt", "w") as f:  # the user's own open() still works
        f.write("ok")
    fds1 = len(os.listdir("/proc/self/fd"))
    p.close()
    print(json.dumps({"fds0": fds0, "fds1": fds1, "worker": str(p.worker_path),
                      "cpu_clock": cpu_clock}))
"""


def test_short_lived_threads_release_their_fds_and_fold_exactly(tmp_path):
    """1,100 threads, each with a phase(io=True) (a /proc/thread-self/io fd) and, where perf
    events open, a task-clock fd, under a 256-fd limit: the process keeps no fd per exited thread
    and the folded trees hold every entry and counter the test made."""
    proc = run_python(THREADS_CHILD, cwd=tmp_path, timeout=240)
    got = json.loads(proc.stdout)
    assert got["fds1"] <= got["fds0"] + 4, got
    doc = read_worker(Path(got["worker"]))
    per_name: dict[str, dict] = {}
    for t in doc["threads"]:
        for ph in t["phases"]:
            entry = per_name.setdefault(t["name"], {"job": 0, "step": 0, "items": 0, "io": 0})
            key = ph["path"][-1]
            entry[key] = entry.get(key, 0) + ph["calls"]
            entry["items"] += ph["counters"].get("items", 0)
            entry["io"] += ph.get("io", {}).get("calls", 0)
    for r in range(3):
        mine = [i for i in range(1100) if i % 3 == r]
        assert per_name[f"loader-{r}"] == {
            "job": len(mine),
            "step": len(mine),
            "items": sum(mine),
            "io": len(mine),
        }
    exited = sum(t.get("exited_threads", 0) for t in doc["threads"])
    assert 1099 <= exited <= 1100  # (the last may not have run its exit hook before close())
    assert len(doc["threads"]) <= 3 + 2  # three names' records, the last thread, main at most


COUNTERS_CHILD = """
    from lineprofiler.accounting import Profiler

    p = Profiler(run_dir="run", enabled=True, snapshot_interval_s=None, sample_interval_s=None)
    with p.phase("loss"):
        p.count("debt", -2**62)
        p.count("debt", -2**62)
        p.count("debt", -2**62)  # past -2**63: saturates
        p.count("ok", 5)
    try:
        p.count("huge", 2**70)
    except OverflowError as exc:
        print("raised:", exc)
    for i in range(65536 - 2):
        p.count(f"c{i}")
    p.count("one-too-many")  # the thread's 65,537th counter
    p.count("one-too-many")
    p.close()
"""


def test_counters_saturate_visibly_and_excess_ones_are_refused_and_named(tmp_path):
    proc = run_python(COUNTERS_CHILD, cwd=tmp_path, timeout=120)
    assert "raised: count() n=1180591620717411303424 does not fit a 64-bit counter" in proc.stdout
    (f,) = worker_files(tmp_path / "run")
    doc = read_worker(f)
    (loss,) = [ph for t in doc["threads"] for ph in t["phases"] if ph["path"] == ["loss"]]
    assert loss["counters"] == {"debt": -(2**63), "ok": 5}
    assert loss["counters_saturated"] == ["debt"]
    assert sum(t.get("counters_refused", 0) for t in doc["threads"]) == 2
    text = report(tmp_path, tmp_path / "run")  # the worker stays readable
    (debt,) = [line for line in text.splitlines() if "+ debt" in line]
    assert "SATURATED" in debt
    (ok,) = [line for line in text.splitlines() if "+ ok" in line]
    assert "SATURATED" not in ok
    assert "2 count() call(s) in 1 worker(s) were refused" in " ".join(text.split())


HOST_CHILD = """
    import json, socket, sys
    from lineprofiler.accounting import Profiler

    socket.sethostname(sys.argv[1])
    p = Profiler(run_dir="run", enabled=True, snapshot_interval_s=None, sample_interval_s=None)
    with p.phase("x"):
        pass
    p.close()
    print(json.dumps(str(p.worker_path)))
"""


@pytest.mark.parametrize("host", [".", "..", "a/b", "../../escape"])
def test_odd_host_names_stay_inside_workers_with_the_real_name_kept(tmp_path, host):
    root_and("unshare")
    proc = run_python(HOST_CHILD, cwd=tmp_path, args=[host], wrapper=["unshare", "--uts"])
    path = Path(json.loads(proc.stdout))
    workers = (tmp_path / "run" / "workers").resolve()
    assert path.resolve().parent.parent == workers
    assert path.parent.name not in (".", "..")
    assert read_worker(path)["meta"]["host"] == host


NOT_MAIN_CHILD = """
    import threading, warnings
    from lineprofiler.accounting import Profiler

    warnings.simplefilter("always")
    def build():
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for _ in range(2):
                p = Profiler(run_dir="run", enabled=True, snapshot_interval_s=None,
                             sample_interval_s=None)
                with p.phase("x"):
                    pass
                p.close()
        print(sum("signal" in str(w.message) for w in caught), "warning(s)")
    t = threading.Thread(target=build)
    t.start()
    t.join()
"""


def test_a_profiler_built_off_the_main_thread_warns_once_and_the_report_says_so(tmp_path):
    proc = run_python(NOT_MAIN_CHILD, cwd=tmp_path)
    assert "1 warning(s)" in proc.stdout
    assert all(
        read_worker(f)["meta"]["signal_flush"] is False for f in worker_files(tmp_path / "run")
    )
    text = " ".join(report(tmp_path, tmp_path / "run").split())
    assert "built their profiler outside the main thread" in text


# A child in its own mount namespace with a small tmpfs as its run directory, so the disk really
# fills; it copies the run out (the tmpfs goes with the namespace) before it exits.
FULL_DISK_WRAPPER = [
    "unshare",
    "--mount",
    "sh",
    "-c",
    'mkdir -p run && mount -t tmpfs -o size=256k tmpfs run && exec "$0" "$@"',
]

FILL = """
    import os

    def fill():
        fd = os.open("run/filler", os.O_WRONLY | os.O_CREAT)
        try:
            while True:
                os.write(fd, b"\\0" * 512)
        except OSError:
            pass
        finally:
            os.close(fd)
"""

DISK_FULL_UNTIL_EXIT_CHILD = (
    FILL
    + """
    import shutil
    from lineprofiler.accounting import Profiler

    p = Profiler(run_dir="run", enabled=True, snapshot_interval_s=None, sample_interval_s=None)
    fill()  # full from here until exit
    for i in range(300):
        with p.phase(f"phase-{i}"):
            pass
    p.close()
    print(p.flush_stats())
    shutil.copytree("run/workers", "copy/workers")
"""
)


def test_a_disk_full_until_exit_is_named_in_the_report(tmp_path):
    root_and("unshare")
    proc = run_python(DISK_FULL_UNTIL_EXIT_CHILD, cwd=tmp_path, wrapper=FULL_DISK_WRAPPER)
    assert "'errors': 1" in proc.stdout  # close()'s write failed
    text = " ".join(report(tmp_path, tmp_path / "copy").split())  # unwrapped
    assert "1 later write(s) failed" in text
    assert "No space left on device" in text


SAMPLES_ENOSPC_CHILD = (
    FILL
    + """
    import json, os, time
    from lineprofiler.accounting import Profiler

    t0 = time.time_ns()
    p = Profiler(run_dir="run", enabled=True, snapshot_interval_s=None, sample_interval_s=1000.0)
    for _ in range(60):
        p._rec.sample_now()
    fill()  # the .samples file's last page has room for a few rows, then one row is cut
    for _ in range(60):
        p._rec.sample_now()
    os.remove("run/filler")
    for _ in range(20):
        p._rec.sample_now()
    status = json.loads(p._rec.sampler_status())
    p.close()
    stem = str(p.worker_path)[: -len(".json")]
    with open(stem + ".samples", "rb") as f:
        data = f.read()
    print(json.dumps({"t0": t0, "t1": time.time_ns(), "status": status, "hex": data.hex()}))
"""
)


def test_sample_rows_stay_aligned_when_the_disk_fills_mid_row(tmp_path):
    root_and("unshare")
    proc = run_python(SAMPLES_ENOSPC_CHILD, cwd=tmp_path, wrapper=FULL_DISK_WRAPPER)
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    data = bytes.fromhex(got["hex"])
    header_bytes, words = struct.unpack_from("<II", data, 12)
    row = 8 * words
    assert got["status"]["write_errors"] > 0  # the disk did fill
    assert (len(data) - header_bytes) % row == 0  # whole rows only
    n = (len(data) - header_bytes) // row
    assert n >= got["status"]["rows"] > 0
    for k in range(n):  # every row parses as a row: its time lies inside the test's own window
        t_ns, dt_ns = struct.unpack_from("<qq", data, header_bytes + k * row)
        assert got["t0"] <= t_ns <= got["t1"], k
        assert 0 <= dt_ns <= got["t1"] - got["t0"], k


def test_the_full_disk_wrapper_is_a_real_full_disk(tmp_path):
    """The two tests above rely on the tmpfs filling: check that it does, in this environment."""
    root_and("unshare")
    code = FILL + "\n    fill()\n    import os\n    print(os.statvfs('run').f_bavail)\n"
    proc = run_python(code, cwd=tmp_path, wrapper=FULL_DISK_WRAPPER, check=False)
    if proc.returncode != 0 and "mount" in proc.stderr:
        pytest.skip(f"cannot mount a tmpfs here: {proc.stderr.strip()}")
    assert proc.stdout.strip() == "0"
