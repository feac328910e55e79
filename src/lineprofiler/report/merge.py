"""``merge_run``: read a run directory's worker files and merge them into a ``MergedRun``.

The merge streams: one worker file is parsed, checked and reduced to its phase tree before the
next is read, so memory is the trees, not the files. A file that cannot be used (unreadable,
truncated, not JSON, another schema version, wrong types, absurd numbers) costs that worker
only: it is listed in ``run.unreadable`` and named under the caveats.

Attempts: every worker records the attempt it belongs to (``meta.run_id``). A rerun into the same
directory is a new attempt; the newest (latest start) is merged and the others are named as
superseded, never summed in.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from lineprofiler.report import resources
from lineprofiler.report.caveats import run_caveats
from lineprofiler.report.model import Attempt, MergedPhase, MergedRun, Path_, Role, Unreadable
from lineprofiler.runfile.layout import run_id_from_name, worker_files
from lineprofiler.runfile.stats import PhaseStats
from lineprofiler.runfile.worker_doc import Worker, WorkerFileError, load_worker_doc, read_worker

# A worker not yet closed is stale when its last write is this much older than the run's newest
# file: STALE_MIN_S, or STALE_INTERVALS snapshot intervals if that is longer.
STALE_MIN_S = 60.0
STALE_INTERVALS = 3.0


class RunError(Exception):
    """The directory cannot be reported at all (missing, empty, not a run, nothing readable)."""


def _check_run_dir(run_dir: Path) -> list[Path]:
    if not run_dir.exists():
        raise RunError(f"{run_dir}: no such directory")
    if not run_dir.is_dir():
        raise RunError(f"{run_dir}: not a directory")
    files = worker_files(run_dir)
    if files:
        return files
    try:
        entries = list(run_dir.iterdir())
    except OSError as exc:
        raise RunError(f"{run_dir}: cannot list it ({exc.strerror})") from None
    if not entries:
        raise RunError(f"{run_dir}: the directory is empty (no profiled process wrote to it)")
    if (run_dir / "workers").is_dir():
        raise RunError(f"{run_dir}: a run directory with no worker files under workers/")
    hint = ""
    if run_dir.name == "workers":
        hint = f" (pass the run directory, {run_dir.parent})"
    elif run_dir.parent.name == "workers":
        hint = f" (pass the run directory, {run_dir.parent.parent})"
    raise RunError(f"{run_dir}: not a lineprofiler run (no workers/<host>/w_*.json inside){hint}")


def _add_copy(tree: dict[Path_, MergedPhase], path: Path_, stats: PhaseStats) -> None:
    have = tree.get(path)
    if have is None:
        have = tree[path] = MergedPhase()
    have.add(stats)


# A file cannot have been written after it was last modified: a written_at beyond its mtime by
# more than the clock skew between a node and the file server is not believed (it would stretch
# the run's Runtime and make every other worker look stale).
MTIME_SLACK_S = 600.0


def _bound_written_at(w: Worker, f: Path) -> None:
    try:
        limit = f.stat().st_mtime + MTIME_SLACK_S
    except OSError:
        return
    if w.written_at > limit:
        w.written_at = max(w.start_time, limit)


# -- the merge --


def merge_run(
    run_dir: str | os.PathLike[str],
    with_samples: bool = True,
    attempt: str | None = None,
) -> MergedRun:
    """Merges the newest attempt (or ``attempt``, a run id) of a run directory.

    ``with_samples=False`` reads phases only: resource samples are never loaded. Raises
    ``RunError`` when the directory is missing, empty, not a run, or holds no usable worker
    file; a single unusable file is listed in ``run.unreadable`` instead.
    """
    root = Path(os.fspath(run_dir))
    files = _check_run_dir(root)

    # Group by attempt from the file names (w_<run_id>_<pid>_<uuid8>.json); every file is parsed,
    # since an attempt's start (which picks the newest) is its workers' earliest start.
    by_attempt: dict[str, list[Path]] = {}
    for f in files:
        by_attempt.setdefault(run_id_from_name(f.name) or "", []).append(f)
    if attempt is not None and attempt not in by_attempt:
        known = ", ".join(sorted(k for k in by_attempt if k)) or "none"
        raise RunError(f"{root}: no attempt {attempt!r} (attempts: {known})")

    workers: dict[str, list[Worker]] = {}
    unreadable: dict[str, list[Unreadable]] = {}
    samples_of: dict[int, tuple[dict[str, Any], Path]] = {}
    for run_id, paths in by_attempt.items():
        for f in paths:
            rel = f.relative_to(root).as_posix()
            try:
                doc = load_worker_doc(f)
                w = read_worker(doc, rel)
            except WorkerFileError as exc:
                unreadable.setdefault(run_id, []).append(Unreadable(rel, str(exc)))
                continue
            _bound_written_at(w, f)
            workers.setdefault(w.run_id or run_id, []).append(w)
            if with_samples:
                # read below, once the attempt is chosen; keep the small keys, not the phases
                slim = {k: v for k, v in doc.items() if k != "threads"}
                samples_of[id(w)] = (slim, f)
            del doc

    chosen = attempt if attempt is not None else _newest(workers)
    if chosen is None or not workers.get(chosen):
        bad = [u for us in unreadable.values() for u in us]
        detail = "; ".join(f"{u.path}: {u.reason}" for u in bad[:5])
        more = f" (and {len(bad) - 5} more)" if len(bad) > 5 else ""
        raise RunError(f"{root}: no readable worker file ({len(bad)} unreadable: {detail}{more})")

    mine = sorted(
        workers[chosen],
        key=lambda w: (w.role, w.host, -1 if w.rank is None else w.rank, w.pid, w.path),
    )
    roles: dict[str, Role] = {}
    tree: dict[Path_, MergedPhase] = {}
    for w in mine:
        role = roles.get(w.role)
        if role is None:
            role = roles[w.role] = Role(w.role)
        role.workers.append(w)
        for path, stats in w.tree.items():
            _add_copy(role.tree, path, stats)
            _add_copy(tree, path, stats)
    run = MergedRun(
        run_dir=str(root),
        run_id=chosen,
        workers=mine,
        roles=dict(sorted(roles.items())),
        tree=tree,
        unreadable=sorted(unreadable.get(chosen, []), key=lambda u: u.path),
        with_samples=with_samples,
    )
    for run_id in sorted(set(workers) | set(unreadable)):
        if run_id == chosen:
            continue
        ws = workers.get(run_id, [])
        n = len(ws) + len(unreadable.get(run_id, []))
        start = min((w.start_time for w in ws), default=None)
        run.superseded.append(Attempt(run_id or "(unnamed)", n, start))
    run.superseded.sort(key=lambda a: (a.start_time or 0.0, a.run_id))

    if with_samples:
        for w in mine:
            got = samples_of.get(id(w))
            if got is not None:
                resources.read_worker_samples(run, w, got[0], got[1])
        samples_of.clear()
        resources.finish_samples(run)

    _mark_stale(run)
    run.caveats = run_caveats(run) + (run.samples.caveats if run.samples else [])
    return run


def _newest(workers: dict[str, list[Worker]]) -> str | None:
    """The attempt whose earliest worker started last."""
    best: tuple[float, str] | None = None
    for run_id, ws in workers.items():
        if not ws:
            continue
        key = (min(w.start_time for w in ws), run_id)
        if best is None or key > best:
            best = key
    return None if best is None else best[1]


def stale_after_s(w: Worker) -> float:
    """How far behind the run's newest file a not-yet-closed worker may be before it is stale."""
    return max(STALE_MIN_S, STALE_INTERVALS * (w.snapshot_interval_s or 0.0))


def _mark_stale(run: MergedRun) -> None:
    newest = run.end_time
    if newest is None:
        return
    for w in run.workers:
        behind = newest - w.written_at
        if not w.final and behind > stale_after_s(w):
            w.stale_s = behind
