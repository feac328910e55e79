"""``compare`` with phases that only some of a role's processes record: the change is the ratio
of time per process of the role (docs: "time summed over the role's processes, divided by their
number"), so a phase recorded by one process of four in BASE and by all four in NEW is 4x, and
the runs' different process counts are the denominators. Truth: the durations chosen here."""

from __future__ import annotations

import json
import math
from pathlib import Path

from lineprofiler.report.compare import compare_runs, render_compare_json, render_compare_text
from lineprofiler.report.merge import merge_run
from tests.report.synth import MS, Ph, worker_doc, write_worker


def _run(run_dir: Path, processes: int, eval_on: int) -> tuple[Path, dict[str, int]]:
    """``processes`` trainers, each 10 x 100 ms of step; the first ``eval_on`` also run eval
    (5 x 40 ms). Returns the directory and each phase's total time (ns)."""
    total = {"step": 0, "eval": 0}
    for k in range(processes):
        phases = [Ph(("step",), durations=[100 * MS] * 10)]
        total["step"] += 10 * 100 * MS
        if k < eval_on:
            phases.append(Ph(("eval",), durations=[40 * MS] * 5))
            total["eval"] += 5 * 40 * MS
        write_worker(run_dir, worker_doc(role="trainer", pid=100 + k, rank=k, threads=phases))
    return run_dir, total


def test_change_divides_by_the_roles_processes_not_the_recording_ones(tmp_path):
    cases = [
        # (BASE processes, BASE eval on, NEW processes, NEW eval on)
        (4, 1, 4, 4),  # eval spreads to every rank: 4x the time per process
        (2, 1, 4, 1),  # twice the ranks, one still evaluates: half the time per process
        (4, 4, 2, 1),
    ]
    for i, (pa, ea, pb, eb) in enumerate(cases):
        a, ta = _run(tmp_path / f"a{i}", pa, ea)
        b, tb = _run(tmp_path / f"b{i}", pb, eb)
        c = compare_runs(merge_run(a), merge_run(b))
        doc = json.loads(render_compare_json(c))
        phases = {p["name"]: p for p in doc["roles"][0]["phases"]}
        for name in ("step", "eval"):
            truth = (tb[name] / pb) / (ta[name] / pa)
            got = phases[name]["time_per_process_ratio"]
            assert math.isclose(got, truth, rel_tol=1e-9), (i, name, got, truth)
            assert phases[name]["a"]["processes"] == (pa if name == "step" else ea)
            assert phases[name]["b"]["processes"] == (pb if name == "step" else eb)
        # the terminal table prints the same ratio
        line = next(ln for ln in render_compare_text(c).splitlines() if ln.startswith("eval "))
        truth = (tb["eval"] / pb) / (ta["eval"] / pa)
        assert line.split()[5] == f"{truth:.2f}x", line
