"""The I/O block's series and sums over several workers' sidecars, against the rows the test wrote:
the write sparkline's columns, the profiler's own writes taken out, intervals without counters."""

from __future__ import annotations

import json

from lineprofiler.accounting import merge_run
from lineprofiler.report.json import to_document
from lineprofiler.report.text import render_text
from lineprofiler.runfile.samples import F_IO, F_RSS, W_DT, W_FLAGS, W_OWN_WB, W_RSS, W_T, W_WB
from tests.report.synth import T0, Ph, worker_doc, write_worker
from tests.resources.synth_samples import S, attach_samples

T0_NS = int(T0 * 1e9)


def _worker(run, pid, seconds, writes, *, io=True, own=None, life=600.0):
    """Rows ending at T0 + each of ``seconds``, with ``writes`` bytes written in them."""
    doc = worker_doc(role="actor", pid=pid, written_at=T0 + life, threads=[Ph(("x",), [S])])
    path = write_worker(run, doc)
    n = len(seconds)
    cols = {
        W_T: [T0_NS + s * S for s in seconds],
        W_DT: [S] * n,
        W_FLAGS: [(F_IO if io else 0) | F_RSS] * n,
        W_WB: list(writes) if io else [0] * n,
        W_RSS: [1_000_000] * n,
        W_OWN_WB: list(own or [0] * n),
    }
    attach_samples(doc, path, cols, n, dropped=0 if io else n)


def io_doc(run):
    merged = merge_run(run)
    return json.loads(json.dumps(to_document(merged), allow_nan=False))["resources"]["io"], merged


def test_sparkline_columns_span_the_run(tmp_path):
    run = tmp_path / "run"
    # a 600 s run: 40 columns of 601/40 s each; writes in seconds 1, 2, 300 and 600
    _worker(run, 1, [1, 2, 300, 600], [100, 50, 7, 9])
    io, merged = io_doc(run)
    want = [0] * 40
    for second, b in ((1, 100), (2, 50), (300, 7), (600, 9)):
        want[second * 40 // 601] += b  # column of a second: its offset in the 601 s span
    assert io["write_sparkline_bytes"] == want
    assert want[0] == 150 and want[19] == 7 and want[39] == 9
    assert io["write_peak_bytes_per_s"] == 100
    assert io["write_bytes"] == 166 and io["write_bytes_per_s"] == 166 / 4


def test_a_short_run_has_one_column_per_second(tmp_path):
    run = tmp_path / "run"
    writes = [5, 0, 0, 40, 1, 0, 0, 0, 0, 2]
    _worker(run, 1, list(range(1, 11)), writes, life=10.0)
    io, merged = io_doc(run)
    assert io["write_sparkline_bytes"] == [0, *writes]  # seconds 0..10 of the run
    assert io["write_bytes_per_s"] == sum(writes) / 4  # over the 4 intervals that wrote
    text = render_text(merged)
    spark = next(line for line in text.splitlines() if line.startswith("  write "))
    # eighths of the tallest column, a column with any bytes at least one: 5/40 -> 1, 1/40 -> 1
    assert spark.split()[1] == "▁"
    # the busiest second (40 B) beside the rate, in the same terms (never below it)
    assert io["write_peak_bytes_per_s"] == 40
    write_line = next(line for line in text.splitlines() if line.startswith("Write "))
    assert write_line.endswith("peak 40 B/s"), write_line
    assert spark[len("  write ") :].split("   peak")[0] == " ▁  █▁    ▁"


def test_workers_are_summed_and_one_without_counters_does_not_hide_the_others(tmp_path):
    run = tmp_path / "run"
    _worker(run, 1, [1, 2], [1000, 3000], own=[10, 20])
    _worker(run, 2, [1, 2, 3], [0, 0, 0], io=False, own=[5, 0, 0])
    _worker(run, 3, [1], [500], own=[7])
    io, merged = io_doc(run)
    assert io is not None and io["write_bytes"] == 4500
    assert io["own_write_bytes_excluded"] == 10 + 20 + 5 + 7
    assert io["intervals"] == 6 and io["dropped_intervals"] == 3
    assert [c.kind for c in merged.caveats] == ["io_dropped"]
    assert "3 of 6 intervals dropped" in render_text(merged)
