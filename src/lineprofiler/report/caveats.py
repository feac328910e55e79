"""The caveats of a merged run: each thing that makes it less than complete, in words.

The resource blocks add their own (``report.resources``); ``merge_run`` puts both in
``run.caveats``. ``kind`` is a stable identifier for programs; the message is for people.
"""

from __future__ import annotations

from lineprofiler.report.attempts import duplicate_ranks
from lineprofiler.report.model import Caveat, MergedRun, Worker
from lineprofiler.report.units import fmt_duration, fmt_plural, fmt_utc

_LIST_LIMIT = 10


def _listing(items: list[str], sep: str = ", ") -> str:
    """At most _LIST_LIMIT items, then how many more (the caveat's ``workers`` has them all)."""
    shown = sep.join(items[:_LIST_LIMIT])
    more = len(items) - _LIST_LIMIT
    return shown + (f"{sep}and {more} more" if more > 0 else "")


def run_caveats(run: MergedRun) -> list[Caveat]:
    """What makes the merged run less than complete, in the order the report prints them."""
    out: list[Caveat] = []
    if run.unreadable:
        out.append(
            Caveat(
                "unreadable",
                f"{len(run.unreadable)} worker file(s) could not be read and are not counted: "
                + _listing([f"{u.path}: {u.reason}" for u in run.unreadable], sep="; "),
                [u.path for u in run.unreadable],
            )
        )
    nothing = [w for w in run.workers if w.recorded_nothing]
    if nothing:
        out.append(
            Caveat(
                "recorded_nothing",
                f"{len(nothing)} worker(s) started, recorded nothing: "
                + _listing([f"{w.role} {w.label}" for w in nothing]),
                [w.path for w in nothing],
            )
        )
    ended = [w for w in run.workers if w.ended_unclosed]
    if ended:
        out.append(
            Caveat(
                "ended_without_final_write",
                f"{len(ended)} worker(s) ended without a final write (killed, or exited through "
                "os._exit): their numbers stop at their last write, and they are left out of "
                "imbalance, busiest and stragglers: "
                + _listing([_ended_label(w) for w in ended], sep="; "),
                [w.path for w in ended],
            )
        )
    pending = [w for w in run.workers if w.next_write_s is not None]
    if pending:
        out.append(
            Caveat(
                "not_written_yet",
                f"{len(pending)} live worker(s) have not written a phase yet (the first periodic "
                "write is still to come): "
                + _listing(
                    [
                        f"{w.role} {w.label} next write in "
                        f"{fmt_duration(int((w.next_write_s or 0.0) * 1e9))}"
                        for w in pending
                    ]
                ),
                [w.path for w in pending],
            )
        )
    stale = [w for w in run.workers if w.stale_s is not None]
    if stale:
        out.append(
            Caveat(
                "stale",
                f"{len(stale)} worker(s) stopped writing before the run's newest file "
                "(died or hung; their numbers end there): "
                + _listing(
                    [
                        f"{w.role} {w.label} {fmt_duration(int(w.stale_s * 1e9))} behind"
                        for w in stale
                        if w.stale_s is not None
                    ]
                ),
                [w.path for w in stale],
            )
        )
    failing = [w for w in run.workers if w.flush_errors > 0]
    if failing:
        out.append(
            Caveat(
                "flush_errors",
                f"{len(failing)} worker(s) had failing writes (their file may be out of date): "
                + _listing(
                    [
                        f"{w.role} {w.label} {w.flush_errors} failed"
                        + (f" ({w.last_flush_error})" if w.last_flush_error else "")
                        for w in failing
                    ]
                ),
                [w.path for w in failing],
            )
        )
    folded = [w for w in run.workers if w.folded_entries > 0]
    if folded:
        total = sum(w.folded_entries for w in folded)
        out.append(
            Caveat(
                "folded",
                f"{fmt_plural(total, 'phase entry', 'phase entries')} in {len(folded)} worker(s) "
                'went to the "(folded)" '
                "node: their phase tree was full (4096 paths), so new paths were folded "
                "together — phase names built from data?",
                [w.path for w in folded],
            )
        )
    overflow = [w for w in run.workers if w.depth_overflow > 0]
    if overflow:
        out.append(
            Caveat(
                "depth_overflow",
                f"{len(overflow)} worker(s) nested phases deeper than the recorder's limit; "
                "the deepest entries were not recorded",
                [w.path for w in overflow],
            )
        )
    disorder = [w for w in run.workers if w.out_of_order_exits > 0]
    if disorder:
        out.append(
            Caveat(
                "out_of_order_exits",
                f"{sum(w.out_of_order_exits for w in disorder):,} phase exit(s) in "
                f"{len(disorder)} worker(s) came before the exit of a phase entered inside them "
                "(on one thread or in one asyncio task): the inner entries were closed there, "
                "early",
                [w.path for w in disorder],
            )
        )
    refused = [w for w in run.workers if w.counters_refused > 0]
    if refused:
        total = sum(w.counters_refused for w in refused)
        out.append(
            Caveat(
                "counters_refused",
                f"{total:,} count() call(s) in {len(refused)} worker(s) were refused: a thread "
                "used more than 65,536 counters (counter names built from data?)",
                [w.path for w in refused],
            )
        )
    no_signal = [w for w in run.workers if not w.signal_flush]
    if no_signal:
        out.append(
            Caveat(
                "no_signal_flush",
                f"{len(no_signal)} worker(s) built their profiler outside the main thread, so "
                "SIGTERM/SIGUSR1/SIGHUP could not flush them: "
                + _listing([f"{w.role} {w.label}" for w in no_signal]),
                [w.path for w in no_signal],
            )
        )
    out.extend(_attempt_caveats(run))
    if run.workers and not any(w.final for w in run.workers):
        out.append(
            Caveat(
                "live",
                "no worker has closed: the run is live or was killed; numbers stop at each "
                "worker's last write",
            )
        )
    still_open = [w for w in run.workers if w.open_entries]
    if still_open:
        entries = sum(w.open_entries for w in still_open)
        out.append(
            Caveat(
                "open_entries",
                f"{fmt_plural(entries, 'phase entry', 'phase entries')} in {len(still_open)} "
                f"worker(s) {'was' if entries == 1 else 'were'} still open at "
                "their last write: their time so far is counted, their wait and percentiles "
                "are not",
                [w.path for w in still_open],
            )
        )
    return out


