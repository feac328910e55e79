"""``compare --fail-over``: the CI gate on real runs of one workload, and on sampled estimates."""

from __future__ import annotations

import json

import pytest

from tests.helpers import run_python
from tests.report.synth import MS, Ph, worker_doc, write_worker
from tests.timing import clock_slack_ns

CLI = "from lineprofiler.cli import main; raise SystemExit(main())"

# One process, three phases; "step" sleeps STEP_S x slow. "fetch" is sampled (one entry in 2).
# The child times every entry itself (perf_counter) and writes the means it measured.
WORKLOAD = """
    import json, sys, time
    from lineprofiler.accounting import Profiler
    run, slow = sys.argv[1], float(sys.argv[2])
    p = Profiler(run_dir=run, role="trainer", enabled=True,
                 snapshot_interval_s=None, sample_interval_s=None)
    truth = {}
    def timed(name, seconds, **kw):  # (the sleep alone, the whole with statement)
        t0 = time.perf_counter()
        with p.phase(name, **kw):
            t1 = time.perf_counter()
            time.sleep(seconds)
            t2 = time.perf_counter()
        truth.setdefault(name, []).append((t2 - t1, time.perf_counter() - t0))
    for _ in range(8):
        timed("load", 0.010)
        timed("step", 0.020 * slow)
        timed("fetch", 0.005 * slow, sample=0.5)
    p.close()
    json.dump(truth, open(run + ".truth.json", "w"))
"""


def _record(tmp_path, name: str, slow: float = 1.0):
    run_python(WORKLOAD, cwd=tmp_path, args=[name, str(slow)])
    return tmp_path / name, json.loads((tmp_path / f"{name}.truth.json").read_text())


PHASES = {"load": 0.010, "step": 0.020, "fetch": 0.005}  # name: its sleep in a base run, in s
WIDEN = 1.01  # the clock error (0.5%) on both sides of a ratio


def _mean_bounds(truth, name: str) -> tuple[float, float]:
    """(sleeps alone, whole with statements): the bracket of the mean the profiler measured;
    fetch's of its measured entries (the stride is deterministic: entries 0, 2, 4, 6)."""
    entries = truth[name][:: 2 if name == "fetch" else 1]
    return (
        sum(i for i, _ in entries) / len(entries),
        sum(o for _, o in entries) / len(entries),
    )


def _growth(base, new, name: str) -> tuple[float, float]:
    """The bracket of mean(new) / mean(base) by the children's own clocks."""
    (blo, bhi), (nlo, nhi) = _mean_bounds(base, name), _mean_bounds(new, name)
    return nlo / bhi / WIDEN, nhi / blo * WIDEN


def _steady(truth, slow: float = 1.0) -> bool:
    """Every entry's with statement within 20% of its sleep (step's and fetch's are slow times
    the base's): the machine did not stretch it."""
    return all(
        o <= 1.2 * PHASES[n] * (1.0 if n == "load" else slow) for n in PHASES for _, o in truth[n]
    )


def _mean_gate(base, new, fail_over: float, slow: float = 1.0) -> tuple[set[str], set[str]]:
    """The phases the mean gate must flag (growth above fail_over whatever the clocks' bracket;
    fetch, a sampled estimate whose interval widens with the entries' spread, only on steady
    runs) and those it may flag (the bracket reaches above fail_over)."""
    must, may = set(), set()
    for name in PHASES:
        lo, hi = _growth(base, new, name)
        if lo > 1 + fail_over and (name != "fetch" or (_steady(base) and _steady(new, slow))):
            must.add(name)
        if hi > 1 + fail_over:
            may.add(name)
    return must, may


def cli(tmp_path, *args):
    proc = run_python(CLI, cwd=tmp_path, args=[str(a) for a in args], check=False, timeout=60)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


