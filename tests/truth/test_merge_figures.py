"""The merge's and the view's figures against arithmetic on what the test wrote.

Sums over processes (open entries, async entries, saturated counters, sample rates), each
process's time per phase, the order of workers, attempts sharing an id, the errors that say
what a directory is, the live/stale boundaries, and the view's shares, counter rates, dominant
phases, ITERATIONS choice and quantile rows: every expected number is computed here from the
durations, counts and times the test chose.
"""

from __future__ import annotations

import re

import pytest

from lineprofiler.accounting import merge_run
from lineprofiler.report import merge
from lineprofiler.report.merge import RunError
from lineprofiler.report.model import MergedPhase, Role
from lineprofiler.report.view import _counters, role_view, run_view, sample_note
from lineprofiler.runfile.stats import PhaseStats
from tests.report.synth import MS, RUN_ID, T0, Ph, worker_doc, write_worker
from tests.truth import buckets as ref

S = 1_000_000_000


# -- sums over processes --


def _edit_phase(doc, path, **fields):
    for th in doc["threads"]:
        for ph in th["phases"]:
            if tuple(ph["path"]) == path:
                ph.update(fields)
    return doc


def test_open_async_and_saturated_fields_are_summed_over_processes(tmp_path):
    run = tmp_path / "run"
    for pid, (open_n, open_ns, a_calls, a_wall, sat) in {
        1: (1, 2 * S, 2, 3 * S, ["bytes"]),
        2: (2, 5 * S, 1, 4 * S, []),
    }.items():
        doc = worker_doc(
            role="actor", pid=pid, threads=[Ph(("step",), [S, S], counters={"bytes": 10})]
        )
        _edit_phase(
            doc,
            ("step",),
            open=open_n,
            open_ns=open_ns,
            async_calls=a_calls,
            async_wall_ns=a_wall,
        )
        if sat:
            _edit_phase(doc, ("step",), counters_saturated=sat)
        write_worker(run, doc)
    m = merge_run(run)
    s = m.roles["actor"].tree[("step",)]
    assert (s.open, s.open_ns) == (3, 7 * S)
    assert (s.async_calls, s.async_wall_ns) == (3, 7 * S)
    assert s.wall_ns == 4 * S and s.time_ns == 11 * S
    assert s.processes == 2
    # each process's time in the phase includes its open entries: 2 + 2 s and 2 + 5 s
    role = m.roles["actor"]
    times = sorted(role.worker_time_ns(i, ("step",)) for i in range(2))
    assert times == [4 * S, 7 * S]
    assert role.worker_time_ns(2, ("step",)) == 0  # no such worker (one past the last)
    assert role.worker_time_ns(5, ("step",)) == 0
    assert role.worker_time_ns(0, ("never",)) == 0


def test_a_process_time_sums_its_threads(tmp_path):
    run = tmp_path / "run"
    two = [("MainThread", [Ph(("x",), [S])]), ("loader", [Ph(("x",), [2 * S])])]
    write_worker(run, worker_doc(role="a", pid=1, threads=two))
    write_worker(run, worker_doc(role="a", pid=2, threads=[Ph(("x",), [S])]))
    role = merge_run(run).roles["a"]
    assert sorted(role.worker_time_ns(i, ("x",)) for i in range(2)) == [S, 3 * S]


def test_a_duplicated_worker_file_is_counted_once(tmp_path):
    run = tmp_path / "run"
    doc = worker_doc(role="a", pid=1, threads=[Ph(("x",), [S])])
    kept = write_worker(run, doc)
    write_worker(run, doc, name=f"w_{RUN_ID}_1_copy0001.json")
    m = merge_run(run)
    assert m.processes == 1 and m.tree[("x",)].calls == 1
    assert len(m.duplicates) == 1 and kept.name in " ".join(m.duplicates[0])


def test_an_unreadable_file_belongs_to_the_attempt_its_mtime_falls_in(tmp_path):
    import os

    run = tmp_path / "run"
    old, new = "20261202T1400-aaaaaa", "20261202T1500-bbbbbb"
    write_worker(run, worker_doc(role="a", pid=1, run_id=old, threads=[Ph(("x",), [S])]))
    late = dict(start_time=T0 + 3600, written_at=T0 + 3700, threads=[Ph(("x",), [S])])
    write_worker(run, worker_doc(role="a", pid=2, run_id=new, **late))
    bad = write_worker(run, "{", name=f"w_{old}_3_00000003.json")  # named for the old one
    os.utime(bad, (T0 + 3650, T0 + 3650))  # but written during the new one
    m = merge_run(run)
    counts = {a.run_id: a.workers for a in m.attempts}
    assert counts == {old: 1, new: 2}
    assert [u.path for u in m.unreadable] == [bad.relative_to(run).as_posix()]


