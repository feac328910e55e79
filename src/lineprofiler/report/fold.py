"""Folding worker files into a mergeable summary (``Partial``): the merge's streaming core.

Each worker file is parsed, checked whole, and its records added into its role's tree before the
next file is read; per process only what the straggler and imbalance views need is kept (its
``Worker`` summary and its time per path, in an array indexed by the partial's path ids). The fold
is associative: two partials of disjoint files add up to the partial of both, which is what lets
the merge use several processes and ``reduce`` write one summary per host.
"""

from __future__ import annotations

import hashlib
import os
from array import array
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from lineprofiler.report.model import MergedPhase, Path_, Unreadable
from lineprofiler.runfile import phase_fields
from lineprofiler.runfile.layout import THREADS_MARK, run_id_from_name
from lineprofiler.runfile.safe_read import UnsafeFile, read_regular_stat, reuse_dirs
from lineprofiler.runfile.stats import Histogram, merged_extremes
from lineprofiler.runfile.worker_doc import (
    MAX_WORKER_BYTES,
    PhaseRecord,
    Worker,
    WorkerFileError,
    decode_worker_doc,
    load_worker_doc_mtime,
    read_worker,
)


@dataclass
class FoldedWorker:
    """A worker's summary, its time per path id, and (when samples are wanted) its sidecar status."""

    worker: Worker
    times: array  # array('q'): time_ns per path id of the partial (0 where absent)
    samples: dict | None = None  # the document's "samples" object, when with_samples


@dataclass
class Partial:
    """The fold of some worker files of one attempt key (their run id)."""

    paths: dict[Path_, int] = field(default_factory=dict)  # path -> id
    roles: dict[str, dict[Path_, MergedPhase]] = field(default_factory=dict)  # role -> tree
    workers: list[FoldedWorker] = field(default_factory=list)

    def path_id(self, path: Path_) -> int:
        got = self.paths.get(path)
        if got is None:
            got = self.paths[path] = len(self.paths)
        return got

    def path_list(self) -> list[Path_]:
        out: list[Path_] = [()] * len(self.paths)
        for p, i in self.paths.items():
            out[i] = p
        return out

    def add(self, other: Partial) -> None:
        """Adds a partial of other files into this one (their path ids are remapped)."""
        remap = array("q", (self.path_id(p) for p in other.path_list()))
        for role, tree in other.roles.items():
            mine = self.roles.setdefault(role, {})
            for path, stats in tree.items():
                have = mine.get(path)
                if have is None:
                    mine[path] = stats
                else:
                    have.add(stats)
        identity = all(i == j for i, j in enumerate(remap))
        n = len(self.paths)
        for fw in other.workers:
            if not identity:  # the other side numbered its paths differently
                times = array("q", bytes(8 * n))
                for i, t in enumerate(fw.times):
                    if t:
                        times[remap[i]] = t
                fw.times = times
            self.workers.append(fw)

    def fold(self, worker: Worker, records: list[PhaseRecord], samples: dict | None) -> None:
        """Adds one checked worker's records into its role's tree."""
        tree = self.roles.setdefault(worker.role, {})
        times: dict[int, int] = {}
        touched: set[Path_] = set()
        _fold_records(tree, records, times, touched, self.path_id)
        for path in touched:
            tree[path].processes += 1
        arr = array("q", bytes(8 * len(self.paths)))
        for i, t in times.items():
            arr[i] = t
        self.workers.append(FoldedWorker(worker, arr, samples))


