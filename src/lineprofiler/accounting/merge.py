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

import json
import math
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from lineprofiler.accounting.model import (
    Attempt,
    Caveat,
    MergedPhase,
    MergedRun,
    Path_,
    Role,
    Unreadable,
    Worker,
)
from lineprofiler.render.units import fmt_duration, fmt_utc

SCHEMA_VERSION = 1
WORKER_FORMAT = "lineprofiler-worker"
_MAX_NS = 2**63 - 1  # ~292 years: any count or time above is corrupt
# A worker not yet closed is stale when its last write is this much older than the run's newest
# file: STALE_MIN_S, or STALE_INTERVALS snapshot intervals if that is longer.
STALE_MIN_S = 60.0
_FUTURE_SLACK_S = 86400.0  # clock skew between the nodes and the machine reading the run
STALE_INTERVALS = 3.0

# Readers of resource samples, called per worker only when with_samples=True:
#   reader(run, worker, doc, file_path) -> None    (put results under run.resources; doc is the
#   worker file without its "threads", which the merge has already reduced)
# and finishers, called once after every worker was read: finisher(run) -> None.
SAMPLE_READERS: list[Callable[[MergedRun, Worker, Mapping[str, Any], Path], None]] = []
SAMPLE_FINISHERS: list[Callable[[MergedRun], None]] = []


class RunError(Exception):
    """The directory cannot be reported at all (missing, empty, not a run, nothing readable)."""


class _Bad(Exception):
    """A worker file that cannot be used; the message is the reason."""


def worker_files(run_dir: Path) -> list[Path]:
    """The run's worker files, ``workers/<host>/w_*.json``, sorted."""
    return sorted(p for p in run_dir.glob("workers/*/w_*.json") if p.is_file())


def _run_id_from_name(name: str) -> str | None:
    # w_<run_id>_<pid>_<uuid8>.json
    stem = name[2:-5] if name.startswith("w_") and name.endswith(".json") else ""
    parts = stem.rsplit("_", 2)
    return parts[0] if len(parts) == 3 and parts[0] else None


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


# -- reading and checking one worker file --


