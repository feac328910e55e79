"""on_snapshot() callbacks (periodic flush only) and deltas() (per-interval trees)."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from lineprofiler.accounting import Profiler
from lineprofiler.runfile.stats import HIST_MAX_REL_ERROR
from tests.timing import clock_slack_ns


def _wait_for(pred, timeout_s: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while not pred():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def test_callbacks_fire_on_the_periodic_flush_from_the_snapshot_thread_only(tmp_path):
    p = Profiler(run_dir=tmp_path, enabled=True, snapshot_interval_s=0.03, sample_interval_s=None)
    seen: list[tuple[int, int]] = []  # (thread ident, calls of "work" in the cumulative tree)
    try:

        @p.on_snapshot
        def export(tree):
            seen.append((threading.get_ident(), tree[("work",)].calls if ("work",) in tree else 0))

        for _ in range(5):
            with p.phase("work"):
                time.sleep(0.001)
        assert _wait_for(lambda: len(seen) >= 2 and seen[-1][1] == 5)
    finally:
        p.close()
    n_at_close = len(seen)
    time.sleep(0.1)
    assert len(seen) == n_at_close  # close() neither calls it nor leaves a thread that does
    assert threading.get_ident() not in {ident for ident, _ in seen}


def test_no_periodic_flush_means_no_callback_even_at_close(tmp_path):
    p = Profiler(run_dir=tmp_path, enabled=True, snapshot_interval_s=None, sample_interval_s=None)
    calls = []
    p.on_snapshot(calls.append)
    with p.phase("x"):
        pass
    p.close()
    assert calls == []


def test_a_raising_callback_is_counted_and_skipped(tmp_path):
    p = Profiler(run_dir=tmp_path, enabled=True, snapshot_interval_s=0.02, sample_interval_s=None)
    good = []
    try:

        @p.on_snapshot
        def broken(_tree):
            raise ConnectionError("exporter lost its connection")

        p.on_snapshot(lambda tree: good.append(len(tree)))
        assert _wait_for(lambda: len(good) >= 3)
        assert p.flush_stats()["callback_errors"] >= 3
        assert p._rec.thread_running()
    finally:
        p.close()


def test_a_callback_can_close_over_deltas_and_the_profiler_closes_cleanly(tmp_path):
    p = Profiler(run_dir=tmp_path, enabled=True, snapshot_interval_s=0.02, sample_interval_s=None)
    exported: list[dict] = []
    try:

        @p.on_snapshot
        def export(_tree):
            exported.append({"/".join(k): v.calls for k, v in p.deltas().items()})

        for _ in range(20):
            with p.phase("step"):
                time.sleep(0.005)
        assert _wait_for(lambda: len(exported) >= 2)
    finally:
        p.close()
    # every completed entry is exported exactly once across intervals (the tail after the
    # last periodic flush is the one that is lost, by design)
    total = sum(d.get("step", 0) for d in exported)
    assert 0 < total <= 20


def test_deltas_have_their_own_cursor_and_leave_out_idle_phases(profiler):
    p = profiler
    for _ in range(3):
        with p.phase("a"):
            pass
    first = p.deltas()
    assert set(first) == {("a",)} and first[("a",)].calls == 3
    with p.phase("b"):
        p.count("items", 7)
    p.count("root_items", 2)
    second = p.deltas()
    assert set(second) == {("b",), ()}  # "a" did nothing: absent, not zero
    assert second[("b",)].counters == {"items": 7}
    assert p.deltas() == {}
    p.count("items_only", 1)
    assert set(p.deltas()) == {()}


@pytest.mark.parametrize("measure_cpu", [True, False])
@pytest.mark.timing
def test_delta_histograms_are_the_intervals_own(tmp_path, measure_cpu):
    p = Profiler(
        run_dir=tmp_path,
        enabled=True,
        snapshot_interval_s=None,
        sample_interval_s=None,
        measure_cpu=measure_cpu,
    )
    try:
        for _ in range(50):
            with p.phase("step"):
                pass
        fast = p.deltas()[("step",)]
        slow_true = []
        for _ in range(9):
            t0 = time.perf_counter_ns()
            with p.phase("step"):
                time.sleep(0.02)
            slow_true.append(time.perf_counter_ns() - t0)
        slow = p.deltas()[("step",)]
    finally:
        p.close()
    assert fast.calls == 50 and slow.calls == 9
    assert slow.hist.count == 9
    # the interval's p50 is a slow entry's, not dragged down by the 50 fast ones before it
    true_p50 = sorted(slow_true)[4]
    assert slow.hist.quantile(0.5) <= true_p50 * (1 + HIST_MAX_REL_ERROR)
    assert slow.hist.quantile(0.5) >= 0.02e9 * (1 - HIST_MAX_REL_ERROR)
    assert slow.wall_ns <= sum(slow_true) + clock_slack_ns(sum(slow_true))
    assert (slow.cpu_ns is None) == (not measure_cpu)


def test_the_example_exporter_publishes_per_interval_metrics(tmp_path):
    from tests.helpers import run_python

    example = Path(__file__).resolve().parents[2] / "examples" / "export_tensorboard.py"
    run_dir = tmp_path / "profile"
    proc = run_python(
        f"import runpy, sys\n"
        f"sys.argv = ['export_tensorboard.py', '--run-dir', {str(run_dir)!r}, '--steps', '60',"
        f" '--interval', '0.05', '--logger', 'jsonl']\n"
        f"runpy.run_path({str(example)!r}, run_name='__main__')\n",
        cwd=tmp_path,
    )
    assert "exported" in proc.stdout
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    by_tag: dict[str, list[dict]] = {}
    for r in rows:
        by_tag.setdefault(r["tag"], []).append(r)
    steps = by_tag["profile/iteration/train_step/calls"]
    assert len(steps) >= 2  # more than one interval, each its own number
    assert 0 < sum(r["value"] for r in steps) <= 60
    # counters are per interval too: 32 samples per train_step entry of that interval (a
    # snapshot taken between count() and the entry's exit sees the count one entry early)
    samples = {r["step"]: r["value"] for r in by_tag["profile/iteration/train_step/samples"]}
    calls = {r["step"]: r["value"] for r in steps}
    assert all(abs(samples.get(s, 0) - 32 * calls[s]) <= 32 for s in calls)
    assert abs(sum(samples.values()) - 32 * sum(calls.values())) <= 32
    # the sleeping phase waits, the spinning one much less (wall, not self; a loaded machine
    # preempts the spinner, so only the comparison is robust)
    waits = [r["value"] for r in by_tag["profile/iteration/load_batch/wait"]]
    spins = [r["value"] for r in by_tag["profile/iteration/train_step/wait"]]
    assert min(waits) > 0.5
    assert sum(spins) / len(spins) < sum(waits) / len(waits)


def test_a_callback_may_close_the_profiler(tmp_path):
    p = Profiler(run_dir=tmp_path, enabled=True, snapshot_interval_s=0.02, sample_interval_s=None)
    calls = []

    @p.on_snapshot
    def stop_after_two(_tree):
        calls.append(1)
        if len(calls) == 2:
            p.close()

    assert _wait_for(lambda: p.closed)
    time.sleep(0.1)
    assert len(calls) == 2
    p.close()


@pytest.mark.slow
def test_exiting_with_callbacks_registered_and_running_is_clean(tmp_path):
    from tests.helpers import run_python

    proc = run_python(
        f"""
        import time
        from lineprofiler.accounting import Profiler
        p = Profiler(run_dir={str(tmp_path / "profile")!r}, enabled=True,
                     snapshot_interval_s=0.01, sample_interval_s=None)
        started = []

        @p.on_snapshot
        def slow(_tree):
            started.append(1)
            time.sleep(0.2)  # still inside the callback when the main thread finishes
            p.deltas()

        while not started:
            time.sleep(0.001)
        print("leaving without close()")
        """,
        cwd=tmp_path,
        timeout=60,
    )
    assert "leaving" in proc.stdout
    assert proc.stderr == "" or "Traceback" not in proc.stderr
    (worker,) = (tmp_path / "profile").glob("workers/*/w_*.json")
    assert json.loads(worker.read_text())["final"] is True  # atexit closed it after the thread


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="needs fork")
def test_a_forked_child_starts_its_deltas_from_its_own_empty_tree(tmp_path):
    from tests.helpers import run_python

    proc = run_python(
        f"""
        import os
        from lineprofiler.accounting import Profiler
        p = Profiler(run_dir={str(tmp_path / "profile")!r}, enabled=True,
                     snapshot_interval_s=None, sample_interval_s=None)
        for _ in range(50):
            with p.phase("a"):
                pass
        p.deltas()
        pid = os.fork()
        if pid == 0:
            p._rec.reset_after_fork(str(p.worker_path) + ".child", "{{}}")
            for _ in range(3):
                with p.phase("a"):
                    pass
            d = p.deltas()
            print("child", d[("a",)].calls if ("a",) in d else None, flush=True)
            os._exit(0)
        os.waitpid(pid, 0)
        p.close()
        """,
        cwd=tmp_path,
    )
    assert "child 3" in proc.stdout
