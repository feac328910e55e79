"""Where a run's files live and what they are called: the one place that names them.

A run directory holds ``workers/<host>/w_<run_id>_<pid>_<uuid8>.json`` per process (plus the
sampler's ``.samples``/``.tags`` sidecars beside it), ``metadata.json`` and ``backend/``. The
schema version and the limits are the C++ recorder's own (generated from ``_core`` into
``core_constants``), never copied.
"""

from __future__ import annotations

import os
from pathlib import Path

from lineprofiler.runfile import core_constants as _cc

# Environment variables an enabled profiler exports to its children (and a user may set): lp_core's
# (identity.h, the standalone profiler's too), generated into core_constants.
ENV_PROFILE: str = _cc.ENV_PROFILE
ENV_RUN_DIR: str = _cc.ENV_RUN_DIR
ENV_RUN_ID: str = _cc.ENV_RUN_ID
ENV_ROLE: str = _cc.ENV_ROLE
# The exporting profiler's role: a child that joins the run is "<parent role>.child" by default.
ENV_PARENT_ROLE: str = _cc.ENV_PARENT_ROLE
# The phases whose lines are traced (comma-separated names or "/"-joined paths) and how many
# entries per process ("all": every one); a profiler built with lines= exports both (issue 32).
ENV_LINES = "LINEPROFILER_LINES"
ENV_LINES_ENTRIES = "LINEPROFILER_LINES_ENTRIES"
# The run-level variables a profiler exports (and its close() restores).
RUN_ENV_KEYS = (ENV_PROFILE, ENV_RUN_DIR, ENV_RUN_ID, ENV_PARENT_ROLE, ENV_LINES, ENV_LINES_ENTRIES)
# Set by ``lineprofiler record``: a file each enabled profiler of the command appends its run
# directory to (absolute, NUL-terminated), so record reports the directory the run really wrote.
ENV_RECORD_DIRS = "LINEPROFILER_RECORD_DIRS"

WORKER_FORMAT: str = _cc.WORKER_FORMAT
WORKER_SCHEMA_VERSION: int = _cc.WORKER_SCHEMA_VERSION
MAX_PATHS: int = _cc.MAX_PATHS  # paths per thread before new ones fold into "(folded)"
MAX_DEPTH: int = _cc.MAX_DEPTH  # nesting beyond this is counted in depth_overflow
# The path element the recorder puts between a handed-off thread's work and the phases it was
# handed from (accounting.attach): ``step/[threads]/work`` ran on other threads inside ``step``.
THREADS_MARK = "[threads]"

WORKERS_DIR: str = _cc.WORKERS_DIR
SAMPLES_SUFFIX = ".samples"
TAGS_SUFFIX = ".tags"
# The line statistics of the phases named by Profiler(lines=...) / LINEPROFILER_LINES, one JSON
# document beside the worker file, rewritten at every snapshot (docs/worker-file.md, "Lines").
LINES_SUFFIX = ".lines"
LINES_FORMAT = "lineprofiler-lines"
LINES_VERSION = 1
LINES_MAX_BYTES = 8 << 20  # a larger sidecar is not read (a caveat says so)


def worker_path(run_dir: Path, host: str, run_id: str, pid: int, uid8: str) -> Path:
    """``<run_dir>/workers/<host>/w_<run>_<pid>_<uuid8>.json``."""
    return run_dir / WORKERS_DIR / host / f"w_{run_id}_{pid}_{uid8}.json"


def list_workers(run_dir: str | Path) -> tuple[list[Path], set[str]]:
    """``worker_files`` and ``workers_with_lines`` of the run from one listing of each host
    directory (a merge needs both: ``top`` lists a thousand files at each refresh)."""
    top = os.path.join(run_dir, WORKERS_DIR)
    try:
        with os.scandir(top) as entries:
            hosts = [e.name for e in entries if e.is_dir()]
    except OSError:
        return [], set()
    found: list[tuple[str, str]] = []
    lines: set[str] = set()
    cut = len(LINES_SUFFIX)
    for host in hosts:
        try:
            with os.scandir(os.path.join(top, host)) as entries:
                for e in entries:
                    name = e.name
                    if not name.startswith("w_"):
                        continue
                    if name.endswith(".json"):
                        if e.is_file():
                            found.append((host, name))
                    elif name.endswith(LINES_SUFFIX):
                        lines.add(f"{WORKERS_DIR}/{host}/{name[:-cut]}.json")
        except OSError:
            continue
    found.sort()
    out: list[Path] = []
    dirs: dict[str, Path] = {}
    for host, name in found:  # one Path per host directory, one join per file
        d = dirs.get(host)
        if d is None:
            d = dirs[host] = Path(top, host)
        out.append(d / name)
    return out, lines


def worker_files(run_dir: Path) -> list[Path]:
    """The run's worker files, ``workers/<host>/w_*.json``, sorted as paths (by host, then name).
    A link counts as what it points to, as in a glob (reading it is refused later, and says so).
    One listing per directory, no stat per regular file: a run holds thousands."""
    return list_workers(run_dir)[0]


def workers_with_lines(run_dir: Path) -> set[str]:
    """The run-relative paths (posix) of the worker files that have a line-statistics sidecar
    beside them (``w_*.lines`` in a host directory, whatever it is: reading it checks): one
    listing per host directory, so that a run of thousands of workers and few sidecars costs a
    set lookup per worker, not a path and a stat."""
    return list_workers(run_dir)[1]


def run_id_from_name(name: str) -> str | None:
    """The run id in a worker file's name ``w_<run_id>_<pid>_<uuid8>.json``, or None."""
    stem = name[2:-5] if name.startswith("w_") and name.endswith(".json") else ""
    parts = stem.rsplit("_", 2)
    return parts[0] if len(parts) == 3 and parts[0] else None


def pid_from_name(name: str) -> int | None:
    """The pid in a worker file's name ``w_<run_id>_<pid>_<uuid8>.json``, or None."""
    stem = name[2:-5] if name.startswith("w_") and name.endswith(".json") else ""
    parts = stem.rsplit("_", 2)
    return int(parts[1]) if len(parts) == 3 and parts[1].isdigit() else None


def lines_path(worker_file: Path) -> Path:
    """The line-statistics sidecar beside a worker file."""
    return worker_file.with_suffix(LINES_SUFFIX)


def samples_path(worker_file: Path) -> Path:
    """The sampler's row file beside a worker file."""
    return worker_file.with_suffix(SAMPLES_SUFFIX)
