"""The JSON report of one merged run (``lineprofiler report --json``); keys: docs/report-json.md.

Times are integer nanoseconds (``*_ns``), Unix timestamps float seconds, fractions in [0, 1].
A number that was not measured is ``null``, never 0. Key order is fixed.
"""

from __future__ import annotations

import json
from typing import Any

from lineprofiler.report.json_resources import resources_doc
from lineprofiler.report.model import Attempt, MergedRun, Worker
from lineprofiler.report.units import json_frac, json_ns
from lineprofiler.report.view import (
    DEFAULT_TOP,
    CounterRow,
    LineRow,
    PhaseLinesView,
    PhaseRow,
    RoleView,
    RunView,
    Straggler,
    clock_summary,
    run_view,
)

REPORT_FORMAT = "lineprofiler-report"
REPORT_SCHEMA_VERSION = 1


def counter_doc(c: CounterRow) -> dict[str, Any]:
    return {
        "name": c.name,
        "count": c.count,
        "rate_per_s": None if c.rate_per_s is None else round(c.rate_per_s, 3),
        "time_per_each_ns": json_ns(c.time_per_each_ns),
        "saturated": c.saturated,
    }


def phase_doc(r: PhaseRow) -> dict[str, Any]:
    s = r.stats
    return {
        "path": list(r.path),
        "name": r.name,
        "depth": len(r.path),
        "thread": s.thread_node,
        "processes": s.processes,
        "calls": s.calls,
        "open": s.open,
        "time_ns": r.time_ns,
        "wall_ns": s.wall_ns,
        "open_ns": s.open_ns,
        "self_ns": s.self_ns,
        "cpu_ns": s.cpu_ns,
        "wait_ns": s.wait_ns,
        "wait_fraction": json_frac(r.wait_fraction),
        "async_calls": s.async_calls,
        "async_wall_ns": s.async_wall_ns,
        "raised": s.raised,
        "on_threads": r.on_threads,
        "threads": s.threads,
        "share": json_frac(r.share),
        "mean_ns": json_ns(r.mean_ns),
        "p50_ns": json_ns(r.q(0.5)),
        "p95_ns": json_ns(r.q(0.95)),
        "p99_ns": json_ns(r.q(0.99)),
        "estimated": s.estimated,
        "sample_every": sorted(x for x in s.sample_rates if x > 1),
        "counters": [counter_doc(c) for c in r.counters],
        "io": s.io,
    }


def line_doc(row: LineRow) -> dict[str, Any]:
    """One line of a traced phase (``roles[].phases[].lines[]``)."""
    ml = row.line
    return {
        "file": ml.file,
        "line": ml.line,
        "end_line": ml.end_line,
        "function": ml.function,
        "hits": ml.hits,
        "time_ns": ml.time_ns,
        "raw_time_ns": ml.raw_time_ns,
        "self_ns": ml.self_ns,
        "per_hit_ns": json_ns(row.per_hit_ns),
        "share": json_frac(row.share),
        "processes": ml.processes,
        "source": ml.source,
    }


def lines_traced_doc(lv: PhaseLinesView) -> dict[str, Any]:
    """A traced phase's ``lines_traced``: its entries, how many were traced, and how much slower
    the traced ones were."""
    m = lv.merged
    return {
        "requested": m.requested,
        "processes": m.processes,
        "entries": m.entries,
        "traced_entries": m.traced_entries,
        "traced_wall_ns": m.traced_wall_ns,
        "untraced_wall_ns": m.untraced_wall_ns,
        "traced_mean_ns": json_ns(lv.traced_mean_ns),
        "untraced_mean_ns": json_ns(lv.untraced_mean_ns),
        "slowdown": None if lv.slowdown is None else round(lv.slowdown, 4),
        "project_folder": m.project_folder,
    }


def worker_ref(w: Worker) -> dict[str, Any]:
    return {"path": w.path, "rank": w.rank, "host": w.host, "pid": w.pid}


def straggler_doc(s: Straggler) -> dict[str, Any]:
    return {
        "path": list(s.path),
        "name": "/".join(s.path),
        "slowest": {**worker_ref(s.slowest.worker), "time_ns": s.slowest.time_ns},
        "median_ns": json_ns(s.median_ns),
        "ratio": json_frac(s.ratio),
        "processes": [{**worker_ref(t.worker), "time_ns": t.time_ns} for t in s.times],
        "hosts": [
            {"host": h, "processes": n, "mean_ns": json_ns(mean)} for h, n, mean in s.by_host()
        ],
    }


def _with_lines(doc: dict[str, Any], lv: PhaseLinesView | None) -> dict[str, Any]:
    """A traced phase's document gains ``lines_traced`` and ``lines`` (every line, by self
    time); other phases' documents are as they were."""
    if lv is not None:
        doc["lines_traced"] = lines_traced_doc(lv)
        doc["lines"] = [line_doc(row) for row in lv.rows]
    return doc