def _ended_label(w: Worker) -> str:
    """``trainer pid 123 (node07), last write 12:00:01.250 UTC, up to 28.7 s unaccounted``."""
    last = fmt_utc(w.written_at)
    lost = (
        f", up to {fmt_duration(int(w.unaccounted_s * 1e9))} after it unaccounted"
        if w.unaccounted_s is not None
        else ""
    )
    return f"{w.role} pid {w.pid} ({w.host}), last write {last}{lost}"


def _attempt_caveats(run: MergedRun) -> list[Caveat]:
    """Copied files skipped, ranks claimed twice, and the attempts not merged (reruns and
    concurrent runs under other ids)."""
    out: list[Caveat] = []
    if run.duplicates:
        misplaced = set(run.misplaced)

        def dup(skipped: str, first: str) -> str:
            why = (
                "; its name or directory disagrees with its contents"
                if skipped in misplaced
                else ""
            )
            return f"{skipped} (a copy of {first}{why})"

        out.append(
            Caveat(
                "duplicate_file",
                f"{len(run.duplicates)} worker file(s) repeat a process already read (same host, "
                "pid and uuid: a copy) and are skipped: "
                + _listing([dup(skipped, first) for skipped, first in run.duplicates]),
                [skipped for skipped, _ in run.duplicates],
            )
        )
    if run.launches:
        parts = [
            f"parent pid {ppid} on {host}: "
            + ", ".join(f"{w.role} pid {w.pid}" for w in ws[:4])
            + (f" and {len(ws) - 4} more" if len(ws) > 4 else "")
            for host, ppid, ws in run.launches
        ]
        out.append(
            Caveat(
                "merged_launches",
                f"{len(run.launches)} launches that look separate (one program started by "
                "different parent processes, no shared run id) ran at the same time and are "
                "merged here as one run: "
                + _listing(parts, sep="; ")
                + ". If they are separate runs, give each its own run_dir or "
                "LINEPROFILER_RUN_ID",
                sorted(w.path for _, _, ws in run.launches for w in ws),
            )
        )
    pairs = duplicate_ranks(run.workers)
    if pairs:
        out.append(
            Caveat(
                "duplicate_rank",
                f"{len(pairs)} pair(s) of processes claimed one rank at the same time: "
                + _listing([f"{a.role} rank {a.rank}: {a.label} and {b.label}" for a, b in pairs]),
                sorted({w.path for pair in pairs for w in pair}),
            )
        )
    reported = [a for a in run.attempts if a.reported]
    if len(reported) > 1:
        out.append(
            Caveat(
                "attempts_summed",
                f"{len(reported)} attempts are summed here (--attempt all): totals and process "
                "counts add up runs that did not run together",
            )
        )
    start = min((a.start_time for a in reported if a.start_time is not None), default=None)
    # One bullet per kind of attempt left out, however many there are: (attempt id, details).
    unplaced: list[tuple[str, str]] = []
    overlapped: list[tuple[str, str]] = []
    later: list[tuple[str, str]] = []
    older: list[tuple[str, str]] = []
    for a in run.superseded:
        when = f", started {fmt_utc(a.start_time)}" if a.start_time is not None else ""
        what = f"{a.workers} worker file(s){when}"
        if a.workers and a.unreadable == a.workers:  # nothing of it to place it by but names
            when = f", last modified {fmt_utc(a.end_time)}" if a.end_time is not None else ""
            unplaced.append((a.run_id, f"{a.workers} unreadable worker file(s){when}"))
        elif start is not None and any(a.run_id in r.overlapped for r in reported):
            overlapped.append((a.run_id, what))
        elif start is not None and a.start_time is not None and a.start_time > start:
            later.append((a.run_id, what))
        else:
            older.append((a.run_id, what))
    if unplaced:
        out.append(
            Caveat(
                "superseded_attempt",
                (
                    f"attempt {_attempts(unplaced)} is not merged: none of its files could be "
                    "read, and neither their names nor their times place them in this run"
                )
                if len(unplaced) == 1
                else f"{len(unplaced)} attempts are not merged: none of their files could be "
                "read, and neither their names nor their times place them in this run: "
                + _attempts(unplaced),
            )
        )
    if overlapped:
        out.append(
            Caveat(
                "overlapped_attempt",
                (
                    f"attempt {_attempts(overlapped)} ran at the same time under another id and "
                    f"is not merged; report it with --attempt {overlapped[0][0]}"
                )
                if len(overlapped) == 1
                else f"{len(overlapped)} attempts ran at the same time under other ids and are "
                f"not merged: {_attempts(overlapped)}; report one with --attempt ID",
            )
        )
    if later:
        one = len(later) == 1
        why = (
            "this report is the one asked for"
            if run.attempt_asked is not None
            else ("it has" if one else "they have")
            + " no readable worker file, so this report is the newest attempt that has one"
        )
        out.append(
            Caveat(
                "later_attempt",
                f"a later attempt {_attempts(later)} is not merged; {why}"
                if one
                else f"{len(later)} later attempts are not merged: {_attempts(later)}; {why}",
            )
        )
    if older:
        out.append(
            Caveat(
                "superseded_attempt",
                (
                    f"superseded attempt {_attempts(older)} is not merged (a rerun into the same "
                    "directory replaced it); this report is the newest attempt"
                )
                if len(older) == 1
                else f"{len(older)} older attempts superseded (reruns into the same directory "
                f"replaced them) and not merged: {_attempts(older)}; this report is the newest "
                "attempt",
            )
        )
    return out


def _attempts(items: list[tuple[str, str]]) -> str:
    """``ID (details)``, joined; at most _LIST_LIMIT of them, then how many more."""
    return _listing([f"{run_id} ({details})" for run_id, details in items])