def _load(path: Path) -> dict[str, Any]:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise _Bad(f"cannot read it ({exc.strerror or exc})") from None
    if not data.strip():
        raise _Bad("empty file (the process died before its first write completed)")
    try:
        doc = json.loads(data)
    except UnicodeDecodeError:
        raise _Bad("not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        # A file cut short (a torn copy, a full disk) fails at its end, or inside a last string.
        if exc.pos >= len(data.rstrip()) - 1 or exc.msg.startswith("Unterminated string"):
            raise _Bad(f"truncated (the JSON stops at byte {len(data)})") from None
        raise _Bad(f"not JSON ({exc.msg}: line {exc.lineno}, column {exc.colno})") from None
    except RecursionError:
        raise _Bad("not a worker file (nested too deeply)") from None
    if not isinstance(doc, dict):
        raise _Bad(f"not a worker file (a JSON {type(doc).__name__}, not an object)")
    if doc.get("format", WORKER_FORMAT) != WORKER_FORMAT:
        raise _Bad(f"not a worker file (format {doc.get('format')!r})")
    version = doc.get("schema_version")
    if version != SCHEMA_VERSION:
        raise _Bad(
            f"schema_version {version!r}; this lineprofiler reads version {SCHEMA_VERSION} "
            "(report it with the version that wrote it)"
        )
    return doc


def _int(value: Any, what: str, lo: int = 0, hi: int = _MAX_NS) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise _Bad(f"{what} is {type(value).__name__} {_short(value)}, not an integer")
    if not lo <= value <= hi:
        raise _Bad(f"{what} = {value} is out of range [{lo}, {hi}]")
    return value


def _num(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _Bad(f"{what} is {type(value).__name__} {_short(value)}, not a number")
    if not math.isfinite(value) or value < 0 or value > 1e11:
        raise _Bad(f"{what} = {value} is not a plausible Unix time")
    return float(value)


def _str(value: Any, what: str, optional: bool = False) -> str | None:
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise _Bad(f"{what} is {type(value).__name__} {_short(value)}, not a string")
    return value


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _opt_int(value: Any, what: str, lo: int = 0) -> int | None:
    return None if value is None else _int(value, what, lo=lo)


def _phase(
    rec: Any, where: str, lifetime_ns: int | None, tasks: bool = False
) -> tuple[Path_, MergedPhase]:
    if not isinstance(rec, dict):
        raise _Bad(f"{where}: a phase record is {type(rec).__name__}, not an object")
    raw_path = rec.get("path")
    if not isinstance(raw_path, list) or not all(isinstance(p, str) for p in raw_path):
        raise _Bad(f"{where}: path {_short(raw_path)} is not a list of names")
    name = "/".join(raw_path) or "(root)"
    at = f"{where} phase {name!r}"
    for key in ("calls", "wall_ns", "self_ns", "open", "open_ns", "async_calls", "async_wall_ns"):
        _int(rec.get(key, 0), f"{at}: {key}")
    if rec.get("cpu_ns") is not None:
        _int(rec["cpu_ns"], f"{at}: cpu_ns")
    hist = rec.get("hist", [])
    if not isinstance(hist, list):
        raise _Bad(f"{at}: hist is {type(hist).__name__}, not a list")
    for pair in hist:
        if not (isinstance(pair, list) and len(pair) == 2):
            raise _Bad(f"{at}: hist entry {_short(pair)} is not [bucket, count]")
        _int(pair[0], f"{at}: hist bucket", hi=511)
        _int(pair[1], f"{at}: hist count")
    counters = rec.get("counters", {})
    if not isinstance(counters, dict):
        raise _Bad(f"{at}: counters is {type(counters).__name__}, not an object")
    for cname, cval in counters.items():
        _int(cval, f"{at}: counter {cname!r}", lo=-_MAX_NS)
    every = _int(rec.get("sample_every", 1), f"{at}: sample_every", lo=1)
    stats = MergedPhase.from_record(rec)
    if every == 1 and lifetime_ns is not None:
        # A path appears once per thread and its entries cannot overlap, so its time is bounded
        # by the worker's lifetime (with slack for the two clocks); asyncio tasks' entries that
        # spanned an await (and, on a thread with tasks, open ones) can overlap.
        limit = lifetime_ns * 1.01 + 1e9
        bounded = stats.wall_ns - stats.async_wall_ns + (0 if tasks else stats.open_ns)
        if bounded > limit or (stats.cpu_ns or 0) > limit:
            raise _Bad(
                f"{at}: {stats.wall_ns + stats.open_ns} ns recorded in a process that lived "
                f"{lifetime_ns} ns"
            )
    io = rec.get("io")
    if io is not None:
        if not isinstance(io, dict):
            raise _Bad(f"{at}: io is {type(io).__name__}, not an object")
        # sum the integer fields; other (future) fields are ignored, as unknown keys are
        stats.io = {
            str(k): v
            for k, v in io.items()
            if isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= _MAX_NS
        }
    stats.sample_rates = {every}
    stats.processes = 1
    return tuple(raw_path), stats


def _worker(doc: dict[str, Any], rel: str) -> Worker:
    meta = doc.get("meta")
    if not isinstance(meta, dict):
        raise _Bad("no meta object")
    start_time = _num(meta.get("start_time"), "meta.start_time")
    written_at = _num(doc.get("written_at"), "written_at")
    if written_at + 1.0 < start_time:
        raise _Bad(f"written_at {written_at} is before the process started ({start_time})")
    if written_at > time.time() + _FUTURE_SLACK_S:
        # one such file would make every other worker look stale
        raise _Bad(f"written_at {written_at} is in the future ({fmt_utc(written_at)})")
    clock = doc.get("clock") if isinstance(doc.get("clock"), dict) else {}
    threads = doc.get("threads", [])
    if not isinstance(threads, list):
        raise _Bad(f"threads is {type(threads).__name__}, not a list")
    thread_names = meta.get("thread_names") is True
    w = Worker(
        path=rel,
        role=_str(meta.get("role"), "meta.role") or "main",
        host=_str(meta.get("host"), "meta.host") or "?",
        pid=_int(meta.get("pid"), "meta.pid", hi=2**31),
        run_id=_str(meta.get("run_id"), "meta.run_id") or "",
        uuid=_str(meta.get("uuid", ""), "meta.uuid") or "",
        start_time=start_time,
        written_at=written_at,
        rank=_opt_int(meta.get("rank"), "meta.rank", lo=-1),
        local_rank=_opt_int(meta.get("local_rank"), "meta.local_rank", lo=-1),
        job_id=None if meta.get("job_id") is None else str(meta.get("job_id")),
        snapshot_seq=_int(doc.get("snapshot_seq", 0), "snapshot_seq"),
        final=doc.get("final") is True,
        flush_errors=_int(doc.get("flush_errors", 0), "flush_errors"),
        last_flush_error=str(doc.get("last_flush_error") or ""),
        clock_wall=_str(clock.get("wall"), "clock.wall", optional=True),
        clock_cpu=_str(clock.get("cpu"), "clock.cpu", optional=True),
        own_write_bytes=_opt_int(doc.get("own_write_bytes"), "own_write_bytes"),
        thread_names=thread_names,
        snapshot_interval_s=_interval(meta.get("snapshot_interval_s")),
        threads=len(threads),
    )
    lifetime_ns = w.lifetime_ns
    tree = w.tree
    for i, thread in enumerate(threads):
        if not isinstance(thread, dict):
            raise _Bad(f"threads[{i}] is {type(thread).__name__}, not an object")
        where = f"thread {thread.get('name') or i}"
        w.folded_entries += _int(thread.get("folded_entries", 0), f"{where}: folded_entries")
        w.depth_overflow += _int(thread.get("depth_overflow", 0), f"{where}: depth_overflow")
        w.out_of_order_exits += _int(thread.get("out_of_order_exits", 0), f"{where}: exits")
        tasks = bool(thread.get("tasks"))
        phases = thread.get("phases", [])
        if not isinstance(phases, list):
            raise _Bad(f"{where}: phases is {type(phases).__name__}, not a list")
        prefix: Path_ = ()
        if thread_names:
            prefix = (str(thread.get("name") or f"thread-{thread.get('tid')}"),)
        for rec in phases:
            path, stats = _phase(rec, where, lifetime_ns, tasks)
            stats.thread_node = thread_names and not path
            _add(tree, prefix + path, stats)
            if thread_names and len(path) == 1:
                node = MergedPhase(
                    cpu_ns=stats.cpu_ns,
                    wall_ns=stats.wall_ns,
                    async_calls=stats.async_calls,
                    async_wall_ns=stats.async_wall_ns,
                    open_ns=stats.open_ns,
                    sample_rates=set(stats.sample_rates),
                    processes=1,
                    thread_node=True,
                )
                _add(tree, prefix, node)
    return w


def _interval(value: Any) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
        return float(value)
    return None


def _add(tree: dict[Path_, MergedPhase], path: Path_, stats: MergedPhase) -> None:
    have = tree.get(path)
    if have is None:
        tree[path] = stats
    else:
        processes = have.processes
        have.add(stats)
        have.processes = processes  # same worker: still one process


def _add_copy(tree: dict[Path_, MergedPhase], path: Path_, stats: MergedPhase) -> None:
    have = tree.get(path)
    if have is None:
        have = tree[path] = MergedPhase(thread_node=stats.thread_node)
    have.add(stats)


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
        by_attempt.setdefault(_run_id_from_name(f.name) or "", []).append(f)
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
                doc = _load(f)
                w = _worker(doc, rel)
            except _Bad as exc:
                unreadable.setdefault(run_id, []).append(Unreadable(rel, str(exc)))
                continue
            workers.setdefault(w.run_id or run_id, []).append(w)
            if with_samples and SAMPLE_READERS:
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
                for reader in SAMPLE_READERS:
                    reader(run, w, got[0], got[1])
        samples_of.clear()
        for finish in SAMPLE_FINISHERS:
            finish(run)

    _mark_stale(run)
    run.caveats = _caveats(run) + list(run.resources.pop("caveats", []))
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


# -- caveats --

_LIST_LIMIT = 10


def _listing(items: list[str], sep: str = ", ") -> str:
    """At most _LIST_LIMIT items, then how many more (the caveat's ``workers`` has them all)."""
    shown = sep.join(items[:_LIST_LIMIT])
    more = len(items) - _LIST_LIMIT
    return shown + (f"{sep}and {more} more" if more > 0 else "")


def _caveats(run: MergedRun) -> list[Caveat]:
    out: list[Caveat] = []
    if run.unreadable:
        out.append(
            Caveat(
                "unreadable",
                f"{len(run.unreadable)} worker file(s) could not be read and are not counted: "
                + _listing([f"{u.path}: {u.reason}" for u in run.unreadable], sep="; "),
                [u.path for u in run.unreadable],
            )
        )
    nothing = [w for w in run.workers if w.recorded_nothing]
    if nothing:
        out.append(
            Caveat(
                "recorded_nothing",
                f"{len(nothing)} worker(s) started, recorded nothing: "
                + _listing([f"{w.role} {w.label}" for w in nothing]),
                [w.path for w in nothing],
            )
        )
    stale = [w for w in run.workers if w.stale_s is not None]
    if stale:
        out.append(
            Caveat(
                "stale",
                f"{len(stale)} worker(s) stopped writing before the run's newest file "
                "(died or hung; their numbers end there): "
                + _listing(
                    [
                        f"{w.role} {w.label} {fmt_duration(int(w.stale_s * 1e9))} behind"
                        for w in stale
                        if w.stale_s is not None
                    ]
                ),
                [w.path for w in stale],
            )
        )
    failing = [w for w in run.workers if w.flush_errors > 0]
    if failing:
        out.append(
            Caveat(
                "flush_errors",
                f"{len(failing)} worker(s) had failing writes (their file may be out of date): "
                + _listing(
                    [
                        f"{w.role} {w.label} {w.flush_errors} failed"
                        + (f" ({w.last_flush_error})" if w.last_flush_error else "")
                        for w in failing
                    ]
                ),
                [w.path for w in failing],
            )
        )
    folded = [w for w in run.workers if w.folded_entries > 0]
    if folded:
        total = sum(w.folded_entries for w in folded)
        out.append(
            Caveat(
                "folded",
                f'{total:,} phase entries in {len(folded)} worker(s) went to the "(folded)" '
                "node: their phase tree was full (4096 paths), so new paths were folded "
                "together — phase names built from data?",
                [w.path for w in folded],
            )
        )
    overflow = [w for w in run.workers if w.depth_overflow > 0]
    if overflow:
        out.append(
            Caveat(
                "depth_overflow",
                f"{len(overflow)} worker(s) nested phases deeper than the recorder's limit; "
                "the deepest entries were not recorded",
                [w.path for w in overflow],
            )
        )
    disorder = [w for w in run.workers if w.out_of_order_exits > 0]
    if disorder:
        out.append(
            Caveat(
                "out_of_order_exits",
                f"{sum(w.out_of_order_exits for w in disorder):,} phase exit(s) in "
                f"{len(disorder)} worker(s) came before the exit of a phase entered inside them "
                "(on one thread or in one asyncio task): the inner entries were closed there, "
                "early",
                [w.path for w in disorder],
            )
        )
    for a in run.superseded:
        when = f", started {fmt_utc(a.start_time)}" if a.start_time is not None else ""
        out.append(
            Caveat(
                "superseded_attempt",
                f"superseded attempt {a.run_id} ({a.workers} worker file(s){when}) "
                "is not merged; this report is the newest attempt",
            )
        )
    if run.workers and not any(w.final for w in run.workers):
        out.append(
            Caveat(
                "live",
                "no worker has closed: the run is live or was killed; numbers stop at each "
                "worker's last write",
            )
        )
    still_open = [w for w in run.workers if any(s.open for s in w.tree.values())]
    if still_open:
        entries = sum(s.open for w in still_open for s in w.tree.values() if not s.thread_node)
        out.append(
            Caveat(
                "open_entries",
                f"{entries:,} phase entries in {len(still_open)} worker(s) were still open at "
                "their last write: their time so far is counted, their wait and percentiles "
                "are not",
                [w.path for w in still_open],
            )
        )
    return out


# The resource readers register themselves in SAMPLE_READERS/SAMPLE_FINISHERS on import.
from lineprofiler.accounting import resources_merge as _resources_merge  # noqa: E402, F401
