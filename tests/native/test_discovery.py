"""Finding the C++ API from a build: get_include(), get_cmake_dir(), ``python -m lineprofiler
--includes`` / ``--cmake-dir``, and find_package(lineprofiler CONFIG) building the example."""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

import lineprofiler
from lineprofiler.accounting import merge_run
from tests.native.build import EXAMPLE
from tests.native.test_extension import run_ext, search_tree


def _cli(*args: str) -> str:
    proc = subprocess.run(
        [sys.executable, "-m", "lineprofiler", *args], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def test_includes_name_pythons_headers_and_ours():
    flags = _cli("--includes").split()
    assert f"-I{lineprofiler.get_include()}" in flags
    assert f"-I{sysconfig.get_path('include')}" in flags
    for flag in flags:
        assert Path(flag[2:]).is_dir(), flag


def test_cmake_dir_holds_the_package_config():
    cmake_dir = Path(_cli("--cmake-dir"))
    assert cmake_dir == Path(lineprofiler.get_cmake_dir())
    assert (cmake_dir / "lineprofilerConfig.cmake").is_file()
    assert (cmake_dir / "lineprofilerConfigVersion.cmake").is_file()


@pytest.mark.slow
def test_find_package_builds_the_example_extension(tmp_path):
    cmake = shutil.which("cmake")
    if cmake is None:
        pytest.skip("cmake is not installed")
    build = tmp_path / "build"
    configure = [
        cmake,
        "-S",
        str(EXAMPLE),
        "-B",
        str(build),
        f"-DPython_EXECUTABLE={sys.executable}",
    ]
    for cmd in (configure, [cmake, "--build", str(build), "-j2"]):
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, f"{' '.join(cmd)}\n{proc.stdout}\n{proc.stderr}"
    run_ext(
        """
        from lineprofiler.accounting import Profiler
        import mcts_native
        prof = Profiler(run_dir="run", role="actor", enabled=True, install=True,
                        snapshot_interval_s=None, sample_interval_s=None)
        with prof.phase("mcts"):
            mcts_native.search(2, 2)
        prof.close()
        """,
        tmp_path,
        build,
    )
    search_tree(merge_run(tmp_path / "run", with_samples=False).tree, ("mcts",), 2, 2)
