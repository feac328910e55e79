"""The recorder through the Python API: nesting, arithmetic, ground-truth wait%, files."""

from __future__ import annotations

import json
import math
import os
import threading
import time
import warnings

import pytest

from lineprofiler import _core, accounting
from lineprofiler.accounting import Profiler
from tests.helpers import quiet_profiler, read_worker, worker_files


def make(tmp_path, **kw) -> Profiler:
    return quiet_profiler(tmp_path / "run", **kw)


def spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def test_nesting_and_self_time_arithmetic(tmp_path):
    with make(tmp_path) as p:
        for _ in range(4):
            with p.phase("iteration"):
                with p.phase("a"):
                    spin(0.002)
                with p.phase("b"):
                    with p.phase("c"):
                        spin(0.001)
        tree = p.merged_tree()
    it, a, b, c = (
        tree[k]
        for k in [("iteration",), ("iteration", "a"), ("iteration", "b"), ("iteration", "b", "c")]
    )
    assert [x.calls for x in (it, a, b, c)] == [4, 4, 4, 4]
    assert a.wall_ns >= 4 * 2_000_000
    assert it.self_ns == it.wall_ns - a.wall_ns - b.wall_ns
    assert b.self_ns == b.wall_ns - c.wall_ns
    assert c.self_ns == c.wall_ns
    assert it.wall_ns >= a.wall_ns + b.wall_ns
    assert it.hist.count == 4


@pytest.mark.timing
def test_sleep_is_wait_and_spin_is_not(tmp_path):
    # Ground truth: a sleeping thread is off the CPU; a spinning one is on it except when the
    # (shared, 2-core) machine preempts it, which time.thread_time_ns() measures independently.
    # Both are measured inside the phase (around spin()) and around the with statement: a
    # preemption between the two counts as waiting in the outer figures only.
    spin_wall = spin_cpu = inner_wall = inner_cpu = 0
    with make(tmp_path) as p:
        for _ in range(5):
            with p.phase("sleep"):
                time.sleep(0.02)
            w0, c0 = time.perf_counter_ns(), time.thread_time_ns()
            with p.phase("spin"):
                w1, c1 = time.perf_counter_ns(), time.thread_time_ns()
                spin(0.02)
                inner_cpu += time.thread_time_ns() - c1
                inner_wall += time.perf_counter_ns() - w1
            spin_cpu += time.thread_time_ns() - c0
            spin_wall += time.perf_counter_ns() - w0
        tree = p.merged_tree()
    assert tree[("sleep",)].wait_fraction > 0.95
    assert tree[("sleep",)].wall_ns >= 5 * 20_000_000
    # the phase's wait lies between the fewest CPU over the most wall and the reverse, widened by
    # 0.05 for the CPU clock tier's error (2% of the CPU time plus the host's steal)
    lo, hi = 1 - spin_cpu / inner_wall, 1 - inner_cpu / spin_wall
    got = tree[("spin",)].wait_fraction
    assert lo - 0.05 < got < hi + 0.05, (got, lo, hi)
    if hi < 0.05:  # an unloaded machine: the spin really was on the CPU throughout
        assert got < 0.06


def test_known_durations_give_quantiles_within_the_bucket_error(tmp_path):
    # Ground truth: each entry's duration measured independently just inside (a lower bound of
    # the phase's wall) and just outside the with statement (an upper bound).
    durations = [0.001] * 50 + [0.010] * 45 + [0.030] * 5
    inner, outer = [], []
    with make(tmp_path, measure_cpu=False) as p:
        for d in durations:
            t0 = time.perf_counter_ns()
            with p.phase("op"):
                t1 = time.perf_counter_ns()
                spin(d)
                t2 = time.perf_counter_ns()
            t3 = time.perf_counter_ns()
            inner.append(t2 - t1)
            outer.append(t3 - t0)
        h = p.merged_tree()[("op",)].hist
    inner.sort()
    outer.sort()
    err = accounting.HIST_MAX_REL_ERROR
    for q in (0.5, 0.95, 0.99):
        rank = math.ceil(q * len(durations))
        est = h.quantile(q)
        assert inner[rank - 1] * (1 - err) <= est <= outer[rank - 1] * (1 + err), (q, est)


def test_counters_land_on_the_innermost_phase_or_the_root(tmp_path):
    with make(tmp_path) as p:
        p.count("at_root", 3)
        with p.phase("outer"):
            p.count("items")
            with p.phase("inner"):
                p.count("items", 10)
                p.count("big", 2**63 - 1)
                p.count("big", 1)  # the sum saturates rather than wrapping
            p.count("items", n=2)
        tree = p.merged_tree()
    assert tree[()].counters == {"at_root": 3}
    assert tree[("outer",)].counters == {"items": 3}
    assert tree[("outer", "inner")].counters["items"] == 10
    assert tree[("outer", "inner")].counters["big"] == 2**63 - 1


