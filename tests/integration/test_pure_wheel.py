"""The pure build as a user gets it: a py3-none-any wheel (LINEPROFILER_PURE_BUILD=1, what every
non-Linux platform builds) installed into a fresh venv reads a run the full build recorded and
prints byte-identical text, JSON and HTML; recording there warns and returns.

This is the install-without-compiler check CI runs (~30 s): the wheel holds no compiled module and
the venv is given no compiler (CC/CXX point at /bin/false). scripts/build-wheels --check does the
same with the repaired manylinux wheel.
"""

from __future__ import annotations

import os
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

from tests.helpers import child_env, run_python
from tests.report.test_without_core import RECORD

pytestmark = [pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]


def _clean_env(**extra: str) -> dict[str, str]:
    """No PYTHONPATH (the venv must import its own lineprofiler), no compiler to fall back on."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LINEPROFILER_", "PYTHON"))}
    env.update(CC="/bin/false", CXX="/bin/false", PIP_DISABLE_PIP_VERSION_CHECK="1", **extra)
    return env


def _build_pure_wheel(out: Path) -> Path:
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps", "-q", "-w", str(out)],
        env=_clean_env(LINEPROFILER_PURE_BUILD="1"),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    (wheel,) = out.glob("*.whl")
    return wheel


def test_pure_wheel_in_a_fresh_venv_reads_a_full_build_run(tmp_path):
    wheel = _build_pure_wheel(tmp_path / "wheels")
    assert wheel.name.endswith("-py3-none-any.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "lineprofiler/runfile/core_constants.py" in names
    assert [n for n in names if n.endswith((".so", ".pyd"))] == []

    env_dir = tmp_path / "pure"
    venv.EnvBuilder(with_pip=True, symlinks=True).create(env_dir)
    py = str(env_dir / "bin" / "python")
    install = subprocess.run(
        [py, "-m", "pip", "install", "-q", str(wheel)],
        env=_clean_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert install.returncode == 0, install.stderr
    where = subprocess.run(
        [
            py,
            "-c",
            "import lineprofiler, importlib.util as u; print(lineprofiler.__file__); "
            "print(u.find_spec('lineprofiler._core'))",
        ],
        cwd=tmp_path,
        env=_clean_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert where.stdout.splitlines() == [
        str(next(env_dir.glob("lib/python*/site-packages/lineprofiler/__init__.py"))),
        "None",
    ], where.stderr

    run_python(RECORD, cwd=tmp_path)  # the full build (this interpreter) records
    # ... and reads: this interpreter's lineprofiler, whose _core imports
    full_env = child_env({"COLUMNS": "100"})
    has_core = [sys.executable, "-c", "import lineprofiler._core"]
    assert subprocess.run(has_core, env=full_env, cwd=tmp_path, timeout=60).returncode == 0
    cli_pure = str(env_dir / "bin" / "lineprofiler")
    for argv in (["report", "run"], ["report", "run", "--json"], ["compare", "run", "run"]):
        full = subprocess.run(
            [sys.executable, "-m", "lineprofiler", *argv],
            cwd=tmp_path,
            capture_output=True,
            timeout=120,
            env=full_env,
        )
        pure = subprocess.run(
            [cli_pure, *argv],
            cwd=tmp_path,
            capture_output=True,
            timeout=120,
            env=_clean_env(COLUMNS="100"),
        )
        assert full.returncode == pure.returncode == 0, (argv, full.stderr, pure.stderr)
        assert full.stdout == pure.stdout, argv
    html = {}
    for name, cmd, env in (
        ("full", [sys.executable, "-m", "lineprofiler"], full_env),
        ("pure", [cli_pure], _clean_env(COLUMNS="100")),
    ):
        proc = subprocess.run(
            [*cmd, "report", "run", "--html", f"{name}.html"],
            cwd=tmp_path,
            capture_output=True,
            timeout=120,
            env=env,
        )
        assert proc.returncode == 0, proc.stderr
        html[name] = (tmp_path / f"{name}.html").read_bytes()
    assert html["full"] == html["pure"] and len(html["full"]) > 10_000

    record = subprocess.run(
        [
            py,
            "-W",
            "always",
            "-c",
            "from lineprofiler.accounting import Profiler\n"
            "p = Profiler(run_dir='pure_run', enabled=True)\n"
            "with p.phase('step'):\n    p.count('n')\n"
            "p.close()\nprint('returned')",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        env=_clean_env(),
    )
    assert record.returncode == 0, record.stderr
    assert record.stdout == "returned\n"
    assert record.stderr.count("RecordingUnavailableWarning") == 1, record.stderr
    assert not (tmp_path / "pure_run").exists()
