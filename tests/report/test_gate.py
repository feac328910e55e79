"""``compare --fail-over``: the CI gate on real runs of one workload, and on sampled estimates."""

from __future__ import annotations

import json

from tests.helpers import run_python
from tests.report.synth import MS, Ph, worker_doc, write_worker

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
    def timed(name, seconds, **kw):
        t0 = time.perf_counter()
        with p.phase(name, **kw):
            time.sleep(seconds)
        truth.setdefault(name, []).append(time.perf_counter() - t0)
    for _ in range(8):
        timed("load", 0.010)
        timed("step", 0.020 * slow)
        timed("fetch", 0.005 * slow, sample=0.5)
    p.close()
    json.dump({k: sum(v) / len(v) for k, v in truth.items()}, open(run + ".truth.json", "w"))
"""


def _record(tmp_path, name: str, slow: float = 1.0):
    run_python(WORKLOAD, cwd=tmp_path, args=[name, str(slow)])
    return tmp_path / name, json.loads((tmp_path / f"{name}.truth.json").read_text())


def cli(tmp_path, *args):
    proc = run_python(CLI, cwd=tmp_path, args=[str(a) for a in args], check=False, timeout=60)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def test_gate_on_real_runs(tmp_path):
    base, _ = _record(tmp_path, "base")
    again, _ = _record(tmp_path, "again")
    slow, truth = _record(tmp_path, "slow", slow=4.0)

    # the same workload twice: a 50% gate passes, whatever the machine's noise
    proc = cli(tmp_path, "compare", base, again, "--fail-over", "50")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith("GATE passed") and "3 phase(s) compared" in proc.stdout

    # step 4x slower: the gate fails, names the phase first, the numbers are the child's own
    proc = cli(tmp_path, "compare", base, slow, "--fail-over", "50")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("REGRESSIONS: 2 phase(s) whose mean time per call grew by more")
    assert "step" in proc.stdout.split("COMPARE")[0]
    fetch = next(line for line in lines[1:3] if "fetch" in line)
    assert "~fetch" in fetch and "(sampled: at least +" in fetch  # sampled: marked

    doc = json.loads(cli(tmp_path, "compare", base, slow, "--fail-over", "50", "--json").stdout)
    assert doc["gate"]["passed"] is False and doc["gate"]["metric"] == "mean"
    regs = {r["phase"]: r for r in doc["regressions"]}
    assert set(regs) == {"step", "fetch"}
    step = regs["step"]
    assert step["role"] == "trainer" and step["metric"] == "mean" and not step["estimated"]
    assert abs(step["new"] / 1e9 - truth["step"]) / truth["step"] < 0.05
    assert step["change"] > 2.0  # 4x the sleep; >+200% however much the base overslept
    assert regs["fetch"]["estimated"] and regs["fetch"]["change_low"] <= regs["fetch"]["change"]

    # --phase narrows the gate; p50 and share see the same regression; min-share drops it
    proc = cli(tmp_path, "compare", base, slow, "--fail-over", "50", "--phase", "load")
    assert proc.returncode == 0 and "1 phase(s) compared" in proc.stdout
    # (step's share: 20/35 of the time -> 80/110, +27%)
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
