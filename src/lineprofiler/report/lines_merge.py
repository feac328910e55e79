"""The line statistics of traced phases, merged per role (issue 32): each worker's ``.lines``
sidecar read through ``runfile.lines`` (the one reader), summed per role and phase path.

Across processes hits are exact sums and times are sums of each process's calibrated
``time_ns`` (the calibration is applied by the process that traced, before summing). A line
remembers the processes it was seen in, and a phase the processes that traced it, so a view can
say "(in k of n)". A sidecar that cannot be used costs that worker's lines only: a caveat names
the file and why; the rest of the run is reported.
"""

from __future__ import annotations

from pathlib import Path

from lineprofiler.report.caveat import Caveat
from lineprofiler.report.lines_model import (
    MergedFunction,
    MergedLine,
    MergedPhaseLines,
    ProcessKey,
)
from lineprofiler.report.model import MergedRun, Path_, Role
from lineprofiler.runfile.layout import lines_path, workers_with_lines
from lineprofiler.runfile.lines import LinesDoc, LinesFileError, read_lines


def add_doc(role_lines: dict[Path_, MergedPhaseLines], doc: LinesDoc, who: ProcessKey) -> None:
    """Adds one process's sidecar to its role's merged lines."""
    for ph in doc.phases:
        m = role_lines.get(ph.path)
        if m is None:
            m = role_lines[ph.path] = MergedPhaseLines(ph.path, ph.requested)
        m.entries += ph.entries
        m.traced_entries += ph.traced_entries
        m.traced_wall_ns += ph.traced_wall_ns
        m.untraced_wall_ns += ph.untraced_wall_ns
        m.traced_by.add(who)
        m.project_folders.add(doc.project_folder)
        m.overhead.append(doc.overhead_ns_per_event)
        if doc.mechanism:
            m.mechanisms.add(doc.mechanism)
        for f in ph.functions:
            fkey = (f.file, f.first_line, f.function)
            have = m.functions.get(fkey)
            if have is None:
                m.functions[fkey] = MergedFunction(
                    f.file, f.function, f.first_line, f.last_line, list(f.body)
                )
            elif len(f.body) > len(have.body):
                have.body, have.last_line = list(f.body), max(have.last_line, f.last_line)
            for r in f.lines:
                key = (f.file, r.line)
                ml = m.lines.get(key)
                if ml is None:
                    ml = m.lines[key] = MergedLine(
                        f.file, r.line, r.end_line, f.function, f.first_line, r.source
                    )
                ml.hits += r.hits
                ml.time_ns += r.time_ns
                ml.raw_time_ns += r.raw_time_ns
                ml.self_ns += r.self_ns
                ml.end_line = max(ml.end_line, r.end_line)
                if not ml.source and r.source:
                    ml.source = r.source
                ml.seen_in.add(who)


def read_run_lines(run: MergedRun, with_lines: set[str] | None = None) -> list[Caveat]:
    """Reads every worker's sidecar into ``role.lines``; the caveats of the refused ones.
    ``with_lines``: ``layout.workers_with_lines`` of the run, where the caller listed it."""
    refused: list[tuple[str, str]] = []
    if with_lines is None:
        with_lines = workers_with_lines(Path(run.run_dir))
    if not with_lines:
        return []
    for role in run.roles.values():
        _read_role(run, role, with_lines, refused)
    if not refused:
        return []
    shown = "; ".join(f"{p}: {why}" for p, why in refused[:10])
    more = f"; and {len(refused) - 10} more" if len(refused) > 10 else ""
    return [
        Caveat(
            "lines_unreadable",
            f"{len(refused)} line-statistics sidecar(s) could not be used; their processes' "
            f"lines are not counted (their phases are): {shown}{more}",
            [p for p, _ in refused],
        )
    ]


def _read_role(
    run: MergedRun, role: Role, with_lines: set[str], refused: list[tuple[str, str]]
) -> None:
    root = Path(run.run_dir)
    for w in role.workers:
        if w.path not in with_lines:
            continue  # no sidecar when the run directory was listed: the process traced nothing
        worker_file = root / w.path
        try:
            doc = read_lines(worker_file, within=root)
        except LinesFileError as exc:
            refused.append((str(lines_path(Path(w.path))), str(exc)))
            continue
        if doc is None:
            continue
        if doc.pid != w.pid:
            refused.append(
                (str(lines_path(Path(w.path))), f"pid {doc.pid} is not its worker's ({w.pid})")
            )
            continue
        add_doc(role.lines, doc, w.process_key)
