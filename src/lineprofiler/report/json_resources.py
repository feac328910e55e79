"""The report's resource blocks as data (``--json``: the top-level ``resources`` section),
listed in ``report.json``. Same numbers as ``resources_text``; a block whose source
was unavailable is null, a value that could not be measured is null (never 0).
"""

from __future__ import annotations

from typing import Any

from lineprofiler.report.resources import io_by_phase
from lineprofiler.report.units import bytes_per_s
from lineprofiler.report.view import RunView


def resources_doc(view: RunView) -> dict[str, Any] | None:
    run = view.run
    phases = [
        {
            "path": list(path),
            "calls": io.get("calls", 0),
            "failed": io.get("failed", 0),
            "read_bytes": io.get("read_bytes", 0),
            "write_bytes": io.get("write_bytes", 0),
            "read_chars": io.get("read_chars", 0),
            "write_chars": io.get("write_chars", 0),
            "page_cache_bytes": max(0, io.get("read_chars", 0) - io.get("read_bytes", 0)),
            "bytes_per_s": bytes_per_s(io.get("read_bytes", 0) + io.get("write_bytes", 0), wall_ns),
        }
        for path, io, wall_ns in io_by_phase(run)
    ]
    res = run.samples
    doc: dict[str, Any] = {"io_by_phase": phases or None, "io": None, "memory": None, "gpu": None}
    if res is not None:
        if res.io_rows:
            io = res.io
            doc["io"] = {
                "read_bytes": io.read_bytes,
                "write_bytes": io.write_bytes,
                "read_chars": io.read_chars,
                "write_chars": io.write_chars,
                "page_cache_bytes": io.page_cache_bytes,
                "read_bytes_per_s": res.read_bytes_per_s,
                "write_bytes_per_s": res.write_bytes_per_s,
                "read_peak_bytes_per_s": res.read_peak_per_s,
                "write_peak_bytes_per_s": res.write_peak_per_s,
                "write_sparkline_bytes": res.sparkline_bins(start=run.start_time, end=run.end_time),
                "no_phase_open_share": res.no_phase_share,
                "intervals": res.rows,
                "dropped_intervals": res.dropped,
                "own_write_bytes_excluded": res.own_write_bytes,
                "by_phase_sampled": [
                    {
                        "path": list(p),
                        "read_bytes": t.read_bytes,
                        "write_bytes": t.write_bytes,
                        "read_chars": t.read_chars,
                        "write_chars": t.write_chars,
                    }
                    for p, t in sorted(res.by_tag.items())
                ],
            }
        procs = [m for m in res.memory if m.rss_peak is not None]
        if procs:
            doc["memory"] = {
                "processes": [
                    {"role": m.role, "worker": m.label, "rss_peak_bytes": m.rss_peak} for m in procs
                ],
                "roles": {
                    role: max(m.rss_peak or 0 for m in procs if m.role == role)
                    for role in sorted({m.role for m in procs})
                },
            }
        devs = [d for d in res.gpus.values() if d.busy_dt_ns or d.attributed]
        alloc = [m.cuda_allocated_peak for m in res.memory if m.cuda_allocated_peak is not None]
        reserved = [m.cuda_reserved_peak for m in res.memory if m.cuda_reserved_peak is not None]
        if devs or alloc:
            doc["gpu"] = {
                "devices": [
                    {
                        "host": d.host,
                        "index": d.index,
                        "busy": d.busy,
                        "this_run": d.this_run,
                        "idle": d.idle,
                        "failed_windows": d.failed_windows,
                    }
                    for d in sorted(devs, key=lambda d: (d.host, d.index))
                ],
                "vram_allocated_peak_bytes": max(alloc) if alloc else None,
                "vram_reserved_peak_bytes": max(reserved) if reserved else None,
            }
    if all(v is None for v in doc.values()):
        return None
    return doc