def test_counters_saturated_in_one_process_stay_marked(tmp_path):
    run = tmp_path / "run"
    doc = worker_doc(role="a", pid=1, threads=[Ph(("x",), [S], counters={"n": 5})])
    write_worker(run, _edit_phase(doc, ("x",), counters_saturated=["n"]))
    write_worker(run, worker_doc(role="a", pid=2, threads=[Ph(("x",), [S], counters={"n": 7})]))
    s = merge_run(run).roles["a"].tree[("x",)]
    assert s.counters == {"n": 12} and s.saturated == {"n"}


def test_the_largest_sample_rate_wins_in_any_order(tmp_path):
    run = tmp_path / "run"
    for pid, every in ((1, 100), (2, 10), (3, None)):
        ph = Ph(("s",), [MS], sample_every=every)
        write_worker(run, worker_doc(role="a", pid=pid, threads=[ph]))
    s = merge_run(run).roles["a"].tree[("s",)]
    assert s.sample_every == 100 and s.estimated


def test_merged_phase_add_counts_processes_and_rates():
    m = MergedPhase()
    m.add(PhaseStats(calls=1, wall_ns=5, sample_every=0))
    m.add(PhaseStats(calls=1, wall_ns=5, sample_every=4))
    assert m.processes == 2 and m.sample_rates == {1, 4} and m.estimated
    other = MergedPhase(calls=2, wall_ns=9, sample_rates={1, 50}, processes=3)
    m.add(other)
    assert m.processes == 5 and m.sample_rates == {1, 4, 50} and m.calls == 4
    plain = MergedPhase()
    plain.add(PhaseStats(calls=1, wall_ns=5, sample_every=1))
    assert plain.sample_rates == {1} and not plain.estimated and plain.processes == 1


def test_the_run_tree_sums_a_path_over_roles(tmp_path):
    run = tmp_path / "run"
    write_worker(run, worker_doc(role="a", pid=1, threads=[Ph(("x",), [S, S])]))
    write_worker(run, worker_doc(role="b", pid=2, threads=[Ph(("x",), [3 * S])]))
    m = merge_run(run)
    assert m.tree[("x",)].calls == 3 and m.tree[("x",)].wall_ns == 5 * S
    assert m.tree[("x",)].processes == 2


# -- workers, attempts, errors --


def test_workers_are_ordered_by_role_host_rank_then_pid(tmp_path):
    run = tmp_path / "run"
    for pid, rank, host in ((5, 1, "n1"), (6, 0, "n1"), (7, None, "n1"), (3, None, "n0")):
        doc = worker_doc(role="a", pid=pid, rank=rank, host=host, threads=[Ph(("x",), [S])])
        write_worker(run, doc)
    m = merge_run(run)
    assert [(w.host, w.pid) for w in m.workers] == [("n0", 3), ("n1", 7), ("n1", 6), ("n1", 5)]
    assert m.with_samples is True and merge_run(run, with_samples=False).with_samples is False


def test_attempt_all_sums_every_attempt_and_an_unknown_one_lists_them(tmp_path):
    run = tmp_path / "run"
    old, new = "20261202T1400-aaaaaa", "20261202T1500-bbbbbb"
    write_worker(run, worker_doc(role="a", pid=1, run_id=old, threads=[Ph(("x",), [S])]))
    late = worker_doc(
        role="a",
        pid=2,
        run_id=new,
        start_time=T0 + 3600,
        written_at=T0 + 3700,
        threads=[Ph(("x",), [S, S])],
    )
    write_worker(run, late)
    m = merge_run(run, attempt="all")
    assert m.run_id == "all" and m.tree[("x",)].calls == 3 and m.processes == 2
    assert [a.reported for a in m.attempts] == [True, True] and m.superseded == []
    (old_a,) = [a for a in merge_run(run).attempts if a.run_id == old]
    assert old_a.end_time == T0 + 600.0 and old_a.roles == {"a": 1} and not old_a.reported
    with pytest.raises(RunError) as exc:
        merge_run(run, attempt="nope")
    assert str(exc.value).endswith(f"no attempt 'nope' (attempts: {old}, {new})")


