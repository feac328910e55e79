"""Who and where a worker is: run id, host, rank, job id, and the worker file path."""

from __future__ import annotations

import hashlib
import os
import re
import secrets
import sys
import time
import uuid
from pathlib import Path

from lineprofiler import _core
from lineprofiler.accounting import _torch_worker
from lineprofiler.runfile.layout import ENV_PARENT_ROLE, ENV_ROLE, ENV_RUN_DIR, ENV_RUN_ID

_HOST_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")
_RUN_ID_UNSAFE = re.compile(r"[^A-Za-z0-9.-]")  # no "_": it separates the file name's fields

_RANK_VARS = ("SLURM_PROCID", "RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK")
_LOCAL_RANK_VARS = ("SLURM_LOCALID", "LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID")
_JOB_VARS = ("SLURM_JOB_ID", "PBS_JOBID", "LSB_JOBID", "JOB_ID")


def new_run_id() -> str:
    """A fresh attempt id: UTC minute plus 6 random hex digits, e.g. ``20261202T1535-471c94``."""
    return time.strftime("%Y%m%dT%H%M", time.gmtime()) + "-" + secrets.token_hex(3)


def resolve_run_id(run_dir: Path) -> str:
    """The attempt this process belongs to.

    In order: ``$LINEPROFILER_RUN_ID`` when it was exported for this ``run_dir`` (an enabled
    parent, or the user with no ``$LINEPROFILER_RUN_DIR``); else the one an earlier profiler of
    this process used for ``run_dir``; else one derived from the launcher's
    job, so that ranks started by srun, torchrun or mpirun share an attempt with no parent
    profiler to inherit from; else a fresh one.
    """
    run_dir = Path(run_dir)
    env_id = _RUN_ID_UNSAFE.sub("-", os.environ.get(ENV_RUN_ID, "").strip())
    env_dir = os.environ.get(ENV_RUN_DIR)
    if env_id and (not env_dir or Path(os.path.abspath(env_dir)) == run_dir):
        run_id = env_id
    else:
        run_id = _process_attempts.get(run_dir) or launcher_run_id() or new_run_id()
    _process_attempts[run_dir] = run_id
    return run_id


# The attempt each run directory got in this process (and, through fork, its children): a second
# profiler into the same directory later in the same process, after the first closed and took its
# environment back, is still the same attempt.
_process_attempts: dict[Path, str] = {}


def launcher_run_id() -> str | None:
    """An attempt id shared by every rank of one launch, or None outside a known launcher.

    Slurm: the job id and its requeue count (every step of a job is one attempt, so concurrent
    ``srun`` steps of different roles merge). torchrun: its rendezvous run id. Open MPI: the job's
    PMIx namespace and the launcher's URI. MPICH-style ``PMI_RANK`` alone: this node's launcher
    process. A torchelastic restart is a new attempt under any of them.
    """
    env = os.environ
    elastic = env.get("TORCHELASTIC_RESTART_COUNT", "0").strip()
    suffix = f"-e{_RUN_ID_UNSAFE.sub('', elastic)}" if elastic not in ("", "0") else ""
    job = env.get("SLURM_JOB_ID", "").strip()
    if job:
        restarts = env.get("SLURM_RESTART_COUNT", "0").strip()
        requeue = f"-r{_RUN_ID_UNSAFE.sub('', restarts)}" if restarts not in ("", "0") else ""
        return f"slurm-{_RUN_ID_UNSAFE.sub('-', job)}{requeue}{suffix}"
    elastic_id = env.get("TORCHELASTIC_RUN_ID", "").strip()
    if elastic_id and elastic_id != "none":
        return f"torchrun-{_short_hash(elastic_id)}{suffix}"
    namespace = env.get("PMIX_NAMESPACE") or env.get("OMPI_MCA_ess_base_jobid")
    if namespace and "OMPI_COMM_WORLD_RANK" in env:
        return f"mpi-{_short_hash(namespace, env.get('OMPI_MCA_orte_hnp_uri', ''))}{suffix}"
    if "PMI_RANK" in env:
        ppid = os.getppid()
        return f"pmi-{_short_hash(host_name(), str(ppid), _process_start(ppid))}{suffix}"
    return None


