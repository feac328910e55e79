"""One run is the processes that ran together, however they were started (issue 14).

Each test starts real processes itself and checks process counts, roles and phase counts from
``merge_run`` and from ``lineprofiler report --json`` against what it started. Processes that must
run together wait for each other (a file barrier), so that they overlap is a fact the test
makes, not an accident of timing.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from lineprofiler.accounting import merge_run
from tests.helpers import child_env, run_python

# argv: run_dir role steps barrier_dir peers. Builds its own profiler (no parent, no launcher),
# waits until `peers` processes have arrived, then records `steps` steps.
INDEPENDENT = """
import os, sys, time
from pathlib import Path
from lineprofiler.accounting import Profiler

run_dir, role, steps, barrier, peers = sys.argv[1:6]
p = Profiler(run_dir=run_dir, role=role, enabled=True,
             snapshot_interval_s=None, sample_interval_s=None)
Path(barrier, str(os.getpid())).touch()
deadline = time.monotonic() + 60
while len(os.listdir(barrier)) < int(peers) and time.monotonic() < deadline:
    time.sleep(0.02)
for _ in range(int(steps)):
    with p.phase("step"):
        p.count("items", 1)
p.close()
"""


def _report_json(run_dir: Path, *extra: str) -> dict:
    proc = subprocess.run(
        [sys.executable, "-m", "lineprofiler", "report", str(run_dir), "--json", *extra],
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _attempts_json(run_dir: Path) -> list[dict]:
    proc = subprocess.run(
        [sys.executable, "-m", "lineprofiler", "attempts", str(run_dir), "--json"],
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _shell_launch(tmp_path: Path, run_dir: Path, tag: str, plan: list[tuple[str, int]], env=None):
    """``python x & python x & python y & wait`` from a shell, each with its own steps."""
    script = tmp_path / "independent.py"
    script.write_text(INDEPENDENT)
    barrier = tmp_path / f"barrier-{tag}"
    barrier.mkdir()
    cmds = [
        f"{sys.executable} {script} {run_dir} {role} {steps} {barrier} {len(plan)} &"
        for role, steps in plan
    ]
    proc = subprocess.run(
        ["bash", "-c", " ".join(cmds) + " wait"],
        cwd=tmp_path,
        env=child_env(env),
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr


def test_a_shell_script_launch_is_one_run(tmp_path):
    """The spec's own example: three processes a script started together, no launcher, no
    parent profiler, each with its own generated run id."""
    run_dir = tmp_path / "run"
    _shell_launch(tmp_path, run_dir, "a", [("actor", 2), ("actor", 3), ("learner", 5)])
    run = merge_run(run_dir, with_samples=False)
    assert run.processes == 3
    assert {n: r.processes for n, r in run.roles.items()} == {"actor": 2, "learner": 1}
    assert len({w.run_id for w in run.workers}) == 3  # three ids, still one run
    assert run.roles["actor"].tree[("step",)].calls == 5
    assert run.tree[("step",)].calls == 10
    assert run.superseded == [] and [c.kind for c in run.caveats] == []
    doc = _report_json(run_dir)
    assert doc["run"]["processes"] == 3
    assert doc["run"]["roles"] == {"actor": 2, "learner": 1}
    assert [(a["processes"], a["roles"], a["reported"]) for a in doc["attempts"]] == [
        (3, {"actor": 2, "learner": 1}, True)
    ]


def test_sequential_reruns_are_attempts_never_summed(tmp_path):
    """Two launches one after the other into one directory, without and then with a fixed
    LINEPROFILER_RUN_ID: the newest is reported, the older named, nothing summed."""
    for fixed in (None, "nightly"):
        run_dir = tmp_path / f"run-{fixed}"
        env = {"LINEPROFILER_RUN_ID": fixed} if fixed else None
        _shell_launch(tmp_path, run_dir, f"{fixed}-1", [("actor", 1), ("actor", 1)], env)
        _shell_launch(tmp_path, run_dir, f"{fixed}-2", [("actor", 4), ("actor", 4)], env)
        run = merge_run(run_dir, with_samples=False)
        assert run.processes == 2
        assert run.tree[("step",)].calls == 8  # the second launch's, not 10
        assert [a.workers for a in run.superseded] == [2]
        assert [c.kind for c in run.caveats] == ["superseded_attempt"]
        listed = _attempts_json(run_dir)
        assert [(a["processes"], a["reported"]) for a in listed] == [(2, False), (2, True)]
        assert listed[0]["end_time"] <= listed[1]["start_time"]
        if fixed:
            assert [a["id"] for a in listed] == ["nightly", "nightly~2"]
            text = subprocess.run(
                [sys.executable, "-m", "lineprofiler", "attempts", str(run_dir)],
                env=child_env(),
                capture_output=True,
                text=True,
                timeout=120,
            ).stdout.splitlines()
            text = [line for line in text if not line.startswith("    why: ")]
            assert text[0].split() == [
                "ATTEMPT",
                "START",
                "(UTC)",
                "END",
                "(UTC)",
                "PROCS",
                "ROLES",
            ]
            assert text[1].startswith("nightly ") and text[1].endswith("actor x2")
            assert text[2].startswith("nightly~2 ") and text[2].endswith("actor x2  (reported)")
        old = merge_run(run_dir, with_samples=False, attempt=listed[0]["id"])
        assert old.processes == 2 and old.tree[("step",)].calls == 2
        every = merge_run(run_dir, with_samples=False, attempt="all")
        assert every.processes == 4 and every.tree[("step",)].calls == 10
        doc = _report_json(run_dir, "--attempt", listed[0]["id"])
        assert doc["run"]["processes"] == 2 and doc["run"]["run_id"] == listed[0]["id"]


def test_concurrent_runs_under_different_explicit_ids_stay_apart(tmp_path):
    """Two launches at the same time into one directory with different explicit ids: two
    attempts that overlapped, each named, neither summed into the other."""
    run_dir = tmp_path / "run"
    script = tmp_path / "independent.py"
    script.write_text(INDEPENDENT)
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    procs = [
        subprocess.Popen(
            [sys.executable, script, run_dir, "actor", str(steps), barrier, "4"],
            env=child_env({"LINEPROFILER_RUN_ID": rid}),
        )
        for rid, steps in (("alpha", 1), ("alpha", 1), ("beta", 3), ("beta", 3))
    ]
    assert [p.wait(timeout=120) for p in procs] == [0, 0, 0, 0]
    run = merge_run(run_dir, with_samples=False)
    assert run.processes == 2
    assert run.tree[("step",)].calls in (2, 6)
    other = "alpha" if run.run_id == "beta" else "beta"
    assert [c.kind for c in run.caveats] == ["overlapped_attempt"]
    assert other in run.caveats[0].message
    assert merge_run(run_dir, with_samples=False, attempt=other).processes == 2


def test_a_copied_worker_file_is_skipped_and_named(tmp_path):
    run_dir = tmp_path / "run"
    _shell_launch(tmp_path, run_dir, "a", [("actor", 2), ("learner", 3)])
    [learner] = [p for p in run_dir.glob("workers/*/*.json") if '"learner"' in p.read_text()]
    copy = learner.with_name(learner.name.replace("w_", "w_copy-", 1))
    shutil.copy(learner, copy)
    run = merge_run(run_dir, with_samples=False)
    assert run.processes == 2
    assert run.tree[("step",)].calls == 5  # not 8
    [dup] = [c for c in run.caveats if c.kind == "duplicate_file"]
    assert len(dup.workers) == 1 and dup.workers[0] in (
        copy.relative_to(run_dir).as_posix(),
        learner.relative_to(run_dir).as_posix(),
    )
    assert _report_json(run_dir)["run"]["processes"] == 2


def test_two_live_processes_claiming_one_rank_are_named(tmp_path):
    run_dir = tmp_path / "run"
    _shell_launch(tmp_path, run_dir, "a", [("actor", 1), ("actor", 1)], {"RANK": "0"})
    run = merge_run(run_dir, with_samples=False)
    assert run.processes == 2
    assert [c.kind for c in run.caveats] == ["duplicate_rank"]
    assert len(run.caveats[0].workers) == 2


# The parent has no profiler; LINEPROFILER_PROFILE=1 comes from the shell, and each worker builds
# Profiler(run_dir=..., role=...), meeting the others at a barrier.
ENV_ONLY_SPAWN = """
import multiprocessing as mp, sys
from lineprofiler.accounting import Profiler

def worker(i, barrier):
    with Profiler(run_dir="run", role="actor" if i else "learner",
                  snapshot_interval_s=None, sample_interval_s=None) as p:
        barrier.wait(60)
        for _ in range(i + 1):
            with p.phase("step"):
                pass

if __name__ == "__main__":
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(3)
    procs = [ctx.Process(target=worker, args=(i, barrier)) for i in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    print("exitcodes", [p.exitcode for p in procs])
"""


def test_env_only_spawn_workers_are_one_run(tmp_path):
    out = run_python(ENV_ONLY_SPAWN, cwd=tmp_path, env={"LINEPROFILER_PROFILE": "1"}).stdout
    assert "exitcodes [0, 0, 0]" in out
    run = merge_run(tmp_path / "run", with_samples=False)
    assert run.processes == 3
    assert {n: r.processes for n, r in run.roles.items()} == {"actor": 2, "learner": 1}
    assert run.tree[("step",)].calls == 6
    assert run.superseded == [] and [c.kind for c in run.caveats] == []
