"""What the evidence says about each worker's process: when it started, and whether it ended.

A worker file says when its profiler started and last wrote, and (``meta.process_start``) which
process wrote it: ``<boot id>:<clock ticks since boot>``. From those and from the machine the
reader runs on:

- **Launch.** The process's own start in Unix seconds, for files of one boot: the boot's clock is
  ``start_time - ticks / CLK_TCK`` at the latest (a profiler starts after its process), so the
  smallest of these over the boot's files is the boot time, late by at most the quickest
  process's import time; each process started at that plus its ticks.
- **Fate.** On the reader's own host and boot, a pid that no longer exists or is a zombie
  (``gone``), or that exists with another start (``pid reused``: it ended before that process
  started), has ended; one with the same start is ``alive``. A later file of the same host and
  boot with the same pid and a later start also says the first ended, before that start.
  Elsewhere the fate is unknown (""). (A reader in another pid namespace under the same host
  name would misjudge: the host name and boot id are all the files say of where a pid lives.)

A process that ended without a final write (killed, or ``os._exit``) gets ``unaccounted_s``: at
most how much wall time after its last write its file cannot hold (the next periodic write that
never came, a reuse of its pid, or the moment of reading bound it).
"""

from __future__ import annotations

import os
import time
from collections import defaultdict

from lineprofiler.runfile.safe_read import read_kernel_text
from lineprofiler.runfile.worker_doc import Worker

_BOOT_ID_FILE = "/proc/sys/kernel/random/boot_id"


def _clock_ticks_per_s() -> int:
    try:
        return int(os.sysconf("SC_CLK_TCK")) or 100
    except (ValueError, OSError):
        return 100


def _split_start(process_start: str | None) -> tuple[str, int] | None:
    """``(boot id, ticks since boot)`` of a ``meta.process_start``, or None."""
    if not process_start or ":" not in process_start:
        return None
    boot, _, ticks = process_start.rpartition(":")
    if not boot or not ticks.isdigit():
        return None
    return boot, int(ticks)


def reader_boot_id() -> str:
    """The boot id of the machine reading the run ("" where unreadable)."""
    try:
        return read_kernel_text(_BOOT_ID_FILE).strip()[:36]
    except OSError:
        return ""


def pid_start_ticks(pid: int) -> int | None:
    """The start of ``pid`` on this machine in clock ticks since boot; None when there is no
    such process, or only its corpse (a zombie its parent has not reaped yet)."""
    try:
        fields = read_kernel_text(f"/proc/{pid}/stat").rsplit(")", 1)[1].split()
        return None if fields[0] in ("Z", "X") else int(fields[19])
    except (OSError, IndexError, ValueError):
        return None


def settle_fates(workers: list[Worker], now: float | None = None) -> None:
    """Sets ``launched_at``, ``fate`` and ``unaccounted_s`` of each worker from the evidence."""
    now = time.time() if now is None else now
    hz = _clock_ticks_per_s()
    starts = {id(w): _split_start(w.process_start) for w in workers}
    boot_clock: dict[str, float] = {}
    for w in workers:
        s = starts[id(w)]
        if s is not None:
            at = w.start_time - s[1] / hz
            boot_clock[s[0]] = min(boot_clock.get(s[0], at), at)
    for w in workers:
        s = starts[id(w)]
        w.launched_at = None if s is None else min(w.start_time, boot_clock[s[0]] + s[1] / hz)

    # A pid's later processes on one host and boot: each says the earlier one ended by then.
    by_pid: dict[tuple[str, str, int], list[Worker]] = defaultdict(list)
    for w in workers:
        s = starts[id(w)]
        if s is not None:
            by_pid[(w.host, s[0], w.pid)].append(w)
    reused_by: dict[int, float] = {}
    for ws in by_pid.values():
        for w in ws:
            t = starts[id(w)][1]  # type: ignore[index]
            later = [o.launched_at for o in ws if starts[id(o)][1] > t]  # type: ignore[index]
            if later:
                reused_by[id(w)] = min(x for x in later if x is not None)

    here, boot = os.uname().nodename, reader_boot_id()
    for w in workers:
        s = starts[id(w)]
        w.fate = ""
        if s is not None and w.host == here and boot and s[0] == boot:
            ticks = pid_start_ticks(w.pid)
            w.fate = "gone" if ticks is None else "alive" if ticks == s[1] else "pid reused"
            if ticks is not None and ticks > s[1]:  # the pid's next process: ours ended before
                later = boot_clock[s[0]] + ticks / hz
                reused_by[id(w)] = min(reused_by.get(id(w), later), later)
        if id(w) in reused_by and w.fate != "gone":
            w.fate = "pid reused"
        w.unaccounted_s = None
        if w.ended_unclosed:
            bound = min(now, reused_by.get(id(w), now))
            if w.snapshot_interval_s:
                bound = min(bound, w.written_at + w.snapshot_interval_s)
            w.unaccounted_s = max(0.0, bound - w.written_at)
