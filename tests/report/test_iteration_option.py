"""``report --iteration NAME``: the ITERATIONS block of a loop whose phase is not called
``iteration``, checked against the loop's own count and timer."""

from __future__ import annotations

import json
import re
import time

from tests.helpers import quiet_profiler
from tests.report.test_cli_report import cli

STEPS = 40
STEP_S = 0.002


def _run(tmp_path) -> float:
    """A trainer whose loop body is ``epoch/step``, beside a top-level ``poll`` entered 3 times
    (what the default picks); the steps' mean duration by the test's own clock, in ns."""
    p = quiet_profiler(tmp_path / "run", role="trainer")
    own_ns = 0
    try:
        for _ in range(3):
            with p.phase("poll"):
                pass
        with p.phase("epoch"):
            for _ in range(STEPS):
                t0 = time.perf_counter_ns()
                with p.phase("step"):
                    time.sleep(STEP_S)
                own_ns += time.perf_counter_ns() - t0
    finally:
        p.close()
    return own_ns / STEPS


def _mean_ns(text: str) -> float:
    m = re.search(r"ITERATIONS[^\n]*\n +mean +([\d.]+)(us|ms|s)\b", text)
    assert m, text
    return float(m.group(1)) * {"us": 1e3, "ms": 1e6, "s": 1e9}[m.group(2)]


def test_iteration_names_the_loop_phase_and_its_block_matches_the_loops_own_clock(tmp_path):
    own_mean_ns = _run(tmp_path)
    default = cli(tmp_path, "report", "run", "--no-samples")
    assert default.returncode == 0, default.stderr
    assert "ITERATIONS  (3 entries)  poll" in default.stdout  # today's fallback, unchanged

    for name in ("step", "epoch/step"):
        proc = cli(tmp_path, "report", "run", "--no-samples", "--iteration", name)
        assert proc.returncode == 0, proc.stderr
        assert f"ITERATIONS  ({STEPS} entries)  epoch/step" in proc.stdout
        # the mean is exact (wall / entries): within the test's own timer, which also holds the
        # with statement itself, and never above it by more than clock noise
        mean = _mean_ns(proc.stdout)
        assert 0.9 * own_mean_ns <= mean <= own_mean_ns * 1.01, (mean, own_mean_ns)
        assert mean >= STEP_S * 1e9

    doc = json.loads(
        cli(tmp_path, "report", "run", "--json", "--no-samples", "--iteration", "step").stdout
    )
    [role] = doc["roles"]
    assert role["iterations"] == "epoch/step"


def test_an_iteration_name_no_phase_has_shows_no_block(tmp_path):
    _run(tmp_path)
    proc = cli(tmp_path, "report", "run", "--no-samples", "--iteration", "missing")
    assert proc.returncode == 0, proc.stderr
    assert "ITERATIONS" not in proc.stdout
    assert "--iteration step" in cli(tmp_path, "report", "--help").stdout  # an example in --help
