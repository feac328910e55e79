"""Builds the standalone example server (examples/native/standalone) for the tests, against the
installed package as a user would: with CMake and find_package(lineprofiler CONFIG), or with the
compiler and lineprofiler.get_include() / get_library_dir() directly."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import lineprofiler

ROOT = Path(__file__).resolve().parents[2]
SERVER = ROOT / "examples" / "native" / "standalone"
WARNINGS = ["-Wall", "-Wextra", "-Werror"]


def cxx() -> str:
    """$CXX when set, else g++."""
    name = os.environ.get("CXX") or "g++"
    found = shutil.which(name)
    if found is None:
        raise AssertionError(f"no C++ compiler {name!r} on PATH")
    return found


def _run(cmd: list[str], cwd: Path | None = None) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=cwd)
    if proc.returncode != 0:
        raise AssertionError(f"build failed: {' '.join(cmd)}\n{proc.stdout}\n{proc.stderr}")


def build_direct(
    out_dir: Path, source: Path = SERVER / "server.cpp", flags: list[str] | None = None
) -> Path:
    """Compiles source into out_dir/<stem> with -I get_include() and liblineprofiler.a."""
    out_dir.mkdir(parents=True, exist_ok=True)
    exe = out_dir / source.stem
    lib = Path(lineprofiler.get_library_dir()) / "liblineprofiler.a"
    _run(
        [
            cxx(),
            "-std=c++20",
            "-O1",
            *WARNINGS,
            *(flags or []),
            f"-I{lineprofiler.get_include()}",
            str(source),
            str(lib),
            "-pthread",
            "-ldl",
            "-o",
            str(exe),
        ]
    )
    return exe


def build_cmake(build_dir: Path) -> Path:
    """Configures and builds examples/native/standalone with find_package(lineprofiler CONFIG)."""
    cmake = shutil.which("cmake")
    if cmake is None:
        raise AssertionError("cmake is not on PATH (the package's own build needs it too)")
    _run(
        [
            cmake,
            "-S",
            str(SERVER),
            "-B",
            str(build_dir),
            f"-Dlineprofiler_DIR={lineprofiler.get_cmake_dir()}",
            f"-DCMAKE_CXX_COMPILER={cxx()}",
        ]
    )
    _run([cmake, "--build", str(build_dir), "-j2"])
    return build_dir / "server"