def test_an_id_reused_by_a_later_attempt_is_not_summed_into_it(tmp_path):
    run = tmp_path / "run"
    # one id, two lifetimes an hour apart: two attempts; the newest alone is merged
    first = worker_doc(role="a", pid=1, uuid="0000aaaa", threads=[Ph(("x",), [S])])
    write_worker(run, first)
    second = worker_doc(
        role="a",
        pid=2,
        uuid="0000bbbb",
        start_time=T0 + 3600,
        written_at=T0 + 3700,
        threads=[Ph(("x",), [S, S, S])],
    )
    write_worker(run, second)
    m = merge_run(run)
    assert m.processes == 1 and [w.pid for w in m.workers] == [2]
    assert m.tree[("x",)].calls == 3 and m.roles["a"].tree[("x",)].processes == 1
    assert m.roles["a"].worker_time_ns(0, ("x",)) == 3 * S


@pytest.mark.parametrize("n", [5, 6, 7])
def test_no_readable_file_names_five_then_counts_the_rest(tmp_path, n):
    run = tmp_path / "run"
    for k in range(n):
        write_worker(run, "{not json", name=f"w_{RUN_ID}_{k}_0000000{k}.json")
    with pytest.raises(RunError) as exc:
        merge_run(run)
    msg = str(exc.value)
    assert f"no readable worker file ({n} unreadable: " in msg
    one = r"workers/node01/w_[^;:]+\.json: [^;]+"
    assert re.fullmatch(rf".*\({n} unreadable: {one}(; {one}){{4}}.*\)", msg), msg
    # the reason of such a file, from a run where another file is readable
    ok = tmp_path / "ok"
    write_worker(ok, worker_doc(role="a", pid=1, threads=[Ph(("x",), [S])]))
    write_worker(ok, "{not json", name=f"w_{RUN_ID}_0_00000000.json")
    reason = merge_run(ok).unreadable[0].reason
    if n > 5:
        assert msg.endswith(f"{reason} (and {n - 5} more))"), msg
    else:
        assert msg.endswith(f"{reason})") and "more)" not in msg, msg


def test_unreadable_files_are_listed_by_path(tmp_path):
    run = tmp_path / "run"
    write_worker(run, worker_doc(role="a", pid=1, threads=[Ph(("x",), [S])]))
    for k in (9, 3, 6):
        write_worker(run, "{", name=f"w_{RUN_ID}_{k}_0000000{k}.json")
    m = merge_run(run)
    paths = [u.path for u in m.unreadable]
    assert paths == sorted(paths) and len(paths) == 3
    assert all(a.workers == 4 for a in m.attempts)  # the unreadable ones count in the attempt


def _layout(tmp_path, what):
    d = tmp_path / "d"
    if what == "missing":
        return d, f"{d}: no such directory (was profiling enabled?"
    if what == "file":
        f = tmp_path / "w_notes.json"  # named like a worker file, but not under workers/
        f.write_text("x")
        return f, f"{f}: not a directory"
    if what == "worker_file":
        f = write_worker(d, worker_doc(role="a", pid=1, threads=[Ph(("x",), [S])]))
        return f, f"{f}: a worker file; pass its run directory, {d}"
    if what == "empty":
        d.mkdir()
        return d, f"{d}: the directory is empty: no profiled process wrote to it"
    if what == "workers_without_files":
        (d / "workers" / "node01").mkdir(parents=True)
        return d, f"{d}: a run directory with no worker files under workers/"
    if what == "the_workers_dir":
        (d / "workers" / "node01").mkdir(parents=True)
        (d / "workers" / "x.txt").write_text("")
        return (
            d / "workers",
            f"{d / 'workers'}: not a lineprofiler run (pass the run directory, {d})",
        )
    if what == "a_host_dir":
        (d / "workers" / "node01").mkdir(parents=True)
        (d / "workers" / "node01" / "x.txt").write_text("")
        host = d / "workers" / "node01"
        return host, f"{host}: not a lineprofiler run (pass the run directory, {d})"
    if what.startswith("runs_inside"):
        n = int(what.rsplit("_", 1)[1])
        (d / "zz_not_a_run").mkdir(parents=True)  # a folder without worker files: not counted
        for k in range(n):
            write_worker(d / f"r{k:02d}", worker_doc(role="a", pid=1, threads=[Ph(("x",), [S])]))
        shown = ", ".join(str(d / f"r{k:02d}") for k in range(min(n, 10)))
        more = f" and {n - 10} more" if n > 10 else ""
        return d, f"{d}: not a run directory itself, but it holds {n}: {shown}{more}"
    if what == "other":
        d.mkdir()
        (d / "notes.txt").write_text("")
        return d, f"{d}: not a lineprofiler run (no workers/<host>/w_*.json inside)"
    raise AssertionError(what)


