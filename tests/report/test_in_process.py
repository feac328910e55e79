"""The CLI tests' golden texts and compare numbers, rendered in this process.

test_cli_report.py and test_compare.py run the real CLI in a subprocess; the same renderers are
called here directly so that mutation testing (scripts/mutation), which attributes a mutant to the
tests that run its code in-process, sees these checks too. The golden files are the ones the CLI
tests pin; the compare numbers are arithmetic on the durations the two runs were built from.
"""

from __future__ import annotations

import json
from pathlib import Path

from lineprofiler.accounting import merge_run
from lineprofiler.report.compare import compare_document, compare_runs, render_compare_text
from lineprofiler.report.json import render_json
from lineprofiler.report.text import render_text
from tests.report.synth import MS, Ph, golden_run, worker_doc, write_worker
from tests.report.test_cli_report import assert_stable_keys, caveats_run
from tests.report.test_compare import _run

GOLDEN = Path(__file__).parent / "golden"


def test_golden_report_in_process(tmp_path):
    run = golden_run(tmp_path / "run")
    assert render_text(merge_run(run)) == (GOLDEN / "report.txt").read_text()


def test_golden_report_with_caveats_in_process(tmp_path):
    run = caveats_run(tmp_path / "run")
    assert render_text(merge_run(run)) == (GOLDEN / "report_caveats.txt").read_text()


def test_golden_compare_in_process(tmp_path, monkeypatch):
    golden_run(tmp_path / "a")
    b = _run(tmp_path / "b", 3, 7, 9000, extra=[Ph(("iteration", "replay"), dist=[(MS, 100)])])
    write_worker(b, worker_doc(role="evaluator", pid=9, threads=[Ph(("eval",), [MS])]))
    monkeypatch.chdir(tmp_path)
    text = render_compare_text(compare_runs(merge_run("a"), merge_run("b")))
    assert text == (GOLDEN / "compare.txt").read_text()


def test_compare_numbers_in_process(tmp_path):
    a = _run(tmp_path / "a", 4, 8, 1000, extra=[Ph(("iteration", "old"), dist=[(MS, 10)])])
    b = _run(tmp_path / "b", 2, 4, 1000, extra=[Ph(("iteration", "new"), dist=[(MS, 30)])])
    write_worker(b, worker_doc(role="evaluator", pid=9, threads=[Ph(("eval",), [MS])]))
    c = compare_runs(merge_run(a), merge_run(b))
    doc = json.loads(json.dumps(compare_document(c), allow_nan=False))
    roles = {r["role"]: r for r in doc["roles"]}
    assert roles["evaluator"]["in"] == "b" and roles["actor"]["in"] == "both"
    assert roles["actor"]["processes"] == {"a": 4, "b": 2}
    phases = {p["name"]: p for p in roles["actor"]["phases"]}
    mcts = phases["iteration/mcts"]
    # per process: 100 x 8 ms in A, 100 x 4 ms in B; the same 1,000 simulations in half the time
    assert mcts["time_per_process_ratio"] == 0.5
    assert abs(mcts["p50_ratio"] - 0.5) < 0.06 and abs(mcts["p99_ratio"] - 0.5) < 0.06
    assert mcts["counters"] == [
        {
            "name": "sims",
            "in": "both",
            "rate_per_s_a": 1250.0,
            "rate_per_s_b": 2500.0,
            "rate_ratio": 2.0,
        }
    ]
    assert phases["iteration/old"]["in"] == "a" and phases["iteration/old"]["b"] is None
    assert phases["iteration/new"]["in"] == "b" and phases["iteration/new"]["a"] is None
    assert phases["iteration/new"]["time_per_process_ratio"] is None
    text = render_compare_text(c)
    old = next(line for line in text.splitlines() if line.startswith("iteration/old"))
    assert old.split()[-3:] == ["only", "in", "A"] and "0ns" not in old
    assert "EVALUATOR  only in B (1 process)" in text
    row = next(line for line in text.splitlines() if line.startswith("iteration/mcts"))
    assert "0.50x" in row and "3.2s" in row and "800.0ms" in row
    assert "1,250.0/s -> 2,500.0/s   2.00x" in text


def test_json_keys_in_process(tmp_path):
    assert_stable_keys(json.loads(render_json(merge_run(golden_run(tmp_path / "run")))))


def test_resources_keys_in_process(tmp_path):
    """The resources section's keys, in order (docs/report-json.md)."""
    from lineprofiler.runfile.samples import F_IO, F_RSS, W_DT, W_FLAGS, W_RSS, W_T, W_WB
    from tests.report.synth import T0
    from tests.resources.synth_samples import S, attach_samples

    run = tmp_path / "run"
    doc = worker_doc(role="a", pid=1, threads=[Ph(("x",), [S])])
    doc["threads"][0]["phases"][0]["io"] = {"calls": 1, "failed": 0, "write_chars": 5}
    path = write_worker(run, doc)
    t0 = int(T0 * 1e9)
    cols = {W_T: [t0 + S], W_DT: [S], W_FLAGS: [F_IO | F_RSS], W_WB: [4096], W_RSS: [10**6]}
    attach_samples(doc, path, cols, 1, tags={1: ("x",)})
    res = json.loads(render_json(merge_run(run)))["resources"]
    assert list(res) == ["io_by_phase", "io", "memory", "gpu"]
    assert list(res["io_by_phase"][0]) == [
        "path", "calls", "failed", "read_bytes", "write_bytes", "read_chars", "write_chars",
        "page_cache_bytes", "bytes_per_s",
    ]  # fmt: skip
    assert list(res["io"]) == [
        "read_bytes", "write_bytes", "read_chars", "write_chars", "page_cache_bytes",
        "read_bytes_per_s", "write_bytes_per_s", "read_peak_bytes_per_s", "write_peak_bytes_per_s",
        "write_sparkline_bytes", "no_phase_open_share", "intervals", "dropped_intervals",
        "own_write_bytes_excluded", "by_phase_sampled",
    ]  # fmt: skip
    assert res["io"]["by_phase_sampled"] == [
        {"path": [], "read_bytes": 0, "write_bytes": 4096, "read_chars": 0, "write_chars": 0}
    ]
    assert res["memory"] == {
        "processes": [{"role": "a", "worker": "pid 1 (node01)", "rss_peak_bytes": 10**6}],
        "roles": {"a": 10**6},
    }
    assert res["gpu"] is None
    docs = (Path(__file__).parents[2] / "docs" / "report-json.md").read_text()
    for key in [*res, *res["io_by_phase"][0], *res["io"], *res["memory"]]:
        assert f'"{key}"' in docs or f"`{key}`" in docs, key
