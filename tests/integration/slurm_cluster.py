"""A real one-machine Slurm (munged + slurmctld + slurmd) in a temporary folder, for tests.

Everything lives under the given folder: its own munge key and socket, its own slurm.conf on free
ports, state, spool, logs and pid files, so it neither needs nor disturbs a system Slurm. Needs
root (slurmd launches tasks as the submitting user) and Debian's slurm-wlm and munge.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

BINARIES = (
    "munged",
    "mungekey",
    "slurmctld",
    "slurmd",
    "srun",
    "sbatch",
    "squeue",
    "sinfo",
    "scancel",
)


class SlurmUnavailable(Exception):
    """Why a Slurm could not be started here."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _which(name: str) -> str | None:
    return shutil.which(name) or next(
        (p for p in (f"/usr/sbin/{name}", f"/usr/bin/{name}") if os.access(p, os.X_OK)), None
    )


class SlurmCluster:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.host = socket.gethostname().split(".")[0]
        self.conf = root / "slurm.conf"
        # munged wants every folder above its socket searchable by all, which a pytest tmp_path
        # (mode 0700) is not: the socket gets its own folder directly under /tmp.
        self.munge_socket = Path(tempfile.mkdtemp(prefix="lp-munge-", dir="/tmp")) / "socket"
        self.env = dict(os.environ, SLURM_CONF=str(self.conf))
        self._pidfiles = [
            root / "slurmctld.pid",
            root / "slurmd.pid",
            root / "munge" / "munged.pid",
        ]

    def start(self, timeout_s: float = 30.0) -> None:
        if os.geteuid() != 0:
            raise SlurmUnavailable("needs root (slurmd runs tasks as the submitting user)")
        missing = [b for b in BINARIES if _which(b) is None]
        if missing:
            raise SlurmUnavailable(
                f"not installed: {', '.join(missing)} (apt-get install slurm-wlm munge)"
            )
        munge = self.root / "munge"
        munge.mkdir(mode=0o700)
        self.munge_socket.parent.chmod(0o755)
        key = munge / "munge.key"
        self._run([_which("mungekey"), "--create", f"--keyfile={key}"])
        key.chmod(0o400)
        self._run(
            [
                _which("munged"),
                f"--socket={self.munge_socket}",
                f"--key-file={key}",
                f"--pid-file={munge / 'munged.pid'}",
                f"--log-file={munge / 'munged.log'}",
                f"--seed-file={munge / 'munged.seed'}",
            ]
        )
        for d in ("state", "spool", "log"):
            (self.root / d).mkdir()
        r = self.root
        self.conf.write_text(
            "\n".join(
                [
                    "ClusterName=lptest",
                    f"SlurmctldHost={self.host}",
                    f"SlurmctldPort={_free_port()}",
                    f"SlurmdPort={_free_port()}",
                    "SlurmUser=root",
                    "SlurmdUser=root",
                    "AuthType=auth/munge",
                    "CredType=cred/munge",
                    f"AuthInfo=socket={self.munge_socket}",
                    "ProctrackType=proctrack/linuxproc",
                    "TaskPlugin=task/none",
                    "SelectType=select/cons_tres",
                    "SchedulerType=sched/backfill",
                    "ReturnToService=2",
                    "MpiDefault=none",
                    "JobAcctGatherType=jobacct_gather/none",
                    "AccountingStorageType=accounting_storage/none",
                    "KillWait=5",
                    f"StateSaveLocation={r / 'state'}",
                    f"SlurmdSpoolDir={r / 'spool'}",
                    f"SlurmctldPidFile={r / 'slurmctld.pid'}",
                    f"SlurmdPidFile={r / 'slurmd.pid'}",
                    f"SlurmctldLogFile={r / 'log' / 'slurmctld.log'}",
                    f"SlurmdLogFile={r / 'log' / 'slurmd.log'}",
                    f"NodeName={self.host} CPUs={os.cpu_count() or 2} State=UNKNOWN",
                    f"PartitionName=debug Nodes={self.host} Default=YES MaxTime=INFINITE "
                    "State=UP OverSubscribe=YES",
                    "",
                ]
            )
        )
        self._run([_which("slurmctld"), "-f", str(self.conf)])
        self._run([_which("slurmd"), "-f", str(self.conf)])
        deadline = time.monotonic() + timeout_s
        state = ""
        while time.monotonic() < deadline:
            out = subprocess.run(
                [_which("sinfo"), "-h", "-o", "%t"], env=self.env, capture_output=True, text=True
            )
            state = (out.stdout + out.stderr).strip()
            if out.returncode == 0 and state.split() and state.split()[0] in ("idle", "mix"):
                return
            time.sleep(0.3)
        raise SlurmUnavailable(
            f"the node did not come up within {timeout_s:.0f} s ({state!r}); "
            f"logs: {self.root / 'log'}"
        )

    def _run(self, cmd: list[str | None]) -> None:
        proc = subprocess.run([str(c) for c in cmd], env=self.env, capture_output=True, text=True)
        if proc.returncode != 0:
            raise SlurmUnavailable(f"{Path(str(cmd[0])).name} failed: {proc.stderr.strip()[:300]}")

    def stop(self) -> None:
        pids = []
        for pidfile in self._pidfiles:
            try:
                pid = int(pidfile.read_text().strip())
                os.kill(pid, signal.SIGTERM)
                pids.append(pid)
            except (OSError, ValueError):
                continue
        deadline = time.monotonic() + 10
        while pids and time.monotonic() < deadline:
            pids = [p for p in pids if _alive(p)]
            time.sleep(0.05)
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        shutil.rmtree(self.munge_socket.parent, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