@pytest.mark.parametrize(
    "what",
    [
        "missing",
        "file",
        "worker_file",
        "empty",
        "workers_without_files",
        "the_workers_dir",
        "a_host_dir",
        "runs_inside_2",
        "runs_inside_10",
        "runs_inside_11",
        "other",
    ],
)
def test_each_kind_of_wrong_directory_is_named(tmp_path, what):
    d, expected = _layout(tmp_path, what)
    with pytest.raises(RunError) as exc:
        merge_run(d)
    if what in ("missing", "empty"):  # then what to do about it
        assert str(exc.value).startswith(expected), str(exc.value)
    else:
        assert str(exc.value) == expected


# -- stale and live boundaries (times the test chose) --


def _run_of(tmp_path, *docs):
    run = tmp_path / "run"
    for doc in docs:
        write_worker(run, doc)
    return merge_run(run)


def test_a_worker_exactly_at_the_stale_bound_is_not_stale(tmp_path):
    ph = [Ph(("x",), [S])]
    kw = {"role": "a", "threads": ph, "final": False, "snapshot_interval_s": 10.0}  # bound: 60 s
    m = _run_of(
        tmp_path,
        worker_doc(pid=1, written_at=T0 + 600.0, **kw),
        worker_doc(pid=2, written_at=T0 + 540.0, **kw),  # 60 s behind
        worker_doc(pid=3, written_at=T0 + 539.0, **kw),  # 61 s behind
    )
    stale = {w.pid: w.stale_s for w in m.workers}
    assert stale == {1: None, 2: None, 3: 61.0}


def test_live_and_next_write_at_chosen_read_times(tmp_path):
    silent = worker_doc(
        role="a",
        pid=1,
        host="elsewhere",
        written_at=T0 + 600.0,
        final=False,
        threads=[],
        snapshot_interval_s=10.0,  # stale bound: 60 s
    )
    m = _run_of(tmp_path, silent)
    assert m.live_s is None  # read today, years after T0
    w = m.workers[0]
    newest = T0 + 600.0
    # interval 10 s: due at newest + 10
    merge._mark_stale(m, now=newest + 9.5)
    assert m.live_s == pytest.approx(9.5) and w.next_write_s == pytest.approx(0.5)
    w.next_write_s = None
    merge._mark_stale(m, now=newest + 10.5)  # 0.5 s late: due now
    assert w.next_write_s == 0.0
    w.next_write_s = None
    merge._mark_stale(m, now=newest + 11.0)  # a second late: no longer announced
    assert w.next_write_s is None
    merge._mark_stale(m, now=newest + 60.0)  # exactly the stale bound: still live
    assert m.live_s == pytest.approx(60.0)
    m.live_s = None
    merge._mark_stale(m, now=newest + 61.0)
    assert m.live_s is None
    merge._mark_stale(m, now=newest - 5.0)  # a clock behind the newest write: 0, not negative
    assert m.live_s == 0.0


# -- the view --


def _role(tmp_path, docs, name="a"):
    run = tmp_path / "run"
    for doc in docs:
        write_worker(run, doc)
    return merge_run(run).roles[name]


def test_shares_rates_and_dominant_phases(tmp_path):
    # top level: load 1 s (all self), step 3 s with child fwd 2 s (step's self 1 s); a root
    # counter; a phase with a counter but no self time
    threads = [
        Ph((), [], counters={"epochs": 4}),
        Ph(("load",), [S]),
        Ph(("step",), [S, 2 * S], counters={"items": 6}),
        Ph(("step", "fwd"), [2 * S]),
    ]
    doc = worker_doc(role="a", pid=1, start_time=T0, written_at=T0 + 8.0, threads=threads)
    role = _role(tmp_path, [doc])
    rv = role_view(role, top=10)
    assert rv.phases[("load",)].share == pytest.approx(1 / 4)
    assert rv.phases[("step",)].share == pytest.approx(3 / 4)
    assert rv.phases[("step", "fwd")].share == pytest.approx(2 / 4)
    assert rv.phases[()].share is None
    assert rv.lifetime_ns == 8 * S
    (items,) = rv.phases[("step",)].counters
    assert items.rate_per_s == pytest.approx(6 / 3) and items.time_per_each_ns == 3 * S / 6
    (epochs,) = rv.phases[()].counters  # a root counter's rate is per lifetime
    assert epochs.rate_per_s == pytest.approx(4 / 8)
    assert [r.path for r in rv.dominant] == [("step", "fwd"), ("load",), ("step",), ()]
    # top 1 by self time, then the phases carrying counters, then the root
    assert [r.path for r in role_view(role, top=1).dominant] == [("step", "fwd"), ("step",), ()]
    everything = role_view(role, top=0).dominant
    assert [r.path for r in everything] == [("step", "fwd"), ("load",), ("step",), ()]
    assert [r.path for r in rv.top_level] == [("step",), ("load",)]
    assert run_view(merge_run(tmp_path / "run"), top=3).top == 3


