"""The exporters at their edges: Prometheus histogram counts for entries one recorder bucket
either side of a ``le`` bound, ``_sum`` of a live run with an open entry, and a Perfetto trace of
sampler rows that are *not* one interval apart (the sampler was late, or paused). The expected
numbers are the test's own arithmetic on the durations and rows it wrote."""

from __future__ import annotations

import io
import json
import math

import pytest

from lineprofiler.report.merge import merge_run
from lineprofiler.report.perfetto import export_perfetto
from lineprofiler.report.prometheus import LE_BOUNDS_S, families
from lineprofiler.runfile.samples import (
    F_IO,
    F_RSS,
    W_DT,
    W_FLAGS,
    W_RB,
    W_RSS,
    W_T,
    W_TAG,
    W_WB,
)
from tests.report.synth import MS, T0, Ph, worker_doc, write_worker
from tests.resources.synth_samples import S, attach_samples


def _family(fams: list, name: str):
    return next(f for f in fams if f.name == name)


def test_histogram_counts_entries_next_to_each_bound_exactly(tmp_path):
    """For every ``le`` (the last ns of one of the recorder's buckets): one entry exactly on it
    and one 1 ns above (the next bucket's first value). Each cumulative count is the number of
    entries <= le, computed here from the durations."""
    pytest.importorskip("prometheus_client")  # a test dependency; families() needs it
    durations = []
    for le in LE_BOUNDS_S[:-1]:
        last = round(le * 1e9)  # a whole number of ns
        durations += [last, last + 1]
    doc = worker_doc(role="w", pid=5, threads=[Ph(("op",), durations)], written_at=T0 + 3600)
    write_worker(tmp_path, doc)
    hist = _family(families(merge_run(tmp_path)), "lineprofiler_phase_duration_seconds")
    buckets = {s.labels["le"]: s.value for s in hist.samples if s.name.endswith("_bucket")}
    for le in LE_BOUNDS_S:
        truth = sum(1 for d in durations if d <= round(le * 1e9))
        assert buckets[repr(le)] == truth, (le, buckets[repr(le)], truth)
    assert buckets["+Inf"] == len(durations)


def test_sum_and_count_are_over_completed_entries(tmp_path):
    """A live worker: 40 completed 25 ms entries and one open for 3 s. _count 40, _sum 1 s, so
    _sum/_count is the mean per completed entry; the phase's seconds include the open 3 s."""
    pytest.importorskip("prometheus_client")  # a test dependency; families() needs it
    ph = Ph(("step",), durations=[25 * MS] * 40, open=1, open_ns=3000 * MS)
    write_worker(tmp_path, worker_doc(role="w", pid=5, threads=[ph], final=False))
    fams = families(merge_run(tmp_path))
    hist = _family(fams, "lineprofiler_phase_duration_seconds")
    got = {s.name.rsplit("_", 1)[-1]: s.value for s in hist.samples if "le" not in s.labels}
    assert got["count"] == 40
    assert math.isclose(got["sum"], 40 * 0.025)
    (seconds,) = _family(fams, "lineprofiler_phase_seconds").samples
    assert math.isclose(seconds.value, 40 * 0.025 + 3.0)


def test_perfetto_slices_start_where_each_row_began(tmp_path, perfetto_path):
    """Rows end at +1, +2, +5 and +6 s, each 1 s long: the sampler missed +3 and +4 s. The slice
    of the row ending at +5 s starts at +4 s (its own start), not at +2 s (the previous row's
    end), and its I/O rate is its bytes over its own 1 s."""
    doc = worker_doc(role="w", pid=9, threads=[Ph(("step",), [S])], start_time=T0)
    path = write_worker(tmp_path, doc)
    ends_s = [1, 2, 5, 6]
    cols = {
        W_T: [int(T0 * 1e9) + e * S for e in ends_s],
        W_DT: [S] * 4,
        W_TAG: [1, 1, 2, 1],
        W_FLAGS: [F_IO | F_RSS] * 4,
        W_RB: [0, 0, 4_000_000, 0],
        W_WB: [0] * 4,
        W_RSS: [100_000_000, 100_000_000, 200_000_000, 100_000_000],
    }
    attach_samples(doc, path, cols, 4, tags={1: ["load"], 2: ["train", "step"]})
    write_worker(tmp_path, doc)
    out = io.StringIO()
    export_perfetto(tmp_path, out)
    events = [e for e in json.loads(out.getvalue())["traceEvents"] if e["ph"] != "M"]
    slices = [(e["ph"], e.get("name"), e["ts"]) for e in events if e["ph"] in "BE"]
    us = 1_000_000
    assert slices == [
        ("B", "load", 0),
        ("E", None, 4 * us),
        ("B", "train/step", 4 * us),
        ("E", None, 5 * us),
        ("B", "load", 5 * us),
        ("E", None, 6 * us),
    ]
    rss = [(e["ts"], e["args"]["rss"]) for e in events if e.get("name") == "RSS (MB)"]
    assert rss == [(0, 100), (4 * us, 200), (5 * us, 100)]
    read = [(e["ts"], e["args"]["read"]) for e in events if e.get("name") == "I/O (MB/s)"]
    assert read == [(0, 0), (4 * us, 4), (5 * us, 0)]
