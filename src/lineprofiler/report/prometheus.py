"""``serve``: a Prometheus scrape endpoint over a run directory (``prometheus_client``, optional).

One endpoint serves the whole run, however many processes and nodes wrote it: every scrape
(at most once per ``interval_s``; in between the last merge is served again) merges the worker
files, phases only, exactly as ``report`` does. No process of the run exposes anything, so
there are no per-process ports and none of prometheus_client's multiprocess mode.

Families (labels ``role``, ``phase``, the phase's full name ``a/b``, and ``on_threads``: ``true``
for work handed to other threads inside its parent phase, a path through ``[threads]``, whose time
ran in parallel with its parent's; else ``false``; times in seconds):

- ``lineprofiler_phase_calls_total``: completed entries (counter);
- ``lineprofiler_phase_seconds_total``: the phase's time, process-time summed over the role's
  processes, open entries included (counter). With ``per_process_labels`` this family is per
  ``host`` and ``rank`` instead (rank empty when the process had none; processes sharing both
  are summed), and it sums to the role's;
- ``lineprofiler_phase_wait_ratio``: wait / wall (gauge; absent when CPU was not measured, or
  when the phase has async entries: the report's rule, ``report.view``);
- ``lineprofiler_phase_duration_seconds``: a histogram of the completed entries' wall times.
  Its ``le`` bounds (``LE_BOUNDS_S``) are edges of the recorder's own 512 buckets, the edge
  nearest each 1-2.5-5 value from 1 us to 1000 s (within 3% of it), so each cumulative count
  is exact: no entry is moved across a bound. ``_sum`` is the completed entries' wall time;
- ``lineprofiler_phase_counter_total`` (label ``counter``): ``p.count()`` totals, and
  ``lineprofiler_phase_counter_rate``: the same per second of the phase's time (gauge);
- ``lineprofiler_phase_threads``: for work handed to other threads, how many threads ran it
  (gauge; the report's ``(on N threads)``);
- ``lineprofiler_processes`` (label ``state``: running, closed, stale): worker files by state;
- ``lineprofiler_unreadable_files``: worker files of the served attempt that could not be used
  (the report names each under its caveats), so a file that turns bad while serving shows;
- ``lineprofiler_run_info`` (labels ``run_id``, ``run_dir``) = 1, and
  ``lineprofiler_scrape_merge_seconds``: how long the last merge took;
- ``lineprofiler_merge_ok``: 1 when the last merge succeeded, 0 when it failed and the families
  served are an earlier merge's;
- while the run goes on (the report's LIVE header): ``lineprofiler_run_live_seconds``, the age of
  its newest write; ``lineprofiler_processes_not_written_yet``, live processes whose first
  periodic write (every ``snapshot_interval_s``, 30 s by default) is still to come, so their
  phases read zero; ``lineprofiler_next_write_seconds``, when the soonest of those writes is due.

Every merge reads the newest snapshot of each worker file: what a process did since its last
write shows at its next one (or when it closes).

Sampled phases (``sample=``) export their scaled estimates, as the report does.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from lineprofiler.report.fold import DocCache
from lineprofiler.report.merge import merge_run
from lineprofiler.report.model import MergedRun
from lineprofiler.report.view import role_view
from lineprofiler.runfile.safe_read import reuse_dirs
from lineprofiler.runfile.stats import HIST_BUCKETS, bucket_of

DEFAULT_PORT = 9464
DEFAULT_INTERVAL_S = 5.0


def _edge_ns(target_ns: int) -> int:
    """The lower edge (ns) of the bucket holding ``target_ns``, or of the next one if nearer."""
    b = bucket_of(target_ns)

    def lower(k: int) -> int:
        lo, hi = 0, target_ns * 2 + 2
        while lo < hi:  # smallest ns in bucket >= k
            mid = (lo + hi) // 2
            if bucket_of(mid) >= k:
                hi = mid
            else:
                lo = mid + 1
        return lo

    a, c = lower(b), lower(min(b + 1, HIST_BUCKETS - 1))
    return a if target_ns - a <= c - target_ns else c


def _le_bounds() -> tuple[tuple[float, int], ...]:
    """(le in seconds, first source bucket above it) for each bound."""
    out = []
    for exp in range(3, 13):  # 1 us .. 1000 s
        for m in (1, 2.5, 5):
            target = int(m * 10**exp)
            if target > 10**12:
                break
            edge = _edge_ns(target)
            out.append(((edge - 1) / 1e9, bucket_of(edge)))
    return tuple(out)


LE_BOUNDS: tuple[tuple[float, int], ...] = _le_bounds()
LE_BOUNDS_S: tuple[float, ...] = tuple(le for le, _ in LE_BOUNDS)


def rebucket(buckets: dict[int, int]) -> list[tuple[str, int]]:
    """Cumulative ``(le, count)`` pairs, ``+Inf`` last, from the recorder's bucket counts."""
    items = sorted(buckets.items())
    out = []
    i = 0
    seen = 0
    for le, first_above in LE_BOUNDS:
        while i < len(items) and items[i][0] < first_above:
            seen += items[i][1]
            i += 1
        out.append((repr(le), seen))
    out.append(("+Inf", sum(buckets.values())))
    return out


