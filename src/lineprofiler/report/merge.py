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
import time
from pathlib import Path

from lineprofiler.report import resources
from lineprofiler.report.attempts import AttemptGroup, UnreadableFile, group_attempts
from lineprofiler.report.caveats import run_caveats
from lineprofiler.report.fates import settle_fates
from lineprofiler.report.fold import DocCache, Folded, Partial, fold_files
from lineprofiler.report.lines_merge import read_run_lines
from lineprofiler.report.model import Attempt, MergedPhase, MergedRun, Path_, Role, Unreadable
from lineprofiler.report.parallel import fold_run
from lineprofiler.report.reduce import load_host
from lineprofiler.report.timeline import TimelineBuilder
from lineprofiler.runfile.layout import (
    WORKERS_DIR,
    list_workers,
    pid_from_name,
    run_id_from_name,
    worker_files,
)
from lineprofiler.runfile.run_error import RunError
from lineprofiler.runfile.summary import SUMMARIES_DIR
from lineprofiler.runfile.worker_doc import Worker

# A worker not yet closed is stale when its last write is this much older than the run's newest
# file: STALE_MIN_S, or STALE_INTERVALS snapshot intervals if that is longer.
STALE_MIN_S = 60.0
STALE_INTERVALS = 3.0
ALL = "all"  # merge_run(attempt=ALL): every attempt, summed by request


_NOT_ENABLED = (
    "was profiling enabled? A profiler writes only when enabled: Profiler(..., enabled=True), "
    "or LINEPROFILER_PROFILE=1 in its environment, or the command run under "
    "`lineprofiler record -- python ...`"
)


def check_run_dir(run_dir: Path) -> list[Path]:
    """The run's worker files; ``RunError`` saying what to do when there are none."""
    if not run_dir.exists():
        raise RunError(f"{run_dir}: no such directory ({_NOT_ENABLED})")
    if not run_dir.is_dir():
        if run_dir.name.startswith("w_") and run_dir.parent.parent.name == "workers":
            raise RunError(
                f"{run_dir}: a worker file; pass its run directory, {run_dir.parent.parent.parent}"
            )
        raise RunError(f"{run_dir}: not a directory")
    files = worker_files(run_dir)
    if files:
        return files
    try:
        entries = list(run_dir.iterdir())
    except OSError as exc:
        raise RunError(f"{run_dir}: cannot list it ({exc.strerror})") from None
    if not entries:
        raise RunError(
            f"{run_dir}: the directory is empty: no profiled process wrote to it ({_NOT_ENABLED})"
        )
    if (run_dir / WORKERS_DIR).is_dir():
        raise RunError(f"{run_dir}: a run directory with no worker files under workers/")
    if run_dir.name == WORKERS_DIR:
        raise RunError(
            f"{run_dir}: not a lineprofiler run (pass the run directory, {run_dir.parent})"
        )
    if run_dir.parent.name == WORKERS_DIR:
        raise RunError(
            f"{run_dir}: not a lineprofiler run (pass the run directory, {run_dir.parent.parent})"
        )
    inside = sorted(e.name for e in entries if e.is_dir() and worker_files(e))
    if inside:
        shown = ", ".join(str(run_dir / n) for n in inside[:10])
        more = f" and {len(inside) - 10} more" if len(inside) > 10 else ""
        raise RunError(
            f"{run_dir}: not a run directory itself, but it holds {len(inside)}: {shown}{more}"
        )
    raise RunError(f"{run_dir}: not a lineprofiler run (no workers/<host>/w_*.json inside)")


# -- the merge --


