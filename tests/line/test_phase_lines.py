"""The lines of a phase (issue 32): Profiler(lines=...), LINEPROFILER_LINES, the .lines sidecar.

Ground truth is the test's own: hits it computes from the loops it runs, entries it counts, sleeps
it times with perf_counter_ns. The sidecars are read directly (docs/worker-file.md, "Lines of a
phase"), as the report side reads them.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from lineprofiler import _core
from lineprofiler.accounting import Profiler
from lineprofiler.accounting._lines import Schedule, bounded_json
from lineprofiler.runfile.layout import LINES_FORMAT, LINES_VERSION

from ._support import load_module, make_project

ITERS = 300


def _sidecars(run_dir: Path) -> list[dict]:
    docs = []
    for path in sorted((run_dir / "workers").glob("*/*.lines")):
        doc = json.loads(path.read_text())
        assert doc["format"] == LINES_FORMAT and doc["version"] == LINES_VERSION
        docs.append(doc)
    return docs


def _line_hits(doc: dict, source: str) -> int:
    return sum(
        ln["hits"]
        for ph in doc["phases"]
        for f in ph["functions"]
        for ln in f["lines"]
        if ln["source"].strip() == source
    )


def _profiler(run_dir: Path, **kw) -> Profiler:
    return Profiler(
        run_dir=run_dir, enabled=True, snapshot_interval_s=None, sample_interval_s=None, **kw
    )


# ------------------------------------------------------------------------------------------------
# choosing entries


def test_the_schedule_traces_exactly_n_entries_spread_by_doubling_strides():
    s = Schedule(20)
    chosen = [i for i in range(500) if s.choose()]
    assert chosen == [0, 1, 2, 3, 5, 7, 9, 11, 15, 19, 23, 27, 35, 43, 51, 59, 75, 91, 107, 123]
    every = Schedule(None)
    assert all(every.choose() for _ in range(1000))
    one = Schedule(1)
    assert [i for i in range(50) if one.choose()] == [0]


def test_lines_entries_20_traces_20_of_500_and_the_phase_still_counts_500(tmp_path, monkeypatch):
    root = make_project(tmp_path)
    monkeypatch.chdir(root)
    mod = load_module(
        root / "work.py",
        f"""
        from lineprofiler import _core
        traced = []

        def step(k):
            traced.append(_core.line_tracer_active() is not None)
            total = 0
            for i in range({ITERS}):
                total += i
            return total
        """,
    )
    run_dir = tmp_path / "run"
    p = _profiler(run_dir, lines="step")
    try:
        for k in range(500):
            with p.phase("iteration"):
                with p.phase("step"):
                    mod.step(k)
    finally:
        p.close()
    assert sum(mod.traced) == 20
    # the recorder's schedule (C) is the documented one (Schedule, above)
    assert [i for i, t in enumerate(mod.traced) if t] == [
        0, 1, 2, 3, 5, 7, 9, 11, 15, 19, 23, 27, 35, 43, 51, 59, 75, 91, 107, 123
    ]  # fmt: skip
    (doc,) = _sidecars(run_dir)
    (ph,) = doc["phases"]
    assert ph["path"] == "iteration/step" and ph["requested"] == "step"
    assert ph["entries"] == 500 and ph["traced_entries"] == 20
    assert ph["traced_wall_ns"] > 0 and ph["untraced_wall_ns"] > 0
    assert _line_hits(doc, "total += i") == 20 * ITERS
    tree = p.merged_tree()
    assert tree[("iteration", "step")].calls == 500
    assert tree[("iteration",)].calls == 500


def test_a_process_whose_phases_do_not_match_makes_no_tracer_and_no_sidecar(tmp_path, monkeypatch):
    root = make_project(tmp_path)
    monkeypatch.chdir(root)
    run_dir = tmp_path / "run"
    p = _profiler(run_dir, lines=["train_step", "a/b/c"])
    active = []
    try:
        for _ in range(10):
            with p.phase("iteration"), p.phase("b"), p.phase("other"):
                active.append(_core.line_tracer_active())
    finally:
        p.close()
    assert active == [None] * 10
    assert p._lines is not None and not p._lines.has_data()
    assert not list((run_dir / "workers").glob("*/*.lines"))
    assert list((run_dir / "workers").glob("*/*.json")) or list((run_dir / "workers").glob("*/*"))


def test_a_path_with_a_slash_matches_that_path_only(tmp_path, monkeypatch):
    root = make_project(tmp_path)
    monkeypatch.chdir(root)
    mod = load_module(root / "w.py", "def f():\n    x = 1\n    return x\n")
    run_dir = tmp_path / "run"
    p = _profiler(run_dir, lines="train/step", lines_entries=None)
    try:
        for _ in range(3):
            with p.phase("train"), p.phase("step"):
                mod.f()
            with p.phase("eval"), p.phase("step"):
                mod.f()
    finally:
        p.close()
    (doc,) = _sidecars(run_dir)
    assert [ph["path"] for ph in doc["phases"]] == ["train/step"]
    assert doc["phases"][0]["traced_entries"] == 3
    assert _line_hits(doc, "x = 1") == 3


# ------------------------------------------------------------------------------------------------
# what is traced: the thread (task) that opened the entry only


def test_another_threads_project_code_is_not_counted(tmp_path, monkeypatch):
    root = make_project(tmp_path)
    monkeypatch.chdir(root)
    mod = load_module(
        root / "t.py",
        """
        import time

        def mine(n):
            total = 0
            for i in range(n):
                total += i
            return total

        def theirs(stop):
            spins = 0
            while not stop.is_set():
                spins += 1
            return spins
        """,
    )
    stop = threading.Event()
    other = threading.Thread(target=mod.theirs, args=(stop,))
    run_dir = tmp_path / "run"
    p = _profiler(run_dir, lines="step", lines_entries=None)
    other.start()
    try:
        for _ in range(5):
            with p.phase("step"):
                mod.mine(ITERS)
                time.sleep(0.005)  # the other thread runs meanwhile
    finally:
        stop.set()
        other.join()
        p.close()
    (doc,) = _sidecars(run_dir)
    assert _line_hits(doc, "total += i") == 5 * ITERS
    assert _line_hits(doc, "spins += 1") == 0


def test_in_asyncio_only_the_task_that_opened_the_entry_is_traced(tmp_path, monkeypatch):
    import asyncio

    root = make_project(tmp_path)
    monkeypatch.chdir(root)
    mod = load_module(
        root / "a.py",
        """
        import asyncio

        async def mine(p, n):
            async with p.phase("step"):
                total = 0
                for i in range(n):
                    total += i
                await asyncio.sleep(0.01)
                for i in range(n):
                    total -= i
            return total

        async def theirs():
            count = 0
            for _ in range(20):
                count += 1
                await asyncio.sleep(0.001)
            return count
        """,
    )
    run_dir = tmp_path / "run"
    p = _profiler(run_dir, lines="step", lines_entries=None)

    async def main():
        await asyncio.gather(mod.mine(p, ITERS), mod.theirs())

    try:
        asyncio.run(main())
    finally:
        p.close()
    (doc,) = _sidecars(run_dir)
    assert _line_hits(doc, "total += i") == ITERS
    assert _line_hits(doc, "total -= i") == ITERS
    assert _line_hits(doc, "count += 1") == 0


# ------------------------------------------------------------------------------------------------
# times: the LineProfiler's truth


def test_a_sleep_inside_the_phase_prints_within_5_percent_of_the_sleep(tmp_path, monkeypatch):
    root = make_project(tmp_path)
    monkeypatch.chdir(root)
    mod = load_module(
        root / "s.py",
        """
        import time
        slept = []

        def step():
            t0 = time.perf_counter_ns()
            time.sleep(0.02)
            slept.append(time.perf_counter_ns() - t0)
        """,
    )
    run_dir = tmp_path / "run"
    p = _profiler(run_dir, lines="step", lines_entries=None)
    try:
        for _ in range(5):
            with p.phase("step"):
                mod.step()
    finally:
        p.close()
    (doc,) = _sidecars(run_dir)
    (f,) = [f for ph in doc["phases"] for f in ph["functions"] if f["function"] == "step"]
    (line,) = [ln for ln in f["lines"] if ln["source"].strip() == "time.sleep(0.02)"]
    assert line["hits"] == 5
    truth = sum(mod.slept)
    assert abs(line["time_ns"] - truth) <= 0.05 * truth, (line["time_ns"], truth)


def test_a_tight_loops_time_is_never_below_its_untraced_time(tmp_path, monkeypatch):
    root = make_project(tmp_path)
    monkeypatch.chdir(root)
    mod = load_module(
        root / "loop.py",
        """
        def loop(n):
            total = 0
            for i in range(n):
                total += i
            return total
        """,
    )
    n = 5000
    best_plain = None
    for _ in range(5):
        t0 = time.perf_counter_ns()
        mod.loop(n)
        plain = time.perf_counter_ns() - t0
        best_plain = plain if best_plain is None else min(best_plain, plain)
    run_dir = tmp_path / "run"
    p = _profiler(run_dir, lines="step", lines_entries=None)
    try:
        for _ in range(4):
            with p.phase("step"):
                mod.loop(n)
    finally:
        p.close()
    (doc,) = _sidecars(run_dir)
    assert doc["overhead_ns_per_event"] is not None
    (f,) = [f for ph in doc["phases"] for f in ph["functions"] if f["function"] == "loop"]
    per_call = sum(ln["time_ns"] for ln in f["lines"]) / 4
    # as tests/line/test_truth.py: never below the truth (the same 0.9 floor on a loaded host)
    assert per_call >= 0.9 * best_plain, (per_call, best_plain)


# ------------------------------------------------------------------------------------------------
# processes: env only, 4 spawn workers; SIGTERM


WORKERS = """
import multiprocessing as mp
import sys
from lineprofiler import accounting

