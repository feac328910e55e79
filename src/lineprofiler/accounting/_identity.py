"""Who and where a worker is: run id, host, rank, job id, and the worker file path."""

from __future__ import annotations

import os
import sys
import uuid
from pathlib import Path

from lineprofiler import _core, _torch_worker
from lineprofiler.runfile.layout import ENV_PARENT_ROLE, ENV_ROLE

# The rules (run id, launcher attempts, host names, ranks) are lp_core's (src/cpp/lp_core/identity.h),
# the standalone C++ profiler's too: this module only adapts them to Python's types. Text from the
# environment or the kernel comes as bytes and is decoded as os.environ decodes it.


def new_run_id() -> str:
    """A fresh attempt id: UTC minute plus 6 random hex digits, e.g. ``20261202T1535-471c94``."""
    return _core.new_run_id()


def resolve_run_id(run_dir: Path) -> str:
    """The attempt this process belongs to.

    In order: ``$LINEPROFILER_RUN_ID`` when it was exported for this ``run_dir`` (an enabled
    parent, or the user with no ``$LINEPROFILER_RUN_DIR``); else the one an earlier profiler of
    this process used for ``run_dir`` (kept by lp_core, inherited through fork); else one derived
    from the launcher's job, so that ranks started by srun, torchrun or mpirun share an attempt
    with no parent profiler to inherit from; else a fresh one.
    """
    return _core.resolve_run_id(os.fsencode(os.path.abspath(run_dir)))


def launcher_run_id() -> str | None:
    """An attempt id shared by every rank of one launch, or None outside a known launcher.

    Slurm: the job id and its requeue count (every step of a job is one attempt, so concurrent
    ``srun`` steps of different roles merge). torchrun: its rendezvous run id. Open MPI: the job's
    PMIx namespace and the launcher's URI. MPICH-style ``PMI_RANK`` alone: this node's launcher
    process. A torchelastic restart is a new attempt under any of them.
    """
    return _core.launcher_run_id()


def real_host_name() -> str:
    """This node's UTS name as the kernel has it (``unshare --uts`` children see their own)."""
    return os.fsdecode(_core.real_host_name())


def host_name() -> str:
    """This node's name made safe as one directory inside ``workers/``: characters outside
    ``[A-Za-z0-9._-]`` become ``_``, and a name that is all dots (``.``, ``..``) or starts with one
    gets a ``_`` prefix (the real name is kept in the worker file's ``meta.host``)."""
    return _core.host_name()


# A secret in argv (``--api-key X``, ``HF_TOKEN=X``, ``-p X``, ``postgres://u:pw@h``) is masked in
# the worker file's meta.argv, which other users of a shared file system may read. The rule is
# lp_core's (src/cpp/lp_core/argv_mask.h), the same for the standalone C++ profiler.
MASK: str = _core.MASKED


def masked_argv(argv: list[str]) -> list[str]:
    """``argv`` with every secret value replaced by ``MASK`` (the rule: ``_core.mask_argv``).
    An argument that is not valid UTF-8 is passed with its bad bytes backslash-escaped."""
    return _core.mask_argv([str(a).encode("utf-8", "backslashreplace").decode() for a in argv])


def launcher_identity() -> dict[str, object]:
    """Rank, local rank and job id from whichever launcher set them (None where absent)."""
    who = _core.launcher_identity()
    if who["job_id"] is not None:
        who["job_id"] = os.fsdecode(who["job_id"])
    return who


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
