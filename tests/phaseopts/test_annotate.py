"""annotate=True: an NVTX range per phase entry, from torch.cuda.nvtx or the nvtx package."""

from __future__ import annotations

import importlib.machinery
import sys
import types

import pytest

from lineprofiler import accounting
from lineprofiler.accounting import Profiler


def _fake_nvtx(events: list) -> types.ModuleType:
    mod = types.ModuleType("nvtx")
    mod.__spec__ = importlib.machinery.ModuleSpec("nvtx", None)
    mod.push_range = lambda name: events.append(("push", name))
    mod.pop_range = lambda: events.append(("pop",))
    return mod


def _profiler(tmp_path, **kw) -> Profiler:
    return Profiler(
        run_dir=tmp_path, enabled=True, snapshot_interval_s=None, sample_interval_s=None, **kw
    )


def test_nvtx_package_ranges_nest_like_the_phases_without_torch(tmp_path, monkeypatch):
    events: list = []
    monkeypatch.setitem(sys.modules, "torch", None)  # as if torch were not installed
    monkeypatch.setitem(sys.modules, "nvtx", _fake_nvtx(events))
    p = _profiler(tmp_path, annotate=True, install=True)
    try:
        assert p._annotator.nvtx_source == "nvtx"
        assert not p._annotator.record_function
        with p.phase("iteration"):
            with accounting.phase("mcts"):
                pass
            with pytest.raises(RuntimeError):
                with p.phase("env_step"):
                    raise RuntimeError("boom")
        tree = p.merged_tree()
    finally:
        p.close()
    assert events == [
        ("push", "iteration"),
        ("push", "mcts"),
        ("pop",),
        ("push", "env_step"),
        ("pop",),
        ("pop",),
    ]
    assert tree[("iteration", "mcts")].calls == 1 and tree[("iteration", "env_step")].calls == 1


def test_torch_cuda_nvtx_is_preferred_when_a_device_is_visible(tmp_path, monkeypatch):
    torch = pytest.importorskip("torch")
    events: list = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda.nvtx, "range_push", lambda name: events.append(name))
    monkeypatch.setattr(torch.cuda.nvtx, "range_pop", lambda: events.append("pop"))
    p = _profiler(tmp_path, annotate=True)
    try:
        assert p._annotator.nvtx_source == "torch.cuda.nvtx"
        assert p._annotator.record_function
        with p.phase("forward"):
            pass
    finally:
        p.close()
    assert events == ["forward", "pop"]


def test_sampled_and_skipped_entries_are_still_annotated_and_counted(tmp_path, monkeypatch):
    events: list = []
    monkeypatch.setitem(sys.modules, "torch", None)
    monkeypatch.setitem(sys.modules, "nvtx", _fake_nvtx(events))
    p = _profiler(tmp_path, annotate=True)
    try:
        for _ in range(10):
            with p.phase("select", sample=0.5):
                pass
        tree = p.merged_tree()
    finally:
        p.close()
    assert events.count(("push", "select")) == 10
    assert tree[("select",)].calls == 10 and tree[("select",)].sample_every == 2
