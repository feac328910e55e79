"""The report's resource blocks as text: I/O BY PHASE, I/O, MEMORY and GPU (``report.text`` lists
them). Each block is absent when its source was unavailable; definitions are in
``report/resources.py``.
"""

from __future__ import annotations

from lineprofiler.report.resource_model import RunResources
from lineprofiler.report.resources import io_by_phase
from lineprofiler.report.units import NA, RULE, bytes_per_s, fmt_bytes, fmt_share, path_label
from lineprofiler.report.view import RunView
from lineprofiler.runfile.samples import NO_PHASE

SPARK = " ▁▂▃▄▅▆▇█"
TOP_TAGS = 6
TOP_PROCESSES = 8


def fmt_byte_rate(n: int | float | None, ns: int | None) -> str:
    """Bytes over ns as ``785.7 MB/s``; n/a without time."""
    rate = bytes_per_s(n, ns)
    return NA if rate is None else fmt_bytes(int(rate)) + "/s"


def _per_s(rate: float | None) -> str:
    return NA if rate is None else fmt_bytes(int(rate)) + "/s"


def _path_name(path: tuple[str, ...]) -> str:
    return path_label(path)


def samples_of(view: RunView) -> RunResources | None:
    return view.run.samples


def io_by_phase_block(view: RunView) -> list[str]:
    rows = io_by_phase(view.run)
    if not rows:
        return []
    width = max(26, max(len(_path_name(p)) for p, _, _ in rows) + 2)
    out = ["I/O BY PHASE (measured exactly)", RULE]
    failed = spanned = 0
    for path, io, wall_ns in rows:
        spanned += io.get("async", 0)
        rb, wb = io.get("read_bytes", 0), io.get("write_bytes", 0)
        rc = io.get("read_chars", 0)
        failed += io.get("failed", 0)
        if not io.get("calls", 0):  # no entry recorded bytes: none measured, not zero
            out.append(f"  {_path_name(path):<{width}}r {NA:>10}   w {NA:>10}")
            continue
        out.append(
            f"  {_path_name(path):<{width}}r {fmt_bytes(rb):>10}   w {fmt_bytes(wb):>10}"
            f"   {fmt_byte_rate(rb + wb, wall_ns):>12}"
        )
        cache = max(0, rc - rb)
        if cache:
            out.append(f"  {'':<{width}}+ {fmt_bytes(cache)} read from page cache")
    if failed:
        out.append(
            f"  {failed:,} io=True entr{'y' if failed == 1 else 'ies'} recorded no bytes "
            "(a counter read failed at a boundary)"
        )
    if spanned:
        out.append(
            f"  {spanned:,} io=True entr{'y' if spanned == 1 else 'ies'} in asyncio tasks spanned "
            "an await and recorded no bytes (the thread's counters include other tasks' I/O)"
        )
    return out


def io_block(view: RunView) -> list[str]:
    res = samples_of(view)
    if res is None or not res.io_rows:
        return []
    io = res.io
    out = ["I/O", RULE]
    out.append(
        f"{'Read (from disk)':<30}{fmt_bytes(io.read_bytes):>12}"
        f"{_per_s(res.read_bytes_per_s):>16}   peak {_per_s(res.read_peak_per_s)}"
    )
    out.append(f"{'Read (from page cache)':<30}{fmt_bytes(io.page_cache_bytes):>12}")
    out.append(
        f"{'Write':<30}{fmt_bytes(io.write_bytes):>12}"
        f"{_per_s(res.write_bytes_per_s):>16}   peak {_per_s(res.write_peak_per_s)}"
    )
    bins = res.sparkline_bins(start=view.run.start_time, end=view.run.end_time)
    if bins:
        top = max(bins) or 1
        line = "".join(SPARK[0 if b == 0 else max(1, round(b * 8 / top))] for b in bins)
        out.append(f"  write {line:<{len(bins)}}")
    out.append(
        "  rates: bytes per second of wall time in which the run moved them (all processes);"
        " peak: the busiest second"
    )
    share = res.no_phase_share
    if share is not None:
        out.append(
            f"  {fmt_share(share)} of disk bytes (read + written) landed with (no phase open)"
        )
    tagged = sorted(
        res.by_tag.items(),
        key=lambda kv: (-(kv[1].read_bytes + kv[1].write_bytes), -kv[1].page_cache_bytes),
    )[:TOP_TAGS]
    if tagged and not (len(tagged) == 1 and tagged[0][0] == NO_PHASE):
        out.append("  by phase open at each interval's start (1-interval resolution):")
        width = max(24, max(len(_path_name(p)) for p, _ in tagged) + 2)
        for path, t in tagged:
            out.append(
                f"    {_path_name(path):<{width}}r {fmt_bytes(t.read_bytes):>10}"
                f"   w {fmt_bytes(t.write_bytes):>10}   cache {fmt_bytes(t.page_cache_bytes):>10}"
            )
    if res.dropped:
        out.append(
            f"  {res.dropped:,} of {res.rows:,} intervals dropped (counters unreadable): "
            "their bytes are not counted"
        )
    return out


def memory_block(view: RunView) -> list[str]:
    res = samples_of(view)
    if res is None:
        return []
    procs = [m for m in res.memory if m.rss_peak is not None]
    if not procs:
        return []
    out = ["MEMORY (RSS peak)", RULE]
    by_role: dict[str, list[int]] = {}
    for m in procs:
        by_role.setdefault(m.role, []).append(m.rss_peak or 0)
    for role, peaks in sorted(by_role.items()):
        out.append(
            f"{role.upper():<20}{'x' + str(len(peaks)):>6}  max {fmt_bytes(max(peaks)):>10}"
            f"   sum {fmt_bytes(sum(peaks)):>10}"
        )
    if len(procs) > 1:
        out.append("  largest processes:")
        for m in sorted(procs, key=lambda m: -(m.rss_peak or 0))[:TOP_PROCESSES]:
            out.append(f"    {m.role + ' ' + m.label:<36}{fmt_bytes(m.rss_peak):>10}")
    return out


def gpu_block(view: RunView) -> list[str]:
    res = samples_of(view)
    if res is None:
        return []
    devs = [d for d in res.gpus.values() if d.busy_dt_ns or d.attributed]
    alloc = [m.cuda_allocated_peak for m in res.memory if m.cuda_allocated_peak is not None]
    reserved = [m.cuda_reserved_peak for m in res.memory if m.cuda_reserved_peak is not None]
    if not devs and not alloc:
        return []
    out = ["GPU", RULE]
    hosts = {d.host for d in devs}
    if devs:
        out.append(f"{'':<30}{'busy':>6}{'this run':>11}{'idle':>9}")
        for d in sorted(devs, key=lambda d: (d.host, d.index)):
            name = f"GPU {d.index}" if len(hosts) == 1 else f"{d.host} GPU {d.index}"
            out.append(
                f"{name:<30}{fmt_share(d.busy):>6}{fmt_share(d.this_run):>11}{fmt_share(d.idle):>9}"
            )
    if alloc:
        out.append(f"{'VRAM allocated (peak)':<30}{fmt_bytes(max(alloc)):>12}")
    if reserved:
        out.append(f"{'VRAM reserved (peak)':<30}{fmt_bytes(max(reserved)):>12}")
    if alloc and len(alloc) > 1:
        out.append("  (largest single process; torch's CUDA allocator)")
    return out
