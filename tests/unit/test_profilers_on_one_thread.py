"""Several enabled profilers used on one thread (e.g. a library's own profiler inside the
application's): each one's phases nest only among its own, and every exit finds its own frame."""

from __future__ import annotations

from lineprofiler import _core, accounting
from tests.helpers import quiet_profiler


def test_two_profilers_interleaved_200_times_record_200_calls_each(tmp_path):
    # On main before this change, every exit of `a` was dropped: `step` recorded 0 calls and the
    # tree nested step/step/... 128 deep.
    with quiet_profiler(tmp_path / "a") as a, quiet_profiler(tmp_path / "b") as b:
        for _ in range(200):
            with a.phase("step"):
                b.count("x")
                with b.phase("inner"):
                    a.count("y")
        tree_a, tree_b = a.merged_tree(), b.merged_tree()
    assert {p: s.calls for p, s in tree_a.items() if p} == {("step",): 200}
    assert tree_a[("step",)].counters == {"y": 200}
    assert tree_a[("step",)].open == 0
    assert {p: s.calls for p, s in tree_b.items() if p} == {("inner",): 200}
    assert tree_b[()].counters == {"x": 200}


def test_three_profilers_nest_among_their_own(tmp_path):
    profs = [quiet_profiler(tmp_path / f"p{i}") for i in range(3)]
    try:
        for _ in range(50):
            with profs[0].phase("a0"), profs[1].phase("b0"), profs[2].phase("c0"):
                with profs[0].phase("a1"), profs[2].phase("c1"):
                    pass
        trees = [p.merged_tree() for p in profs]
    finally:
        for p in profs:
            p.close()
    assert {p: s.calls for p, s in trees[0].items() if p} == {("a0",): 50, ("a0", "a1"): 50}
    assert {p: s.calls for p, s in trees[1].items() if p} == {("b0",): 50}
    assert {p: s.calls for p, s in trees[2].items() if p} == {("c0",): 50, ("c0", "c1"): 50}


def test_an_installed_profilers_phase_inside_another_profilers_phase(tmp_path):
    with (
        quiet_profiler(tmp_path / "app") as app,
        quiet_profiler(tmp_path / "lib", install=True) as lib,
    ):
        for _ in range(200):
            with app.phase("request"):
                with accounting.phase("library_call"):
                    assert accounting.current() == "library_call"
                    assert app.current() == "request"
        tree_app, tree_lib = app.merged_tree(), lib.merged_tree()
    assert _core.get_installed() is None
    assert {p: s.calls for p, s in tree_app.items() if p} == {("request",): 200}
    assert {p: s.calls for p, s in tree_lib.items() if p} == {("library_call",): 200}