def families(run: MergedRun, per_process: bool = False, merge_s: float = 0.0) -> list[Any]:
    """The run's metric families (prometheus_client ``Metric`` objects)."""
    from prometheus_client.core import (
        CounterMetricFamily,
        GaugeMetricFamily,
        HistogramMetricFamily,
    )

    rp = ["role", "phase", "on_threads"]
    calls = CounterMetricFamily(
        "lineprofiler_phase_calls", "Completed entries of the phase.", labels=rp
    )
    seconds = CounterMetricFamily(
        "lineprofiler_phase_seconds",
        "Time in the phase (process-time, open entries included), seconds.",
        labels=rp + (["host", "rank"] if per_process else []),
    )
    wait = GaugeMetricFamily(
        "lineprofiler_phase_wait_ratio", "Share of the phase's wall time off the CPU.", labels=rp
    )
    hist = HistogramMetricFamily(
        "lineprofiler_phase_duration_seconds",
        "Wall time of the phase's completed entries, seconds.",
        labels=rp,
    )
    ctr = CounterMetricFamily(
        "lineprofiler_phase_counter", "p.count() totals.", labels=rp + ["counter"]
    )
    rate = GaugeMetricFamily(
        "lineprofiler_phase_counter_rate",
        "p.count() per second of the phase's time.",
        labels=rp + ["counter"],
    )
    threads = GaugeMetricFamily(
        "lineprofiler_phase_threads",
        "Threads that ran work handed to them inside the parent phase (on_threads only).",
        labels=rp,
    )
    procs = GaugeMetricFamily(
        "lineprofiler_processes",
        "Worker processes of the run by state.",
        labels=["role", "state"] + (["host"] if per_process else []),
    )
    for name, role in run.roles.items():
        view = role_view(role)
        for path, row in view.phases.items():
            if not path:
                continue
            s = row.stats
            labels = [name, row.name, "true" if row.on_threads else "false"]
            calls.add_metric(labels, s.calls)
            if row.on_threads:
                threads.add_metric(labels, s.threads)
            if not per_process:
                seconds.add_metric(labels, row.time_ns / 1e9)
            if row.wait_fraction is not None:  # n/a: CPU not measured, or async entries
                wait.add_metric(labels, row.wait_fraction)
            if not s.thread_node:
                hist.add_metric(labels, rebucket(s.hist.buckets), s.wall_ns / 1e9)
            for c in row.counters:
                ctr.add_metric([*labels, c.name], c.count)
                if c.rate_per_s is not None:
                    rate.add_metric([*labels, c.name], c.rate_per_s)
            if per_process:  # processes sharing (host, rank), e.g. rankless ones, are summed
                per: dict[tuple[str, str], int] = {}
                for i, w in enumerate(role.workers):
                    t = role.worker_time_ns(i, path)
                    if t:
                        key = (w.host, "" if w.rank is None else str(w.rank))
                        per[key] = per.get(key, 0) + t
                for (host, rank), t in sorted(per.items()):
                    seconds.add_metric([*labels, host, rank], t / 1e9)
        states: dict[tuple[str, ...], int] = {}
        for w in role.workers:
            state = "closed" if w.final else ("stale" if w.stale_s is not None else "running")
            key = (name, state, w.host) if per_process else (name, state)
            states[key] = states.get(key, 0) + 1
        for key, n in sorted(states.items()):
            procs.add_metric(list(key), n)
    info = GaugeMetricFamily(
        "lineprofiler_run_info", "The attempt served.", labels=["run_id", "run_dir"]
    )
    info.add_metric([run.run_id or "", run.run_dir], 1)
    took = GaugeMetricFamily(
        "lineprofiler_scrape_merge_seconds", "How long the last merge of the run took, seconds."
    )
    took.add_metric([], merge_s)
    bad = GaugeMetricFamily(
        "lineprofiler_unreadable_files",
        "Worker files of the served attempt that could not be used (see the report's caveats).",
    )
    bad.add_metric([], len(run.unreadable))
    return [
        calls, seconds, wait, hist, ctr, rate, threads, procs, bad, info, took,
        *_live_families(run),
    ]  # fmt: skip


