"""Figures of runs recorded by the real profiler in real processes, against what each process
measured itself: its own perf_counter/thread_time around each entry, the bytes it wrote and read,
its own /proc/self/statm readings, the sizes of the files the profiler left."""

from __future__ import annotations

import json
import os
import re
from concurrent.futures import ThreadPoolExecutor
from textwrap import dedent

import pytest

from lineprofiler.accounting import merge_run
from lineprofiler.report.json import to_document
from lineprofiler.report.text import render_text
from tests.helpers import run_python, worker_files
from tests.timing import clock_slack_ns

MS = 1_000_000


def report(run_dir):
    merged = merge_run(run_dir)
    return merged, json.loads(json.dumps(to_document(merged), allow_nan=False)), render_text(merged)


def run_together(code, tmp_path, arg_lists, env) -> None:
    """Runs one process per argument list, all started at once: one run. (One after the other
    they would be attempts of their own, never summed.)"""
    with ThreadPoolExecutor(len(arg_lists)) as pool:
        # (a script file each: run_python names it by the code's hash)
        done = [
            pool.submit(
                run_python, f"{dedent(code)}\n# process {i}\n", cwd=tmp_path, args=a, env=env
            )
            for i, a in enumerate(arg_lists)
        ]
        for f in done:
            f.result()


def phases_by_path(doc) -> dict[tuple[str, ...], dict]:
    return {tuple(p["path"]): p for r in doc["roles"] for p in r["phases"]}


@pytest.mark.timing
def test_cpu_and_wait_per_phase_and_thread_node_match_the_processs_own_clocks(tmp_path):
    code = """
        import json, threading, time
        from lineprofiler.accounting import Profiler
        p = Profiler(run_dir="run", role="learner", enabled=True, thread_names=True,
                     snapshot_interval_s=None, sample_interval_s=None)
        truth = {}
        def measured(key, name, fn):
            w0, c0 = time.perf_counter_ns(), time.thread_time_ns()
            with p.phase(name):
                i0 = time.perf_counter_ns()
                fn()
                i1 = time.perf_counter_ns()
            w, c, i = truth.get(key, (0, 0, 0))
            truth[key] = (w + time.perf_counter_ns() - w0, c + time.thread_time_ns() - c0,
                          i + i1 - i0)
        def spin():
            end = time.perf_counter() + 0.008
            while time.perf_counter() < end:
                pass
        def half():  # about half on the CPU, half asleep
            spin()
            time.sleep(0.008)
        def collector():
            for _ in range(25):
                measured("collector/drain", "drain", lambda: time.sleep(0.004))
        t = threading.Thread(target=collector, name="collector")
        threading.current_thread().name = "learner"
        t.start()
        for _ in range(12):
            measured("learner/train", "train", spin)
            measured("learner/mixed", "mixed", half)
        t.join()
        p.close()
        json.dump(truth, open("truth.json", "w"))
    """
    run_python(code, cwd=tmp_path)
    truth = {
        tuple(k.split("/")): v for k, v in json.loads((tmp_path / "truth.json").read_text()).items()
    }
    merged, doc, text = report(tmp_path / "run")
    ph = phases_by_path(doc)
    # The thread nodes: the sum of their thread's top-level phases.
    truth[("learner",)] = tuple(
        map(sum, zip(truth[("learner", "train")], truth[("learner", "mixed")], strict=True))
    )
    truth[("collector",)] = truth[("collector", "drain")]
    for path, (wall, cpu, inner) in truth.items():
        p = ph[path]
        # the recorder's interval lies between the process's own clock inside the with block
        # (around fn() alone) and around it, whatever the load preempted in between, widened by
        # the clock error (the recorder's wall clock is the TSC, calibrated against
        # CLOCK_MONOTONIC, not the same clock as perf_counter)
        lo, hi = inner - clock_slack_ns(inner), wall + clock_slack_ns(wall)
        assert lo <= p["wall_ns"] <= hi, (path, inner, wall)
        slack = 2 * MS + wall // 20  # the CPU figures: generous (a loaded 2-core machine)
        assert abs(p["cpu_ns"] - cpu) <= slack, (path, p["cpu_ns"], cpu)
        assert p["wait_ns"] == p["wall_ns"] - p["cpu_ns"]
        assert abs(p["wait_ns"] - (wall - cpu)) <= 2 * slack, (path, p["wait_ns"], wall - cpu)
        assert p["wait_fraction"] == pytest.approx(1 - cpu / wall, abs=0.1), path
        assert p["thread"] == (len(path) == 1)
    # Sleeping is waiting whatever the load; the spinning thread's share is whatever the
    # process itself measured (a loaded host steals from it), checked above.
    assert ph[("collector", "drain")]["wait_fraction"] > 0.8
    # The text report's wait column: the same fractions, in whole percent.
    for path in (("collector", "drain"), ("learner", "train"), ("learner", "mixed")):
        wall, cpu, _inner = truth[path]
        m = re.search(rf"^{'/'.join(path)} +\S+ +(\d+)% ", text, re.M)
        assert m, text
        assert abs(int(m.group(1)) - 100 * (1 - cpu / wall)) <= 10, (path, text)


