"""Folding worker files into a mergeable summary (``Partial``): the merge's streaming core.

Each worker file is parsed, checked whole, and its records added into its role's tree before the
next file is read; per process only what the straggler and imbalance views need is kept (its
``Worker`` summary and its time per path, in an array indexed by the partial's path ids). The fold
is associative: two partials of disjoint files add up to the partial of both, which is what lets
the merge use several processes and ``reduce`` write one summary per host.
"""

from __future__ import annotations

import os
from array import array
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from lineprofiler.report.model import MergedPhase, Path_, Unreadable
from lineprofiler.runfile import phase_fields
from lineprofiler.runfile.layout import THREADS_MARK, run_id_from_name
from lineprofiler.runfile.stats import merged_extremes
from lineprofiler.runfile.worker_doc import (
    PhaseRecord,
    Worker,
    WorkerFileError,
    load_worker_doc,
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

    def add(self, other: Folded) -> None:
        for key, part in other.partials.items():
            have = self.partials.get(key)
            if have is None:
                self.partials[key] = part
            else:
                have.add(part)
        for key, bad in other.unreadable.items():
            self.unreadable.setdefault(key, []).extend(bad)


def fold_files(root: Path, files: Iterable[Path], with_samples: bool) -> Folded:
    """Parses, checks and folds worker files one at a time (bounded memory)."""
    out = Folded()
    for f in files:
        rel = f.relative_to(root).as_posix()
        name_id = run_id_from_name(f.name) or ""
        try:
            doc = load_worker_doc(f, within=root)
            w, records = read_worker(doc, rel, os.fspath(f))
        except WorkerFileError as exc:
            out.unreadable.setdefault(name_id, []).append(Unreadable(rel, str(exc)))
            continue
        samples = doc.samples if with_samples else None
        del doc
        key = w.run_id or name_id
        part = out.partials.get(key)
        if part is None:
            part = out.partials[key] = Partial()
        part.fold(w, records, samples if isinstance(samples, dict) else None)
    return out
