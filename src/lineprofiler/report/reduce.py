"""Host summaries (``lineprofiler reduce``): a host's worker files folded once, reused by reports.

The fold is associative, so a report adds a host's summary instead of reading its files, as long
as the summary's sources are exactly that host's files now (same names, sizes and mtimes); a
stale, foreign or broken summary is ignored and the files are read.
"""

from __future__ import annotations

from array import array
from pathlib import Path

from lineprofiler.report.fold import Folded, FoldedWorker, Partial, fold_files
from lineprofiler.report.model import MergedPhase, Unreadable
from lineprofiler.runfile.layout import WORKERS_DIR
from lineprofiler.runfile.stats import Histogram
from lineprofiler.runfile.summary import (
    HostSummary,
    PartialSum,
    PhaseSum,
    WorkerSum,
    file_stamp,
    read_summary,
    summary_path,
    write_summary,
)
from lineprofiler.runfile.worker_doc import Worker

_WORKER_FIELDS = [f for f in WorkerSum.__struct_fields__ if f not in ("times", "samples")]
# PhaseSum's fields that are MergedPhase's as they are; path_id and the containers are converted.
_PHASE_CONVERTED = ("path_id", "hist", "sample_rates", "saturated")
_PHASE_FIELDS = [f for f in PhaseSum.__struct_fields__ if f not in _PHASE_CONVERTED]


def host_files(run_dir: Path, host: str) -> list[Path]:
    """One host's worker files, sorted."""
    return sorted(p for p in (run_dir / WORKERS_DIR / host).glob("w_*.json") if p.is_file())


def _sources(run_dir: Path, files: list[Path]) -> list[tuple[str, int, int]] | None:
    out = []
    for f in files:
        stamp = file_stamp(f)
        if stamp is None:
            return None
        out.append((f.relative_to(run_dir).as_posix(), *stamp))
    return out


def reduce_host(run_dir: Path, host: str, with_samples: bool = True) -> tuple[Path, int]:
    """Folds one host's worker files and writes its summary; returns (path, files folded)."""
    files = host_files(run_dir, host)
    sources = _sources(run_dir, files)
    if sources is None:
        raise OSError(f"{host}: a worker file vanished while it was read; run reduce again")
    folded = fold_files(run_dir, files, with_samples)
    summary = HostSummary(
        host=host,
        sources=sources,
        partials={k: _partial_sum(p) for k, p in folded.partials.items()},
        unreadable={k: [(u.path, u.reason) for u in us] for k, us in folded.unreadable.items()},
    )
    return write_summary(run_dir, summary), len(files)


def load_host(run_dir: Path, host: str, files: list[Path]) -> Folded | None:
    """The host's summary as a fold, if it covers exactly ``files`` as they are now."""
    summary = read_summary(summary_path(run_dir, host), within=run_dir)
    if summary is None or summary.host != host:
        return None
    if _sources(run_dir, files) != [tuple(s) for s in summary.sources]:
        return None
    out = Folded()
    for key, ps in summary.partials.items():
        part = _partial(run_dir, ps)
        if part is None:
            return None
        out.partials[key] = part
    for key, bad in summary.unreadable.items():
        out.unreadable[key] = [Unreadable(p, r) for p, r in bad]
    return out


def _partial_sum(part: Partial) -> PartialSum:
    roles = {
        role: [
            PhaseSum(
                path_id=part.paths[path],
                hist=sorted(m.hist.buckets.items()),
                sample_rates=sorted(m.sample_rates),
                saturated=sorted(m.saturated),
                **{f: getattr(m, f) for f in _PHASE_FIELDS},
            )
            for path, m in tree.items()
        ]
        for role, tree in part.roles.items()
    }
    workers = [
        WorkerSum(
            **{f: getattr(fw.worker, f) for f in _WORKER_FIELDS},
            times=list(fw.times),
            samples=fw.samples,
        )
        for fw in part.workers
    ]
    return PartialSum([list(p) for p in part.path_list()], roles, workers)


def _partial(run_dir: Path, ps: PartialSum) -> Partial | None:
    part = Partial()
    for p in ps.paths:
        part.path_id(tuple(p))
    n = len(ps.paths)
    if len(part.paths) != n:
        return None  # a path listed twice: not a summary we wrote
    paths = part.path_list()
    for role, phases in ps.roles.items():
        tree = part.roles.setdefault(role, {})
        for s in phases:
            if s.path_id >= n:
                return None
            tree[paths[s.path_id]] = MergedPhase(
                hist=Histogram.from_pairs(s.hist),
                sample_rates=set(s.sample_rates),
                saturated=set(s.saturated),
                **{f: getattr(s, f) for f in _PHASE_FIELDS},
            )
    for ws in ps.workers:
        parts = Path(ws.path).parts
        if len(ws.times) > n or parts[:1] != (WORKERS_DIR,) or ".." in parts:
            return None
        w = Worker(**{f: getattr(ws, f) for f in _WORKER_FIELDS})
        w.file = str(run_dir / ws.path)  # never a path the summary names outside the run
        samples = ws.samples if isinstance(ws.samples, dict) else None
        part.workers.append(FoldedWorker(w, array("q", ws.times), samples))
    return part