def test_counter_rows_at_the_edges():
    s = MergedPhase(counters={"n": 3, "z": 0}, saturated={"n"})
    n, z = _counters(s, 1)
    assert n.rate_per_s == pytest.approx(3e9) and n.time_per_each_ns == pytest.approx(1 / 3)
    assert n.saturated and not z.saturated
    assert z.rate_per_s == 0.0 and z.time_per_each_ns is None
    (n0, _) = _counters(s, 0)
    assert n0.rate_per_s is None and n0.time_per_each_ns is None


def test_zero_time_and_zero_self_phases(tmp_path):
    threads = [Ph(("a",), [0]), Ph(("b",), [1]), Ph(("a", "c"), [0])]
    rv = role_view(_role(tmp_path, [worker_doc(role="a", pid=1, threads=threads)]))
    assert rv.phases[("a",)].share == 0.0 and rv.phases[("b",)].share == 1.0
    # only b has self time (1 ns); zero-self phases are not dominant
    assert [r.path for r in rv.dominant] == [("b",)]


def test_no_time_at_all_gives_no_share(tmp_path):
    rv = role_view(_role(tmp_path, [worker_doc(role="a", pid=1, threads=[Ph(("a",), [0])])]))
    assert rv.phases[("a",)].share is None


def test_thread_nodes_are_not_dominant_and_have_no_quantiles(tmp_path):
    doc = worker_doc(role="a", pid=1, thread_names=True, threads=[("loader", [Ph(("x",), [S])])])
    rv = role_view(_role(tmp_path, [doc]))
    nodes = [r for r in rv.phases.values() if r.stats.thread_node]
    assert nodes and all(r.q(0.5) is None for r in nodes)
    assert all(not r.stats.thread_node for r in rv.dominant)


@pytest.mark.parametrize(
    "phases, expected",
    [
        ([Ph(("iteration",), [S])], ("iteration",)),  # named: even once
        ([Ph(("loop",), [S, S]), Ph(("setup",), [S])], ("loop",)),
        ([Ph(("loop",), [S])], None),  # entered once: no loop
        ([Ph(("iteration",), [], open=1, open_ns=S), Ph(("b",), [S, S])], ("b",)),  # never done
        ([Ph(("a",), [S, S]), Ph(("b",), [S, S, S])], ("b",)),
        ([Ph(("a", "iteration"), [S]), Ph(("b",), [S, S, S])], ("a", "iteration")),
        (
            [Ph(("x", "iteration"), [S, S]), Ph(("iteration",), [S, S])],
            ("iteration",),  # tie on calls: the shorter path
        ),
    ],
)
def test_the_iterations_block_picks_the_loop(tmp_path, phases, expected):
    rv = role_view(_role(tmp_path, [worker_doc(role="a", pid=1, threads=phases)]))
    assert (rv.iterations.path if rv.iterations else None) == expected


def test_two_processes_have_stragglers_and_one_has_none(tmp_path):
    two = [
        worker_doc(role="a", pid=1, threads=[Ph(("x",), [S])]),
        worker_doc(role="a", pid=2, threads=[Ph(("x",), [3 * S])]),
    ]
    rv = role_view(_role(tmp_path, two))
    (st,) = rv.stragglers
    assert st.slowest.time_ns == 3 * S and st.median_ns == 2 * S and st.ratio == 1.5
    one = role_view(_role(tmp_path / "b", two[:1]))
    assert one.stragglers == []


def test_quantile_rows(tmp_path):
    durations = [2 * MS]
    rv = role_view(_role(tmp_path, [worker_doc(role="a", pid=1, threads=[Ph(("x",), durations)])]))
    assert rv.phases[("x",)].q(0.5) == pytest.approx(ref.bucket_value(ref.bucket_of(2 * MS)))
    assert rv.phases[("x",)].mean_ns == 2 * MS
    empty = MergedPhase(calls=3, wall_ns=3)  # calls but no histogram: no quantile, not NaN
    role = Role("a", tree={("e",): empty})
    assert role_view(role).phases[("e",)].q(0.5) is None


def test_sample_note_names_each_rate():
    assert sample_note(MergedPhase(sample_rates={2})) == "1 entry in 2"
    assert sample_note(MergedPhase(sample_rates={1, 100, 2000})) == (
        "1 entry in 100, 1 entry in 2,000 (merged with fully measured entries)"
    )
