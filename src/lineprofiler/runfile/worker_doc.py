"""One reader and validator of worker documents (``workers/<host>/w_*.json``).

``load_worker_doc`` parses a file; ``read_worker`` checks a document and turns it into a
``Worker``: its identity and its phase tree (summed over threads, ``io`` byte sums and, under
``thread_names``, the threads' own nodes included). ``tree_of`` gives the same tree for a live
profiler's own document (``merged_tree()``/``deltas()``), so both sides read one format one way.
A document that cannot be used raises ``WorkerFileError`` whose message is the reason.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lineprofiler.runfile.layout import WORKER_FORMAT, WORKER_SCHEMA_VERSION
from lineprofiler.runfile.safe_read import UnsafeFile, read_regular
from lineprofiler.runfile.stats import PhaseStats

Path_ = tuple[str, ...]

_MAX_NS = 2**63 - 1  # ~292 years: any count or time above is corrupt
FOLDED_NAME = "(folded)"  # the node a full tree folds new paths into (lp_core/recorder.cpp)
_FUTURE_SLACK_S = 86400.0  # clock skew between the nodes and the machine reading the run
# What one worker file may cost the reader: a thread's tree is at most 4,096 paths (~1 MB of
# JSON), so this is hundreds of full trees; parsing takes ~10x the file's size in memory.
MAX_WORKER_BYTES = 256 << 20


class WorkerFileError(Exception):
    """A worker file that cannot be used; the message is the reason."""


@dataclass
class Worker:
    """One worker file of the reported attempt (one process)."""

    path: str  # relative to the run directory
    role: str
    host: str
    pid: int
    run_id: str
    uuid: str
    start_time: float
    written_at: float
    rank: int | None = None
    local_rank: int | None = None
    job_id: str | None = None
    snapshot_seq: int = 0
    final: bool = False
    flush_errors: int = 0
    last_flush_error: str = ""
    clock_wall: str | None = None
    clock_cpu: str | None = None  # None: CPU time not measured
    own_write_bytes: int | None = None
    thread_names: bool = False
    snapshot_interval_s: float | None = None
    threads: int = 0
    folded_entries: int = 0
    depth_overflow: int = 0
    counters_refused: int = 0  # count()s refused: a thread's counter table was full
    signal_flush: bool = True  # False: built outside the main thread, no flush on SIGTERM & co.
    tree: dict[Path_, PhaseStats] = field(default_factory=dict, repr=False)
    stale_s: float | None = None  # set by the merge when the worker is named stale

    @property
    def recorded_nothing(self) -> bool:
        """The file exists but holds no phase and no counter."""
        return not self.tree

    @property
    def lifetime_ns(self) -> int:
        """From the process's start to its file's last write, in ns (never negative)."""
        return max(0, round((self.written_at - self.start_time) * 1e9))

    @property
    def busy_ns(self) -> int:
        """Sum of the time of this process's top-level phases (over its threads)."""
        return sum(s.time_ns for p, s in self.tree.items() if len(p) == 1)

    @property
    def label(self) -> str:
        """``rank 3 (node07)`` or ``pid 123 (node07)``."""
        who = f"rank {self.rank}" if self.rank is not None else f"pid {self.pid}"
        return f"{who} ({self.host})"


