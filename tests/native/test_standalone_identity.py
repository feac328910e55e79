"""The standalone profiler's run identity is the Python profiler's: the same attempt id (from
LINEPROFILER_RUN_ID, or derived from Slurm, torchrun, Open MPI or PMI), rank, local rank, job id,
host directory and run directory, computed by each side from the same environment."""

from __future__ import annotations

import json
import os
import platform
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import lineprofiler
from tests.helpers import child_env, read_worker, worker_files
from tests.native.standalone_build import build_direct

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_direct(tmp_path_factory.mktemp("server_identity"))


PYTHON_SIDE = """
import json, os, sys
from pathlib import Path
from lineprofiler.accounting import _identity
run_dir = Path(os.path.abspath(sys.argv[1]))
print(json.dumps({"run_id": _identity.resolve_run_id(run_dir), "host_dir": _identity.host_name(),
                  "run_dir": str(run_dir), **_identity.launcher_identity()}))
"""

CASES: dict[str, dict[str, str]] = {
    "slurm": {
        "SLURM_JOB_ID": " 4242 ",
        "SLURM_RESTART_COUNT": "2",
        "SLURM_PROCID": "3",
        "SLURM_LOCALID": "1",
        "TORCHELASTIC_RESTART_COUNT": "1",
    },
    "slurm_unsafe_job_id": {"SLURM_JOB_ID": "42_7[1] é", "SLURM_PROCID": " 0"},
    "torchrun": {"TORCHELASTIC_RUN_ID": "rdzv-77", "RANK": "5", "LOCAL_RANK": "0"},
    "mpi": {
        "PMIX_NAMESPACE": "prterun-node-123@1",
        "OMPI_COMM_WORLD_RANK": "2",
        "OMPI_COMM_WORLD_LOCAL_RANK": "2",
        "OMPI_MCA_orte_hnp_uri": "123.0;tcp://10.0.0.1:4000",
    },
    "pmi": {"PMI_RANK": "1", "MPI_LOCALRANKID": "1", "PBS_JOBID": "99.server"},
    "env_run_id_for_this_dir": {"LINEPROFILER_RUN_ID": "my_run id/x", "SLURM_JOB_ID": "5"},
    "env_run_id_no_run_dir": {"LINEPROFILER_RUN_ID": "abc", "RANK": "x"},
    "env_run_id_for_another_dir": {"LINEPROFILER_RUN_ID": "other", "SLURM_JOB_ID": "6"},
}