def test_io_bytes_summed_over_processes_against_the_bytes_each_wrote_and_read(tmp_path):
    code = """
        import os, sys
        from lineprofiler.accounting import Profiler
        n = int(sys.argv[1])
        p = Profiler(run_dir="run", role="loader", enabled=True, snapshot_interval_s=None,
                     sample_interval_s=None)
        path = f"shard{n}.bin"
        with p.phase("save", io=True):
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            view = memoryview(os.urandom(n))
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
            os.close(fd)
        fd = os.open(path, os.O_RDONLY)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)  # the first read goes to the disk
        os.close(fd)
        with p.phase("load", io=True):
            for _ in range(2):  # cold, then from the page cache
                with open(path, "rb", buffering=0) as f:
                    got = 0
                    while chunk := f.read(1 << 20):
                        got += len(chunk)
                assert got == n
        p.close()
    """
    sizes = [1024 * 1024, 3 * 1024 * 1024]  # page multiples: a cold read fetches exactly n
    env = {"LINEPROFILER_RUN_ID": "20261203T1200-10io10"}
    run_together(code, tmp_path, [[str(n)] for n in sizes], env)
    merged, doc, text = report(tmp_path / "run")
    rows = {tuple(r["path"]): r for r in doc["resources"]["io_by_phase"]}
    total = sum(sizes)
    save, load = rows[("save",)], rows[("load",)]
    assert save["calls"] == 2 and load["calls"] == 2 and save["failed"] == load["failed"] == 0
    assert save["write_chars"] == total and save["read_chars"] == 0
    assert save["write_bytes"] >= total
    assert load["read_chars"] == 2 * total and load["write_chars"] == 0
    if load["read_bytes"] == 0:
        pytest.fail("the filesystem under tmp_path does not account read_bytes")
    assert load["read_bytes"] == total
    assert load["page_cache_bytes"] == total  # read_chars - read_bytes: the warm pass
    assert phases_by_path(doc)[("load",)]["processes"] == 2
    mb = f"{total / 1e6:.1f} MB"
    assert re.search(rf"^  load +r +{mb} +w +0 B ", text, re.M), text
    assert f"+ {mb} read from page cache" in text


def test_rss_peak_against_the_processs_own_statm_readings(tmp_path):
    code = """
        import json, os, time
        from lineprofiler.accounting import Profiler
        page = os.sysconf("SC_PAGESIZE")
        def rss():
            with open("/proc/self/statm") as f:
                return int(f.read().split()[1]) * page
        p = Profiler(run_dir="run", role="worker", enabled=True, snapshot_interval_s=None,
                     sample_interval_s=0.02)
        seen = [rss()]
        with p.phase("hold"):
            buf = b"\\x01" * (160 * 1000 * 1000)  # written: every page resident
            end = time.monotonic() + 0.4
            while time.monotonic() < end:
                seen.append(rss())
                time.sleep(0.005)
            del buf
        seen.append(rss())
        p.close()
        json.dump(max(seen), open("peak.json", "w"))
    """
    run_python(code, cwd=tmp_path)
    peak = json.loads((tmp_path / "peak.json").read_text())
    merged, doc, text = report(tmp_path / "run")
    (proc,) = doc["resources"]["memory"]["processes"]
    assert proc["rss_peak_bytes"] == pytest.approx(peak, rel=0.05)
    assert doc["resources"]["memory"]["roles"] == {"worker": proc["rss_peak_bytes"]}
    m = re.search(r"^WORKER +x1 +max +([0-9.]+) MB", text, re.M)
    assert m, text
    assert float(m.group(1)) * 1e6 == pytest.approx(peak, rel=0.05)


def test_own_write_bytes_against_the_bytes_the_process_saw_written(tmp_path):
    """The process's own syscall counter (wchar of its only thread, which does nothing but make
    the profiler write) is the ground truth of what the profiler's flushes handed to write()."""
    code = """
        import json, os, sys
        from lineprofiler.accounting import Profiler
        def wchar():
            with open("/proc/thread-self/io", "rb", buffering=0) as f:
                return int(f.read().split(b"wchar:")[1].split()[0])
        before = wchar()
        p = Profiler(run_dir="run", role="w", enabled=True, snapshot_interval_s=None,
                     sample_interval_s=None)
        for i in range(int(sys.argv[1])):
            with p.phase(f"phase{i}"):
                pass
        p.close()
        json.dump([os.getpid(), wchar() - before], open(f"wchar{sys.argv[1]}.json", "w"))
    """
    env = {"LINEPROFILER_RUN_ID": "20261203T1200-0wn0wn"}
    counts = (3, 40)
    run_together(code, tmp_path, [[str(k)] for k in counts], env)
    written = dict(json.loads((tmp_path / f"wchar{k}.json").read_text()) for k in counts)
    files = worker_files(tmp_path / "run")
    docs = {f: json.loads(f.read_text()) for f in files}
    own = sorted(d["own_write_bytes"] for d in docs.values())
    # The file records what was written before its own final write, which is the file itself.
    # Paired by pid: the two processes' own writes can differ by a byte (a pid's digits), so
    # sorting each list on its own can pair one process's file with the other's count.
    assert {
        d["meta"]["pid"]: d["own_write_bytes"] + os.path.getsize(f) for f, d in docs.items()
    } == {int(pid): n for pid, n in written.items()}
    merged, doc, text = report(tmp_path / "run")
    assert doc["run"]["own_write_bytes"] == sum(own)
    assert sorted(w["own_write_bytes"] for w in doc["workers"]) == own
    m = re.search(r"Own writes ([0-9.]+) (k?B)", text)
    assert m, text
    scale = 1000 if m.group(2) == "kB" else 1
    assert float(m.group(1)) * scale == pytest.approx(sum(own), abs=50)