def _short_hash(*parts: str) -> str:
    return hashlib.sha1("\0".join(parts).encode()).hexdigest()[:8]


def _process_start(pid: int) -> str:
    """The start time of ``pid`` in clock ticks since boot (tells a reused pid apart), or ""."""
    return _process_start_at(f"/proc/{pid}/stat")


def _process_start_at(stat_path: str) -> str:
    try:
        with open(stat_path) as f:
            return f.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return ""


_own_start: tuple[int, str | None] = (-1, None)  # (pid, own_process_start()) for that pid


def own_process_start() -> str | None:
    """This process's own start, ``<boot id>:<clock ticks since boot>`` (``/proc/self/stat``
    field 22), or None where unreadable. With the host and pid it names one process: several
    profilers built one after another in it share it, while a reused pid (or a pid namespace's
    pid 1 started again) gets another. Read once per pid."""
    global _own_start
    pid = os.getpid()
    if _own_start[0] == pid:
        return _own_start[1]
    ticks = _process_start_at("/proc/self/stat")
    value = None
    if ticks:
        try:
            with open("/proc/sys/kernel/random/boot_id") as f:
                boot = f.read().strip()[:36]
        except OSError:
            boot = ""
        value = f"{boot}:{ticks}"
    _own_start = (pid, value)
    return value


def real_host_name() -> str:
    """This node's UTS name as the kernel has it (``unshare --uts`` children see their own)."""
    return os.uname().nodename or "localhost"


def host_name() -> str:
    """This node's name made safe as one directory inside ``workers/``: characters outside
    ``[A-Za-z0-9._-]`` become ``_``, and a name that is all dots (``.``, ``..``) or starts with one
    gets a ``_`` prefix (the real name is kept in the worker file's ``meta.host``)."""
    name = _HOST_UNSAFE.sub("_", real_host_name())[:200]
    return "_" + name if name.startswith(".") else name


# A secret in argv (``--api-key X``, ``HF_TOKEN=X``, ``-p X``, ``postgres://u:pw@h``) is masked in
# the worker file's meta.argv, which other users of a shared file system may read. The rule is
# lp_core's (src/cpp/lp_core/argv_mask.h), the same for the standalone C++ profiler.
MASK: str = _core.MASKED


def masked_argv(argv: list[str]) -> list[str]:
    """``argv`` with every secret value replaced by ``MASK`` (the rule: ``_core.mask_argv``).
    An argument that is not valid UTF-8 is passed with its bad bytes backslash-escaped."""
    return _core.mask_argv([str(a).encode("utf-8", "backslashreplace").decode() for a in argv])


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


def new_uid8() -> str:
    return uuid.uuid4().hex[:8]


def _loader_worker_id() -> int | None:
    """This process's torch DataLoader worker id, or None (torch not loaded, or not a worker)."""
    data = sys.modules.get("torch.utils.data")
    if data is None:
        return None
    try:
        info = data.get_worker_info()
    except Exception:
        return None
    return None if info is None else int(info.id)


def child_role(parent_role: str) -> str:
    """The role of a child process joining its parent's run.

    Its own ``$LINEPROFILER_ROLE`` when set for it (not the parent's, inherited); else
    ``<parent role>.loader`` in a torch DataLoader worker; else ``<parent role>.child``.
    """
    own = os.environ.get(ENV_ROLE)
    if own and own != parent_role and own != os.environ.get(ENV_PARENT_ROLE):
        return own
    if _loader_worker_id() is not None or _torch_worker.in_loader_worker:
        return f"{parent_role}.loader"
    return f"{parent_role}.child"


def process_name() -> str | None:
    """A label for this process where one is known: ``loader worker N`` (torch), else the
    multiprocessing name (``ForkPoolWorker-3``); None in a main process."""
    loader = _loader_worker_id()
    if loader is not None:
        return f"loader worker {loader}"
    mp = sys.modules.get("multiprocessing")
    if mp is None:
        return None
    try:
        name = mp.current_process().name
    except Exception:
        return None
    return None if name == "MainProcess" else str(name)
