"""merge_run against ground truth: synthetic runs whose numbers the test chose, and real runs."""

from __future__ import annotations

import pytest

from lineprofiler.accounting import RunError, merge_run
from lineprofiler.runfile.stats import HIST_MAX_REL_ERROR
from tests.helpers import run_python
from tests.report.synth import (
    MS,
    RUN_ID,
    T0,
    Ph,
    golden_run,
    worker_doc,
    write_worker,
)


def test_golden_run_sums_over_processes(tmp_path):
    run = merge_run(golden_run(tmp_path / "run"))
    assert list(run.roles) == ["actor", "learner"]
    assert run.roles["actor"].processes == 4 and run.roles["learner"].processes == 1
    assert run.processes == 5
    assert run.hosts == ["node07", "node08"]
    assert run.run_id == RUN_ID
    assert run.unreadable == [] and run.superseded == []
    mcts = run.tree[("iteration", "self_play", "mcts")]
    # 4 actors x (95 + 5) entries; actor 3 takes 10 ms, the others 9 ms (x2 for the slow 5)
    assert mcts.calls == 400
    assert mcts.wall_ns == 3 * (95 * 9 * MS + 5 * 18 * MS) + (95 * 10 * MS + 5 * 20 * MS)
    assert mcts.counters == {"mcts_simulations": 4 * 6_400}
    assert mcts.processes == 4
    per_worker = [95 * m + 5 * 2 * m for m in (9 * MS, 9 * MS, 9 * MS, 10 * MS)]
    assert mcts.cpu_ns == sum(int(w * 0.8) for w in per_worker)  # each actor on CPU 80%
    assert mcts.wait_fraction == pytest.approx(0.2)
    p50 = mcts.hist.quantile(0.5)
    assert abs(p50 - 9 * MS) <= 9 * MS * HIST_MAX_REL_ERROR
    p99 = mcts.hist.quantile(0.99)
    assert abs(p99 - 20 * MS) <= 20 * MS * HIST_MAX_REL_ERROR
    assert run.runtime_ns == 2_000_000_000
    assert all(w.written_at == T0 + 2.0 for w in run.workers)


def test_thread_names_nest_each_thread_under_its_name(tmp_path):
    run = merge_run(golden_run(tmp_path / "run"))
    learner = run.roles["learner"].tree
    assert learner[("learner", "train_step")].calls == 32
    assert learner[("collector", "drain_queue")].calls == 301
    node = learner[("collector",)]
    assert node.thread_node and node.calls == 0
    assert node.wall_ns == 300 * 2 * MS + 200 * MS
    assert ("train_step",) not in learner


def test_imbalance_is_max_over_mean_busy(tmp_path):
    run = merge_run(golden_run(tmp_path / "run"))
    busy = [w.busy_ns for w in run.roles["actor"].workers]
    # busy = the top-level "iteration" time of each actor
    fast = 95 * (9 * MS + 2_150_000) + 5 * (18 * MS + 2_150_000)
    slow = 95 * (10 * MS + 2_150_000) + 5 * (20 * MS + 2_150_000)
    assert sorted(busy) == [fast, fast, fast, slow]
    assert run.roles["actor"].imbalance == pytest.approx(slow / ((3 * fast + slow) / 4))
    assert run.roles["learner"].imbalance == pytest.approx(1.0)


def test_attempts_newest_is_merged_and_others_named(tmp_path):
    d = tmp_path / "run"
    old, new = "20261202T1400-aaaaaa", "20261202T1500-bbbbbb"
    for pid in (1, 2, 3):
        write_worker(d, worker_doc(role="actor", pid=pid, run_id=old, threads=[Ph(("a",), [MS])]))
    write_worker(
        d,
        worker_doc(
            role="actor",
            pid=9,
            run_id=new,
            start_time=T0 + 3600,
            written_at=T0 + 3700,
            threads=[Ph(("a",), [MS, MS])],
        ),
    )
    run = merge_run(d)
    assert run.run_id == new
    assert run.processes == 1
    assert run.tree[("a",)].calls == 2  # not 5: the old attempt is not summed in
    assert [(a.run_id, a.workers) for a in run.superseded] == [(old, 3)]
    assert any(c.kind == "superseded_attempt" and old in c.message for c in run.caveats)
    assert merge_run(d, attempt=old).tree[("a",)].calls == 3
    with pytest.raises(RunError, match="no attempt"):
        merge_run(d, attempt="nope")