# The fold of one worker's records, generated once from the field table: each scalar field's line
# comes from its combine rule (runfile/phase_fields.fold_lines), the containers' code is below.
# Generated rather than looped over the fields, so the merge pays no getattr per field.
_FOLD_CONTAINERS = {"path", "hist", "counters", "io", "saturated"}
assert _FOLD_CONTAINERS == phase_fields.CONTAINERS, "a container field the fold does not handle"
_FOLD_SOURCE = """
def _fold_records(tree, records, times, touched, path_id):
    for path, rec, every, thread_node, io in records:
        m = tree.get(path)
        if m is None:
            m = tree[path] = MergedPhase()
{scalars}
        if rec.hist:
            b = m.hist.buckets
            for k, c in rec.hist:
                b[k] = b.get(k, 0) + c
        if rec.counters:
            mc = m.counters
            for k, v in rec.counters.items():
                mc[k] = mc.get(k, 0) + v
            if rec.saturated:
                m.saturated.update(rec.saturated)
        m.sample_rates.add(every)
        if every > m.sample_every:
            m.sample_every = every
        if thread_node:
            m.thread_node = True
        if THREADS_MARK in path:
            m.threads += 1  # one record per thread that ran work handed to it
        if io:
            mine = m.io if m.io is not None else {{}}
            for k, v in io.items():
                mine[k] = mine.get(k, 0) + v
            m.io = mine
        touched.add(path)
        pid = path_id(path)
        times[pid] = times.get(pid, 0) + rec.wall_ns + rec.open_ns
""".format(scalars="\n".join(phase_fields.fold_lines("m", "rec", " " * 8)))
_namespace = {
    "MergedPhase": MergedPhase,
    "merged_extremes": merged_extremes,
    "THREADS_MARK": THREADS_MARK,
}
exec(
    compile(_FOLD_SOURCE, "<report.fold: generated from the phase field table>", "exec"), _namespace
)
_fold_records = _namespace["_fold_records"]


@dataclass
class Folded:
    """What folding a set of files gives: a partial per run id, and the unusable files."""

    partials: dict[str, Partial] = field(default_factory=dict)
    unreadable: dict[str, list[Unreadable]] = field(default_factory=dict)

    def fold_worker(
        self, name_id: str, w: Worker, records: list[PhaseRecord], samples: object
    ) -> None:
        """Folds one checked worker into the partial of its run id (else its file name's)."""
        key = w.run_id or name_id
        part = self.partials.get(key)
        if part is None:
            part = self.partials[key] = Partial()
        part.fold(w, records, samples if isinstance(samples, dict) else None)

    def add(self, other: Folded) -> None:
        for key, part in other.partials.items():
            have = self.partials.get(key)
            if have is None:
                self.partials[key] = part
            else:
                have.add(part)
        for key, bad in other.unreadable.items():
            self.unreadable.setdefault(key, []).extend(bad)