def role_doc(rv: RoleView) -> dict[str, Any]:
    role = rv.role
    busy = [b for _, b in role.process_busy_ns()]
    return {
        "role": role.name,
        "processes": role.processes,
        "imbalance": json_frac(role.imbalance),
        "busiest": None if role.busiest is None else worker_ref(role.busiest),
        "idle": [worker_ref(w) for w in role.workers if w.idle],
        "busy_ns": {
            "max": max(busy, default=0),
            "mean": json_ns(sum(busy) / len(busy)) if busy else None,
            "min": min(busy, default=0),
        },
        "top_level_ns": role.top_level_ns,
        "phases": [_with_lines(phase_doc(r), rv.lines.get(p)) for p, r in rv.phases.items()],
        "dominant": [r.name for r in rv.dominant if r.path],
        "iterations": None if rv.iterations is None else rv.iterations.name,
        "stragglers": [straggler_doc(s) for s in rv.stragglers],
    }


def worker_doc(w: Worker) -> dict[str, Any]:
    return {
        "path": w.path,
        "role": w.role,
        "host": w.host,
        "pid": w.pid,
        "rank": w.rank,
        "local_rank": w.local_rank,
        "job_id": w.job_id,
        "run_id": w.run_id,
        "uuid": w.uuid,
        "start_time": w.start_time,
        "written_at": w.written_at,
        "final": w.final,
        "snapshot_seq": w.snapshot_seq,
        "stale_s": None if w.stale_s is None else round(w.stale_s, 3),
        "flush_errors": w.flush_errors,
        "last_flush_error": w.last_flush_error,
        "recorded_nothing": w.recorded_nothing,
        "idle": w.idle,
        "process_name": w.process_name,
        "ppid": w.ppid,
        "busy_ns": w.busy_ns,
        "threads": w.threads,
        "thread_names": w.thread_names,
        "clock": {"wall": w.clock_wall, "cpu": w.clock_cpu},
        "own_write_bytes": w.own_write_bytes,
        "folded_entries": w.folded_entries,
        "depth_overflow": w.depth_overflow,
        "next_write_s": w.next_write_s,
        "ended_without_final_write": w.ended_unclosed,
        "unaccounted_s": None if w.unaccounted_s is None else round(w.unaccounted_s, 3),
    }


def attempt_doc(a: Attempt) -> dict[str, Any]:
    """One attempt of the directory: id, span, processes (worker files), roles, whether merged."""
    return {
        "id": a.run_id,
        "start_time": a.start_time,
        "end_time": a.end_time,
        "processes": a.workers,
        "roles": a.roles,
        "overlapped": a.overlapped,
        "reported": a.reported,
        "unreadable": a.unreadable,
        "why": a.why,
    }


def to_document(
    run: MergedRun,
    top: int = DEFAULT_TOP,
    iteration: str | None = None,
    view: RunView | None = None,
) -> dict[str, Any]:
    """The report as plain data (what ``--json`` prints); ``iteration`` as in ``role_view``;
    ``view``: the run's view when the caller has it already (the HTML report: built once).
    A traced phase lists every line (``--lines-top`` limits the text report only)."""
    if view is None:
        view = run_view(run, top, iteration)
    wall, cpu = clock_summary(run)
    doc: dict[str, Any] = {
        "format": REPORT_FORMAT,
        "schema_version": REPORT_SCHEMA_VERSION,
        "run": {
            "dir": run.run_dir,
            "run_id": run.run_id,
            "start_time": run.start_time,
            "end_time": run.end_time,
            "runtime_ns": run.runtime_ns,
            "live_s": run.live_s,  # the run is still going: seconds since its newest write
            "processes": run.processes,
            "roles": {name: role.processes for name, role in run.roles.items()},
            "hosts": run.hosts,
            "nodes": len(run.hosts),
            "clocks": {
                "wall": dict(sorted(wall.items())),
                "cpu": {
                    ("not_measured" if k is None else k): v for k, v in sorted(cpu.items(), key=str)
                },
            },
            "own_write_bytes": _sum_opt([w.own_write_bytes for w in run.workers]),
            "with_samples": run.with_samples,
            "superseded": [
                {"run_id": a.run_id, "workers": a.workers, "start_time": a.start_time}
                for a in run.superseded
            ],
        },
        "attempts": [attempt_doc(a) for a in run.attempts],
        "roles": [role_doc(rv) for rv in view.roles],
        "workers": [worker_doc(w) for w in run.workers],
        "unreadable": [{"path": u.path, "reason": u.reason} for u in run.unreadable],
        "caveats": [
            {"kind": c.kind, "message": c.message, "workers": c.workers} for c in run.caveats
        ],
    }
    resources = resources_doc(view)
    if resources is not None:
        doc["resources"] = resources
    return doc


def _sum_opt(values: list[int | None]) -> int | None:
    got = [v for v in values if v is not None]
    return sum(got) if got else None


def render_json(
    run: MergedRun,
    top: int = DEFAULT_TOP,
    iteration: str | None = None,
    indent: int | None = 2,
    view: RunView | None = None,
) -> str:
    """``--json``'s text: indented for people; ``indent=None`` (the HTML report's embedded data)
    is compact, and json's C encoder writes it (an indent makes it fall back to Python)."""
    doc = to_document(run, top, iteration, view)
    return json.dumps(doc, indent=indent, allow_nan=False) + "\n"