ENTRIES, ITERS = 7, {iters}


def train_step(k):
    total = 0
    for i in range(ITERS):
        total += i * k
    return total


def worker(idx):
    for e in range(ENTRIES):
        with accounting.phase("iteration"):
            with accounting.phase("train_step"):
                train_step(e)
            outside_the_phase = e + 1


if __name__ == "__main__":
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=worker, args=(i,)) for i in range(4)]
    for pr in procs:
        pr.start()
    for pr in procs:
        pr.join()
    sys.exit(max(pr.exitcode for pr in procs))
"""


def test_four_spawn_workers_env_only_give_exact_hits(tmp_path):
    from tests.helpers import run_python

    root = make_project(tmp_path)
    run_dir = tmp_path / "run"
    env = {
        "LINEPROFILER_PROFILE": "1",
        "LINEPROFILER_RUN_DIR": str(run_dir),
        "LINEPROFILER_LINES": "train_step",
        "LINEPROFILER_LINES_ENTRIES": "all",
    }
    run_python(WORKERS.format(iters=ITERS), cwd=root, env=env, timeout=180)
    docs = _sidecars(run_dir)
    assert len(docs) == 4
    assert len({d["pid"] for d in docs}) == 4
    assert sum(_line_hits(d, "total += i * k") for d in docs) == 4 * 7 * ITERS
    assert sum(_line_hits(d, "outside_the_phase = e + 1") for d in docs) == 0
    for d in docs:
        (ph,) = d["phases"]
        assert ph["path"] == "iteration/train_step"
        assert ph["entries"] == ph["traced_entries"] == 7
        assert d["project_folder"] == str(root.resolve())


SIGTERMED = """
import sys, time
from pathlib import Path
from lineprofiler.accounting import Profiler

