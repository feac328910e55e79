"""Real launchers start the ranks: torch.distributed.run, Open MPI's mpirun, Slurm's srun.

No parent profiler exists here: each rank builds its own, and the ranks of one launch must still
form one attempt (from the launcher's job identity), each recording its rank and local rank.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lineprofiler.accounting import merge_run
from tests.helpers import child_env
from tests.integration.slurm_cluster import SlurmCluster

pytestmark = [pytest.mark.slow, pytest.mark.launcher]

RANK_SCRIPT = """
import json, os, sys, time
from lineprofiler.accounting import Profiler

p = Profiler(run_dir=sys.argv[1], role=sys.argv[2], enabled=True,
             snapshot_interval_s=None, sample_interval_s=None)
rank = json.loads(p._meta_json())["rank"]  # what the worker file's meta will say
for _ in range(rank + 1):
    with p.phase("step"):
        p.count("items", 2)
if len(sys.argv) > 3:        # wait to be preempted
    print("ready", rank, os.environ.get("SLURM_JOB_ID"), flush=True)
    with p.phase("blocked"):
        time.sleep(120)
p.close()
"""


def _script(tmp_path):
    path = tmp_path / "rank.py"
    path.write_text(RANK_SCRIPT)
    return path


def _check_ranks(run, role: str, n: int, rank_source: str) -> None:
    assert run.processes == n
    assert {r: run.roles[r].processes for r in run.roles} == {role: n}
    assert sorted(w.rank for w in run.workers) == list(range(n))
    assert sorted(w.local_rank for w in run.workers) == list(range(n))
    assert len({w.pid for w in run.workers}) == n
    assert all(w.final for w in run.workers)
    # Ground truth: rank r ran r + 1 steps.
    assert sorted(w.tree[("step",)].calls for w in run.workers) == list(range(1, n + 1))
    assert run.tree[("step",)].calls == n * (n + 1) // 2
    assert run.tree[("step",)].counters == {"items": n * (n + 1)}
    for w in run.workers:
        assert w.tree[("step",)].calls == w.rank + 1
    assert {meta(run, w)["rank_source"] for w in run.workers} == {rank_source}


def meta(run, worker) -> dict:
    return json.loads((Path(run.run_dir) / worker.path).read_text())["meta"]


def test_torch_distributed_run_with_four_cpu_processes(tmp_path):
    if importlib.util.find_spec("torch") is None:
        pytest.skip("torch is not installed (pip install torch==2.13.0)")
    run_dir = tmp_path / "run"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "4"]
    cmd += [str(_script(tmp_path)), str(run_dir), "trainer"]
    for _ in range(2):  # a rerun into the same directory is a second attempt
        proc = subprocess.run(
            cmd, cwd=tmp_path, env=child_env(), capture_output=True, text=True, timeout=180
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
    run = merge_run(run_dir, with_samples=False)
    _check_ranks(run, "trainer", 4, "RANK")
    assert run.run_id.startswith("torchrun-")
    assert [a.workers for a in run.superseded] == [4]
    assert run.superseded[0].run_id.startswith("torchrun-")
    assert run.superseded[0].run_id != run.run_id


# The ranks meet in a gloo barrier while their profilers are open: that they ran together is a fact
# the test makes (c10d rendezvous; no parent profiler, no LINEPROFILER_RUN_ID).
C10D_RANK_SCRIPT = """
import sys
import torch.distributed as dist
from lineprofiler.accounting import Profiler

p = Profiler(run_dir=sys.argv[1], role="trainer", enabled=True,
             snapshot_interval_s=None, sample_interval_s=None)
dist.init_process_group("gloo")
rank = dist.get_rank()
for _ in range(rank + 1):
    with p.phase("step"):
        p.count("items", 2)
