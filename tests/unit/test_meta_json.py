"""The Python profiler's worker-file meta comes from lp_core's builder (``_core.meta_json``,
lp_core/meta_doc.h): any text a process may hold (surrogate-escaped bytes from the environment,
quotes, control characters, non-ASCII, an argv item whose ``str()`` raises) gives valid JSON and
never raises; each value is the one the test passed or read itself."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

import lineprofiler
from lineprofiler import _core
from tests.helpers import child_env, read_worker, worker_files


class _Unprintable:
    def __str__(self) -> str:
        raise RuntimeError("no str")


def _meta(**over: Any) -> dict[str, Any]:
    kw: dict[str, Any] = dict(
        role="main",
        process_name=None,
        parent_role=None,
        pid=77,
        host_dir="h",
        run_id="r1",
        uuid="0123abcd",
        start_unix_ns=1_700_000_000_123_456_789,
        argv=["prog"],
        signal_flush=True,
        measure_cpu=True,
        snapshot_interval_s=30.0,
        sample_interval_s=None,
        thread_names=False,
        strict_names=False,
        annotate=False,
        backend=None,
        lines=(),
        lines_entries=20,
    )
    kw.update(over)
    return json.loads(_core.meta_json(**kw))


def test_odd_text_is_valid_json_and_never_raises() -> None:
    role = 'r"\\\x01\n é 日 \udcff'  # quote, backslash, control chars, non-ASCII, an escaped byte
    argv = ["prog", "--token=\udcfe", "caf\udce9", 'q"b\\', _Unprintable(), 5]
    meta = _meta(role=role, argv=argv, process_name="w\udc80", parent_role="p\t")
    # What UTF-8 cannot encode is written as its backslash escape, the rest as given.
    assert meta["role"] == 'r"\\\x01\n é 日 \\udcff'
    assert meta["argv"] == ["prog", "--token=<masked>", "caf\\udce9", 'q"b\\', "", "5"]
    assert meta["process_name"] == "w\\udc80"
    assert meta["parent_role"] == "p\t"


def test_values_as_given_and_the_shared_facts() -> None:
    meta = _meta(
        backend="torch",
        lines=("train_step", "eval"),
        lines_entries=None,
        exit_signal="SIGTERM",
        argv=[f"a{i}" for i in range(12)],
    )
    assert (meta["pid"], meta["run_id"], meta["uuid"], meta["host_dir"]) == (
        77,
        "r1",
        "0123abcd",
        "h",
    )
    assert meta["start_unix_ns"] == 1_700_000_000_123_456_789
    assert meta["start_time"] == 1_700_000_000_123_456_789 / 1e9
    assert meta["argv"] == [f"a{i}" for i in range(8)]  # the first 8
    assert (meta["backend"], meta["lines"], meta["lines_entries"]) == (
        "torch",
        ["train_step", "eval"],
        None,
    )
    assert (meta["snapshot_interval_s"], meta["sample_interval_s"]) == (30, None)
    assert list(meta)[-1] == "exit_signal" and meta["exit_signal"] == "SIGTERM"
    assert "exit_signal" not in _meta()
    assert (meta["runtime"], meta["python"]) == ("python", platform.python_version())
    assert meta["ppid"] == os.getppid()
    assert meta["host"] == os.uname().nodename
    assert meta["lineprofiler_version"] == lineprofiler.__version__


def test_a_role_of_undecodable_bytes_gives_a_readable_worker_file(tmp_path: Path) -> None:
    """$LINEPROFILER_ROLE with a byte that is not UTF-8 (os.environ keeps it surrogate-escaped):
    the worker file is still valid JSON, and the report reads it."""
    env = child_env(
        {"LINEPROFILER_PROFILE": "1", "LINEPROFILER_ROLE": "r\udcff", "LINEPROFILER_RUN_DIR": "run"}
    )
    code = (
        "from lineprofiler.accounting import Profiler\n"
        "with Profiler(snapshot_interval_s=None, sample_interval_s=None) as p:\n"
        "    with p.phase('x'):\n"
        "        pass\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, "--password=\udcfe"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    (path,) = worker_files(tmp_path / "run")
    meta = read_worker(path)["meta"]
    assert meta["role"] == "r\\udcff"
    assert meta["argv"] == ["-c", "--password=<masked>"]
    report = subprocess.run(
        [sys.executable, "-m", "lineprofiler", "report", "run", "--json", "--no-samples"],
        cwd=tmp_path,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert report.returncode == 0, report.stderr
    assert json.loads(report.stdout)["run"]["roles"] == {"r\\udcff": 1}