def work():
    total = 0
    for i in range(200):
        total += i
    time.sleep(0.002)
    return total

p = Profiler(run_dir=sys.argv[1], enabled=True, snapshot_interval_s=0.1, sample_interval_s=None,
             lines="step", lines_entries=None)
Path(sys.argv[2]).write_text("ready")
while True:
    with p.phase("step"):
        work()
"""


def test_sigterm_mid_run_keeps_the_last_snapshots_lines(tmp_path):
    from tests.helpers import child_env

    root = make_project(tmp_path)
    run_dir = tmp_path / "run"
    ready = tmp_path / "ready"
    script = root / "child.py"
    script.write_text(textwrap.dedent(SIGTERMED))
    proc = subprocess.Popen(
        [sys.executable, str(script), str(run_dir), str(ready)], cwd=root, env=child_env(None)
    )
    try:
        deadline = time.monotonic() + 60
        seen = 0
        while time.monotonic() < deadline and not seen:
            docs = _sidecars(run_dir) if (run_dir / "workers").exists() else []
            seen = sum(_line_hits(d, "total += i") for d in docs)
            time.sleep(0.05)
        assert seen > 0, "no snapshot wrote the sidecar"
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert rc == -signal.SIGTERM
    (doc,) = _sidecars(run_dir)
    final = _line_hits(doc, "total += i")
    assert final >= seen
    (ph,) = doc["phases"]
    # the entry the signal interrupted is in the lines (closed by close()), not yet counted
    assert 200 * ph["traced_entries"] <= final <= 200 * (ph["traced_entries"] + 1)


# ------------------------------------------------------------------------------------------------
# options and the bound


def test_bad_arguments_raise_and_a_bad_environment_warns(tmp_path, monkeypatch):
    with pytest.raises(TypeError):
        _profiler(tmp_path / "r", lines=5)
    with pytest.raises(ValueError):
        _profiler(tmp_path / "r", lines="a//b")
    with pytest.raises(ValueError):
        _profiler(tmp_path / "r", lines="a", lines_entries=0)
    monkeypatch.setenv("LINEPROFILER_LINES", "step")
    monkeypatch.setenv("LINEPROFILER_LINES_ENTRIES", "lots")
    with pytest.warns(RuntimeWarning, match="LINEPROFILER_LINES_ENTRIES"):
        p = Profiler(run_dir=tmp_path / "r", enabled=False)
    assert p.lines == ("step",) and p.lines_entries == 20
    monkeypatch.setenv("LINEPROFILER_LINES_ENTRIES", "all")
    assert Profiler(run_dir=tmp_path / "r", enabled=False).lines_entries is None


def test_lines_are_exported_to_children_and_restored_at_close(tmp_path, monkeypatch):
    monkeypatch.delenv("LINEPROFILER_LINES", raising=False)
    monkeypatch.delenv("LINEPROFILER_LINES_ENTRIES", raising=False)
    p = _profiler(tmp_path / "run", lines=["a", "b/c"], lines_entries=5)
    try:
        assert os.environ["LINEPROFILER_LINES"] == "a,b/c"
        assert os.environ["LINEPROFILER_LINES_ENTRIES"] == "5"
    finally:
        p.close()
    assert "LINEPROFILER_LINES" not in os.environ
    assert "LINEPROFILER_LINES_ENTRIES" not in os.environ


def test_an_oversized_document_drops_the_least_time_functions_first():
    def fn(i, t):
        return {"file": f"/p/f{i}.py", "function": f"f{i}", "total_time_ns": t, "pad": "x" * 1000}

    doc = {"phases": [{"path": "a", "functions": [fn(i, i * 10) for i in range(50)]}]}
    text = bounded_json(doc, limit=20_000)
    assert len(text.encode()) <= 20_000
    out = json.loads(text)
    (ph,) = out["phases"]
    kept = [f["total_time_ns"] for f in ph["functions"]]
    assert ph["dropped_functions"] == 50 - len(kept) > 0
    assert min(kept) > max(t * 10 for t in range(50) if t * 10 not in kept)


def test_on_snapshot_callbacks_still_run_beside_the_periodic_sidecar(tmp_path, monkeypatch):
    root = make_project(tmp_path)
    monkeypatch.chdir(root)
    mod = load_module(root / "o.py", "def f():\n    y = 2\n    return y\n")
    run_dir = tmp_path / "run"
    p = Profiler(
        run_dir=run_dir,
        enabled=True,
        snapshot_interval_s=0.05,
        sample_interval_s=None,
        lines="step",
        lines_entries=None,
    )
    calls = []
    p.on_snapshot(lambda tree: calls.append(len(tree)))
    try:
        with p.phase("step"):
            mod.f()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not (
            calls and list((run_dir / "workers").glob("*/*.lines"))
        ):
            time.sleep(0.02)
        assert calls, "on_snapshot never ran"
        (doc,) = _sidecars(run_dir)  # written by the snapshot thread, before close()
        assert _line_hits(doc, "y = 2") == 1
    finally:
        p.close()


RECORDED = """
from lineprofiler import accounting