def merge_run(
    run_dir: str | os.PathLike[str],
    with_samples: bool = True,
    attempt: str | None = None,
    jobs: int | None = None,
    cache: DocCache | None = None,
    timeline_bins: int = 0,
) -> MergedRun:
    """Merges the newest attempt (or ``attempt``: an attempt id, or ``"all"``) of a run directory.

    ``with_samples=False`` reads phases only: resource samples are never loaded. ``jobs``: how
    many processes fold the worker files (default: ``$LINEPROFILER_REPORT_JOBS``, else one per
    CPU for large runs; 1 folds in this process). ``timeline_bins``: with samples, also bin the
    sidecars' rows over time as they are read (``run.timeline``, what ``report --html`` draws). Raises ``RunError`` when the directory is
    missing, empty, not a run, or holds no usable worker file; a single unusable file is listed
    in ``run.unreadable`` instead. ``cache``: a ``DocCache`` kept between merges of this run
    directory (``top``, ``serve``): files whose bytes did not change are not parsed again (the
    fold then runs in this process, whatever ``jobs`` says).
    """
    root = Path(os.fspath(run_dir))
    files, with_lines = list_workers(root)  # one listing for both
    if not files:  # RunError saying why there are none (or the files written since)
        files, with_lines = check_run_dir(root), None  # (read_run_lines then lists again)
    if cache is not None:
        cache.begin()
    try:
        folded = _fold(root, files, with_samples, jobs, cache)
    finally:
        if cache is not None:
            cache.end()

    # Every file is parsed, then grouped into attempts by time and id (report.attempts).
    by_worker = {id(fw.worker): fw for p in folded.partials.values() for fw in p.workers}
    workers = sorted((fw.worker for fw in by_worker.values()), key=lambda w: w.path)
    unreadable = [
        _unreadable(root / u.path, u, key) for key, us in folded.unreadable.items() for u in us
    ]
    settle_fates(workers)
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

    part = _attempt_partial(root, folded, {id(w) for a in merged for w in a.workers}, with_samples)
    folded_workers = sorted(
        part.workers,
        key=lambda fw: (
            fw.worker.role,
            fw.worker.host,
            -1 if fw.worker.rank is None else fw.worker.rank,
            fw.worker.pid,
            fw.worker.path,
        ),
    )
    _keep_fates(workers, [fw.worker for fw in folded_workers])
    roles: dict[str, Role] = {}
    for fw in folded_workers:
        w = fw.worker
        role = roles.get(w.role)
        if role is None:
            role = roles[w.role] = Role(w.role, tree=part.roles.get(w.role, {}))
            role.path_ids = part.paths
        role.workers.append(w)
        role.times.append(fw.times)
    for role in roles.values():
        _count_processes_per_path(role)
    tree: dict[Path_, MergedPhase] = {}
    for role in roles.values():
        for path, stats in role.tree.items():
            have = tree.get(path)
            if have is None:
                have = tree[path] = MergedPhase()
            have.add(stats)
    run = MergedRun(
        run_dir=str(root),
        run_id=ALL if attempt == ALL else chosen.id,
        workers=[fw.worker for fw in folded_workers],
        roles=dict(sorted(roles.items())),
        tree=tree,
        unreadable=sorted([u for a in merged for u in a.unreadable], key=lambda u: u.path),
        with_samples=with_samples,
        duplicates=grouping.duplicates,
        misplaced=grouping.misplaced,
        launches=[] if attempt == ALL else chosen.launches,
        attempt_asked=attempt,
    )
    run.attempts = [attempt_entry(a, a in merged) for a in grouping.attempts]
    run.superseded = [a for a in run.attempts if not a.reported]

    if with_samples:
        builder = TimelineBuilder.for_run(run, timeline_bins) if timeline_bins > 0 else None
        also = builder.add if builder is not None else None
        for fw in folded_workers:
            if fw.samples is not None:
                if also is None:
                    resources.read_worker_samples(run, fw.worker, fw.samples, Path(fw.worker.file))
                else:
                    resources.read_worker_samples(
                        run, fw.worker, fw.samples, Path(fw.worker.file), also=also
                    )
        resources.finish_samples(run)
        if builder is not None:
            run.timeline, run.timeline_binned = builder.finish(), True

    _mark_stale(run)
    lines_caveats = read_run_lines(run, with_lines)
    run.caveats = run_caveats(run) + (run.samples.caveats if run.samples else []) + lines_caveats
    return run


def _keep_fates(settled: list[Worker], merged: list[Worker]) -> None:
    """The fates settled over every file, on the workers of the chosen attempt (which may have
    been read again: an id shared by two attempts)."""
    by_path = {w.path: w for w in settled}
    for w in merged:
        was = by_path.get(w.path)
        if was is not None and was is not w:
            w.launched_at, w.fate, w.unaccounted_s = was.launched_at, was.fate, was.unaccounted_s


def _count_processes_per_path(role: Role) -> None:
    """Where one process wrote several files (a profiler per Pool task), a path's ``processes``
    (files that recorded it, from the fold) counts that process once: each further file of one
    process with time in the path is taken off (never below 1)."""
    extra: dict[int, int] = {}  # path id -> files beyond a process's first with time in it
    for g in role.process_groups():
        if len(g) < 2:
            continue
        seen: dict[int, int] = {}
        for i in g:
            times = role.times[i] if i < len(role.times) else ()
            for pid, t in enumerate(times):
                if t:
                    seen[pid] = seen.get(pid, 0) + 1
        for pid, n in seen.items():
            if n > 1:
                extra[pid] = extra.get(pid, 0) + n - 1
    if not extra:
        return
    for path, stats in role.tree.items():
        pid = role.path_ids.get(path)
        if pid is not None and pid in extra:
            stats.processes = max(1, stats.processes - extra[pid])