def identities(server: Path, tmp_path: Path, case: str) -> tuple[dict[str, Any], dict[str, Any]]:
    env = {"LINEPROFILER_PROFILE": "1", **CASES[case]}
    run_arg = "sub/../run"  # relative, resolved against the working directory by both
    if case == "env_run_id_for_this_dir":
        env["LINEPROFILER_RUN_DIR"] = str(tmp_path / "run") + "/"
    elif case == "env_run_id_for_another_dir":
        env["LINEPROFILER_RUN_DIR"] = str(tmp_path / "elsewhere")
    py = subprocess.run(
        [sys.executable, "-c", PYTHON_SIDE, run_arg],
        cwd=tmp_path,
        env=child_env(env),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert py.returncode == 0, py.stderr
    cpp = subprocess.run(
        [str(server), "0", "--run-dir", run_arg],
        cwd=tmp_path,
        env=child_env(env),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert cpp.returncode == 0, cpp.stderr
    (path,) = worker_files(tmp_path / "run")
    meta = read_worker(path)["meta"]
    meta["file"] = path
    return json.loads(py.stdout), meta


@pytest.mark.parametrize("case", sorted(CASES))
def test_same_identity_as_python(server: Path, tmp_path: Path, case: str) -> None:
    want, meta = identities(server, tmp_path, case)
    for key in ("run_id", "host_dir", "rank", "rank_source", "local_rank", "job_id"):
        assert meta[key] == want[key], key
    assert meta["file"].parent == Path(want["run_dir"]) / "workers" / want["host_dir"]
    assert meta["file"].name.startswith(f"w_{want['run_id']}_{meta['pid']}_")
    assert re.fullmatch(r"[0-9a-f]{8}", meta["uuid"])


def test_expected_ids(server: Path, tmp_path: Path) -> None:
    """Ground truth for the derivations, independent of the Python side."""
    _, meta = identities(server, tmp_path, "slurm")
    assert meta["run_id"] == "slurm-4242-r2-e1"
    assert (meta["rank"], meta["rank_source"], meta["local_rank"]) == (3, "SLURM_PROCID", 1)
    assert meta["job_id"] == " 4242 "


def test_fresh_run_id_without_a_launcher(server: Path, tmp_path: Path) -> None:
    env = child_env({"LINEPROFILER_PROFILE": "1", "LINEPROFILER_RUN_DIR": str(tmp_path / "run")})
    for var in ("SLURM_JOB_ID", "TORCHELASTIC_RUN_ID", "PMIX_NAMESPACE", "PMI_RANK"):
        env.pop(var, None)
    proc = subprocess.run([str(server), "0"], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    (path,) = worker_files(tmp_path / "run")
    assert re.fullmatch(r"\d{8}T\d{4}-[0-9a-f]{6}", read_worker(path)["meta"]["run_id"])


def test_run_dir_modes_under_umask_000_and_masked_argv(server: Path, tmp_path: Path) -> None:
    """The standalone profiler creates no group- or world-writable directory whatever the umask,
    and masks argv by lp_core's rule (the Python profiler's: tests/unit/test_argv_mask.py)."""
    env = child_env({"LINEPROFILER_PROFILE": "1"})
    secrets = ["TOKEN=S-ONE", "-p", "S-TWO", "--db=pg://u:S-THREE@h"]
    proc = subprocess.run(
        ["sh", "-c", 'umask 000 && exec "$@"', "sh", str(server), "0", "--run-dir", "a/b/run"]
        + secrets,
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    (path,) = worker_files(tmp_path / "a/b/run")
    made = [tmp_path / "a", tmp_path / "a/b", tmp_path / "a/b/run", path.parent.parent, path.parent]
    modes = [p.stat().st_mode & 0o777 for p in made]
    assert modes == [0o755, 0o755, 0o755, 0o750, 0o750]
    assert path.stat().st_mode & 0o777 == 0o640
    text = path.read_text()
    assert not any(s in text for s in ("S-ONE", "S-TWO", "S-THREE"))
    argv = read_worker(path)["meta"]["argv"]
    assert argv[4:] == ["TOKEN=<masked>", "-p", "<masked>", "--db=pg://u:<masked>@h"]


# The meta object: one builder (lp_core/meta_doc.h) for both profilers. A Python worker and the
# C++ server, both children of this test in one environment, are checked against what the test
# knows itself: their pids, its own pid (their ppid), the environment it gave them, the secrets it
# put in their argv, their start as /proc/<pid>/stat has it, and the package's version.
PY_WORKER = """
import sys
from lineprofiler.accounting import Profiler
p = Profiler(role="server", snapshot_interval_s=5.0)
print("ready", flush=True)
sys.stdin.readline()
p.close()
"""

# Keys whose values both runtimes know alike in this setup (the rest: pid, process_start, uuid,
# start_*, argv, python, runtime and lines_entries are each process's own, checked below).
SAME_VALUES = (
    "role",
    "process_name",
    "parent_role",
    "ppid",
    "host",
    "host_dir",
    "run_id",
    "rank",
    "rank_source",
    "local_rank",
    "job_id",
    "signal_flush",
    "measure_cpu",
    "snapshot_interval_s",
    "sample_interval_s",
    "thread_names",
    "strict_names",
    "annotate",
    "backend",
    "lines",
    "lineprofiler_version",
)


def own_start_of(pid: int) -> str:
    """``<boot id>:<field 22 of /proc/<pid>/stat>``, read here."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    ticks = stat[stat.rindex(")") + 2 :].split()[19]
    boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    return f"{boot}:{ticks}"


def started(cmd: list[str], env: dict[str, str], cwd: Path) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        cmd,
        env=env,
        cwd=cwd,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.strip() == "ready":
            return proc
    raise AssertionError(
        f"{cmd[0]} ended early: {proc.wait()} {proc.stderr and proc.stderr.read()}"
    )


def meta_of(run_dir: Path, runtime: str) -> tuple[dict[str, Any], str]:
    for path in worker_files(run_dir):
        text = path.read_text()
        doc = json.loads(text)
        if doc["meta"]["runtime"] == runtime:
            return doc["meta"], text
    raise AssertionError(f"no {runtime} worker file in {run_dir}")


def test_python_and_cpp_write_one_meta_document(server: Path, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    env = child_env(
        {
            "LINEPROFILER_PROFILE": "1",
            "LINEPROFILER_RUN_DIR": str(run_dir),
            "LINEPROFILER_RUN_ID": "meta-run-1",
            "RANK": "3",
            "LOCAL_RANK": "1",
            "PBS_JOBID": "99.server",
        }
    )
    for var in ("SLURM_PROCID", "SLURM_LOCALID", "SLURM_JOB_ID", "OMPI_COMM_WORLD_RANK"):
        env.pop(var, None)
    py_secrets = ["--token=S-PY-1", "--api-key", "S-PY-2"]
    cpp_secrets = ["--token=S-CPP-1", "--api-key", "S-CPP-2"]
    py = started([sys.executable, "-c", PY_WORKER, *py_secrets], env, tmp_path)
    cpp = started([str(server), *cpp_secrets, "5", "--wait-for-signal"], env, tmp_path)
    try:
        starts = {"python": own_start_of(py.pid), "c++": own_start_of(cpp.pid)}
        py_meta, py_text = meta_of(run_dir, "python")
        cpp_meta, cpp_text = meta_of(run_dir, "c++")
    finally:
        assert py.stdin is not None
        py.stdin.write("\n")
        py.stdin.close()
        cpp.send_signal(15)
        assert py.wait(timeout=60) == 0, py.stderr and py.stderr.read()
        cpp.wait(timeout=60)

    assert list(py_meta) == list(cpp_meta)  # one key set, one order
    assert "exit_signal" not in py_meta
    for key in SAME_VALUES:
        assert py_meta[key] == cpp_meta[key], key
    # ... and those values are the truth
    assert py_meta["role"] == "server"
    assert py_meta["ppid"] == os.getpid()
    assert py_meta["host"] == os.uname().nodename
    assert py_meta["run_id"] == "meta-run-1"
    assert (py_meta["rank"], py_meta["rank_source"], py_meta["local_rank"]) == (3, "RANK", 1)
    assert py_meta["job_id"] == "99.server"
    assert py_meta["signal_flush"] is True
    assert (py_meta["snapshot_interval_s"], py_meta["sample_interval_s"]) == (5, 1)
    assert py_meta["lines"] == []
    assert py_meta["lineprofiler_version"] == lineprofiler.__version__
    assert (py_meta["pid"], cpp_meta["pid"]) == (py.pid, cpp.pid)
    assert py_meta["process_start"] == starts["python"]
    assert cpp_meta["process_start"] == starts["c++"]
    assert (py_meta["python"], cpp_meta["python"]) == (platform.python_version(), None)
    assert (py_meta["lines_entries"], cpp_meta["lines_entries"]) == (20, None)
    masked = ["--token=<masked>", "--api-key", "<masked>"]
    assert py_meta["argv"] == ["-c", *masked]
    assert cpp_meta["argv"] == [str(server), *masked, "5", "--wait-for-signal"]
    assert not any(s in py_text for s in ("S-PY-1", "S-PY-2"))
    assert not any(s in cpp_text for s in ("S-CPP-1", "S-CPP-2"))
