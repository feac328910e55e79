"""Who and where a worker is: run id, host, rank, job id, and the worker file path."""

from __future__ import annotations

import os
import re
import secrets
import time
import uuid
from pathlib import Path

_HOST_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")

_RANK_VARS = ("SLURM_PROCID", "RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK")
_LOCAL_RANK_VARS = ("SLURM_LOCALID", "LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID")
_JOB_VARS = ("SLURM_JOB_ID", "PBS_JOBID", "LSB_JOBID", "JOB_ID")


def new_run_id() -> str:
    """A fresh attempt id: UTC minute plus 6 random hex digits, e.g. ``20261202T1535-471c94``."""
    return time.strftime("%Y%m%dT%H%M", time.gmtime()) + "-" + secrets.token_hex(3)


def host_name() -> str:
    """This node's name (the UTS name, so ``unshare --uts`` children see their own), path-safe."""
    name = os.uname().nodename or "localhost"
    return _HOST_UNSAFE.sub("_", name)


def _first_int(names: tuple[str, ...]) -> tuple[int | None, str | None]:
    for var in names:
        value = os.environ.get(var)
        if value is not None and value.strip().lstrip("-").isdigit():
            return int(value), var
    return None, None


def launcher_identity() -> dict[str, object]:
    """Rank, local rank and job id from whichever launcher set them (None where absent)."""
    rank, rank_var = _first_int(_RANK_VARS)
    local_rank, _ = _first_int(_LOCAL_RANK_VARS)
    job_id = next((os.environ[v] for v in _JOB_VARS if os.environ.get(v)), None)
    return {"rank": rank, "rank_source": rank_var, "local_rank": local_rank, "job_id": job_id}


def worker_path(run_dir: Path, host: str, run_id: str, pid: int, uid8: str) -> Path:
    """``<run_dir>/workers/<host>/w_<run>_<pid>_<uuid8>.json``."""
    return run_dir / "workers" / host / f"w_{run_id}_{pid}_{uid8}.json"


def new_uid8() -> str:
    return uuid.uuid4().hex[:8]