def _fold(
    root: Path, files: list[Path], with_samples: bool, jobs: int | None, cache: DocCache | None
) -> Folded:
    """Folds the run: each host from its summary (``lineprofiler reduce``) where one covers that
    host's files as they are now, the rest from the files."""
    by_host: dict[str, list[Path]] = {}
    for f in files:
        by_host.setdefault(f.parent.name, []).append(f)
    folded = Folded()
    rest: list[Path] = []
    if (root / SUMMARIES_DIR).is_dir():
        for host, host_files in by_host.items():
            got = load_host(root, host, host_files)
            if got is None:
                rest += host_files
            else:
                folded.add(got)
    else:
        rest = files
    if rest and cache is not None:
        folded.add(fold_files(root, rest, with_samples, cache))
    elif rest:
        folded.add(fold_run(root, rest, with_samples, jobs))
    return folded


def _attempt_partial(root: Path, folded: Folded, chosen: set[int], with_samples: bool) -> Partial:
    """The fold of exactly the chosen workers: whole per-id partials where every worker of one
    was chosen; the files of the others folded again (an id shared by two attempts, a duplicate
    left out)."""
    part = Partial()
    again: list[Path] = []
    for p in folded.partials.values():
        ids = {id(fw.worker) for fw in p.workers}
        if ids <= chosen:
            part.add(p)
        elif ids & chosen:
            again += [root / fw.worker.path for fw in p.workers if id(fw.worker) in chosen]
    if again:
        for p in fold_files(root, sorted(again), with_samples).partials.values():
            part.add(p)
    return part


def _unreadable(f: Path, entry: Unreadable, name_id: str) -> UnreadableFile:
    """What can be known of an unreadable file: its name's run id and pid, its mtime and size."""
    try:
        st = f.lstat()
        mtime: float | None = st.st_mtime
        size: int | None = st.st_size
    except OSError:
        mtime = size = None
    return UnreadableFile(
        entry, name_id or run_id_from_name(f.name) or "", mtime, pid_from_name(f.name), size
    )


def attempt_entry(a: AttemptGroup, reported: bool) -> Attempt:
    """An attempt as the run lists it: its end never later than the moment it is read (a live
    process's lifetime reaches one snapshot interval past its last write)."""
    n = len(a.workers) + len(a.unreadable)
    end = a.end_time
    return Attempt(
        a.id,
        n,
        a.start_time,
        None if end is None else min(end, max(time.time(), a.start_time or 0.0)),
        a.roles(),
        a.overlapped,
        reported,
        list(a.why),
        len(a.unreadable),
    )


def stale_after_s(w: Worker) -> float:
    """How far behind the run's newest file a not-yet-closed worker may be before it is stale."""
    return max(STALE_MIN_S, STALE_INTERVALS * (w.snapshot_interval_s or 0.0))


def _mark_stale(run: MergedRun, now: float | None = None) -> None:
    """Names stale workers; and, read while the run goes on, says so and when each worker that
    has not written a phase yet is due to write next."""
    newest = run.end_time
    if newest is None:
        return
    now = time.time() if now is None else now
    for w in run.workers:
        behind = newest - w.written_at
        if not w.final and not w.ended_unclosed and behind > stale_after_s(w):
            w.stale_s = behind
    if any(w.final for w in run.workers):
        return
    here = os.uname().nodename
    alive = [w for w in run.workers if not w.ended_unclosed and not _gone(w, here)]
    since = max(0.0, now - newest)
    if alive and since <= max(stale_after_s(w) for w in alive):
        run.live_s = since
        for w in alive:
            due = w.written_at + (w.snapshot_interval_s or 0.0) - now
            if w.paths == 0 and w.stale_s is None and w.snapshot_interval_s and due > -1.0:
                w.next_write_s = max(0.0, due)


def _gone(w: Worker, here: str) -> bool:
    """Whether a worker that ran on this host has no process any more (killed before it closed).
    Workers of other hosts cannot be checked from here: they count as alive."""
    if w.host != here:
        return False
    try:
        os.kill(w.pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # another user's process (EPERM): it exists
        return False
    return False