@pytest.mark.timing
def test_gate_on_real_runs(tmp_path):
    base, base_truth = _record(tmp_path, "base")
    again, again_truth = _record(tmp_path, "again")
    slow, truth = _record(tmp_path, "slow", slow=4.0)

    def gate_json(new, *args):
        doc = json.loads(cli(tmp_path, "compare", base, new, *args, "--json").stdout)
        return doc, {r["phase"]: r for r in doc["regressions"]}

    # the same workload twice: a 50% gate flags what the children's clocks say grew by more
    # than 50% (nothing, unless the machine stretched the second run's sleeps that much)
    must, may = _mean_gate(base_truth, again_truth, 0.5)
    proc = cli(tmp_path, "compare", base, again, "--fail-over", "50")
    _, regs = gate_json(again, "--fail-over", "50")
    assert must <= set(regs) <= may, (regs, base_truth, again_truth)
    assert proc.returncode == (1 if regs else 0), proc.stdout + proc.stderr
    assert "3 phase(s) compared" in proc.stdout
    if not regs:
        assert proc.stdout.startswith("GATE passed"), proc.stdout

    # step 4x slower: the gate fails, names the phase first, the numbers are the child's own
    must, may = _mean_gate(base_truth, truth, 0.5, slow=4.0)
    assert "step" in must, (base_truth, truth)  # 80 ms of sleep against at most 20 ms + waits
    proc = cli(tmp_path, "compare", base, slow, "--fail-over", "50")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    doc, regs = gate_json(slow, "--fail-over", "50")
    assert must <= set(regs) <= may, (regs, base_truth, truth)
    lines = proc.stdout.splitlines()
    n = len(regs)
    assert lines[0].startswith(f"REGRESSIONS: {n} phase(s) whose mean time per call grew by more")
    assert "step" in proc.stdout.split("COMPARE")[0]
    if "fetch" in regs:
        fetch = next(line for line in lines[1 : 1 + n] if "fetch" in line)
        assert "~fetch" in fetch and "(sampled: at least +" in fetch  # sampled: marked
        assert regs["fetch"]["estimated"]
        assert regs["fetch"]["change_low"] <= regs["fetch"]["change"]

    assert doc["gate"]["passed"] is False and doc["gate"]["metric"] == "mean"
    step = regs["step"]
    assert step["role"] == "trainer" and step["metric"] == "mean" and not step["estimated"]
    # the mean per call lies between the child's sleeps and its whole with statements
    inner_s, outer_s = _mean_bounds(truth, "step")
    lo, hi = (inner_s * 1e9, outer_s * 1e9)
    assert lo - clock_slack_ns(lo) <= step["new"] <= hi + clock_slack_ns(hi), (step, truth)
    g_lo, g_hi = _growth(base_truth, truth, "step")
    assert g_lo - 1 <= step["change"] <= g_hi - 1, (step, g_lo, g_hi)

    # --phase narrows the gate to one phase, flagged as the children's clocks say
    proc = cli(tmp_path, "compare", base, slow, "--fail-over", "50", "--phase", "load")
    assert "1 phase(s) compared" in proc.stdout, proc.stdout
    assert proc.returncode in ({1} if "load" in must else {0, 1} if "load" in may else {0})
    # p50 and share see the same regression (step's share: 20/35 of the time -> 80/110, +27%),
    # asserted when both runs were steady (every with statement within 20% of its sleep): on a
    # busy machine the children's clocks do not decide them
    if _steady(base_truth) and _steady(truth, 4.0):
        for metric, pct in (("p50", "100"), ("share", "15")):
            proc = cli(tmp_path, "compare", base, slow, "--fail-over", pct, "--metric", metric)
            gate = proc.stdout.split("COMPARE")[0]
            assert proc.returncode == 1 and " step " in gate and "load" not in gate, proc.stdout
    proc = cli(tmp_path, "compare", base, slow, "--fail-over", "50", "--min-share", "90")
    assert proc.returncode == 1 and proc.stdout.startswith("GATE failed: nothing was compared")

    # bad input: exit 2, never 0 or 1
    for bad in (
        ["--fail-over", "-5"],
        ["--fail-over", "50", "--phase", "nosuch"],
        ["--metric", "p99"],
        ["--fail-over", "50", "--min-share", "120"],
    ):
        proc = cli(tmp_path, "compare", base, slow, *bad)
        assert proc.returncode == 2 and "error:" in proc.stderr, (bad, proc.stderr)
    assert cli(tmp_path, "compare", base, tmp_path / "nope", "--fail-over", "5").returncode == 2


def _run(d, sample_every, scale, name="sampled"):
    # four measured entries: three of 1 ms and one of 10 ms (a wide spread), each recorded as N
    n = sample_every or 1
    ph = Ph((name,), dist=[(int(scale * MS), 3 * n), (int(scale * 10 * MS), n)])
    ph.sample_every = sample_every
    write_worker(d, worker_doc(role="actor", pid=7, threads=[ph]))
    return d


def test_sampling_error_is_taken_into_account(tmp_path):
    """+60% on four measured entries of a spread-out phase is within its sampling error when
    they are one in ten (not a regression at 50%), and is one when every entry was measured."""
    a = _run(tmp_path / "a", 10, 1.0)
    b = _run(tmp_path / "b", 10, 1.6)
    proc = cli(tmp_path, "compare", a, b, "--fail-over", "50", "--json")
    assert proc.returncode == 0, proc.stdout
    assert json.loads(proc.stdout)["regressions"] == []
    a = _run(tmp_path / "ma", None, 1.0)
    b = _run(tmp_path / "mb", None, 1.6)
    proc = cli(tmp_path, "compare", a, b, "--fail-over", "50", "--json")
    assert proc.returncode == 1
    (reg,) = json.loads(proc.stdout)["regressions"]
    assert reg["phase"] == "sampled" and not reg["estimated"]
    assert abs(reg["change"] - 0.6) < 1e-9 and reg["base"] == 13 * MS / 4


def test_gate_escapes_names_on_the_terminal(tmp_path):
    name = "step\x1b[2J"
    a = _run(tmp_path / "a", None, 1.0, name)
    b = _run(tmp_path / "b", None, 2.0, name)
    proc = cli(tmp_path, "compare", a, b, "--fail-over", "50")
    assert proc.returncode == 1
    assert "step\\x1b[2J" in proc.stdout.split("COMPARE")[0]  # the gate's line, and the table's
    assert "\x1b" not in proc.stdout and proc.stdout.count("step\\x1b[2J") == 2
    assert (
        json.loads(cli(tmp_path, "compare", a, b, "--fail-over", "50", "--json").stdout)[
            "regressions"
        ][0]["phase"]
        == name
    )