def test_stale_failing_and_silent_workers_are_named(tmp_path):
    d = tmp_path / "run"
    ok = [Ph(("a",), [MS])]
    write_worker(d, worker_doc(role="a", pid=1, written_at=T0 + 4000, threads=ok, final=False))
    # stopped writing an hour before the newest file, never closed
    write_worker(d, worker_doc(role="a", pid=2, written_at=T0 + 400, threads=ok, final=False))
    # closed early: finished, not stale
    write_worker(d, worker_doc(role="a", pid=3, written_at=T0 + 400, threads=ok, final=True))
    write_worker(
        d,
        worker_doc(
            role="a",
            pid=4,
            written_at=T0 + 3990,
            threads=ok,
            final=False,
            flush_errors=7,
            last_flush_error="No space left on device",
        ),
    )
    write_worker(d, worker_doc(role="b", pid=5, written_at=T0 + 3, threads=[], final=False))
    run = merge_run(d)
    by_pid = {w.pid: w for w in run.workers}
    assert by_pid[2].stale_s == pytest.approx(3600.0)
    assert by_pid[1].stale_s is None and by_pid[3].stale_s is None
    assert by_pid[5].recorded_nothing and by_pid[5].stale_s == pytest.approx(3997.0)
    kinds = {c.kind: c for c in run.caveats}
    assert kinds["stale"].workers == [by_pid[2].path, by_pid[5].path]
    assert "1h 00m behind" in kinds["stale"].message
    assert kinds["flush_errors"].workers == [by_pid[4].path]
    assert "No space left on device" in kinds["flush_errors"].message
    assert kinds["recorded_nothing"].workers == [by_pid[5].path]
    assert "started, recorded nothing" in kinds["recorded_nothing"].message
    assert "b" in run.roles and run.roles["b"].processes == 1


