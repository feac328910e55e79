"""The hand-written hot path: reused scope objects, count()'s small-int fast path, and the
per-subclass method descriptors of phase()/count(). Run on 3.11 and 3.12 (different CPython
internals: int layout, specialised calls)."""

from __future__ import annotations

import gc
import json

import pytest

from lineprofiler import _core
from lineprofiler.accounting import Profiler
from tests.helpers import quiet_profiler, read_worker, worker_files


def make(tmp_path, **kw) -> Profiler:
    return quiet_profiler(tmp_path / "run", **kw)


def test_many_scopes_held_at_once_are_distinct_and_each_records(tmp_path):
    # More scopes than the recorder keeps spare, all held before any is entered, entered nested
    # in the reverse order of creation.
    with make(tmp_path) as p:
        scopes = [p.phase(f"s{i}") for i in range(10)]
        assert len({id(s) for s in scopes}) == 10

        def enter(i):
            if i < 0:
                return
            with scopes[i]:
                enter(i - 1)

        enter(9)
        tree = p.merged_tree()
    path: tuple[str, ...] = ()
    for i in reversed(range(10)):
        path += (f"s{i}",)
        assert tree[path].calls == 1, path


def test_a_scope_is_reused_only_once_nothing_references_it(tmp_path):
    with make(tmp_path) as p:
        first = p.phase("a")
        held = id(first)
        assert id(p.phase("b")) != held  # first is still referenced
        del first
        for _ in range(1000):
            with p.phase("loop"):
                with p.phase("inner"):
                    pass
        tree = p.merged_tree()
    assert tree[("loop",)].calls == 1000
    assert tree[("loop", "inner")].calls == 1000
    assert ("a",) not in tree and ("b",) not in tree  # made, never entered


def _the_worker_file(tmp_path):
    (path,) = worker_files(tmp_path / "run")
    return path


def test_a_scope_outliving_its_profiler_does_nothing(tmp_path):
    p = make(tmp_path)
    kept = p.phase("kept")
    with p.phase("before"):
        pass
    p.close()
    del p
    gc.collect()
    path = _the_worker_file(tmp_path)
    written = path.read_bytes()
    with kept:  # its recorder is gone: entering and exiting are no-ops, not a crash
        pass
    assert path.read_bytes() == written  # nothing recorded, nothing rewritten
    (thread,) = read_worker(path)["threads"]
    assert [r["path"] for r in thread["phases"]] == [["before"]]
    assert _core.get_installed() is None


def test_a_profiler_dropped_inside_its_own_phase(tmp_path):
    p = make(tmp_path)
    with p.phase("outer"):
        p.close()
        del p
        gc.collect()
        written = _the_worker_file(tmp_path).read_bytes()
    # The exit of "outer" found its recorder gone: a no-op, and the final file stands, with the
    # entry open at close (its time so far counted, no completed call).
    assert _the_worker_file(tmp_path).read_bytes() == written
    (rec,) = read_worker(_the_worker_file(tmp_path))["threads"][0]["phases"]
    assert rec["path"] == ["outer"] and rec["calls"] == 0 and rec["open"] == 1


@pytest.mark.parametrize(
    "n",
    [0, 1, -1, 7, 2**30 - 1, 2**30, -(2**30) + 1, -(2**30), 2**31, 2**62, -(2**62), 2**63 - 1],
)
def test_count_adds_ints_of_every_size_exactly(tmp_path, n):
    with make(tmp_path) as p:
        p.count("c", n)
        p.count("c", n)
        tree = p.merged_tree()
    expected = max(min(2 * n, 2**63 - 1), -(2**63))
    assert tree[()].counters.get("c", 0) == expected


def test_count_takes_bools_and_index_objects(tmp_path):
    class Index:
        def __index__(self) -> int:
            return 5

    class MyInt(int):
        pass

    with make(tmp_path) as p:
        p.count("c", True)
        p.count("c", Index())
        p.count("c", MyInt(3))
        p.count("c", n=2)
        tree = p.merged_tree()
    assert tree[()].counters["c"] == 1 + 5 + 3 + 2


def test_profiler_phase_and_count_are_its_own_c_method_descriptors():
    # CPython's specialised call of a C method needs the instance's type to be exactly the
    # descriptor's class; PhaseFront re-declares phase/count on each subclass for that.
    for name in ("phase", "count"):
        d = Profiler.__dict__[name]
        assert type(d) is type(_core.PhaseFront.__dict__[name])
        assert d.__objclass__ is Profiler

    class Sub(Profiler):
        pass

    assert Sub.__dict__["phase"].__objclass__ is Sub


def test_the_accounting_module_has_no_module_getattr():
    # CPython specialises `accounting.phase`/`accounting.count` (an attribute of a module) only on
    # a module without a __getattr__ (PEP 562); with one, every module-level call paid ~20 ns.
    import lineprofiler.accounting as accounting

    assert "__getattr__" not in vars(accounting)
    assert accounting.phase is _core.installed_phase
    assert accounting.count is _core.installed_count


def test_accounting_merge_run_and_run_error_are_the_merges_own(tmp_path):
    # The reading side behind the lazy accounting.merge_run: the same result and the same error.
    from lineprofiler import accounting
    from lineprofiler.report import merge

    assert accounting.RunError is merge.RunError
    with pytest.raises(accounting.RunError, match="no such directory"):
        accounting.merge_run(tmp_path / "missing")
    with make(tmp_path) as p, p.phase("x"):
        p.count("n", 3)
    run = accounting.merge_run(tmp_path / "run", with_samples=False, jobs=1)
    assert isinstance(run, merge.MergedRun)
    assert run.tree[("x",)].counters["n"] == 3


