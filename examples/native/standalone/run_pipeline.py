"""One profiled run with Python workers and the C++ server (no Python in it) side by side.

The coordinator (this process) enables a profiler; every child joins the run through the
LINEPROFILER_* environment it exports: two Python workers (multiprocessing) and the C++ server
built from server.cpp, which links liblineprofiler.a. One report then shows all three roles.

    python examples/native/standalone/run_pipeline.py --server PATH/TO/server [--run-dir DIR]
    python examples/native/standalone/run_pipeline.py --build-dir DIR   # builds the server first
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import shutil
import subprocess
import sys
import time
from pathlib import Path

import lineprofiler
from lineprofiler.accounting import Profiler

HERE = Path(__file__).resolve().parent


def build_server(build_dir: Path) -> Path:
    """Builds server.cpp with CMake and find_package(lineprofiler CONFIG); returns the program."""
    cmake = shutil.which("cmake")
    if cmake is None:
        raise SystemExit("cmake is needed to build the server (or pass --server)")
    subprocess.run(
        [
            cmake,
            "-S",
            str(HERE),
            "-B",
            str(build_dir),
            f"-Dlineprofiler_DIR={lineprofiler.get_cmake_dir()}",
        ],
        check=True,
    )
    subprocess.run([cmake, "--build", str(build_dir)], check=True)
    return build_dir / "server"


def python_worker(steps: int) -> None:
    profiler = Profiler(role="worker")  # enabled, run_dir and run id: from the environment
    with profiler:
        for _ in range(steps):
            with profiler.phase("step"):
                time.sleep(0.001)
            profiler.count("items", 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", type=Path, help="the built server program")
    parser.add_argument("--build-dir", type=Path, help="build the server here first")
    parser.add_argument("--run-dir", type=Path, default=Path("profile_native"))
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--steps", type=int, default=200)
    args = parser.parse_args()
    server = args.server or (build_server(args.build_dir) if args.build_dir else None)
    if server is None:
        parser.error("pass --server or --build-dir")

    profiler = Profiler(run_dir=args.run_dir, role="coordinator", enabled=True)
    with profiler:
        with profiler.phase("run"):
            ctx = mp.get_context("spawn")
            workers = [ctx.Process(target=python_worker, args=(args.steps,)) for _ in range(2)]
            for w in workers:
                w.start()
            subprocess.run([str(server), str(args.requests)], check=True)  # inherits the run
            for w in workers:
                w.join()
    subprocess.run([sys.executable, "-m", "lineprofiler", "report", str(args.run_dir)], check=True)


if __name__ == "__main__":
    main()