class DocCache:
    """Checked worker documents kept between merges of one run directory (``top``, ``serve``).

    A refresh still reads every worker file (through ``safe_read``, as the merge does), but a file
    whose bytes and modification time are those of a document already checked is not parsed and
    checked again: its ``Worker`` (copied: the merge annotates it) and records are reused. The key
    is the file's *content* (a BLAKE2b digest of the bytes just read) with its path and mtime (the
    check clamps ``written_at`` to the mtime), never its inode, size or times alone: a file
    rewritten in place with the same size and mtime, or on a network filesystem whose attributes
    lag, is parsed again as soon as one byte differs. Unusable files are never kept (they are
    checked again each time). Memory: one entry per file seen by the last merge (the others are
    dropped after each merge), and at most ``MAX_RECORDS`` phase records in all (files beyond
    that are parsed each time).
    """

    MAX_RECORDS = 1 << 18  # ~60 MB of records at worst; 1,024 workers of 64 paths use a quarter
    CHUNK = 32  # files of one host directory folded together (see fold)

    def __init__(self) -> None:
        self._entries: dict[str, tuple[bytes, int, Worker, list[PhaseRecord], object]] = {}
        self._seen: set[str] = set()
        self._records = 0
        # a chunk of files (their paths) -> (each file's (digest, mtime), with_samples, its fold)
        self._chunks: dict[tuple[str, ...], tuple[tuple, bool, Folded]] = {}
        self._chunks_seen: set[tuple[str, ...]] = set()
        self.hits = 0  # files reused by the last merge
        self.misses = 0  # files parsed and checked by the last merge
        self.chunks_reused = 0  # chunks whose fold the last merge reused

    def begin(self) -> None:
        """Starts a merge: counts from zero, and remembers which files it reads."""
        self._seen = set()
        self._chunks_seen = set()
        self.hits = self.misses = self.chunks_reused = 0

    def end(self) -> None:
        """Ends a merge: entries of files it did not read are dropped (files gone, or renamed)."""
        for k in [k for k in self._entries if k not in self._seen]:
            self._drop(k)
        for c in [c for c in self._chunks if c not in self._chunks_seen]:
            del self._chunks[c]

    def fold(self, root: Path, files: list[Path], with_samples: bool) -> Folded:
        """``fold_files`` of ``files``, in chunks of up to ``CHUNK`` files of one directory: a
        chunk whose files all read back with the same bytes and mtime as when it was last folded
        is not folded again; a copy of its fold is added (the merge annotates what it is given).
        A chunk holding an unusable file is folded each time."""
        out = Folded()
        by_dir: dict[str, list[Path]] = {}
        for f in files:
            by_dir.setdefault(os.path.dirname(os.fspath(f)), []).append(f)
        for group in by_dir.values():
            for i in range(0, len(group), self.CHUNK):
                out.add(self._fold_chunk(root, group[i : i + self.CHUNK], with_samples))
        return out

    def _fold_chunk(self, root: Path, files: list[Path], with_samples: bool) -> Folded:
        key = tuple(os.fspath(f) for f in files)
        self._chunks_seen.add(key)
        reads: list[tuple[Path, object]] = []
        sig = []
        within = os.fspath(root)  # a string: safe_read's shortcut for a directory already open
        for f in files:
            try:
                got = self._read(within, f)
            except WorkerFileError as exc:
                got = exc
            reads.append((f, got))
            sig.append(None if isinstance(got, WorkerFileError) else got[1:3])
        have = self._chunks.get(key)
        if have is not None and have[0] == tuple(sig) and have[1] == with_samples:
            self.chunks_reused += 1
            self.hits += len(files)
            return _copy_folded(have[2])
        out = Folded()
        for f, got in reads:
            rel = f.relative_to(root).as_posix()
            name_id = run_id_from_name(f.name) or ""
            try:
                if isinstance(got, WorkerFileError):
                    raise got
                w, records, samples = self._checked(f, rel, with_samples, *got)
            except WorkerFileError as exc:
                out.unreadable.setdefault(name_id, []).append(Unreadable(rel, str(exc)))
                continue
            out.fold_worker(name_id, w, records, samples)
        self._chunks.pop(key, None)
        if None not in sig and all(os.fspath(f) in self._entries for f in files):
            self._chunks[key] = (tuple(sig), with_samples, _copy_folded(out))
        return out

    def _drop(self, key: str) -> None:
        got = self._entries.pop(key, None)
        if got is not None:
            self._records -= len(got[3])

    def _read(self, root: str | Path, f: Path) -> tuple[bytes, bytes, int]:
        """(bytes, digest, mtime_ns) of a worker file read through ``safe_read``."""
        file = os.fspath(f)
        self._seen.add(file)
        try:
            data, st = read_regular_stat(file, MAX_WORKER_BYTES, root)
            mtime_ns = st.st_mtime_ns
        except (UnsafeFile, OSError) as exc:
            self._drop(file)
            raise WorkerFileError(f"cannot read it ({exc})") from None
        return data, hashlib.blake2b(data, digest_size=20).digest(), mtime_ns

    def _checked(
        self, f: Path, rel: str, with_samples: bool, data: bytes, digest: bytes, mtime_ns: int
    ) -> tuple[Worker, list[PhaseRecord], object]:
        """The checked document of bytes just read: reused when they are those last checked."""
        file = os.fspath(f)
        got = self._entries.get(file)
        if got is not None and got[0] == digest and got[1] == mtime_ns:
            if got[4] is not None or not with_samples:  # (kept without its samples: read again)
                self.hits += 1
                return _shallow_copy(got[2]), got[3], got[4] if with_samples else None
        self._drop(file)
        self.misses += 1
        doc = decode_worker_doc(data)
        w, records = read_worker(doc, rel, file, mtime_ns / 1e9)
        samples = doc.samples if with_samples else None
        if self._records + len(records) <= self.MAX_RECORDS:
            # samples None: not wanted, or the document has none (then read again if wanted)
            self._entries[file] = (digest, mtime_ns, _shallow_copy(w), records, samples)
            self._records += len(records)
        return w, records, samples

    def load(
        self, root: Path, f: Path, rel: str, with_samples: bool
    ) -> tuple[Worker, list[PhaseRecord], object]:
        """``(worker, records, samples)`` of file ``f`` (``rel`` below the run directory
        ``root``), checked now or reused; ``WorkerFileError`` when it cannot be used."""
        return self._checked(f, rel, with_samples, *self._read(root, f))


