"""The report of runs recorded by the real profiler in real processes, against ground truth."""

from __future__ import annotations

import json
import statistics

import pytest

from lineprofiler.accounting import merge_run
from tests.helpers import run_python
from tests.timing import clock_slack_ns

CLI = "from lineprofiler.cli import main; raise SystemExit(main())"


def test_thread_names_split_a_spinning_and_a_blocked_thread(tmp_path):
    """Ground truth measured independently in the child (perf_counter and thread_time around
    each entry): the report's wait% per thread-nested phase matches it, the sleeping collector
    near 100%, the spinning learner far below (however loaded the machine is)."""
    code = """
        import json, threading, time
        from lineprofiler.accounting import Profiler
        p = Profiler(run_dir="run", role="learner", enabled=True, thread_names=True,
                     snapshot_interval_s=None, sample_interval_s=None)
        truth = {}
        def measured(name, fn):
            w0, c0 = time.perf_counter(), time.thread_time()
            with p.phase(name):
                fn()
            w, c = truth.get(name, (0.0, 0.0))
            truth[name] = (w + time.perf_counter() - w0, c + time.thread_time() - c0)
        def spin():
            end = time.perf_counter() + 0.01
            while time.perf_counter() < end:
                pass
        def collector():
            for _ in range(20):
                measured("drain_queue", lambda: time.sleep(0.005))
        t = threading.Thread(target=collector, name="collector")
        threading.current_thread().name = "learner"
        t.start()
        for _ in range(10):
            measured("train_step", spin)
        t.join()
        p.close()
        json.dump({k: 1 - c / w for k, (w, c) in truth.items()}, open("truth.json", "w"))
    """
    run_python(code, cwd=tmp_path)
    truth = json.loads((tmp_path / "truth.json").read_text())
    run = merge_run(tmp_path / "run")
    tree = run.roles["learner"].tree
    train, drain = tree[("learner", "train_step")], tree[("collector", "drain_queue")]
    assert train.calls == 10 and drain.calls == 20
    assert drain.wait_fraction > 0.9
    assert abs(drain.wait_fraction - truth["drain_queue"]) < 0.1
    assert abs(train.wait_fraction - truth["train_step"]) < 0.1
    assert tree[("collector",)].thread_node and tree[("collector",)].wall_ns == drain.wall_ns
    proc = run_python(CLI, cwd=tmp_path, args=["report", "run"])
    assert "learner/train_step" in proc.stdout and "collector/drain_queue" in proc.stdout


@pytest.mark.slow
@pytest.mark.timing
def test_straggler_rank_is_named(tmp_path):
    """Four ranks on one host; rank 2 sleeps three times as long: the report names it, and every
    process's time, the slowest and the ratio lie within what the ranks measured themselves."""
    code = """
        import json, sys, time
        from lineprofiler.accounting import Profiler
        rank = int(sys.argv[1])
        p = Profiler(run_dir="run", role="trainer", enabled=True,
                     snapshot_interval_s=None, sample_interval_s=None)
        inner = outer = 0
        for _ in range(5):
            t0 = time.perf_counter_ns()
            with p.phase("step"):
                t1 = time.perf_counter_ns()
                time.sleep(0.006 if rank == 2 else 0.002)
                inner += time.perf_counter_ns() - t1
            outer += time.perf_counter_ns() - t0
        p.close()
        print(json.dumps([inner, outer]))
    """
    env = {"LINEPROFILER_RUN_ID": "20261202T1600-abcdef"}
    truth = {}  # rank -> (inner, outer) by the rank's own clock
    for rank in range(4):
        proc = run_python(
            code,
            cwd=tmp_path,
            args=[str(rank)],
            env={**env, "RANK": str(rank), "LINEPROFILER_RUN_DIR": str(tmp_path / "run")},
        )
        inner, outer = json.loads(proc.stdout.strip().splitlines()[-1])
        truth[rank] = (inner - clock_slack_ns(inner), outer + clock_slack_ns(outer))
    # one after the other: four attempts by time, summed here by request
    run = merge_run(tmp_path / "run", attempt="all")
    assert run.superseded == [] and run.processes == 4
    assert sorted(w.rank for w in run.workers) == [0, 1, 2, 3]
    proc = run_python(CLI, cwd=tmp_path, args=["report", "run", "--json", "--attempt", "all"])
    doc = json.loads(proc.stdout)
    straggler = doc["roles"][0]["stragglers"][0]
    assert straggler["name"] == "step"
    times = {t["rank"]: t["time_ns"] for t in straggler["processes"]}
    for rank, (lo, hi) in truth.items():
        assert lo <= times[rank] <= hi, (rank, times[rank], lo, hi)
    # The slowest is a rank that could be: its own upper bound reaches every other's lower
    # bound; rank 2 whenever its sleeps alone outlast every other rank's whole steps (the
    # usual case: a busy machine can stretch a 2 ms sleep past 6 ms).
    slowest = straggler["slowest"]["rank"]
    assert all(truth[slowest][1] >= lo for lo, _ in truth.values()), (slowest, truth)
    if all(truth[2][0] > hi for rank, (_, hi) in truth.items() if rank != 2):
        assert slowest == 2, (slowest, truth)
    # ratio = slowest / median, each bracketed by the ranks' own clocks (the JSON rounds it to
    # six decimals)
    max_lo, max_hi = max(lo for lo, _ in truth.values()), max(hi for _, hi in truth.values())
    median_lo = statistics.median(lo for lo, _ in truth.values())
    median_hi = statistics.median(hi for _, hi in truth.values())
    ratio = straggler["ratio"]
    assert max_lo / median_hi - 5e-7 <= ratio <= max_hi / median_lo + 5e-7, (straggler, truth)
    text = run_python(CLI, cwd=tmp_path, args=["report", "run", "--attempt", "all"]).stdout
    assert f"rank {slowest} (" in text