def test_unreadable_worker_costs_that_worker_only(tmp_path):
    d = tmp_path / "run"
    write_worker(d, worker_doc(role="a", pid=1, threads=[Ph(("x",), [MS])]))
    good = write_worker(d, worker_doc(role="a", pid=2, threads=[Ph(("x",), [MS])]))
    text = good.read_text()
    write_worker(d, text[: len(text) // 2], name=f"w_{RUN_ID}_3_00000003.json")
    run = merge_run(d)
    assert run.tree[("x",)].calls == 2
    assert [u.path for u in run.unreadable] == [f"workers/node01/w_{RUN_ID}_3_00000003.json"]
    assert "truncated" in run.unreadable[0].reason
    assert run.caveats[0].kind == "unreadable"


def test_with_samples_false_is_the_same_tree(tmp_path):
    d = golden_run(tmp_path / "run")
    a, b = merge_run(d), merge_run(d, with_samples=False)
    assert not b.with_samples and b.samples is None
    assert {p: (s.calls, s.wall_ns, s.counters) for p, s in a.tree.items()} == {
        p: (s.calls, s.wall_ns, s.counters) for p, s in b.tree.items()
    }


def test_sampled_phase_marks_the_merge_estimated(tmp_path):
    d = tmp_path / "run"
    write_worker(d, worker_doc(role="a", pid=1, threads=[Ph(("s",), [MS], sample_every=100)]))
    write_worker(d, worker_doc(role="a", pid=2, threads=[Ph(("s",), [MS])]))
    write_worker(d, worker_doc(role="a", pid=3, threads=[Ph(("m",), [MS])]))
    run = merge_run(d)
    assert run.tree[("s",)].estimated and run.tree[("s",)].sample_rates == {1, 100}
    assert not run.tree[("m",)].estimated


@pytest.mark.parametrize("what", ["missing", "empty", "not_a_run", "all_bad"])
def test_run_errors(tmp_path, what):
    d = tmp_path / "run"
    if what != "missing":
        d.mkdir()
    if what == "not_a_run":
        (d / "notes.txt").write_text("hello")
    if what == "all_bad":
        write_worker(d, "{", name="w_x_1_00000001.json")
    with pytest.raises(RunError) as info:
        merge_run(d)
    assert str(d) in str(info.value)


def test_real_processes_are_merged(tmp_path):
    """Two real processes with the real recorder: the merge sees what they executed."""
    code = """
        import sys, time
        from lineprofiler.accounting import Profiler
        role, n = sys.argv[1], int(sys.argv[2])
        p = Profiler(run_dir="run", role=role, enabled=True,
                     snapshot_interval_s=None, sample_interval_s=None)
        for _ in range(n):
            with p.phase("iteration"), p.phase("work"):
                p.count("items", 3)
                time.sleep(0.001)
        p.close()
    """
    run_python(code, cwd=tmp_path, args=["actor", "5"])
    run_python(code, cwd=tmp_path, args=["learner", "7"])
    run = merge_run(tmp_path / "run", with_samples=False)
    # Each process made its own run id (no env inherited): two attempts, the newest merged.
    assert run.processes == 1 and len(run.superseded) == 1
    assert "learner" in run.roles
    work = run.tree[("iteration", "work")]
    assert work.calls == 7 and work.counters == {"items": 21}
    assert work.wall_ns >= 7 * 1_000_000
    assert run.unreadable == []
    latest = max(w.written_at for w in run.workers)
    assert all(latest - w.written_at < 300 for w in run.workers)


def test_no_samples_never_calls_the_sample_readers(tmp_path, monkeypatch):
    from lineprofiler.report import resources

    calls: list[tuple[str, str]] = []
    monkeypatch.setattr(
        resources,
        "read_worker_samples",
        lambda run, w, doc, path: calls.append((w.run_id, path.name)),
    )
    monkeypatch.setattr(resources, "finish_samples", lambda run: calls.append(("finish", "")))
    d = tmp_path / "run"
    old = worker_doc(role="a", pid=1, run_id="20261201T0000-000000", start_time=T0 - 9)
    old["written_at"] = T0 - 5  # ended before the newer attempt started
    write_worker(d, old)
    doc = worker_doc(role="a", pid=2, threads=[Ph(("x",), [MS])])
    doc["samples"] = {"file": None, "rows": 0}  # a worker whose sampler ran
    write_worker(d, doc)
    merge_run(d, with_samples=False)
    assert calls == []
    merge_run(d)
    # only the reported attempt's workers, then the finisher once
    assert calls == [(RUN_ID, f"w_{RUN_ID}_2_00000002.json"), ("finish", "")]


def test_open_entries_and_live_run_are_caveats(tmp_path):
    d = tmp_path / "run"
    phases = [Ph(("train",), [MS], open=1, open_ns=5 * MS), Ph(("train", "step"), [MS])]
    write_worker(d, worker_doc(role="a", pid=1, threads=phases, final=False))
    run = merge_run(d)
    assert run.tree[("train",)].time_ns == 6 * MS  # the open entry's time so far counts
    assert run.tree[("train",)].wall_ns == MS  # but not as a completed entry
    kinds = {c.kind: c for c in run.caveats}
    assert "live" in kinds and kinds["open_entries"].message.startswith(
        "1 phase entry in 1 worker(s) was still open"
    )


def test_folding_in_several_processes_gives_the_same_run(tmp_path):
    # Workers whose paths appear in different orders, so the partials number paths differently
    # and adding them remaps each worker's per-path times.
    d = tmp_path / "run"
    for k in range(9):
        names = [("a",), ("b",), ("a", "x"), ("c",)]
        mine = names[k % 4 :] + names[: k % 4]
        phases = [Ph(p, [(1 + k) * MS] * (1 + len(p)), counters={"n": k}) for p in mine]
        write_worker(d, worker_doc(role="r", pid=100 + k, rank=k, threads=phases))
    from lineprofiler.report.json import to_document

    one, three = merge_run(d, jobs=1), merge_run(d, jobs=3)
    assert to_document(one) == to_document(three)
    # the straggler view's per-process times are each worker's own: worker k entered ("a", "x")
    # three times, (1 + k) ms each
    role = three.roles["r"]
    got = {w.rank: role.worker_time_ns(i, ("a", "x")) for i, w in enumerate(role.workers)}
    assert got == {k: 3 * (1 + k) * MS for k in range(9)}
    assert role.worker_time_ns(0, ("never",)) == 0


def test_a_worker_tree_is_read_again_from_its_file(tmp_path):
    d = tmp_path / "run"
    write_worker(
        d, worker_doc(role="a", pid=1, threads=[Ph(("x",), [MS, MS]), Ph(("x", "y"), [MS])])
    )
    (w,) = merge_run(d).workers
    assert w.tree[("x",)].calls == 2 and w.tree[("x", "y")].calls == 1
    assert w.busy_ns == 2 * MS and w.paths == 2 and not w.recorded_nothing
