"""One reader and validator of worker documents (``workers/<host>/w_*.json``).

``load_worker_doc`` parses and type-checks a file in one pass (msgspec, against the document
types below: every count and time an integer in [0, 2^63), a bucket index below 512, paths lists
of names); ``read_worker`` checks what types cannot say (plausible times, phases no longer than the
process lived) and returns its ``Worker`` (identity and per-process summaries) with its phase
records: one per thread and path, ``io`` byte sums and, under ``thread_names``, the threads' own
nodes included. ``tree_of`` sums those records into a tree; the live profiler reads its own
document with ``tree_of_json``, so the live side and the merge read one format one way. A document
that cannot be used raises ``WorkerFileError`` whose message is the reason; nothing of it is used.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import msgspec

from lineprofiler.runfile.layout import THREADS_MARK, WORKER_FORMAT, WORKER_SCHEMA_VERSION
from lineprofiler.runfile.phase_fields import MAX_NS, Ns, record_struct
from lineprofiler.runfile.safe_read import UnsafeFile, read_regular_stat
from lineprofiler.runfile.stats import Histogram, PhaseStats

Path_ = tuple[str, ...]

_MAX_NS = MAX_NS
_FUTURE_SLACK_S = 86400.0  # clock skew between the nodes and the machine reading the run
# A file cannot have been written after it was last modified: a written_at beyond its mtime by
# more than the clock skew between a node and the file server is not believed (it would stretch
# the run's Runtime and make every other worker look stale).
_MTIME_SLACK_S = 600.0
# What one worker file may cost the reader (docs/guide/sharing-a-run-directory.md): a thread's tree
# is at most 4,096 paths (~1 MB of JSON), and exited threads fold into at most 65 records, so a real
# file holds a few full trees at most. A file beyond either limit is refused whole (a caveat names
# it): 10^6 paths in one file cost the report minutes and gigabytes.
MAX_WORKER_BYTES = 64 << 20
MAX_RECORDS_PER_FILE = 65_536  # phase records (threads x paths): 16 threads' full trees

UnixTime = Annotated[float, msgspec.Meta(ge=0, le=1e11)]
Rank = Annotated[int, msgspec.Meta(ge=-1, le=2**31)]


# One thread's record of one phase path (``threads[].phases[]``): its fields, types, defaults and
# keys are the field table's (runfile/phase_fields.py; lp_core/phase_fields.h).
PhaseRec = record_struct("PhaseRec", module=__name__, gc=False)


class _Thread(msgspec.Struct):
    phases: list[PhaseRec] = []
    name: Any = None
    tid: Any = None
    folded_entries: Ns = 0
    depth_overflow: Ns = 0
    tasks: Ns = 0  # asyncio tasks that recorded on this thread: their entries may overlap
    out_of_order_exits: Ns = 0
    counters_refused: Ns = 0  # count()s refused: the thread's counter table was full
    exited_threads: Ns = 0  # > 0: the folded record of that many exited threads


class _Meta(msgspec.Struct):
    pid: Annotated[int, msgspec.Meta(ge=0, le=2**31)]
    start_time: UnixTime
    role: str | None = None
    host: str | None = None
    run_id: str | None = None
    uuid: str = ""
    rank: Rank | None = None
    local_rank: Rank | None = None
    job_id: Any = None
    snapshot_interval_s: Any = None
    thread_names: Any = False
    signal_flush: Any = True  # False: built off the main thread (no flush on SIGTERM & co.)
    ppid: Annotated[int, msgspec.Meta(ge=0, le=2**31)] | None = None
    process_name: str | None = None
    process_start: Any = None  # "<boot id>:<ticks since boot>": the process's own start
    host_dir: Any = None  # the directory under workers/ the writer chose for its host
    argv: Any = None  # the process's first arguments, secrets masked


class _Clock(msgspec.Struct):
    wall: str | None = None
    cpu: str | None = None


class WorkerDoc(msgspec.Struct):
    """A worker document, type-checked (unknown keys are ignored, as a newer writer may add)."""

    meta: _Meta
    written_at: UnixTime
    schema_version: Any = None
    format: Any = WORKER_FORMAT
    snapshot_seq: Ns = 0
    final: Any = False
    flush_errors: Ns = 0
    last_flush_error: Any = ""
    clock: _Clock | None = None
    own_write_bytes: Ns | None = None
    late_flush_error: Any = ""  # patched in place when a later write failed (a full disk)
    threads: list[_Thread] = []
    samples: Any = None  # the sampler's status object (read by the report's resource blocks)


class _Header(msgspec.Struct):
    format: Any = WORKER_FORMAT
    schema_version: Any = None


# One thread's record of one path, checked: (path, record, sample_every, thread_node, io).
PhaseRecord = tuple[Path_, PhaseRec, int, bool, "dict[str, int] | None"]


class _Threads(msgspec.Struct):
    threads: list[_Thread] = []


_DECODER = msgspec.json.Decoder(WorkerDoc)
_THREADS = msgspec.json.Decoder(_Threads)
_HEADER = msgspec.json.Decoder(_Header)


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
    out_of_order_exits: int = 0  # exits that closed phases entered after theirs (user code)
    counters_refused: int = 0  # count()s refused: a thread's counter table was full
    signal_flush: bool = True  # False: built outside the main thread, no flush on SIGTERM & co.
    paths: int = 0  # distinct phase paths (0: recorded nothing)
    busy_ns: int = 0  # sum of the time of its top-level phases (over its threads)
    open_entries: int = 0  # phase entries still open at its last write (thread nodes left out)
    file: str = field(default="", repr=False)  # absolute path of the worker file
    stale_s: float | None = None  # set by the merge when the worker is named stale
    # set by the merge when the run is live and this worker has not written a phase yet:
    # seconds until its next periodic write (it is starting, not lost)
    next_write_s: float | None = None
    ppid: int | None = None
    process_name: str | None = None  # multiprocessing's name, or "loader worker N" (torch)
    # The process's own start ("<boot id>:<ticks since boot>"); None in files that predate it
    process_start: str | None = None
    host_dir: str | None = None  # the writer's directory under workers/ (None in older files)
    argv: list[str] | None = None  # the process's command line (first 8, secrets masked)
    # Set by the reader (report.fates) from evidence about the process, not from the file:
    launched_at: float | None = None  # the process's own start, Unix s (estimated), if known
    # "alive", "gone" (no such pid on its host), "pid reused" (the pid is another process's now),
    # or "" (cannot tell: another host or boot, or a file without its process start)
    fate: str = ""
    # A process that ended without a final write: at most this much wall time after its last
    # write is not in its file (None: not such a process)
    unaccounted_s: float | None = None

    @property
    def process_key(self) -> tuple[str, int, str]:
        """Which process wrote the file: (host, pid, the process's own start). Profilers built
        one after another in one process (a Pool task each) share it; a pid reused on the host,
        or the same pid on another host, does not. A file without the start is its own."""
        return (self.host, self.pid, self.process_start or "file:" + self.path)

    @property
    def ended_unclosed(self) -> bool:
        """The process is known to have ended (on its host, its pid is gone or reused) without a
        final write: killed, or exited through ``os._exit``. What it did after its last write is
        not in its file."""
        return not self.final and self.fate in ("gone", "pid reused")

    @property
    def recorded_nothing(self) -> bool:
        """The file holds no phase and no counter, and the process never closed, nor is known to
        have ended (still starting, or on a host the reader cannot check)."""
        return (
            self.paths == 0
            and not self.final
            and self.next_write_s is None
            and not self.ended_unclosed
        )

    @property
    def idle(self) -> bool:
        """The process closed cleanly without recording a phase or counter (a healthy worker
        that got no work)."""
        return self.paths == 0 and self.final

    @property
    def tree(self) -> dict[Path_, PhaseStats]:
        """This process's own tree, read again from its file (the merge keeps only summaries).

        For tests and drill-down; a live worker's file may have moved on since the merge.
        """
        within = self.file[: -len(self.path)] if self.file.endswith("/" + self.path) else None
        doc = load_worker_doc(Path(self.file), within)
        return tree_of(doc, self.thread_names)

    @property
    def lifetime_ns(self) -> int:
        """From the process's start to its file's last write, in ns (never negative)."""
        return max(0, round((self.written_at - self.start_time) * 1e9))

    @property
    def label(self) -> str:
        """``rank 3 (node07)`` or ``pid 123 (node07)``, then the process's name where known
        (``pid 123 (node07) ForkPoolWorker-2``)."""
        who = f"rank {self.rank}" if self.rank is not None else f"pid {self.pid}"
        name = f" {self.process_name}" if self.process_name else ""
        return f"{who} ({self.host}){name}"


def load_worker_doc(path: Path | str, within: Path | str | None = None) -> WorkerDoc:
    """Reads and type-checks a worker file (a ``WorkerFileError`` says why it cannot be used): a
    regular file (not a link, a FIFO or a device) of at most MAX_WORKER_BYTES; ``within``: the
    run directory, no directory between which and the file may be a link."""
    return load_worker_doc_mtime(path, within)[0]


def load_worker_doc_mtime(
    path: Path | str, within: Path | str | None = None
) -> tuple[WorkerDoc, float]:
    """``load_worker_doc``, with the file's mtime (s) from the open that read it."""
    try:
        data, st = read_regular_stat(path, MAX_WORKER_BYTES, within)
    except UnsafeFile as exc:
        raise WorkerFileError(f"cannot read it ({exc})") from None
    return decode_worker_doc(data), st.st_mtime


def decode_worker_doc(data: bytes | str) -> WorkerDoc:
    """Parses and type-checks a worker document's JSON text."""
    if not data.strip():
        raise WorkerFileError("empty file (the process died before its first write completed)")
    try:
        doc = _DECODER.decode(data)
    except msgspec.ValidationError as exc:
        _check_header(data)  # another format or schema version says so first
        raise WorkerFileError(f"not a valid worker file: {exc}") from None
    except msgspec.DecodeError as exc:
        msg = str(exc)
        if "UTF-8" in msg:
            raise WorkerFileError("not UTF-8 text") from None
        if "truncated" in msg:
            raise WorkerFileError(f"truncated (the JSON stops at byte {len(data)})") from None
        if msg.startswith("JSON is malformed"):
            raise WorkerFileError(f"not JSON ({msg[len('JSON is malformed: ') :]})") from None
        raise WorkerFileError(f"not a worker file ({msg})") from None
    except RecursionError:
        raise WorkerFileError("not a worker file (nested too deeply)") from None
    _check_version(doc.format, doc.schema_version)
    return doc


def _check_header(data: bytes | str) -> None:
    try:
        header = _HEADER.decode(data)
    except (msgspec.ValidationError, msgspec.DecodeError, RecursionError):
        raise WorkerFileError("not a worker file (a JSON value that is not an object)") from None
    _check_version(header.format, header.schema_version)


def _check_version(fmt: Any, version: Any) -> None:
    if fmt != WORKER_FORMAT:
        raise WorkerFileError(f"not a worker file (format {_short(fmt)})")
    if version != WORKER_SCHEMA_VERSION:
        raise WorkerFileError(
            f"schema_version {version!r}; this lineprofiler reads version {WORKER_SCHEMA_VERSION} "
            "(report it with the version that wrote it)"
        )


def _num(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise WorkerFileError(f"{what} is {type(value).__name__} {_short(value)}, not a number")
    # (an int is compared as it is: one beyond a float's range must not raise OverflowError)
    if not (0 <= value <= 10**11 if isinstance(value, int) else 0 <= value <= 1e11):
        raise WorkerFileError(f"{what} = {value} is not a plausible Unix time")
    return float(value)


def _argv(value: Any) -> list[str] | None:
    """``meta.argv`` when it is a list of strings (at most 8 of at most 4,096 characters)."""
    if not isinstance(value, list) or not all(isinstance(a, str) for a in value):
        return None
    return [a[:4096] for a in value[:8]]


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def read_worker(
    doc: WorkerDoc, rel: str, file: str = "", mtime_s: float | None = None
) -> tuple[Worker, list[PhaseRecord]]:
    """Checks a type-checked document further: its ``Worker`` and its phase records. ``mtime_s``:
    the file's mtime as read (else ``file`` is stat'ed for it)."""
    meta = doc.meta
    start_time = _num(meta.start_time, "meta.start_time")
    written_at = _num(doc.written_at, "written_at")

    if written_at + 1.0 < start_time:
        raise WorkerFileError(
            f"written_at {written_at} is before the process started ({start_time})"
        )
    if written_at > time.time() + _FUTURE_SLACK_S:
        # one such file would make every other worker look stale
        raise WorkerFileError(f"written_at {written_at} is in the future ({_utc(written_at)})")
    if file and mtime_s is None:
        try:
            mtime_s = os.stat(file).st_mtime
        except OSError:
            pass
    if mtime_s is not None:  # within that day's allowance, still not after the file's last write
        written_at = min(written_at, max(start_time, mtime_s + _MTIME_SLACK_S))
    clock = doc.clock or _Clock()
    thread_names = meta.thread_names is True
    w = Worker(
        path=rel,
        role=meta.role or "main",
        host=meta.host or "?",
        pid=meta.pid,
        run_id=meta.run_id or "",
        uuid=meta.uuid or "",
        start_time=start_time,
        written_at=written_at,
        rank=meta.rank,
        local_rank=meta.local_rank,
        job_id=None if meta.job_id is None else str(meta.job_id),
        snapshot_seq=doc.snapshot_seq,
        final=doc.final is True,
        flush_errors=doc.flush_errors,
        last_flush_error=str(doc.last_flush_error or ""),
        signal_flush=meta.signal_flush is not False,
        clock_wall=clock.wall,
        clock_cpu=clock.cpu,
        own_write_bytes=doc.own_write_bytes,
        thread_names=thread_names,
        snapshot_interval_s=_interval(meta.snapshot_interval_s),
        threads=len(doc.threads),
        file=file,
        ppid=meta.ppid,
        process_name=meta.process_name,
        process_start=_process_start(meta.process_start),
        host_dir=meta.host_dir if isinstance(meta.host_dir, str) else None,
        argv=_argv(meta.argv),
    )
    records, w.folded_entries, w.depth_overflow = _records(doc, thread_names, w.lifetime_ns)
    w.out_of_order_exits = sum(t.out_of_order_exits for t in doc.threads)
    w.counters_refused = sum(t.counters_refused for t in doc.threads)
    late = doc.late_flush_error
    if isinstance(late, str) and late.strip():
        w.flush_errors = max(w.flush_errors, 1)
        w.last_flush_error = late.strip() + "; this file predates them"
    times: dict[Path_, int] = {}
    for path, rec, _every, thread_node, _io in records:
        times[path] = times.get(path, 0) + rec.wall_ns + rec.open_ns
        if not thread_node:
            w.open_entries += rec.open
    w.paths = len(times)
    w.busy_ns = sum(t for p, t in times.items() if len(p) == 1)
    return w, records


def tree_of(doc: WorkerDoc | _Threads, thread_names: bool = False) -> dict[Path_, PhaseStats]:
    """The phase tree of a worker document, summed over its threads."""
    records, _, _ = _records(doc, thread_names, None)
    tree: dict[Path_, PhaseStats] = {}
    for path, rec, every, thread_node, io in records:
        stats = stats_of(rec, every, thread_node, io)
        if THREADS_MARK in path:
            stats.threads = 1  # this thread ran work handed to it (one record per thread)
        have = tree.get(path)
        if have is None:
            tree[path] = stats
        else:
            have.add(stats)
    return tree


def tree_of_json(text: bytes | str, thread_names: bool = False) -> dict[Path_, PhaseStats]:
    """``tree_of`` a document given as JSON text (a live profiler's own snapshot: its phases are
    checked as the merge checks them; the rest of the document is not needed)."""
    try:
        doc = _THREADS.decode(text)
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        raise WorkerFileError(f"not a valid worker document: {exc}") from None
    return tree_of(doc, thread_names)


# PhaseRec's fields that are PhaseStats' as they are: the scalars (the containers and the sampling
# rate are converted in ``stats_of``).
_STATS_CONVERTED = ("path", "hist", "counters", "sample_every", "io", "saturated")
_STATS_FIELDS = [f for f in PhaseRec.__struct_fields__ if f not in _STATS_CONVERTED]


def stats_of(rec: PhaseRec, every: int, thread_node: bool, io: dict[str, int] | None) -> PhaseStats:
    """A checked record as ``PhaseStats``."""
    return PhaseStats(
        hist=Histogram.from_pairs(rec.hist),
        counters=dict(rec.counters),
        sample_every=every,
        io=dict(io) if io else None,
        thread_node=thread_node,
        saturated=set(rec.saturated),
        **{f: getattr(rec, f) for f in _STATS_FIELDS},
    )


def _records(
    doc: WorkerDoc | _Threads, thread_names: bool, lifetime_ns: int | None
) -> tuple[list[PhaseRecord], int, int]:
    """Every thread's records; and the folded entries and depth overflows."""
    folded = overflow = 0
    n_records = sum(len(t.phases) for t in doc.threads)
    if n_records > MAX_RECORDS_PER_FILE:
        raise WorkerFileError(
            f"{n_records:,} phase records, more than the {MAX_RECORDS_PER_FILE:,} a file may hold"
        )
    # Each path's time summed over the file's threads must stay an int64 (the merge keeps it as
    # one): values each within the schema can add up beyond it (estimates, asyncio tasks). Every
    # time is >= 0 (the schema), so a path's sum is at most the file's: the sums per path are
    # only taken when the file's total passes the bound (_check_path_sums).
    total_ns = 0
    # A path appears once per thread and its entries cannot overlap, so its time is bounded by
    # the worker's lifetime (with slack for the two clocks).
    limit = _MAX_NS if lifetime_ns is None else lifetime_ns * 1.01 + 1e9
    out: list[PhaseRecord] = []
    owners = _handing_threads(doc) if thread_names else {}
    for i, thread in enumerate(doc.threads):
        folded += thread.folded_entries
        overflow += thread.depth_overflow
        prefix: Path_ = ()
        if thread_names:
            prefix = _thread_prefix(thread)
        for rec in thread.phases:
            every = rec.sample_every
            # asyncio tasks' entries that spanned an await (and, on a thread with tasks, open
            # ones) can overlap: only the rest is bounded by the lifetime
            bounded = rec.wall_ns - rec.async_wall_ns + (0 if thread.tasks else rec.open_ns)
            if every == 1 and (bounded > limit or (rec.cpu_ns or 0) > limit):
                at = f"thread {thread.name or i} phase {'/'.join(rec.path) or '(root)'!r}"
                raise WorkerFileError(
                    f"{at}: {rec.wall_ns + rec.open_ns} ns recorded in a process that lived "
                    f"{lifetime_ns} ns"
                )
            io = rec.io
            if io is not None:
                io = {str(k): v for k, v in io.items() if type(v) is int and 0 <= v <= _MAX_NS}
            path = prefix + tuple(rec.path)
            if owners and THREADS_MARK in rec.path:  # under the thread that handed it out
                path = owners.get(_handed_from(rec.path), prefix) + tuple(rec.path)
            total_ns += rec.wall_ns + rec.open_ns
            out.append((path, rec, every, thread_names and not rec.path, io))
            if thread_names and len(rec.path) == 1:
                # a top-level phase of the thread also counts into the thread's own node
                node = PhaseRec(
                    path=[],
                    wall_ns=rec.wall_ns,
                    open_ns=rec.open_ns,
                    cpu_ns=rec.cpu_ns,
                    async_calls=rec.async_calls,
                    async_wall_ns=rec.async_wall_ns,
                )
                out.append((prefix, node, every, True, None))
                total_ns += rec.wall_ns + rec.open_ns
    if total_ns > _MAX_NS:
        _check_path_sums(out)
    return out, folded, overflow


def _thread_prefix(thread: _Thread) -> Path_:
    """A thread's own node under ``thread_names``: its name."""
    return (str(thread.name or f"thread-{thread.tid}"),)


def _handed_from(path: list[str]) -> Path_:
    """The path work handed to another thread was handed from: before its first ``[threads]``."""
    return tuple(path[: path.index(THREADS_MARK)])


def _handing_threads(doc: WorkerDoc | _Threads) -> dict[Path_, Path_]:
    """Under ``thread_names``: for each path work was handed from, the name node of the one
    thread whose own records hold that path, so the attached work nests under it
    (``MainThread/step/[threads]/work``, not under the pool thread's name). A path held by no
    thread of the file, or by several (two threads handing work from their own ``step``), is not
    in the map: such work stays under the name of the thread that ran it."""
    wanted = {_handed_from(r.path) for t in doc.threads for r in t.phases if THREADS_MARK in r.path}
    if not wanted:
        return {}
    found: dict[Path_, set[Path_]] = {}
    for t in doc.threads:
        for r in t.phases:
            if tuple(r.path) in wanted:  # (none of them holds a [threads])
                found.setdefault(tuple(r.path), set()).add(_thread_prefix(t))
    return {p: next(iter(s)) for p, s in found.items() if len(s) == 1}


def _check_path_sums(records: list[PhaseRecord]) -> None:
    """WorkerFileError for the first path whose time summed over the file's records (a thread's
    own node included) passes int64."""
    path_ns: dict[Path_, int] = {}
    for path, rec, *_ in records:
        total = path_ns.get(path, 0) + rec.wall_ns + rec.open_ns
        if total > _MAX_NS:
            raise WorkerFileError(
                f"phase {'/'.join(path) or '(root)'!r}: {total} ns in all, beyond the int64 range "
                "a run can record"
            )
        path_ns[path] = total


def _interval(value: Any) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value <= 1e9:
        return float(value)
    return None


def _utc(unix_s: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(unix_s))


def _process_start(value: Any) -> str | None:
    """A worker's ``meta.process_start`` when it is a plausible one (short text), else None."""
    if isinstance(value, str) and 0 < len(value) <= 80:
        return value
    return None
