"""The big-job recipe on a real Slurm: one reduce task per (simulated) host, then the report."""

from __future__ import annotations

import subprocess
import sys

import pytest

from lineprofiler.accounting import merge_run
from lineprofiler.report.json import to_document
from tests.helpers import child_env
from tests.report.synth import MS, Ph, worker_doc, write_worker

pytestmark = [pytest.mark.slow, pytest.mark.launcher]

HOSTS = ["node00", "node01", "node02", "node03"]


def test_srun_reduce_per_host_then_report(tmp_path, slurm):
    run_dir = tmp_path / "run"
    for k in range(16):
        host = HOSTS[k % 4]
        phases = [Ph(("step",), [MS * (1 + k)] * 3, counters={"items": k})]
        write_worker(
            run_dir, worker_doc(role="actor", pid=100 + k, host=host, rank=k, threads=phases)
        )
    before = to_document(merge_run(run_dir, with_samples=False))
    # each task reduces "its node": the host directory its rank names (one real node here)
    script = (
        f"import os, sys; from lineprofiler.cli import main; "
        f"hosts = {HOSTS!r}; "
        f"sys.exit(main(['reduce', {str(run_dir)!r}, '--host', hosts[int(os.environ['SLURM_PROCID'])]]))"
    )
    cmd = ["srun", "-n", "4", "--overcommit", sys.executable, "-c", script]
    env = child_env({"SLURM_CONF": slurm.env["SLURM_CONF"]})
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.stem for p in (run_dir / "summaries").iterdir()) == HOSTS
    after = to_document(merge_run(run_dir, with_samples=False))
    assert after == before
    assert after["run"]["processes"] == 16
    step = next(p for p in after["roles"][0]["phases"] if p["path"] == ["step"])
    assert step["calls"] == 48 and step["time_ns"] == sum(3 * MS * (1 + k) for k in range(16))
