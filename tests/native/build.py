"""Builds the example extension (examples/native/extension) for the tests, with the compiler and
lineprofiler.get_include() (as a user's setup.py would), into a directory the caller owns."""

from __future__ import annotations

import os
import shutil
import subprocess
import sysconfig
from pathlib import Path

import lineprofiler

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "native" / "extension"
WARNINGS = ["-Wall", "-Wextra", "-Werror"]


def compiler(name: str = "g++") -> str | None:
    """A C++ compiler on PATH: $CXX for "g++" when set, else the named one; None when absent."""
    if name == "g++" and os.environ.get("CXX"):
        return shutil.which(os.environ["CXX"])
    return shutil.which(name)


def python_includes() -> list[str]:
    dirs = dict.fromkeys([sysconfig.get_path("include"), sysconfig.get_path("platinclude")])
    return [f"-I{d}" for d in dirs]


def build_extension(out_dir: Path, defines: list[str] | None = None) -> Path:
    """Compiles mcts_native into out_dir (with -D each of defines); returns out_dir."""
    out_dir.mkdir(parents=True, exist_ok=True)
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    cmd = [
        compiler() or "g++",
        "-std=c++17",
        "-O2",
        "-fPIC",
        "-shared",
        *WARNINGS,
        *python_includes(),
        f"-I{lineprofiler.get_include()}",
        *(f"-D{d}" for d in defines or []),
        str(EXAMPLE / "mcts_native.cpp"),
        "-o",
        str(out_dir / f"mcts_native{suffix}"),
        "-pthread",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        raise AssertionError(f"build failed: {' '.join(cmd)}\n{proc.stderr}")
    return out_dir
