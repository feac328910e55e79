"""phase(name, sample=r): a deterministic stride, skipped subtrees, scaled values, sample_every."""

from __future__ import annotations

import json
import math
import time

import pytest

from lineprofiler.accounting import Profiler
from tests.timing import clock_slack_ns


def _spin(ns: int) -> None:
    end = time.perf_counter_ns() + ns
    while time.perf_counter_ns() < end:
        pass


def _records(profiler: Profiler) -> dict[tuple[str, ...], dict]:
    doc = json.loads(profiler._rec.snapshot_json())
    return {tuple(p["path"]): p for t in doc["threads"] for p in t["phases"]}


@pytest.mark.timing
def test_sampled_total_matches_the_measured_entries_and_the_true_total(profiler):
    entries, stride = 400, 10
    inner, outer = [], []  # each entry timed inside and around its with block
    for _ in range(entries):
        t_out = time.perf_counter_ns()
        with profiler.phase("select", sample=1 / stride):
            t0 = time.perf_counter_ns()
            _spin(60_000)
            t1 = time.perf_counter_ns()
        t_end = time.perf_counter_ns()
        inner.append(t1 - t0)
        outer.append(t_end - t_out)
    rec = _records(profiler)[("select",)]
    assert rec["calls"] == entries
    assert rec["sample_every"] == stride
    assert sum(c for _, c in rec["hist"]) == entries
    # The stride is deterministic (entries 0, 10, 20, ...), so the estimate the profiler must
    # produce is bracketed by the test's own clock: stride x the measured entries' durations,
    # timed inside (a lower bound) and around (an upper bound) each with block.
    # (widened by the clock error: the recorder's clock is not perf_counter)
    lo, hi = stride * sum(inner[::stride]), stride * sum(outer[::stride])
    assert lo - clock_slack_ns(lo) <= rec["wall_ns"] <= hi + clock_slack_ns(hi)
    # ...and that estimate lands on the true total within the sampling error of a steady load:
    # 4 standard errors of the scaled mean of 40 measured entries, plus the bracket's width.
    measured = inner[::stride]
    mean = sum(inner) / len(inner)
    sd = math.sqrt(sum((d - mean) ** 2 for d in inner) / (len(inner) - 1))
    slack = stride * (sum(outer[::stride]) - sum(measured))
    allowed = 4 * entries * sd / math.sqrt(len(measured)) + slack
    assert abs(rec["wall_ns"] - sum(inner)) <= allowed


def test_a_skipped_entry_records_nothing_beneath_it_and_measured_ones_scale(profiler):
    for i in range(100):
        with profiler.phase("outer", sample=0.25):
            profiler.count("items", 3)
            with profiler.phase("inner"):
                profiler.count("inner_items")
            with profiler.phase(f"only_in_entry_{i}"):  # new names while skipping: no node data
                pass
    with profiler.phase("plain"):
        profiler.count("items", 3)
    rec = _records(profiler)
    assert rec[("outer",)]["calls"] == 100
    assert rec[("outer",)]["counters"] == {"items": 300}
    assert rec[("outer", "inner")]["calls"] == 100
    assert rec[("outer", "inner")]["counters"] == {"inner_items": 100}
    assert rec[("outer", "inner")]["sample_every"] == 4
    # only entries 0, 4, 8, ... were measured: each of their one-off children stands for 4
    one_offs = sorted(p[1] for p in rec if len(p) == 2 and p[1].startswith("only_in_entry_"))
    assert one_offs == sorted(f"only_in_entry_{i}" for i in range(0, 100, 4))
    assert all(rec[("outer", n)]["calls"] == 4 for n in one_offs)
    assert rec[("plain",)]["counters"] == {"items": 3}
    assert "sample_every" not in rec[("plain",)]
    assert profiler.current() == ""


def test_skipped_entries_nest_and_unwind_on_exceptions(profiler):
    for i in range(10):
        with pytest.raises(KeyError):
            with profiler.phase("risky", sample=0.5):
                with profiler.phase("child"):
                    raise KeyError(i)
        assert profiler.current() == ""
        with profiler.phase("after"):
            pass
    rec = _records(profiler)
    assert rec[("risky",)]["calls"] == 10
    assert rec[("risky", "child")]["calls"] == 10
    assert rec[("after",)]["calls"] == 10
    assert "sample_every" not in rec[("after",)]


def test_sample_one_is_every_entry_and_bad_rates_raise(profiler):
    for _ in range(5):
        with profiler.phase("full", sample=1.0):
            pass
    rec = _records(profiler)[("full",)]
    assert rec["calls"] == 5 and "sample_every" not in rec
    for bad in (0, 0.0, -0.1, 1.5, float("nan")):
        with pytest.raises(ValueError, match="sample"):
            profiler.phase("x", sample=bad)
    with pytest.raises(TypeError):
        profiler.phase("x", sample="often")


def test_worker_file_carries_scaled_values_and_the_sample_every_key(tmp_path):
    p = Profiler(run_dir=tmp_path, enabled=True, snapshot_interval_s=None, sample_interval_s=None)
    for _ in range(50):
        with p.phase("iteration"), p.phase("mcts", sample=0.1):
            p.count("sims", 64)
    p.close()
    (path,) = tmp_path.glob("workers/*/w_*.json")
    doc = json.loads(path.read_text())
    rec = {tuple(r["path"]): r for t in doc["threads"] for r in t["phases"]}
    assert "sample_every" not in rec[("iteration",)]
    assert rec[("iteration", "mcts")]["sample_every"] == 10
    assert rec[("iteration", "mcts")]["calls"] == 50
    assert rec[("iteration", "mcts")]["counters"] == {"sims": 3200}


def test_merged_tree_and_deltas_keep_the_estimate_marker(profiler):
    for _ in range(20):
        with profiler.phase("hot", sample=0.1):
            pass
        with profiler.phase("cold"):
            pass
    tree = profiler.merged_tree()
    assert tree[("hot",)].estimated and tree[("hot",)].sample_every == 10
    assert not tree[("cold",)].estimated
    merged = tree[("cold",)]
    merged.add(tree[("hot",)])  # a sampled phase merged into a measured one: estimated
    assert merged.estimated
    assert profiler.deltas()[("hot",)].sample_every == 10


def test_a_scope_object_entered_again_after_a_skip_does_not_stick(profiler):
    scope = profiler.phase("reused", sample=0.5)
    for _ in range(4):
        with scope:
            pass
        with profiler.phase("after"):
            pass
    rec = _records(profiler)
    assert rec[("reused",)]["calls"] == 4
    assert rec[("after",)]["calls"] == 4


def test_the_report_marks_a_sampled_phase_estimated_and_names_its_rate(tmp_path):
    from lineprofiler.accounting import merge_run
    from lineprofiler.report.text import render_text

    p = Profiler(run_dir=tmp_path, enabled=True, snapshot_interval_s=None, sample_interval_s=None)
    for _ in range(300):
        with p.phase("iteration"):
            with p.phase("uct_search", sample=0.01):
                _spin(20_000)
            _spin(5_000)
    p.close()
    run = merge_run(tmp_path, with_samples=False)
    assert run.tree[("iteration", "uct_search")].estimated
    assert not run.tree[("iteration",)].estimated
    text = render_text(run)
    assert "~" in text and "1 entry in 100" in text
