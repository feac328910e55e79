"""``report --iteration NAME``: the ITERATIONS block of a loop whose phase is not called
``iteration``, checked against the loop's own count and timer."""

from __future__ import annotations

import json
import re
import time

import pytest

from tests.helpers import quiet_profiler
from tests.report.test_cli_report import cli
from tests.timing import clock_slack_ns, printed_ns

STEPS = 40
STEP_S = 0.002


def _run(tmp_path) -> tuple[float, float]:
    """A trainer whose loop body is ``epoch/step``, beside a top-level ``poll`` entered 3 times
    (what the default picks); the steps' mean duration by the test's own clock, in ns, from
    inside (the sleep alone: less than the step) and from outside (the whole with statement)."""
    p = quiet_profiler(tmp_path / "run", role="trainer")
    inner_ns = outer_ns = 0
    try:
        for _ in range(3):
            with p.phase("poll"):
                pass
        with p.phase("epoch"):
            for _ in range(STEPS):
                t0 = time.perf_counter_ns()
                with p.phase("step"):
                    t1 = time.perf_counter_ns()
                    time.sleep(STEP_S)
                    inner_ns += time.perf_counter_ns() - t1
                outer_ns += time.perf_counter_ns() - t0
    finally:
        p.close()
    return inner_ns / STEPS, outer_ns / STEPS


def _mean_ns(text: str) -> tuple[float, float]:
    """The ITERATIONS block's printed mean, and half its last printed digit, in ns."""
    m = re.search(r"ITERATIONS[^\n]*\n +mean +([\d.]+)(us|ms|s)\b", text)
    assert m, text
    return printed_ns(m.group(1), m.group(2))


@pytest.mark.timing
def test_iteration_names_the_loop_phase_and_its_block_matches_the_loops_own_clock(tmp_path):
    inner_mean_ns, outer_mean_ns = _run(tmp_path)
    default = cli(tmp_path, "report", "run", "--no-samples")
    assert default.returncode == 0, default.stderr
    assert "ITERATIONS  (3 entries)  poll" in default.stdout  # today's fallback, unchanged

    for name in ("step", "epoch/step"):
        proc = cli(tmp_path, "report", "run", "--no-samples", "--iteration", name)
        assert proc.returncode == 0, proc.stderr
        assert f"ITERATIONS  ({STEPS} entries)  epoch/step" in proc.stdout
        # the mean is exact (wall / entries): between the steps' sleeps and their whole with
        # statements by the test's own clock, widened by the clock's error and the printed
        # rounding ("2.1ms" is 2.05-2.15 ms)
        mean, half_step = _mean_ns(proc.stdout)
        lo = inner_mean_ns - clock_slack_ns(inner_mean_ns) - half_step
        hi = outer_mean_ns + clock_slack_ns(outer_mean_ns) + half_step
        assert lo <= mean <= hi, (mean, inner_mean_ns, outer_mean_ns)
        assert mean + half_step >= STEP_S * 1e9

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