@pytest.mark.parametrize("enabled", [True, False])
def test_count_with_a_float_raises_type_error(tmp_path, enabled):
    with make(tmp_path, enabled=enabled) as p:
        with pytest.raises(TypeError, match="integer"):
            p.count("x", 1.5)
        with pytest.raises(TypeError):
            accounting.count("x", 2.0)


class _FloatLike:
    """What a NumPy float scalar is to count(): __float__, and an __index__ that refuses."""

    def __float__(self) -> float:
        return 2.5

    def __index__(self) -> int:
        raise TypeError("'_FloatLike' object cannot be interpreted as an integer")

    def __repr__(self) -> str:
        return "_FloatLike(2.5)"


@pytest.mark.parametrize("enabled", [True, False])
def test_count_with_a_float_tensor_names_the_counter_and_says_counts_are_integers(
    tmp_path, enabled
):
    torch = pytest.importorskip("torch")
    big = torch.full((1000,), 0.5)
    cases = [
        (torch.tensor(2.5), "torch.Tensor"),
        (torch.tensor(3.0, dtype=torch.float64), "torch.Tensor"),  # integral, still a float
        (torch.tensor([1.0, 2.0]), "torch.Tensor"),
        (big, "torch.Tensor"),
        (1.5, "float"),
        (_FloatLike(), "_FloatLike"),
    ]
    with make(tmp_path, enabled=enabled) as p:
        for n, type_name in cases:
            for count, kw in ((p.count, False), (accounting.count, True)):
                with pytest.raises(TypeError) as got:
                    count("tokens", n=n) if kw else count("tokens", n)
                message = str(got.value)
                assert message.startswith("count('tokens', n=")
                assert "counts are integers" in message and type_name in message
                assert len(message) < 300  # a big tensor's repr is cut short
        p.count("tokens", torch.tensor(7))  # an integer tensor is a count
        p.count("tokens", n=torch.tensor(5, dtype=torch.int32))
        tree = p.merged_tree()
    if enabled:
        assert tree[()].counters == {"tokens": 12}
    else:
        assert tree == {}


def test_disabled_profiler_records_and_writes_nothing(tmp_path):
    p = Profiler(run_dir=tmp_path / "run", enabled=False)
    with p.phase("x"):
        p.count("n", 1)
    p.close()
    assert not (tmp_path / "run").exists()
    assert p.merged_tree() == {}
    assert isinstance(p.phase("x"), _core.NullScope)


def test_enabled_defaults_to_the_environment(tmp_path, monkeypatch):
    monkeypatch.delenv("LINEPROFILER_PROFILE", raising=False)
    assert not Profiler(run_dir=tmp_path).enabled
    monkeypatch.setenv("LINEPROFILER_PROFILE", "1")
    monkeypatch.setenv("LINEPROFILER_ROLE", "actor")
    p = Profiler(run_dir=tmp_path, snapshot_interval_s=None, sample_interval_s=None)
    try:
        assert p.enabled and p.role == "actor"
    finally:
        p.close()