_T = TypeVar("_T")


def _shallow_copy(obj: _T) -> _T:
    """``copy.copy`` of a plain dataclass instance (its fields in ``__dict__``: ``Worker``,
    ``MergedPhase``) without ``copy``'s generic reduce protocol: a steady ``top`` refresh copies
    every reused worker and phase."""
    c = object.__new__(type(obj))
    c.__dict__.update(obj.__dict__)
    return c


def _copy_phase(m: MergedPhase) -> MergedPhase:
    """A merged phase whose containers are its own (adding into it leaves ``m`` as it was)."""
    c = _shallow_copy(m)
    c.hist = Histogram(dict(m.hist.buckets))
    c.counters = dict(m.counters)
    c.saturated = set(m.saturated)
    c.sample_rates = set(m.sample_rates)
    c.io = None if m.io is None else dict(m.io)
    return c


def _copy_folded(f: Folded) -> Folded:
    """A copy of a fold that the merge may change (phases summed into, workers annotated, time
    arrays replaced) without changing ``f``."""
    out = Folded()
    for key, p in f.partials.items():
        out.partials[key] = Partial(
            paths=dict(p.paths),
            roles={r: {path: _copy_phase(m) for path, m in t.items()} for r, t in p.roles.items()},
            workers=[
                FoldedWorker(_shallow_copy(fw.worker), fw.times, fw.samples) for fw in p.workers
            ],
        )
    out.unreadable = {k: list(v) for k, v in f.unreadable.items()}
    return out


def fold_files(
    root: Path, files: Iterable[Path], with_samples: bool, cache: DocCache | None = None
) -> Folded:
    """Parses, checks and folds worker files one at a time (bounded memory); with ``cache``,
    files unchanged since it last read them are not parsed again."""
    if cache is not None:
        return cache.fold(root, list(files), with_samples)
    out = Folded()
    root_s = os.fspath(root)
    prefix = root_s.rstrip("/") + "/"
    # each directory on the way to the files opened once, not once per file (4 opens a file)
    with reuse_dirs():
        for f in files:
            file = os.fspath(f)  # strings from here: a Path's str and parts cost more than a read
            if file.startswith(prefix):
                rel = file[len(prefix) :]
            else:
                rel = f.relative_to(root).as_posix()
            name_id = run_id_from_name(os.path.basename(file)) or ""
            try:
                doc, mtime_s = load_worker_doc_mtime(file, within=root_s)
                w, records = read_worker(doc, rel, file, mtime_s)
                samples = doc.samples if with_samples else None
                del doc
            except WorkerFileError as exc:
                out.unreadable.setdefault(name_id, []).append(Unreadable(rel, str(exc)))
                continue
            out.fold_worker(name_id, w, records, samples)
    return out
