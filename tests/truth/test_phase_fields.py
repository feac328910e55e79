"""Every field of a phase's aggregates survives every path a worker file's record takes.

A record reaches a reader four ways: ``tree_of`` (a live profiler's ``merged_tree()`` and
``deltas()``), the merge's fold (``report``), a host summary (``reduce`` then ``report``) and
``PhaseStats.since`` (the live interval). The field list of ``PhaseStats`` is written out once;
these tests make a new field that one path forgets fail here, whatever its type: the record sets
every field to a value that is not its default, and each path must give the values the test put
in (sums of the two threads' values it wrote, the extremes' min and max).
"""

from __future__ import annotations

import dataclasses
import json

from lineprofiler.accounting import merge_run
from lineprofiler.report.model import MergedPhase
from lineprofiler.report.reduce import reduce_host
from lineprofiler.runfile.stats import Histogram, PhaseStats
from lineprofiler.runfile.worker_doc import tree_of_json
from tests.report.synth import worker_doc, write_worker

# Work two threads were handed inside "step" (accounting.attach): the "[threads]" element makes the
# reader count the threads that ran it (``threads``), a field no record carries itself.
LOAD = ("step", "[threads]", "load")

# Two threads' records of one path, every field set (sample_every 1 keeps them exact sums).
RECORDS = [
    {
        "path": list(LOAD),
        "calls": 4,
        "wall_ns": 40_000,
        "self_ns": 30_000,
        "cpu_ns": 10_000,
        "open": 1,
        "open_ns": 500,
        "hist": [[200, 3], [210, 1]],
        "counters": {"items": 12},
        "sample_every": 1,
        "async_calls": 2,
        "async_wall_ns": 9_000,
        "io": {"read_bytes": 100, "write_bytes": 7},
        "counters_saturated": ["items"],
        "synthetic": True,
        "min_wall_ns": 9_000,
        "max_wall_ns": 12_000,
        "raised": 3,
    },
    {
        "path": list(LOAD),
        "calls": 1,
        "wall_ns": 8_000,
        "self_ns": 8_000,
        "cpu_ns": 3_000,
        "open": 2,
        "open_ns": 70,
        "hist": [[205, 1]],
        "counters": {"items": 3, "batches": 1},
        "sample_every": 1,
        "async_calls": 1,
        "async_wall_ns": 8_000,
        "io": {"read_bytes": 5},
        "counters_saturated": [],
        "synthetic": False,
        "min_wall_ns": 8_000,
        "max_wall_ns": 8_000,
        "raised": 1,
    },
]

# What the two records sum to, written out by hand.
EXPECTED = {
    "calls": 5,
    "wall_ns": 48_000,
    "self_ns": 38_000,
    "cpu_ns": 13_000,
    "open": 3,
    "open_ns": 570,
    "hist": Histogram({200: 3, 205: 1, 210: 1}),
    "counters": {"items": 15, "batches": 1},
    "sample_every": 1,
    "async_calls": 3,
    "async_wall_ns": 17_000,
    "io": {"read_bytes": 105, "write_bytes": 7},
    "saturated": {"items"},
    "synthetic": True,
    "thread_node": False,
    "min_wall_ns": 8_000,
    "max_wall_ns": 12_000,
    "raised": 4,
    "threads": 2,  # one per thread record of a path through "[threads]"
}


def _doc(pid: int = 100) -> dict:
    doc = worker_doc(role="actor", pid=pid)
    doc["threads"] = [
        {"tid": 1, "name": "MainThread", "phases": [RECORDS[0]]},
        {"tid": 2, "name": "loader", "phases": [RECORDS[1]]},
    ]
    return doc


def _fields(stats: PhaseStats) -> dict:
    return {f.name: getattr(stats, f.name) for f in dataclasses.fields(PhaseStats)}


def test_the_expected_values_cover_every_field_and_none_is_a_default():
    assert set(EXPECTED) == {f.name for f in dataclasses.fields(PhaseStats)}
    default = _fields(PhaseStats())
    # thread_node is the one mark a worker file's record cannot carry (the reader makes it)
    assert [f for f, v in EXPECTED.items() if v == default[f]] == ["thread_node"]


def test_tree_of_carries_every_field():
    tree = tree_of_json(json.dumps(_doc()))
    assert _fields(tree[LOAD]) == EXPECTED