def test_worker_file_layout_and_header(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with Profiler(
        run_dir="rel",
        role="learner",
        enabled=True,
        snapshot_interval_s=None,
        sample_interval_s=None,
    ) as p:
        assert p.run_dir == tmp_path / "rel"  # absolute, against the constructing cwd
        with p.phase("x"):
            pass
    [path] = worker_files(tmp_path / "rel")
    assert path.parent.parent.name == "workers"
    assert (
        path.name.startswith(f"w_{p.run_id}_{os.getpid()}_") and len(path.stem.split("_")[-1]) == 8
    )
    doc = read_worker(path)
    assert doc["schema_version"] == _core.WORKER_SCHEMA_VERSION
    meta = doc["meta"]
    assert meta["role"] == "learner" and meta["pid"] == os.getpid() and meta["run_id"] == p.run_id
    assert meta["host"] == path.parent.name
    assert doc["final"] is True and doc["written_at"] <= time.time()
    assert not list((tmp_path / "rel").rglob("*.tmp"))


def test_worker_file_exists_from_the_start_and_is_valid_after_every_flush(tmp_path):
    p = make(tmp_path, snapshot_interval_s=0.01)
    try:
        [path] = worker_files(tmp_path / "run")  # written at construction
        seqs = set()
        stop = threading.Event()
        errors = []

        def reader():
            while not stop.is_set():
                try:
                    seqs.add(json.loads(path.read_text())["snapshot_seq"])
                except Exception as exc:  # a reader must never see a partial file
                    errors.append(exc)

        t = threading.Thread(target=reader)
        t.start()
        deadline = time.monotonic() + 0.5
        while time.monotonic() < deadline:
            with p.phase("work"):
                p.count("n")
        stop.set()
        t.join()
        assert not errors
        assert len(seqs) >= 3
    finally:
        p.close()
    assert read_worker(path)["final"] is True


def test_close_is_idempotent_and_makes_later_phases_no_ops(tmp_path):
    p = make(tmp_path)
    with p.phase("x"):
        pass
    p.close()
    p.close()
    with pytest.warns(RuntimeWarning, match="after close"):  # once (tests/unit/test_after_close)
        with p.phase("after"):
            p.count("n")
    assert ("after",) not in p.merged_tree()
    [path] = worker_files(tmp_path / "run")
    assert read_worker(path)["snapshot_seq"] == 2  # start + close, nothing more


@pytest.mark.parametrize("kind", ["under_a_file", "proc"])
def test_unwritable_run_dir_warns_once_and_never_raises(tmp_path, kind):
    if kind == "under_a_file":
        (tmp_path / "file").write_text("x")
        run_dir = tmp_path / "file" / "run"
    else:
        run_dir = "/proc/self/lineprofiler-run"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        p = Profiler(
            run_dir=run_dir, enabled=True, snapshot_interval_s=None, sample_interval_s=None
        )
        with p.phase("x"):
            p.count("n")
        p.close()
    ours = [w for w in caught if "lineprofiler" in str(w.message)]
    assert len(ours) == 1 and issubclass(ours[0].category, RuntimeWarning)
    assert p.flush_stats()["errors"] >= 2
    assert p.merged_tree()[("x",)].calls == 1


def test_two_scopes_held_before_entering_either(tmp_path):
    with make(tmp_path) as p:
        a, b = p.phase("a"), p.phase("b")
        with a:
            with b:
                pass
        with b:
            pass
        tree = p.merged_tree()
    assert tree[("a",)].calls == 1 and tree[("a", "b")].calls == 1 and tree[("b",)].calls == 1


def test_an_exception_inside_a_phase_propagates_and_the_phase_closes(tmp_path):
    with make(tmp_path) as p:
        with pytest.raises(ZeroDivisionError):
            with p.phase("boom"):
                raise ZeroDivisionError
        assert p.current() == ""
        assert p.merged_tree()[("boom",)].calls == 1


def test_threads_get_their_own_trees(tmp_path):
    with make(tmp_path) as p:

        def work():
            for _ in range(10):
                with p.phase("t"):
                    p.count("n")

        threads = [threading.Thread(target=work, name=f"w{i}") for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        tree = p.merged_tree()
    assert tree[("t",)].calls == 40 and tree[("t",)].counters == {"n": 40}
    [path] = worker_files(tmp_path / "run")
    names = {t["name"] for t in read_worker(path)["threads"]}
    assert {"w0", "w1", "w2", "w3"} <= names


def test_open_phases_are_visible_in_a_snapshot(tmp_path):
    with make(tmp_path) as p:
        with p.phase("long"):
            with p.phase("done"):
                pass
            time.sleep(0.01)
            tree = p.merged_tree()
    long = tree[("long",)]
    assert long.calls == 0 and long.open == 1 and long.open_ns >= 10_000_000
    assert tree[("long", "done")].calls == 1


def test_phase_names_of_any_text_round_trip(tmp_path):
    names = ['quote"s', "back\\slash", "new\nline", "tab\t", "café", "日本", "😀", "\x00nul"]
    with make(tmp_path) as p:
        for n in names:
            with p.phase(n):
                pass
    [path] = worker_files(tmp_path / "run")
    got = {tuple(r["path"]) for t in read_worker(path)["threads"] for r in t["phases"]}
    assert got == {(n,) for n in names}


def test_install_serves_module_level_functions(tmp_path):
    assert accounting.installed_profiler() is None
    with accounting.phase("nothing installed"):
        accounting.count("n")
    assert accounting.current() == ""
    p = make(tmp_path, install=True)
    try:
        assert accounting.installed_profiler() is p
        with accounting.phase("deep"):
            assert accounting.current() == "deep"
            accounting.count("sims", 64)
        assert p.merged_tree()[("deep",)].counters == {"sims": 64}
    finally:
        p.close()
    assert accounting.installed_profiler() is None


def test_second_install_warns_and_does_not_take_over(tmp_path):
    first = make(tmp_path, install=True)
    try:
        with pytest.warns(RuntimeWarning, match="already installed"):
            second = make(tmp_path, install=True)
        assert accounting.installed_profiler() is first
        second.close()
        assert accounting.installed_profiler() is first
    finally:
        first.close()


def test_pickling_a_profiler_says_how_a_child_joins(tmp_path):
    import pickle

    p = quiet_profiler(tmp_path)
    try:
        with pytest.raises(TypeError, match=r"build Profiler\(role=\.\.\.\) in the child"):
            pickle.dumps(p)
    finally:
        p.close()
