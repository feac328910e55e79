"""``lineprofiler top``: a live view of a run in progress, re-merged every interval.

Each refresh is one streaming ``merge_run(with_samples=False)`` of the worker files (which the
profilers rewrite every ``snapshot_interval_s``), folded in this process (where a file whose bytes
did not change since the last refresh is read but not parsed and checked again:
``report.fold.DocCache``) unless ``$LINEPROFILER_REPORT_JOBS`` is set, plus the tail of each sampler sidecar
(``report.timeline.recent``), so it needs no server and works on a shared filesystem across nodes.

Numbers per role and dominant phase, *last* (between the two newest snapshots seen: while no
worker writes, the view says since when, and keeps the latest interval) and *since start* (the
whole run so far):

- ``time``: process-time in the phase (completed + still open), summed over the role's processes;
- ``share``: that time over the role's top-level time in the same span;
- ``wait``: (wall - cpu) / wall of the entries completed in the span, by the report's rule
  (``report.view``: n/a where CPU was not measured, ``async`` where an entry spanned an await);
- a counter's rate: its count in the span per second of wall-clock time (last: the time
  between the refreshes that saw the two snapshots; since start: the run's runtime), summed over
  processes — the role's throughput.

Processes are *finished* (closed), *stale* (not closed, last write older than the report's stale
threshold) or *alive*; ``age`` is the time since a process's last write.
"""

from __future__ import annotations

import os
import select
import shutil
import sys
import time
from typing import TextIO

from lineprofiler.report.fold import DocCache
from lineprofiler.report.merge import RunError, merge_run, stale_after_s
from lineprofiler.report.model import MergedRun, Path_, Worker
from lineprofiler.report.parallel import ENV_JOBS
from lineprofiler.report.timeline import recent
from lineprofiler.report.units import (
    NA,
    fmt_bytes,
    fmt_duration,
    fmt_rate,
    fmt_share,
    terminal_safe,
)
from lineprofiler.report.view import any_raised, interval_rows, phase_rows
from lineprofiler.runfile.safe_read import reuse_dirs
from lineprofiler.runfile.stats import PhaseStats

DEFAULT_INTERVAL_S = 2.0
DEFAULT_TOP = 8


# Each role's cumulative phases at one refresh: the next refresh's rows are the difference.
Snapshot = dict[tuple[str, Path_], PhaseStats]


def snapshot(run: MergedRun) -> Snapshot:
    return {(role.name, path): s for role in run.roles.values() for path, s in role.tree.items()}


def _newest_per_process(workers: list[Worker]) -> list[Worker]:
    """Each process's newest file: a process is alive, stale or finished as that one says (a
    Pool worker may close one profiler per task and go on to the next)."""
    newest: dict[tuple[str, int, str], Worker] = {}
    for w in workers:
        key = w.process_key
        have = newest.get(key)
        if have is None or w.written_at > have.written_at:
            newest[key] = w
    return list(newest.values())