def _live_families(run: MergedRun) -> list[Any]:
    """The report's LIVE header as gauges: while the run goes on, how old its newest write is,
    and how many processes have not written a phase yet (their numbers read zero until their
    first periodic write, due in the least of ``next_write``)."""
    from prometheus_client.core import GaugeMetricFamily

    live = GaugeMetricFamily(
        "lineprofiler_run_live_seconds",
        "While the run is still going: seconds since its newest worker write (absent once the "
        "run has finished or gone stale).",
    )
    pending = [w.next_write_s for w in run.workers if w.next_write_s is not None]
    unwritten = GaugeMetricFamily(
        "lineprofiler_processes_not_written_yet",
        "Live processes whose first periodic write is still to come: their phases read zero.",
    )
    due = GaugeMetricFamily(
        "lineprofiler_next_write_seconds",
        "Seconds until the soonest first periodic write of a process not written yet.",
    )
    if run.live_s is not None:
        live.add_metric([], run.live_s)
        unwritten.add_metric([], len(pending))
        if pending:
            due.add_metric([], min(pending))
    return [live, unwritten, due]


def merge_ok_family(ok: bool) -> Any:
    """``lineprofiler_merge_ok``: whether the families served come from the latest merge."""
    from prometheus_client.core import GaugeMetricFamily

    fam = GaugeMetricFamily(
        "lineprofiler_merge_ok",
        "1: the last merge succeeded; 0: it failed, and an earlier merge is served.",
    )
    fam.add_metric([], 1 if ok else 0)
    return fam


class RunCollector:
    """A prometheus_client collector over a run directory, merged at most every interval_s."""

    def __init__(self, run_dir: str | Path, interval_s: float, per_process: bool) -> None:
        self.run_dir = str(run_dir)
        self.interval_s = interval_s
        self.per_process = per_process
        self._lock = threading.Lock()
        self._at: float | None = None
        self._families: list[Any] = []
        self._ok = True
        self.merges = 0
        self._cache = DocCache()  # files unchanged since the last scrape are not parsed again

    def refresh(self) -> list[Any]:
        """The families, re-merged when the last merge is older than ``interval_s``.

        A merge that fails (the directory gone, nothing readable) keeps serving the last one,
        with ``lineprofiler_merge_ok`` 0.
        """
        with self._lock:
            now = time.monotonic()
            if self._at is None or now - self._at >= self.interval_s:
                t0 = time.perf_counter()
                try:
                    with reuse_dirs():  # the run's directories opened once per merge
                        run = merge_run(self.run_dir, with_samples=False, jobs=1, cache=self._cache)
                    got = families(run, self.per_process, time.perf_counter() - t0)
                except Exception:
                    if self._at is None:
                        raise
                    self._ok = False
                else:
                    self._families = got
                    self._ok = True
                    self.merges += 1
                self._at = now
            return [*self._families, merge_ok_family(self._ok)]

    def collect(self) -> Iterator[Any]:
        yield from self.refresh()
