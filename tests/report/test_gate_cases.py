"""The CI gate (``compare --fail-over``) where the easy cases hide bugs: asymmetric shares, nested
``--phase`` names, the order of several regressions, sampled estimates near the decision
boundary, and a live NEW run with open entries. Every expectation is computed here from the
durations the test chose (tests/report/synth.py writes them in the real worker format).

In-process (``compare_runs`` + the renderers the CLI prints): what a user sees, in milliseconds.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from lineprofiler.report.compare import compare_runs, render_compare_json, render_compare_text
from lineprofiler.report.gate import GateSpec
from lineprofiler.report.merge import merge_run
from tests.report.synth import MS, Ph, worker_doc, write_worker


def _write(run_dir: Path, phases: list[Ph], pid: int = 7, final: bool = True) -> Path:
    write_worker(run_dir, worker_doc(role="trainer", pid=pid, threads=phases, final=final))
    return run_dir


def _gate(a: Path, b: Path, fail_over: float, **kw) -> tuple[dict, str]:
    c = compare_runs(merge_run(a), merge_run(b), gate=GateSpec(fail_over, **kw))
    return json.loads(render_compare_json(c)), render_compare_text(c)


def _gate_lines(text: str) -> list[str]:
    return text.split("COMPARE")[0].splitlines()


def test_min_share_is_judged_on_base_in_both_directions(tmp_path):
    """A phase below --min-share in BASE that grew above it is not gated; one above it in BASE
    that shrank below it (fewer, slower calls) still is."""
    # BASE: big 100 x 10 ms (1000 ms), tiny 5 x 1 ms (5 ms: 0.5%), shrinks 20 x 2 ms (40 ms: 3.8%)
    a = _write(
        tmp_path / "a",
        [
            Ph(("big",), durations=[10 * MS] * 100),
            Ph(("tiny",), durations=[1 * MS] * 5),
            Ph(("shrinks",), durations=[2 * MS] * 20),
        ],
    )
    # NEW: tiny 5 x 10 ms (50 ms: 4.8%, +900%), shrinks 2 x 4 ms (8 ms: 0.8%, +100% per call)
    b = _write(
        tmp_path / "b",
        [
            Ph(("big",), durations=[10 * MS] * 100),
            Ph(("tiny",), durations=[10 * MS] * 5),
            Ph(("shrinks",), durations=[4 * MS] * 2),
        ],
    )
    share_tiny_a = 5 / (1000 + 5 + 40)
    share_shrinks_a = 40 / (1000 + 5 + 40)
    assert share_tiny_a < 0.01 < share_shrinks_a  # the test's own premise
    doc, text = _gate(a, b, 0.5, min_share=0.01)
    assert doc["gate"]["checked"] == 2  # big and shrinks; tiny was below 1% in BASE
    assert [(r["phase"], r["base"], r["new"]) for r in doc["regressions"]] == [
        ("shrinks", 2 * MS, 4 * MS)
    ]
    lines = _gate_lines(text)
    assert lines[0].startswith("REGRESSIONS: 1 phase(s) whose mean time per call grew by more")
    assert lines[1].split() == ["trainer", "shrinks", "2.0ms", "->", "4.0ms", "+100%"]


def test_phase_selects_nested_phases_by_leaf_or_full_name(tmp_path):
    """``--phase step`` is train/step (its leaf), ``--phase train`` is only the top-level train,
    ``--phase train/step`` the full name; a name in no run is listed as unmatched."""
    phases = [
        Ph(("train",), durations=[30 * MS] * 10),
        Ph(("train", "step"), durations=[20 * MS] * 10),
        Ph(("eval",), durations=[5 * MS] * 10),
    ]
    a = _write(tmp_path / "a", phases)
    slow = [
        Ph(("train",), durations=[50 * MS] * 10),
        Ph(("train", "step"), durations=[40 * MS] * 10),
        Ph(("eval",), durations=[5 * MS] * 10),
    ]
    b = _write(tmp_path / "b", slow)
    for wanted in (["step"], ["train/step"]):
        doc, text = _gate(a, b, 0.5, phases=wanted)
        assert doc["gate"]["checked"] == 1, wanted
        assert [(r["phase"], r["change"]) for r in doc["regressions"]] == [("train/step", 1.0)]
        assert _gate_lines(text)[1].split() == [
            "trainer",
            "train/step",
            "20.0ms",
            "->",
            "40.0ms",
            "+100%",
        ]
    # train: 30 -> 50 ms is +67%: only that phase is checked, not its child
    doc, _ = _gate(a, b, 0.5, phases=["train"])
    assert doc["gate"]["checked"] == 1
    assert [r["phase"] for r in doc["regressions"]] == ["train"]
    assert math.isclose(doc["regressions"][0]["change"], 50 / 30 - 1)
    # eval did not change; "nope" matches nothing and is reported as such
    c = compare_runs(merge_run(a), merge_run(b), gate=GateSpec(0.5, phases=["eval", "nope"]))
    assert c.gate is not None and c.gate.checked == 1 and c.gate.unmatched == ["nope"]
    assert c.gate.regressions == []


def test_regressions_are_listed_worst_first(tmp_path):
    """Three regressions of +60%, +300% and +120%: printed and exported worst first."""
    growth = {"alpha": 1.6, "beta": 4.0, "gamma": 2.2}
    a = _write(tmp_path / "a", [Ph((n,), durations=[10 * MS] * 10) for n in growth])
    b = _write(
        tmp_path / "b", [Ph((n,), durations=[int(10 * MS * g)] * 10) for n, g in growth.items()]
    )
    doc, text = _gate(a, b, 0.5)
    expected = sorted(growth, key=lambda n: -growth[n])  # beta, gamma, alpha
    assert [r["phase"] for r in doc["regressions"]] == expected
    for r in doc["regressions"]:
        assert math.isclose(r["change"], growth[r["phase"]] - 1, rel_tol=1e-9)
    shown = [line.split()[1] for line in _gate_lines(text)[1:4]]
    assert shown == expected
    assert [line.split()[-1] for line in _gate_lines(text)[1:4]] == ["+300%", "+120%", "+60%"]


def _cv(durations: list[int]) -> float:
    mean = sum(durations) / len(durations)
    var = sum((d - mean) ** 2 for d in durations) / len(durations)
    return math.sqrt(var) / mean


def test_sampled_phase_near_the_boundary_uses_both_intervals(tmp_path):
    """One entry in 10 measured, 100 measured entries of 1 ms and 3 ms (cv 0.5): the mean's
    interval is +-3 x 0.5 / sqrt(100) = +-15%. NEW 1.9x slower: its low end is only +40% over
    BASE's high end (passes a 50% gate) though +61% over BASE's estimate; NEW 2.4x: +77%, fails."""
    every = 10
    measured = [1 * MS] * 50 + [3 * MS] * 50
    rel = 3.0 * _cv(measured) / math.sqrt(len(measured))
    assert math.isclose(rel, 0.15)

    def run(d: Path, scale: float) -> Path:
        ph = Ph(("fetch",), dist=[(int(v * scale), every) for v in measured])
        ph.sample_every = every
        return _write(d, [ph, Ph(("step",), durations=[300 * MS] * 10)])

    a = run(tmp_path / "a", 1.0)
    for scale, regresses in ((1.9, False), (2.4, True)):
        b = run(tmp_path / f"b{scale}", scale)
        doc, text = _gate(a, b, 0.5)
        low = scale * (1 - rel) / (1 + rel) - 1  # NEW's low end over BASE's high end
        assert (low > 0.5) is regresses  # the test's own premise: 0.40 and 0.77
        regs = doc["regressions"]
        if not regresses:
            assert regs == [], regs
            assert text.startswith("GATE passed")
            continue
        (r,) = regs
        assert r["phase"] == "fetch" and r["estimated"]
        # cv is read from the histogram (2.89% buckets): the interval moves by a few %
        assert abs(r["change_low"] - low) < 0.05, (r["change_low"], low)
        assert math.isclose(r["change"], scale - 1, rel_tol=1e-6)  # the mean: wall / calls
        line = _gate_lines(text)[1]
        assert "~fetch" in line
        printed = float(line.split("at least +")[1].split("%")[0]) / 100
        assert abs(printed - low) < 0.05, (line, low)


def test_partly_sampled_phase_counts_only_its_measured_entries(tmp_path):
    """fetch measured in full by one process (10 entries) and one in 10 by another (10 measured,
    recorded as 100): the gate counts calls over the largest stride, 11 (conservative: 20 were
    measured), never all 110, so the interval is +-3 x 0.5 / sqrt(11). NEW 3x slower stays within
    it at 50%; NEW 6x does not."""
    values = [1 * MS] * 5 + [3 * MS] * 5  # cv 0.5 in each process

    def run(d: Path, scale: float) -> Path:
        full = Ph(("fetch",), durations=[int(v * scale) for v in values])
        sampled = Ph(("fetch",), dist=[(int(v * scale), 10) for v in values])
        sampled.sample_every = 10
        _write(d, [full, Ph(("step",), durations=[300 * MS] * 10)], pid=7)
        return _write(d, [sampled, Ph(("step",), durations=[300 * MS] * 10)], pid=8)

    calls, every = 10 + 100, 10
    n = calls / every  # the gate's count of measured entries: calls over the largest stride
    rel = 3.0 * 0.5 / math.sqrt(n)
    a = run(tmp_path / "a", 1.0)
    for scale, regresses in ((3.0, False), (6.0, True)):
        b = run(tmp_path / f"b{scale}", scale)
        doc, _ = _gate(a, b, 0.5)
        low = scale * (1 - rel) / (1 + rel) - 1
        assert (low > 0.5) is regresses  # 0.13 and 1.26 here
        if regresses:
            (r,) = doc["regressions"]
            assert r["estimated"] and abs(r["change_low"] - low) < 0.1, (r["change_low"], low)
        else:
            assert doc["regressions"] == []


def test_open_entries_of_a_live_run_do_not_move_the_mean(tmp_path):
    """NEW is live: step has one entry open for 10 s at its last write. The mean per call is over
    completed entries (documented), so the same completed entries pass any gate."""
    a = _write(tmp_path / "a", [Ph(("step",), durations=[20 * MS] * 50)])
    b = _write(
        tmp_path / "b",
        [Ph(("step",), durations=[20 * MS] * 50, open=1, open_ns=10_000 * MS)],
        final=False,
    )
    doc, text = _gate(a, b, 0.05)
    assert doc["gate"]["checked"] == 1 and doc["regressions"] == []
    assert text.startswith("GATE passed")
    # the time per process does include it: 1 s -> 11 s
    (phase,) = doc["roles"][0]["phases"]
    assert phase["b"]["time_ns"] == 50 * 20 * MS + 10_000 * MS
    assert math.isclose(phase["time_per_process_ratio"], 11.0)