def test_a_subclass_override_of_phase_is_kept(tmp_path):
    calls = []

    class Traced(Profiler):
        def phase(self, name, **kw):
            calls.append(name)
            return super().phase(name, **kw)

    class Deeper(Traced):
        pass

    assert "phase" not in Deeper.__dict__  # inherits Traced's override, not a C descriptor
    assert "count" in Deeper.__dict__
    p = Deeper(
        run_dir=tmp_path / "run", enabled=True, snapshot_interval_s=None, sample_interval_s=None
    )
    with p:
        with p.phase("x"):
            p.count("n")
        tree = p.merged_tree()
    assert calls == ["x"]
    assert tree[("x",)].calls == 1 and tree[("x",)].counters == {"n": 1}


def test_a_front_method_called_on_a_foreign_object_raises():
    class Sub(Profiler):
        pass

    with pytest.raises(TypeError):
        Sub.__dict__["phase"](object(), "x")


def test_a_full_counter_table_refuses_new_counters_and_counts_the_refusals(tmp_path):
    # With the thread's 65,536 counters used up, a new name is refused (counted in the thread's
    # counters_refused), never added into another counter; existing counters keep counting.
    with make(tmp_path) as p:
        with p.phase("A"):
            p.count("Z", 1)
        for i in range(65536 - 2):
            p.count(f"fill{i}")
        with p.phase("B"):
            p.count("Z", 1)  # the table's last counter
        with p.phase("A"):
            p.count("overflow")  # table full: refused
            p.count("Z", 100)
        tree = p.merged_tree()
        doc = json.loads(p._rec.snapshot_json())
    assert tree[("A",)].counters == {"Z": 101}
    assert tree[("B",)].counters == {"Z": 1}
    assert [t.get("counters_refused") for t in doc["threads"]] == [1]


# Python code that runs inside phase()/count()/__enter__/__exit__ (a name's __str__, n's __index__,
# the sync resolver) may drop the last reference to the recorder in use. Only the ASan build of the
# module (scripts/module-asan-tests) turns a use after free into a failure: elsewhere these could
# pass whatever the module did, so they are marked asan_only and deselected outside that script.


@pytest.mark.asan_only
def test_a_name_whose_str_unbinds_the_front(tmp_path):
    front = _core.PhaseFront()
    front._bind(_core.Recorder(str(tmp_path / "w.json")))

    class Name:
        def __str__(self) -> str:
            front._bind(None)  # the front held the only reference to the recorder
            return "n"

    front.count(Name())
    front._bind(_core.Recorder(str(tmp_path / "w2.json")))
    with front.phase(Name()):
        pass


@pytest.mark.asan_only
def test_an_index_that_unbinds_the_front(tmp_path):
    front = _core.PhaseFront()
    front._bind(_core.Recorder(str(tmp_path / "w.json")))

    class N:
        def __index__(self) -> int:
            front._bind(None)
            return 3

    front.count("n", N())


@pytest.mark.asan_only
def test_a_sync_resolver_that_drops_the_recorder(tmp_path):
    from lineprofiler.accounting import torch_support

    holder = {"r": _core.Recorder(str(tmp_path / "w.json"))}

    def resolver():
        holder.pop("r", None)  # the last reference, dropped inside __enter__
        return None

    _core.set_sync_resolver(resolver)
    try:
        with holder["r"].phase("x", sync=True):
            pass
    finally:
        _core.set_sync_resolver(torch_support.cuda_sync_resolver)


BAD_CALLS = [
    (lambda p: p.phase(), "phase() missing required argument 'name'"),
    (lambda p: p.phase("a", 1, 1, None, 5), "phase() takes at most 4 arguments (name, io=False"),
    (lambda p: p.phase("a", bogus=1), "phase() got an unexpected or repeated keyword argument"),
    (lambda p: p.phase("a", False, io=True), "phase() got an unexpected or repeated keyword"),
    (lambda p: p.count(), "count() missing required argument 'name'"),
    (lambda p: p.count("a", 1, 2), "count() takes at most 2 arguments (name, n=1)"),
    (lambda p: p.count("a", m=2), "count() got an unexpected or repeated keyword argument 'm'"),
    (lambda p: p.count("a", 1, n=2), "count() got an unexpected or repeated keyword argument"),
]


@pytest.mark.parametrize("enabled", [True, False])
def test_phase_and_count_take_keywords_through_one_parser(tmp_path, enabled):
    with make(tmp_path, enabled=enabled) as p:
        for call, message in BAD_CALLS:
            if not enabled and message.startswith("phase()"):
                continue  # a disabled profiler's phase() returns the no-op scope unchecked
            with pytest.raises(TypeError) as got:
                call(p)
            assert message in str(got.value)
        with p.phase(name="k", io=False, sync=False, sample=1.0):
            p.count(name="c", n=3)
            p.count("c", n=2)
        with p.phase(**{"".join(["na", "me"]): "k2"}):  # a keyword that is not interned
            p.count(**{"".join(["n", "ame"]): "c"})
        tree = p.merged_tree()
    if enabled:
        assert tree[("k",)].counters == {"c": 5}
        assert tree[("k2",)].counters == {"c": 1}
    else:
        assert tree == {}