def load_worker_doc(path: Path) -> dict[str, Any]:
    """Parses a worker file: a regular file (not a link, a FIFO or a device) of at most
    MAX_WORKER_BYTES, holding a JSON object of this format and schema version."""
    try:
        data = read_regular(path, MAX_WORKER_BYTES)
    except UnsafeFile as exc:
        raise WorkerFileError(f"cannot read it ({exc})") from None
    if not data.strip():
        raise WorkerFileError("empty file (the process died before its first write completed)")
    try:
        doc = json.loads(data)
    except UnicodeDecodeError:
        raise WorkerFileError("not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        # A file cut short (a torn copy, a full disk) fails at its end, or inside a last string.
        if exc.pos >= len(data.rstrip()) - 1 or exc.msg.startswith("Unterminated string"):
            raise WorkerFileError(f"truncated (the JSON stops at byte {len(data)})") from None
        raise WorkerFileError(
            f"not JSON ({exc.msg}: line {exc.lineno}, column {exc.colno})"
        ) from None
    except RecursionError:
        raise WorkerFileError("not a worker file (nested too deeply)") from None
    except ValueError as exc:  # e.g. an integer of more than 4,300 digits
        raise WorkerFileError(f"not a worker file ({str(exc)[:80]})") from None
    if not isinstance(doc, dict):
        raise WorkerFileError(f"not a worker file (a JSON {type(doc).__name__}, not an object)")
    if doc.get("format", WORKER_FORMAT) != WORKER_FORMAT:
        raise WorkerFileError(f"not a worker file (format {doc.get('format')!r})")
    version = doc.get("schema_version")
    if version != WORKER_SCHEMA_VERSION:
        raise WorkerFileError(
            f"schema_version {version!r}; this lineprofiler reads version {WORKER_SCHEMA_VERSION} "
            "(report it with the version that wrote it)"
        )
    return doc


def _int(value: Any, what: str, lo: int = 0, hi: int = _MAX_NS) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise WorkerFileError(f"{what} is {type(value).__name__} {_short(value)}, not an integer")
    if not lo <= value <= hi:
        raise WorkerFileError(f"{what} = {value} is out of range [{lo}, {hi}]")
    return value


def _num(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise WorkerFileError(f"{what} is {type(value).__name__} {_short(value)}, not a number")
    # (an int is compared as it is: one beyond a float's range must not raise OverflowError)
    if not (0 <= value <= 10**11 if isinstance(value, int) else 0 <= value <= 1e11):
        raise WorkerFileError(f"{what} = {value} is not a plausible Unix time")
    return float(value)


def _str(value: Any, what: str, optional: bool = False) -> str | None:
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise WorkerFileError(f"{what} is {type(value).__name__} {_short(value)}, not a string")
    return value


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _opt_int(value: Any, what: str, lo: int = 0) -> int | None:
    return None if value is None else _int(value, what, lo=lo)


def _phase(rec: Any, where: str, lifetime_ns: int | None) -> tuple[Path_, PhaseStats]:
    if not isinstance(rec, dict):
        raise WorkerFileError(f"{where}: a phase record is {type(rec).__name__}, not an object")
    raw_path = rec.get("path")
    if not isinstance(raw_path, list) or not all(isinstance(p, str) for p in raw_path):
        raise WorkerFileError(f"{where}: path {_short(raw_path)} is not a list of names")
    name = "/".join(raw_path) or "(root)"
    at = f"{where} phase {name!r}"
    for key in ("calls", "wall_ns", "self_ns", "open", "open_ns"):
        _int(rec.get(key, 0), f"{at}: {key}")
    if rec.get("cpu_ns") is not None:
        _int(rec["cpu_ns"], f"{at}: cpu_ns")
    hist = rec.get("hist", [])
    if not isinstance(hist, list):
        raise WorkerFileError(f"{at}: hist is {type(hist).__name__}, not a list")
    for pair in hist:
        if not (isinstance(pair, list) and len(pair) == 2):
            raise WorkerFileError(f"{at}: hist entry {_short(pair)} is not [bucket, count]")
        _int(pair[0], f"{at}: hist bucket", hi=511)
        _int(pair[1], f"{at}: hist count")
    counters = rec.get("counters", {})
    if not isinstance(counters, dict):
        raise WorkerFileError(f"{at}: counters is {type(counters).__name__}, not an object")
    for cname, cval in counters.items():
        # any int64: a saturated counter is a value, not corruption
        _int(cval, f"{at}: counter {cname!r}", lo=-_MAX_NS - 1)
    saturated = rec.get("counters_saturated", [])
    if not isinstance(saturated, list) or not all(isinstance(c, str) for c in saturated):
        raise WorkerFileError(
            f"{at}: counters_saturated {_short(saturated)} is not a list of names"
        )
    every = _int(rec.get("sample_every", 1), f"{at}: sample_every", lo=1)
    stats = PhaseStats.from_record(rec)
    if every == 1 and lifetime_ns is not None:
        # A path appears once per thread and its entries cannot overlap, so its time is bounded
        # by the worker's lifetime (with slack for the two clocks).
        limit = lifetime_ns * 1.01 + 1e9
        if stats.wall_ns + stats.open_ns > limit or (stats.cpu_ns or 0) > limit:
            raise WorkerFileError(
                f"{at}: {stats.wall_ns + stats.open_ns} ns recorded in a process that lived "
                f"{lifetime_ns} ns"
            )
    io = rec.get("io")
    if io is not None:
        if not isinstance(io, dict):
            raise WorkerFileError(f"{at}: io is {type(io).__name__}, not an object")
        # sum the integer fields; other (future) fields are ignored, as unknown keys are
        stats.io = {
            str(k): v
            for k, v in io.items()
            if isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= _MAX_NS
        }
    stats.sample_every = every
    stats.saturated = set(saturated)
    return tuple(raw_path), stats


def read_worker(doc: dict[str, Any], rel: str) -> Worker:
    meta = doc.get("meta")
    if not isinstance(meta, dict):
        raise WorkerFileError("no meta object")
    start_time = _num(meta.get("start_time"), "meta.start_time")
    written_at = _num(doc.get("written_at"), "written_at")
    if written_at + 1.0 < start_time:
        raise WorkerFileError(
            f"written_at {written_at} is before the process started ({start_time})"
        )
    if written_at > time.time() + _FUTURE_SLACK_S:
        # one such file would make every other worker look stale
        raise WorkerFileError(f"written_at {written_at} is in the future ({_utc(written_at)})")
    clock = doc.get("clock") if isinstance(doc.get("clock"), dict) else {}
    threads = doc.get("threads", [])
    if not isinstance(threads, list):
        raise WorkerFileError(f"threads is {type(threads).__name__}, not a list")
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
        signal_flush=meta.get("signal_flush") is not False,
        clock_wall=_str(clock.get("wall"), "clock.wall", optional=True),
        clock_cpu=_str(clock.get("cpu"), "clock.cpu", optional=True),
        own_write_bytes=_opt_int(doc.get("own_write_bytes"), "own_write_bytes"),
        thread_names=thread_names,
        snapshot_interval_s=_interval(meta.get("snapshot_interval_s")),
        threads=len(threads),
    )
    w.folded_entries, w.depth_overflow = _read_threads(w.tree, threads, thread_names, w.lifetime_ns)
    w.counters_refused = sum(
        _int(t.get("counters_refused", 0), f"thread {t.get('name') or i}: counters_refused")
        for i, t in enumerate(threads)
    )
    late = doc.get("late_flush_error")
    if isinstance(late, str) and late.strip():
        # written in place into this file when a later write failed (a full disk, say)
        w.flush_errors = max(w.flush_errors, 1)
        w.last_flush_error = late.strip() + "; this file predates them"
    return w


def tree_of(doc: Mapping[str, Any], thread_names: bool = False) -> dict[Path_, PhaseStats]:
    """The phase tree of a worker document (a live profiler's own), summed over its threads."""
    tree: dict[Path_, PhaseStats] = {}
    threads = doc.get("threads", [])
    _read_threads(tree, threads if isinstance(threads, list) else [], thread_names, None)
    return tree


def _read_threads(
    tree: dict[Path_, PhaseStats], threads: list[Any], thread_names: bool, lifetime_ns: int | None
) -> tuple[int, int]:
    """Adds every thread's phases into ``tree``; returns (folded entries, depth overflows)."""
    folded = overflow = 0
    for i, thread in enumerate(threads):
        if not isinstance(thread, dict):
            raise WorkerFileError(f"threads[{i}] is {type(thread).__name__}, not an object")
        where = f"thread {thread.get('name') or i}"
        thread_folded = _int(thread.get("folded_entries", 0), f"{where}: folded_entries")
        folded += thread_folded
        overflow += _int(thread.get("depth_overflow", 0), f"{where}: depth_overflow")
        phases = thread.get("phases", [])
        if not isinstance(phases, list):
            raise WorkerFileError(f"{where}: phases is {type(phases).__name__}, not a list")
        prefix: Path_ = ()
        if thread_names:
            prefix = (str(thread.get("name") or f"thread-{thread.get('tid')}"),)
        for rec in phases:
            path, stats = _phase(rec, where, lifetime_ns)
            stats.thread_node = thread_names and not path
            # where the thread's tree was full, its top-level "(folded)" is the recorder's node
            stats.synthetic = thread_folded > 0 and path == (FOLDED_NAME,)
            _add(tree, prefix + path, stats)
            if thread_names and len(path) == 1:
                node = PhaseStats(
                    cpu_ns=stats.cpu_ns,
                    wall_ns=stats.wall_ns,
                    open_ns=stats.open_ns,
                    sample_every=stats.sample_every,
                    thread_node=True,
                )
                _add(tree, prefix, node)
    return folded, overflow


def _interval(value: Any) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value <= 1e9:
        return float(value)
    return None


def _add(tree: dict[Path_, PhaseStats], path: Path_, stats: PhaseStats) -> None:
    have = tree.get(path)
    if have is None:
        tree[path] = stats
    else:
        have.add(stats)


def _utc(unix_s: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(unix_s))