def test_the_merge_carries_every_field(tmp_path):
    write_worker(tmp_path / "run", _doc())
    merged = merge_run(tmp_path / "run").roles["actor"].tree[LOAD]
    assert _fields(merged) == EXPECTED
    assert (merged.processes, merged.sample_rates) == (1, {1})


def test_a_host_summary_carries_every_field(tmp_path):
    write_worker(tmp_path / "run", _doc(100))
    write_worker(tmp_path / "run", _doc(101))
    summary, folded = reduce_host(tmp_path / "run", "node01")
    assert folded == 2 and summary.exists()
    merged = merge_run(tmp_path / "run").roles["actor"].tree[LOAD]
    two = {
        f: (
            v * 2
            if type(v) is int and f not in ("sample_every", "min_wall_ns", "max_wall_ns")
            else v
        )
        for f, v in EXPECTED.items()
    }
    two.update(
        hist=Histogram({200: 6, 205: 2, 210: 2}),
        counters={"items": 30, "batches": 2},
        io={"read_bytes": 210, "write_bytes": 14},
    )
    assert _fields(merged) == two
    assert isinstance(merged, MergedPhase) and (merged.processes, merged.sample_rates) == (2, {1})


def test_since_differences_every_sum_and_keeps_every_state_and_mark():
    now = tree_of_json(json.dumps(_doc()))[LOAD]
    first = now.since(PhaseStats())
    assert _fields(first) == EXPECTED  # nothing before: the whole history, extremes exact
    before = PhaseStats(
        calls=1,
        wall_ns=8_000,
        self_ns=8_000,
        cpu_ns=3_000,
        open=9,
        open_ns=9_999,
        hist=Histogram({205: 1}),
        counters={"items": 3, "batches": 1},
        async_calls=1,
        async_wall_ns=8_000,
        io={"read_bytes": 5},
        min_wall_ns=8_000,
        max_wall_ns=8_000,
        raised=1,
    )
    d = now.since(before)
    assert _fields(d) == {
        "calls": 4,
        "wall_ns": 40_000,
        "self_ns": 30_000,
        "cpu_ns": 10_000,
        "open": 3,  # states: what is open now, not a difference
        "open_ns": 570,
        "hist": Histogram({200: 3, 210: 1}),
        "counters": {"items": 12},  # "batches" did not move
        "sample_every": 1,
        "async_calls": 2,
        "async_wall_ns": 9_000,
        "io": {"read_bytes": 100, "write_bytes": 7},
        "saturated": {"items"},
        "synthetic": True,
        "thread_node": False,
        "min_wall_ns": None,  # an interval's own extremes are not recorded
        "max_wall_ns": None,
        "raised": 3,
        "threads": 2,  # a mark (how many threads ran it): the latest, not a difference
    }
    assert d.wait_ns is None  # async entries: still "async" in the interval, not a number
    # a restarted worker (sums went down) gives no negative figures
    back = PhaseStats(calls=1, wall_ns=1, self_ns=1, cpu_ns=1).since(before)
    assert (back.calls, back.wall_ns, back.self_ns, back.cpu_ns) == (0, 0, 0, 0)
    assert back.counters == {} and back.io is None  # a counter it never had did not move


def test_since_edges_missing_cpu_still_io_and_a_thread_node():
    ran = PhaseStats(calls=2, wall_ns=10, cpu_ns=4, io={"read_bytes": 50, "write_bytes": 1})
    ran.thread_node = True
    # CPU missing on either side: the interval's is missing, not a number
    assert PhaseStats(calls=2, wall_ns=10, cpu_ns=None).since(ran).cpu_ns is None
    assert ran.since(PhaseStats(calls=1, wall_ns=5, cpu_ns=None)).cpu_ns is None
    assert PhaseStats(calls=2, cpu_ns=None).since(PhaseStats(cpu_ns=None)).cpu_ns is None
    # an I/O sum that did not move is not in the interval; one that appeared is, however small
    d = ran.since(PhaseStats(calls=1, wall_ns=5, cpu_ns=1, io={"read_bytes": 50}))
    assert d.io == {"write_bytes": 1} and d.thread_node
    assert ran.since(PhaseStats(calls=1, io={"read_bytes": 50, "write_bytes": 1})).io is None