dist.barrier()
dist.destroy_process_group()
p.close()
"""


@pytest.mark.parametrize("rdzv_id", [None, "fixed-job"])
def test_torchrun_c10d_ranks_are_one_attempt_and_a_rerun_another(tmp_path, rdzv_id):
    """torchrun --rdzv-backend=c10d: without --rdzv-id every rank makes its own run id
    (TORCHELASTIC_RUN_ID=none), yet the four are one run; launched twice (with the same
    --rdzv-id, or without one), the second launch is reported and the first named, not summed."""
    if importlib.util.find_spec("torch") is None:
        pytest.skip("torch is not installed (pip install torch==2.13.0)")
    script = tmp_path / "c10d_rank.py"
    script.write_text(C10D_RANK_SCRIPT)
    run_dir = tmp_path / "run"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "4"]
    cmd += ["--rdzv-backend=c10d", "--rdzv-endpoint=localhost:0"]
    cmd += [f"--rdzv-id={rdzv_id}"] if rdzv_id else []
    for _ in range(2):
        proc = subprocess.run(
            [*cmd, str(script), str(run_dir)],
            cwd=tmp_path,
            env=child_env(),
            capture_output=True,
            text=True,
            timeout=240,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
    run = merge_run(run_dir, with_samples=False)
    _check_ranks(run, "trainer", 4, "RANK")
    if rdzv_id is None:
        assert len({w.run_id for w in run.workers}) == 4  # four generated ids, one run
    else:
        assert {w.run_id for w in run.workers} == {run.run_id.split("~")[0]}
        assert run.run_id.endswith("~2")
    assert [a.workers for a in run.superseded] == [4]
    assert [c.kind for c in run.caveats] == ["superseded_attempt"]
    assert [a.workers for a in run.attempts] == [4, 4]


def test_mpirun_with_four_ranks(tmp_path):
    mpirun = shutil.which("mpirun")
    if mpirun is None:
        pytest.skip("mpirun is not installed (apt-get install openmpi-bin)")
    run_dir = tmp_path / "run"
    cmd = [mpirun, "--allow-run-as-root", "--oversubscribe", "-n", "4", sys.executable]
    cmd += [str(_script(tmp_path)), str(run_dir), "rank"]
    env = child_env()
    env.setdefault("OMPI_MCA_plm_rsh_agent", "false")  # single node: never try ssh
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = merge_run(run_dir, with_samples=False)
    _check_ranks(run, "rank", 4, "OMPI_COMM_WORLD_RANK")
    assert run.run_id.startswith("mpi-") and run.superseded == []


def test_srun_ranks_flush_on_usr1_preemption(tmp_path, slurm):
    run_dir = tmp_path / "run"
    cmd = ["srun", "-n", "4", "--overcommit", "--kill-on-bad-exit=0", sys.executable]
    cmd += [str(_script(tmp_path)), str(run_dir), "actor", "wait"]
    env = child_env({"SLURM_CONF": slurm.env["SLURM_CONF"]})
    srun = subprocess.Popen(
        cmd, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        ready = []
        deadline = time.monotonic() + 90
        while len(ready) < 4 and time.monotonic() < deadline:
            line = srun.stdout.readline()
            if not line:
                break
            if line.startswith("ready"):
                ready.append(line.split())
        assert len(ready) == 4, srun.stderr.read() if srun.poll() is not None else "no ready"
        job_id = ready[0][2]
        # What sbatch --signal=USR1@120 does ahead of a preemption, now rather than in 2 minutes.
        subprocess.run(["scancel", "--signal=USR1", job_id], env=env, check=True, timeout=30)
        srun.wait(timeout=60)
    finally:
        if srun.poll() is None:
            srun.kill()
            srun.wait()
    run = merge_run(run_dir, with_samples=False)
    _check_ranks(run, "actor", 4, "SLURM_PROCID")
    assert run.run_id == f"slurm-{job_id}"
    assert {w.job_id for w in run.workers} == {job_id}
    # Preempted mid-phase, each rank wrote its final file from the USR1 handler: nothing lost.
    assert run.tree[("blocked",)].open == 4 and run.tree[("blocked",)].calls == 0
    assert {meta(run, w)["exit_signal"] for w in run.workers} == {"SIGUSR1"}


def _batch_job(tmp_path: Path, slurm: SlurmCluster) -> tuple[Path, Path, Path, dict[str, str]]:
    """A batch script whose one rank records into ``run/`` and waits in a phase to be signalled:
    (run dir, the job's output file, the script, the environment for Slurm's commands)."""
    run_dir = tmp_path / "run"
    script = tmp_path / "job.sh"
    script.write_text(
        f"#!/bin/sh\nexec {sys.executable} {_script(tmp_path)} {run_dir} batch wait\n"
    )
    env = child_env({"SLURM_CONF": slurm.env["SLURM_CONF"]})
    return run_dir, tmp_path / "job.out", script, env


def test_sbatch_batch_step_flushes_on_usr1_to_the_batch_shell(tmp_path, slurm):
    """What ``sbatch --signal=B:USR1@120`` does before a preemption: signal the batch step."""
    run_dir, out, script, env = _batch_job(tmp_path, slurm)
    sub = subprocess.run(
        ["sbatch", "--parsable", f"--output={out}", "-n", "1", str(script)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    job_id = sub.stdout.strip().split(";")[0]
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and "ready" not in (out.read_text() if out.exists() else ""):
        time.sleep(0.1)
    assert "ready" in out.read_text()
    subprocess.run(["scancel", "--batch", "--signal=USR1", job_id], env=env, check=True, timeout=30)
    while time.monotonic() < deadline:
        q = subprocess.run(["squeue", "-h", "-j", job_id], env=env, capture_output=True, text=True)
        if not q.stdout.strip():
            break
        time.sleep(0.1)
    run = merge_run(run_dir, with_samples=False)
    [w] = run.workers
    assert run.run_id == f"slurm-{job_id}" and w.job_id == job_id and w.role == "batch"
    assert w.final and w.tree[("step",)].calls == (w.rank or 0) + 1
    assert run.tree[("blocked",)].open == 1
    assert meta(run, w)["exit_signal"] == "SIGUSR1"


def _wait_for(predicate, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def test_a_requeued_slurm_job_is_a_new_attempt_not_a_sum(tmp_path, slurm):
    """``scontrol requeue`` (what a preemption with requeue does) reruns the batch script in the
    same job: the report must show the second run and name the first, not add them up."""
    run_dir, out, script, env = _batch_job(tmp_path, slurm)

    def text() -> str:
        return out.read_text() if out.exists() else ""

    job_id = (
        subprocess.run(
            [
                "sbatch",
                "--parsable",
                "--requeue",
                "--open-mode=append",
                f"--output={out}",
                str(script),
            ],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        )
        .stdout.strip()
        .split(";")[0]
    )
    _wait_for(lambda: text().count("ready") == 1, 60, "the first run")

    def requeued() -> bool:  # refused while the job is still starting: retry
        cmd = ["scontrol", "requeue", job_id]
        return subprocess.run(cmd, env=env, capture_output=True, timeout=30).returncode == 0

    _wait_for(requeued, 30, "scontrol requeue")

    def started_again() -> bool:  # a requeued job waits ~2 minutes to start again: not here
        cmd = ["scontrol", "update", f"JobId={job_id}", "StartTime=now"]
        subprocess.run(cmd, env=env, capture_output=True, timeout=30)
        return text().count("ready") == 2

    _wait_for(started_again, 60, "the requeued run")
    subprocess.run(["scancel", "--batch", "--signal=USR1", job_id], env=env, check=True, timeout=30)

    def job_gone() -> bool:
        q = subprocess.run(["squeue", "-h", "-j", job_id], env=env, capture_output=True, text=True)
        return not q.stdout.strip()

    _wait_for(job_gone, 60, "the job to end")
    run = merge_run(run_dir, with_samples=False)
    assert run.run_id == f"slurm-{job_id}-r1"
    assert [(a.run_id, a.workers) for a in run.superseded] == [(f"slurm-{job_id}", 1)]
    [w] = run.workers
    assert run.tree[("step",)].calls == (w.rank or 0) + 1  # one run's steps, not two runs' sum
    assert meta(run, w)["exit_signal"] == "SIGUSR1"
    [first] = [p for p in run_dir.glob("workers/*/*.json") if f"w_slurm-{job_id}_" in p.name]
    assert json.loads(first.read_text())["meta"]["exit_signal"] == "SIGTERM"  # requeue's signal
