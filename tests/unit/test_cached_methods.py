"""The scopes' __enter__/__exit__ are cached methods (module/cached_method.h): a `with` reuses a
bound method parked on the scope instead of allocating one. They must behave like ordinary bound
methods: keep their scope alive, work unbound (contextlib.ExitStack), refuse bad calls, leak
nothing. Run on 3.11 and 3.12."""

from __future__ import annotations

import contextlib
import sys

import pytest

from lineprofiler import _core
from lineprofiler.accounting import Profiler
from tests.helpers import quiet_profiler


def make(tmp_path, **kw) -> Profiler:
    return quiet_profiler(tmp_path / "run", **kw)


def test_a_scope_only_the_with_statement_holds_stays_alive_until_its_exit(tmp_path):
    # With every spare scope held, phase() hands out a fresh scope whose one reference the `with`
    # statement drops before calling __enter__: only the bound __exit__ keeps it alive.
    with make(tmp_path) as p:
        held = [p.phase(f"held{i}") for i in range(8)]
        for _ in range(100):
            with p.phase("fresh"):
                with p.phase("inner"):
                    pass
        tree = p.merged_tree()
    del held
    assert tree[("fresh",)].calls == 100
    assert tree[("fresh", "inner")].calls == 100


def test_a_bound_method_keeps_its_scope_alive(tmp_path):
    with make(tmp_path) as p:
        s = p.phase("bound")
        enter, exit_ = s.__enter__, s.__exit__
        assert enter.__self__ is s and exit_.__self__ is s
        del s
        entered = enter()
        assert entered is exit_.__self__
        assert exit_(None, None, None) is None
        refs = sys.getrefcount(entered)
        del enter  # a bound method holds exactly one reference to its scope
        after = sys.getrefcount(entered)
        assert after == refs - 1
        del exit_, entered
        tree = p.merged_tree()
    assert tree[("bound",)].calls == 1


def test_a_released_bound_method_is_reused_and_two_alive_at_once_are_distinct(tmp_path):
    with make(tmp_path) as p:
        s = p.phase("x")
        first = id(s.__exit__)  # released at once: parked on s
        assert id(s.__exit__) == first  # the parked one again, not a new allocation
        a, b = s.__enter__, s.__enter__
        assert a is not b and a.__self__ is b.__self__ is s
        assert a == b and hash(a) == hash(b) and a != s.__exit__ and a != p.phase("y").__enter__
        del a, b  # one parks, the other is freed


def test_unbound_calls_work_as_exit_stack_makes_them(tmp_path):
    with make(tmp_path) as p:
        with contextlib.ExitStack() as stack:
            stack.enter_context(p.phase("stacked"))
        s = p.phase("unbound")
        cls = type(s)
        assert cls.__enter__(s) is s
        cls.__exit__(s, None, None, None)
        tree = p.merged_tree()
    assert tree[("stacked",)].calls == 1
    assert tree[("unbound",)].calls == 1
    assert "PhaseScope" in repr(cls.__enter__) and cls.__enter__.__name__ == "__enter__"
    assert cls.__exit__.__objclass__ is cls and cls.__exit__.__doc__


@pytest.mark.parametrize("scope_of", ["enabled", "disabled"])
def test_bad_calls_raise_type_error(tmp_path, scope_of):
    p = make(tmp_path, enabled=scope_of == "enabled")
    try:
        s = p.phase("x")
        with pytest.raises(TypeError, match="takes exactly 0 arguments"):
            s.__enter__(1)
        with pytest.raises(TypeError, match="takes exactly 3 arguments"):
            s.__exit__(None)
        with pytest.raises(TypeError, match="keyword"):
            s.__exit__(None, None, tb=None)
        with pytest.raises(TypeError, match="needs a"):
            type(s).__enter__(object())
        with pytest.raises(TypeError, match="doesn't apply"):
            type(s).__dict__["__enter__"].__get__(object(), type(s))
    finally:
        p.close()


@pytest.mark.parametrize("enabled", [True, False])
def test_with_statements_allocate_nothing_that_stays(tmp_path, enabled):
    with make(tmp_path, enabled=enabled) as p:

        def loop(n):
            for _ in range(n):
                with p.phase("a"):
                    with p.phase("b"):
                        pass

        loop(1000)  # warm: the tree's nodes, the name cache, parked bound methods
        before = sys.getallocatedblocks()
        loop(20000)
        grown = sys.getallocatedblocks() - before
    assert grown < 50, f"{grown} blocks still allocated after 20,000 with statements"


def test_the_benchmark_floor_is_an_ordinary_c_context_manager():
    floor = _core.PhaseFront()._bench_floor("x")
    with floor as entered:
        assert entered is floor
    assert type(type(floor).__dict__["__enter__"]).__name__ == "method_descriptor"
