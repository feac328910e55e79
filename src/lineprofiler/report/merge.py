"""``merge_run``: read a run directory's worker files and merge them into a ``MergedRun``.

The merge streams: one worker file is parsed, checked and reduced to its phase tree before the
next is read, so memory is the trees, not the files. A file that cannot be used (unreadable,
truncated, not JSON, another schema version, wrong types, absurd numbers) costs that worker
only: it is listed in ``run.unreadable`` and named under the caveats.

Attempts: the processes that ran together (``report.attempts``: by lifetime overlap and by the
ids they claim). The newest (latest start) is merged and the others are named, never summed in;
``attempt="all"`` merges every attempt, by request.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from lineprofiler.report import resources
from lineprofiler.report.attempts import AttemptGroup, UnreadableFile, group_attempts
from lineprofiler.report.caveats import run_caveats
from lineprofiler.report.model import Attempt, MergedPhase, MergedRun, Path_, Role, Unreadable
from lineprofiler.runfile.layout import run_id_from_name, worker_files
from lineprofiler.runfile.stats import PhaseStats
from lineprofiler.runfile.worker_doc import Worker, WorkerFileError, load_worker_doc, read_worker

# A worker not yet closed is stale when its last write is this much older than the run's newest
# file: STALE_MIN_S, or STALE_INTERVALS snapshot intervals if that is longer.
STALE_MIN_S = 60.0
STALE_INTERVALS = 3.0
ALL = "all"  # merge_run(attempt=ALL): every attempt, summed by request


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


# -- the merge --


def merge_run(
    run_dir: str | os.PathLike[str],
    with_samples: bool = True,
    attempt: str | None = None,
) -> MergedRun:
    """Merges the newest attempt (or ``attempt``: an attempt id, or ``"all"``) of a run directory.

    ``with_samples=False`` reads phases only: resource samples are never loaded. Raises
    ``RunError`` when the directory is missing, empty, not a run, or holds no usable worker
    file; a single unusable file is listed in ``run.unreadable`` instead.
    """
    root = Path(os.fspath(run_dir))
    files = _check_run_dir(root)

    # Every file is parsed, then grouped into attempts by time and id (report.attempts).
    workers: list[Worker] = []
    unreadable: list[UnreadableFile] = []
    samples_of: dict[int, tuple[dict[str, Any], Path]] = {}
    for f in files:
        rel = f.relative_to(root).as_posix()
        try:
            doc = load_worker_doc(f)
            w = read_worker(doc, rel)
        except WorkerFileError as exc:
            unreadable.append(_unreadable(f, rel, str(exc)))
            continue
        workers.append(w)
        if with_samples:
            # read below, once the attempt is chosen; keep the small keys, not the phases
            slim = {k: v for k, v in doc.items() if k != "threads"}
            samples_of[id(w)] = (slim, f)
        del doc

    grouping = group_attempts(workers, unreadable)
    chosen = grouping.newest() if attempt in (None, ALL) else grouping.find(attempt)
    if attempt is not None and attempt != ALL and chosen is None:
        known = ", ".join(a.id for a in grouping.attempts) or "none"
        raise RunError(f"{root}: no attempt {attempt!r} (attempts: {known})")
    if chosen is None or not chosen.workers:
        bad = [u.entry for u in unreadable]
        detail = "; ".join(f"{u.path}: {u.reason}" for u in bad[:5])
        more = f" (and {len(bad) - 5} more)" if len(bad) > 5 else ""
        raise RunError(f"{root}: no readable worker file ({len(bad)} unreadable: {detail}{more})")
    merged = grouping.attempts if attempt == ALL else [chosen]

    mine = sorted(
        [w for a in merged for w in a.workers],
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
        run_id=ALL if attempt == ALL else chosen.id,
        workers=mine,
        roles=dict(sorted(roles.items())),
        tree=tree,
        unreadable=sorted([u for a in merged for u in a.unreadable], key=lambda u: u.path),
        with_samples=with_samples,
        duplicates=grouping.duplicates,
    )
    run.attempts = [attempt_entry(a, a in merged) for a in grouping.attempts]
    run.superseded = [a for a in run.attempts if not a.reported]

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


def _unreadable(f: Path, rel: str, reason: str) -> UnreadableFile:
    try:
        mtime: float | None = f.stat().st_mtime
    except OSError:
        mtime = None
    return UnreadableFile(Unreadable(rel, reason), run_id_from_name(f.name) or "", mtime)


def attempt_entry(a: AttemptGroup, reported: bool) -> Attempt:
    """An attempt as the run lists it."""
    n = len(a.workers) + len(a.unreadable)
    return Attempt(a.id, n, a.start_time, a.end_time, a.roles(), a.overlapped, reported)


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
