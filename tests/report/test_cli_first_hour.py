"""The CLI a newcomer meets: record, --version, suggestions, and mistakes that explain themselves."""

from __future__ import annotations

import json
import sys

from lineprofiler import __version__
from tests.report.synth import MS, Ph, worker_doc, write_worker
from tests.report.test_cli_report import cli

SCRIPT = """
import multiprocessing as mp, sys
from lineprofiler.accounting import Profiler

def work(n):
    p = Profiler(role="actor")          # joins the run through the environment record set
    with p:
        for _ in range(n):
            with p.phase("step"):
                p.count("items", 2)

if __name__ == "__main__":
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=work, args=(5,)) for _ in range(2)]
    for q in procs: q.start()
    for q in procs: q.join()
    with Profiler(role="learner") as p:
        with p.phase("train"):
            pass
    sys.exit(int(sys.argv[1]))
"""


def test_record_runs_the_command_and_prints_its_report(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    proc = cli(tmp_path, "record", "--json", "--no-samples", "--", sys.executable, script, "0")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["run"]["roles"] == {"actor": 2, "learner": 1}
    actor = next(r for r in doc["roles"] if r["role"] == "actor")
    step = next(p for p in actor["phases"] if p["path"] == ["step"])
    assert step["calls"] == 10  # 2 processes x 5 entries, counted by the test
    assert (tmp_path / "profile" / "workers").is_dir()
    # the command's failing status passes through, and the report is still printed
    proc = cli(tmp_path, "record", "--run-dir", "r2", "--", sys.executable, script, "3")
    assert proc.returncode == 3 and "ACTOR" in proc.stdout, proc.stderr
    assert "exited with status 3" in proc.stderr


def test_record_of_a_command_that_never_profiles_says_why(tmp_path):
    # the command's own exit status passes through (a CI job fails only when the job did)
    proc = cli(tmp_path, "record", "--", sys.executable, "-c", "print('hi')")
    assert proc.returncode == 0 and "hi" in proc.stdout
    assert "Did the command build a Profiler" in proc.stderr
    proc = cli(tmp_path, "record", "--", sys.executable, "-c", "raise SystemExit(5)")
    assert proc.returncode == 5 and "Did the command build a Profiler" in proc.stderr


def test_version_and_suggestions(tmp_path):
    proc = cli(tmp_path, "--version")
    assert proc.returncode == 0 and proc.stdout.strip() == f"lineprofiler {__version__}"
    proc = cli(tmp_path, "reprot", "x")
    assert proc.returncode == 2 and "did you mean report?" in proc.stderr
    proc = cli(tmp_path, "report", "x", "--jsn")
    assert proc.returncode == 2 and "did you mean --json?" in proc.stderr
    proc = cli(tmp_path, "report", "--help")
    assert proc.returncode == 0 and "examples:" in proc.stdout
    proc = cli(tmp_path, "--help")
    assert "lineprofiler record -- python train.py" in proc.stdout


def test_report_mistakes_explain_themselves(tmp_path):
    proc = cli(tmp_path, "report", tmp_path / "profile")
    assert proc.returncode == 2
    assert "was profiling enabled?" in proc.stderr and "LINEPROFILER_PROFILE=1" in proc.stderr
    (tmp_path / "empty").mkdir()
    proc = cli(tmp_path, "report", tmp_path / "empty")
    assert proc.returncode == 2 and "was profiling enabled?" in proc.stderr
    # a parent of runs lists them; a worker file names its run directory
    for name in ("run_a", "run_b"):
        write_worker(
            tmp_path / "runs" / name, worker_doc(role="a", pid=1, threads=[Ph(("x",), [MS])])
        )
    proc = cli(tmp_path, "report", tmp_path / "runs")
    assert proc.returncode == 2 and "holds 2" in proc.stderr
    assert str(tmp_path / "runs" / "run_a") in proc.stderr
    f = next((tmp_path / "runs" / "run_a" / "workers" / "node01").glob("w_*.json"))
    proc = cli(tmp_path, "report", f)
    assert proc.returncode == 2
    assert f"pass its run directory, {tmp_path / 'runs' / 'run_a'}" in proc.stderr


LIVE = """
import sys, time
from lineprofiler.accounting import Profiler
role, interval = sys.argv[1], float(sys.argv[2])
p = Profiler(run_dir="live", role=role, enabled=True, snapshot_interval_s=interval,
             sample_interval_s=None)
print("started", flush=True)
with p.phase("work"):
    time.sleep(60)
"""


def test_a_report_taken_mid_run_says_the_run_is_going(tmp_path):
    import subprocess

    from tests.helpers import child_env

    script = tmp_path / "live.py"
    script.write_text(LIVE)
    # one worker flushes every 0.5 s, the other only every 30 s: its first periodic write is
    # due later, so it is live and pending, not "recorded nothing"
    procs = [
        subprocess.Popen(
            [sys.executable, script, role, interval],
            cwd=tmp_path,
            env=child_env(),
            stdout=subprocess.PIPE,
            text=True,
        )
        for role, interval in (("fast", "0.5"), ("slow", "30"))
    ]
    try:
        for p in procs:
            assert p.stdout.readline().strip() == "started"
        import time

        time.sleep(1.5)  # the fast one has written its open phase by now
        proc = cli(tmp_path, "report", tmp_path / "live", "--no-samples")
        assert proc.returncode == 0, proc.stderr
        out = proc.stdout
        assert out.startswith("LIVE: the run is still going")
        # caveats come before the role blocks when there are any
        assert out.index("CAVEATS") < out.index("FAST")
        assert "have not written a phase yet" in out and "slow" in out
        assert "recorded nothing" not in out
        doc = json.loads(cli(tmp_path, "report", tmp_path / "live", "--json").stdout)
        assert doc["run"]["live_s"] is not None and doc["run"]["live_s"] < 30
        slow = next(w for w in doc["workers"] if w["role"] == "slow")
        assert 0 < slow["next_write_s"] <= 30 and not slow["recorded_nothing"]
    finally:
        for p in procs:
            p.kill()
            p.wait()