def step(k):
    acc = 0
    for i in range(50):
        acc += i
    return acc

for k in range(6):
    with accounting.phase("iteration"):
        with accounting.phase("step"):
            step(k)
"""


def test_record_lines_sets_the_environment_every_process_reads(tmp_path):
    from tests.helpers import child_env

    root = make_project(tmp_path)
    (root / "train.py").write_text(textwrap.dedent(RECORDED))
    run_dir = tmp_path / "run"
    base = [sys.executable, "-m", "lineprofiler", "record", "--run-dir", str(run_dir)]
    cmd = [*base, "--lines", "step", "--lines-entries", "all", "--", sys.executable, "train.py"]
    env = child_env(None)
    for key in ("LINEPROFILER_LINES", "LINEPROFILER_LINES_ENTRIES", "LINEPROFILER_PROFILE"):
        env.pop(key, None)
    proc = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    (doc,) = _sidecars(run_dir)
    assert _line_hits(doc, "acc += i") == 6 * 50
    assert doc["phases"][0]["path"] == "iteration/step"
    bad = subprocess.run(
        [*base, "--lines", "step", "--lines-entries", "0", "--", sys.executable, "train.py"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 2 and "lines-entries" in bad.stderr


def test_composes_with_sample_every_entry_traced_and_counted(tmp_path, monkeypatch):
    root = make_project(tmp_path)
    monkeypatch.chdir(root)
    mod = load_module(
        root / "c.py", "def f(n):\n    s = 0\n    for i in range(n):\n        s += i\n"
    )
    run_dir = tmp_path / "run"
    p = _profiler(run_dir, lines="step", lines_entries=None)
    try:
        for _ in range(30):
            with p.phase("step", sample=0.1):  # 1 entry in 10 timed; every one traced
                mod.f(40)
    finally:
        p.close()
    (doc,) = _sidecars(run_dir)
    (ph,) = doc["phases"]
    assert ph["traced_entries"] == 30 and ph["entries"] == 30
    assert _line_hits(doc, "s += i") == 30 * 40
    assert p.merged_tree()[("step",)].calls == 30


def test_a_link_planted_at_the_sidecar_is_replaced_never_followed(tmp_path, monkeypatch):
    from lineprofiler.runfile.layout import lines_path

    root = make_project(tmp_path)
    monkeypatch.chdir(root)
    mod = load_module(root / "k.py", "def f():\n    z = 3\n    return z\n")
    victim = tmp_path / "victim.txt"
    victim.write_text("untouched")
    p = _profiler(tmp_path / "run", lines="step", lines_entries=None)
    try:
        with p.phase("step"):
            mod.f()
        assert p.worker_path is not None
        target = lines_path(p.worker_path)
        target.symlink_to(victim)
    finally:
        p.close()
    assert victim.read_text() == "untouched"
    assert target.is_file() and not target.is_symlink()
    assert _line_hits(json.loads(target.read_text()), "z = 3") == 1


def test_a_requested_phase_inside_a_traced_one_is_counted_in_the_outer(tmp_path, monkeypatch):
    root = make_project(tmp_path)
    monkeypatch.chdir(root)
    mod = load_module(root / "n.py", "def g():\n    w = 4\n    return w\n")
    run_dir = tmp_path / "run"
    p = _profiler(run_dir, lines=["outer", "inner"], lines_entries=None)
    try:
        for _ in range(3):
            with p.phase("outer"), p.phase("inner"):
                mod.g()
    finally:
        p.close()
    (doc,) = _sidecars(run_dir)
    by_path = {ph["path"]: ph for ph in doc["phases"]}
    assert by_path["outer"]["traced_entries"] == 3
    assert by_path["outer/inner"]["traced_entries"] == 0
    assert by_path["outer/inner"]["skipped_entries"] == 3  # one tracer at a time: the outer's
    assert _line_hits({"phases": [by_path["outer"]]}, "w = 4") == 3