def frame(
    run: MergedRun,
    prev: Snapshot | None,
    dt_s: float,
    now_unix: float,
    window_s: float,
    top: int = DEFAULT_TOP,
    width: int = 120,
    *,
    quits: bool = True,
    stalled_s: float | None = None,
) -> list[str]:
    """The lines of one refresh. ``prev``: the snapshot the *last* columns are measured from
    (None: none yet); ``dt_s``: wall seconds between it and ``run``'s. ``quits``: say that q
    quits (a terminal); ``stalled_s``: no worker wrote since the previous refresh, and the newest
    write is this many seconds old (the *last* columns then still show the latest interval)."""
    ws = _newest_per_process(run.workers)
    fin = sum(w.final for w in ws)
    stale = sum(1 for w in ws if not w.final and now_unix - w.written_at > stale_after_s(w))
    ages = [max(0.0, now_unix - w.written_at) for w in ws if not w.final]
    finished = bool(ws) and fin == len(ws)
    lines = [
        f"lineprofiler top  {run.run_dir}  run {run.run_id}  runtime {fmt_duration(run.runtime_ns)}"
        f"  refresh {window_s:g}s" + ("  (q quits)" if quits else ""),
        f"Processes {len(ws):,}: {len(ws) - fin - stale:,} alive, {stale:,} stale, {fin:,} finished"
        + (f"   last write {min(ages):.1f}s - {max(ages):.1f}s ago" if ages else "")
        + (
            "   the run has finished: every process closed, the numbers are final"
            if finished
            else ""
        ),
    ]
    raised_shown = any_raised(run)
    rec = recent(run, window_s, int(now_unix * 1e9))
    if rec is None:
        lines.append("I/O, memory: n/a (no sampler rows)")
    else:
        rss = "RSS at the end" if finished else "RSS now"
        lines.append(
            f"Last {window_s:g}s: disk read {fmt_bytes(rec.read_bytes)}, "
            f"write {fmt_bytes(rec.write_bytes)}   {rss} {fmt_bytes(rec.rss_bytes)} "
            f"({rec.workers:,} sampled)"
        )
    pending = [w.next_write_s for w in ws if w.next_write_s is not None]
    if pending:
        lines.append(
            f"{len(pending):,} process(es) have not written a phase yet: the first periodic write "
            f"is due in {fmt_duration(int(min(pending) * 1e9))}"
        )
    if stalled_s is not None and not finished:
        lines.append(
            f"No new snapshot since {stalled_s:.1f}s: 'last' is the interval between the two "
            "newest snapshots" + ("" if prev is not None else " (none yet)")
        )
    for role in run.roles.values():
        lines.append("")
        newest = _newest_per_process(role.workers)
        r_fin = sum(w.final for w in newest)
        r_stale = sum(
            1 for w in newest if not w.final and now_unix - w.written_at > stale_after_s(w)
        )
        r_ages = sorted((max(0.0, now_unix - w.written_at), w.label) for w in newest if not w.final)
        word = "process" if role.processes == 1 else "processes"
        who = f"{role.processes:,} {word}: {role.processes - r_fin - r_stale} alive, "
        who += f"{r_stale} stale, {r_fin} finished"
        if r_ages:
            who += f"; oldest write {r_ages[-1][0]:.1f}s ago ({r_ages[-1][1]})"
        lines.append(f"{role.name.upper()}  ({who})")
        totals = phase_rows(role.tree)
        before = (
            {p: prev[(role.name, p)] for p in role.tree if (role.name, p) in prev}
            if prev is not None
            else {}
        )
        last = interval_rows(role.tree, before)
        ranked = sorted(
            (p for p, s in role.tree.items() if p and not s.thread_node),
            key=lambda p: (-(last[p].time_ns if prev is not None else 0), -role.tree[p].self_ns, p),
        )[:top]
        nw = max([24] + [len(totals[p].label) + 2 for p in ranked])
        nw = min(nw, max(24, width - 62))
        lines.append(
            f"  {'phase':<{nw}}{'last: time':>11}{'share':>7}{'wait%':>6}"
            f"{'total: time':>13}{'share':>7}{'wait%':>6}"
            + (f"{'raised':>8}" if raised_shown else "")
        )
        for p in ranked:
            t, d = totals[p], last[p]
            name = t.label
            if len(name) > nw - 1:
                name = name[: nw - 2] + "…"
            last_t = fmt_duration(d.time_ns) if prev is not None else NA
            last_share = fmt_share(d.share, 0) if prev is not None else NA
            last_wait = d.wait_text if prev is not None else NA
            lines.append(
                f"  {name:<{nw}}{last_t:>11}{last_share:>7}{last_wait:>6}"
                f"{fmt_duration(t.time_ns):>13}{fmt_share(t.share, 0):>7}{t.wait_text:>6}"
                + (f"{t.stats.raised:>8,}" if raised_shown else "")
            )
            for c in sorted(t.stats.counters):
                last_rate = fmt_rate(d.rate(c, dt_s * 1e9)) if prev is not None else NA
                lines.append(
                    f"  {'  + ' + c:<{nw}}{last_rate:>11}{'':>13}"
                    f"{fmt_rate(t.rate(c, run.runtime_ns)):>13}"
                )
    return lines


class _Keys:
    """Raw single-key input from a terminal (cbreak mode; Ctrl-C still interrupts)."""

    def __init__(self) -> None:
        import termios
        import tty

        self.fd = sys.stdin.fileno()
        self.saved = termios.tcgetattr(self.fd)
        tty.setcbreak(self.fd)

    def wait(self, timeout_s: float) -> str:
        """A key pressed within ``timeout_s`` ("" if none)."""
        ready, _, _ = select.select([self.fd], [], [], max(0.0, timeout_s))
        return os.read(self.fd, 32).decode("utf-8", "replace") if ready else ""

    def close(self) -> None:
        import termios

        termios.tcsetattr(self.fd, termios.TCSADRAIN, self.saved)


