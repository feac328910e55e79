"""Folding a run's worker files on several cores: chunks of files folded in worker processes.

The fold is associative (``Partial.add``), so each process folds a share of the files and the
partials are added here. Small runs fold in this process: starting interpreters costs more than it
saves below a few hundred files.
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import pickle
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from lineprofiler.report.fold import Folded, fold_files

ENV_JOBS = "LINEPROFILER_REPORT_JOBS"
PARALLEL_MIN_FILES = 1024  # below this, one process: an interpreter's start-up costs ~0.1 s


def default_jobs(n_files: int) -> int:
    """Processes to fold ``n_files`` with: ``$LINEPROFILER_REPORT_JOBS``, else the usable CPUs."""
    env = os.environ.get(ENV_JOBS, "").strip()
    if env.isdigit() and int(env) > 0:
        return int(env)
    if n_files < PARALLEL_MIN_FILES:
        return 1
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    return max(1, min(cpus, 16))


def _fold_in_child(root: Path, files: list[str], with_samples: bool) -> Folded:
    """Folds ``files`` in a fresh interpreter (``python -m lineprofiler.report.parallel``).

    A plain subprocess, not multiprocessing: spawn and forkserver re-import the caller's
    ``__main__`` (a script without a main guard would recurse), and fork copies the caller's
    threads' locks half-taken. The child pickles its ``Folded`` to stdout; if it cannot run,
    the chunk is folded here instead.
    """
    request = json.dumps({"root": os.fspath(root), "files": files, "with_samples": with_samples})
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "lineprofiler.report.parallel"],
            input=request.encode(),
            capture_output=True,
            check=False,
        )
        if proc.returncode == 0:
            got = pickle.loads(proc.stdout)
            if isinstance(got, Folded):
                return got
    except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError):
        pass
    return fold_files(root, [Path(f) for f in files], with_samples)


def fold_run(root: Path, files: Sequence[Path], with_samples: bool, jobs: int | None) -> Folded:
    """Folds every file, in ``jobs`` processes (None: ``default_jobs``)."""
    n = default_jobs(len(files)) if jobs is None else max(1, jobs)
    if n == 1 or len(files) < 2:
        return fold_files(root, files, with_samples)
    size = max(1, -(-len(files) // n))  # one chunk per process: one start-up each
    chunks = [[os.fspath(f) for f in files[i : i + size]] for i in range(0, len(files), size)]
    out = Folded()
    with concurrent.futures.ThreadPoolExecutor(max_workers=n) as pool:
        futures = [pool.submit(_fold_in_child, root, c, with_samples) for c in chunks]
        for fut in futures:  # in file order, so the result does not depend on timing
            out.add(fut.result())
    return out


def _child_main() -> int:
    request = json.loads(sys.stdin.buffer.read())
    folded = fold_files(
        Path(request["root"]), [Path(f) for f in request["files"]], request["with_samples"]
    )
    sys.stdout.buffer.write(pickle.dumps(folded, protocol=pickle.HIGHEST_PROTOCOL))
    return 0


if __name__ == "__main__":
    sys.exit(_child_main())
