"""On a real one-machine Slurm: one srun step whose rank 0 is the C++ server (no Python) and whose
other ranks are Python. Every rank derives the same attempt from the job (slurm-<job id>) with no
parent profiler to inherit it from, and `scancel --signal=USR1` (what sbatch --signal=USR1@120
does before a preemption) makes each write its final file, the C++ one included."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from lineprofiler.accounting import merge_run
from tests.helpers import child_env, read_worker, worker_files
from tests.integration.conftest import slurm  # noqa: F401 (the fixture)
from tests.native.standalone_build import build_direct

pytestmark = [pytest.mark.slow, pytest.mark.launcher]

RANK = """
import os, signal, sys
from lineprofiler.accounting import Profiler
p = Profiler(run_dir=sys.argv[1], role="rank", enabled=True, snapshot_interval_s=None,
             sample_interval_s=None)
for _ in range(5):
    with p.phase("step"):
        pass
print("ready", os.environ["SLURM_PROCID"], os.environ["SLURM_JOB_ID"], flush=True)
while True:
    signal.pause()
"""


def test_srun_step_with_a_cpp_rank_is_one_attempt_and_flushes_on_usr1(
    tmp_path: Path,
    slurm,  # noqa: F811
) -> None:
    server = build_direct(tmp_path / "bin")
    run_dir = tmp_path / "run"
    (tmp_path / "rank.py").write_text(RANK)
    launch = tmp_path / "launch.sh"
    launch.write_text(
        "#!/bin/bash\n"
        'if [ "$SLURM_PROCID" = 0 ]; then\n'
        f"  exec {server} 400 --run-dir {run_dir} --wait-for-signal\n"
        "fi\n"
        f"exec {sys.executable} {tmp_path / 'rank.py'} {run_dir}\n"
    )
    launch.chmod(0o755)
    env = child_env({"SLURM_CONF": slurm.env["SLURM_CONF"], "LINEPROFILER_PROFILE": "1"})
    cmd = ["srun", "-n", "3", "--overcommit", "--kill-on-bad-exit=0", str(launch)]
    srun = subprocess.Popen(
        cmd, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        ready: list[list[str]] = []
        deadline = time.monotonic() + 90
        while len(ready) < 3 and time.monotonic() < deadline:
            line = srun.stdout.readline() if srun.stdout else ""
            if not line:
                break
            if line.startswith("ready"):
                ready.append(line.split())
        assert len(ready) == 3, srun.stderr.read() if srun.poll() is not None else "no ready"
        job_id = next(r[2] for r in ready if len(r) == 3)
        subprocess.run(["scancel", "--signal=USR1", job_id], env=env, check=True, timeout=30)
        srun.wait(timeout=60)
    finally:
        if srun.poll() is None:
            srun.kill()
            srun.wait()
    docs = [read_worker(f) for f in worker_files(run_dir)]
    assert sorted(d["meta"]["role"] for d in docs) == ["rank", "rank", "server"]
    assert {d["meta"]["run_id"] for d in docs} == {f"slurm-{job_id}"}
    assert {d["meta"]["job_id"] for d in docs} == {job_id}
    assert all(d["final"] and d["meta"]["exit_signal"] == "SIGUSR1" for d in docs)
    (server_doc,) = [d for d in docs if d["meta"]["role"] == "server"]
    assert (server_doc["meta"]["rank"], server_doc["meta"]["rank_source"]) == (0, "SLURM_PROCID")
    run = merge_run(run_dir, with_samples=False)
    assert run.run_id == f"slurm-{job_id}" and run.superseded == []
    assert sorted(run.roles) == ["rank", "server"]
    assert run.tree[("handle",)].calls == 400
    assert run.tree[("step",)].calls == 10