def run_top(
    run_dir: str,
    interval_s: float = DEFAULT_INTERVAL_S,
    top: int = DEFAULT_TOP,
    iterations: int = 0,
    out: TextIO | None = None,
) -> int:
    """Refreshes every ``interval_s`` until ``q``/Ctrl-C (or ``iterations`` refreshes, if > 0).

    Draws in place on a terminal; writes plain frames one after another when ``out`` is not one,
    and then also ends once every process of the run has finished. A ``run_dir`` that is not a
    directory is an error at once (exit 2), as ``report`` has it; an empty one is waited on.
    """
    out = out if out is not None else sys.stdout
    if not os.path.isdir(run_dir):
        try:
            merge_run(run_dir, with_samples=False, jobs=1)
        except RunError as exc:
            print(f"lineprofiler top: error: {terminal_safe(str(exc))}", file=sys.stderr)
            return 2
    live = out.isatty() and sys.stdin.isatty()
    keys = _Keys() if live else None
    heading = f"lineprofiler top  {run_dir}" + ("  (q quits)" if live else "")
    # One process: a refresh re-folds small files often, and starting interpreters every
    # interval cost 4x more on 1,024 workers (benchmarks/bench_top.py); the variable overrides.
    jobs = None if os.environ.get(ENV_JOBS, "").strip() else 1
    # In this process, files whose bytes did not change since the last refresh are not parsed
    # again (report.fold.DocCache: keyed by their content; a refresh reads every file still).
    cache = DocCache() if jobs == 1 else None
    # The *last* columns: from the snapshot before the newest write to the newest one (kept
    # while no worker writes, instead of a zero interval that would look like a stall).
    older: tuple[Snapshot, float] | None = None
    newest: tuple[Snapshot, float, tuple] | None = None
    n = 0
    if live:
        out.write("\x1b[?1049h\x1b[?25l")  # alternate screen, cursor hidden
    try:
        while True:
            t0 = time.monotonic()
            size = shutil.get_terminal_size((120, 40))
            finished = False
            # the run's directories opened once for the refresh (safe_read.reuse_dirs)
            with reuse_dirs():
                try:
                    run = merge_run(run_dir, with_samples=False, jobs=jobs, cache=cache)
                    now = time.time()
                    writes = tuple(sorted((str(w.path), w.written_at) for w in run.workers))
                    stalled_s = None
                    if newest is None or writes != newest[2]:
                        older = (newest[0], newest[1]) if newest is not None else None
                        newest = (snapshot(run), t0, writes)
                    else:
                        stalled_s = max(
                            0.0, now - max((w.written_at for w in run.workers), default=now)
                        )
                    prev, dt_s = (older[0], newest[1] - older[1]) if older else (None, 0.0)
                    lines = frame(
                        run, prev, dt_s, now, interval_s, top, size.columns,
                        quits=live, stalled_s=stalled_s,
                    )  # fmt: skip
                    ws = _newest_per_process(run.workers)
                    finished = bool(ws) and all(w.final for w in ws)
                except RunError as exc:
                    lines = [heading, f"waiting: {exc}"]
                except Exception as exc:  # never a traceback on a live view: say it, and go on
                    lines = [
                        heading,
                        f"internal error: {type(exc).__name__}: {exc} (please report it)",
                    ]
            # every line through terminal_safe: run ids, roles, phase and counter names are the
            # worker files' own text
            lines = [terminal_safe(line) for line in lines]
            if live:
                shown = [ln[: size.columns] for ln in lines[: size.lines - 1]]
                out.write("\x1b[H\x1b[2J" + "\r\n".join(shown))
            else:
                stamp = time.strftime("%H:%M:%S")
                out.write(f"--- {stamp} ---\n" + "\n".join(lines) + "\n\n")
            out.flush()
            n += 1
            if (iterations and n >= iterations) or (finished and not live):
                return 0
            remaining = interval_s - (time.monotonic() - t0)
            if keys is None:
                time.sleep(max(0.0, remaining))
                continue
            deadline = time.monotonic() + max(0.0, remaining)
            while True:
                key = keys.wait(deadline - time.monotonic())
                if key and key[0] in "qQ":
                    return 0
                if time.monotonic() >= deadline:
                    break
    except KeyboardInterrupt:
        return 0
    finally:
        if keys is not None:
            keys.close()
        if live:
            out.write("\x1b[?25h\x1b[?1049l")
            out.flush()
