"""``lineprofiler compare``: ratios against the durations the two synthetic runs were built from."""

from __future__ import annotations

import json

from lineprofiler.accounting import merge_run
from lineprofiler.report.compare import compare_runs, render_compare_text
from tests.helpers import run_python
from tests.report.synth import MS, Ph, worker_doc, write_worker

CLI = "from lineprofiler.cli import main; raise SystemExit(main())"


def _run(d, n_actors, mcts_ms, sims, extra=()):
    for k in range(n_actors):
        phases = [
            Ph(("iteration",), dist=[((mcts_ms + 2) * MS, 100)]),
            Ph(("iteration", "mcts"), dist=[(mcts_ms * MS, 100)], counters={"sims": sims}),
            *extra,
        ]
        write_worker(d, worker_doc(role="actor", pid=100 + k, rank=k, threads=phases))
    return d


def cli(tmp_path, *args):
    proc = run_python(CLI, cwd=tmp_path, args=[str(a) for a in args], check=False, timeout=60)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def test_compare_ratios_and_one_sided_phases(tmp_path):
    a = _run(tmp_path / "a", 4, 8, 1000, extra=[Ph(("iteration", "old"), dist=[(MS, 10)])])
    b = _run(tmp_path / "b", 2, 4, 1000, extra=[Ph(("iteration", "new"), dist=[(MS, 30)])])
    write_worker(b, worker_doc(role="evaluator", pid=9, threads=[Ph(("eval",), [MS])]))
    proc = cli(tmp_path, "compare", a, b, "--json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    roles = {r["role"]: r for r in doc["roles"]}
    assert roles["evaluator"]["in"] == "b" and roles["actor"]["in"] == "both"
    assert roles["actor"]["processes"] == {"a": 4, "b": 2}
    phases = {p["name"]: p for p in roles["actor"]["phases"]}
    mcts = phases["iteration/mcts"]
    # per process: 100 x 8 ms in A, 100 x 4 ms in B
    assert mcts["time_per_process_ratio"] == 0.5
    assert abs(mcts["p50_ratio"] - 0.5) < 0.06 and abs(mcts["p99_ratio"] - 0.5) < 0.06
    # the same 1,000 simulations in half the time: twice the rate
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

    text = cli(tmp_path, "compare", a, b).stdout
    old = next(line for line in text.splitlines() if line.startswith("iteration/old"))
    assert old.split()[-3:] == ["only", "in", "A"] and "0ns" not in old
    assert "EVALUATOR  only in B (1 process)" in text
    row = next(line for line in text.splitlines() if line.startswith("iteration/mcts"))
    assert "0.50x" in row and "3.2s" in row and "800.0ms" in row
    assert "1,250.0/s -> 2,500.0/s   2.00x" in text


def test_compare_top_limits_nested_phases(tmp_path):
    extra = [Ph(("iteration", f"p{i:02d}"), dist=[((i + 1) * 1000, 5)]) for i in range(30)]
    a = _run(tmp_path / "a", 1, 8, 10, extra=extra)
    text = render_compare_text(compare_runs(merge_run(a), merge_run(a), top=5))
    assert "p29" in text and "p00" not in text
    assert "smaller phases present in both not shown" in text


def test_compare_bad_input_exits_2(tmp_path):
    a = _run(tmp_path / "a", 1, 8, 10)
    proc = cli(tmp_path, "compare", a, tmp_path / "missing")
    assert proc.returncode == 2 and "no such directory" in proc.stderr
    (tmp_path / "empty").mkdir()
    proc = cli(tmp_path, "compare", tmp_path / "empty", a)
    assert proc.returncode == 2 and proc.stderr.startswith("lineprofiler compare: error:")


def test_golden_compare_text(tmp_path):
    import os
    from pathlib import Path

    from tests.report.synth import golden_run

    golden_run(tmp_path / "a")
    b = _run(tmp_path / "b", 3, 7, 9000, extra=[Ph(("iteration", "replay"), dist=[(MS, 100)])])
    write_worker(b, worker_doc(role="evaluator", pid=9, threads=[Ph(("eval",), [MS])]))
    proc = cli(tmp_path, "compare", "a", "b")
    assert proc.returncode == 0, proc.stderr
    path = Path(__file__).parent / "golden" / "compare.txt"
    if os.environ.get("LP_UPDATE_GOLDEN"):
        path.write_text(proc.stdout)
    assert proc.stdout == path.read_text()
