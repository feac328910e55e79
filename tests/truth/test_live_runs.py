"""A run read while it goes on: "live", and when each silent worker writes next, against real pids.

The test starts its own processes: one it keeps alive (its pid exists) and one it has already
reaped (its pid does not), and writes worker files for them on this host with times it chose, so
whether the run is live, how long since its newest write and each worker's next write are
arithmetic on those times and on which process the test itself knows to be alive.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from lineprofiler.accounting import merge_run
from lineprofiler.report import merge
from tests.report.synth import Ph, worker_doc, write_worker

HERE = os.uname().nodename
S = 1_000_000_000


@pytest.fixture
def pids():
    alive = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    try:
        yield alive.pid, dead.pid
    finally:
        alive.kill()
        alive.wait()


def _silent(pid: int, written_at: float, interval: float | None = 30.0, host: str = HERE):
    """A worker that has recorded no phase yet (its first snapshot is due)."""
    return worker_doc(
        role="actor",
        pid=pid,
        host=host,
        start_time=written_at - 5.0,
        written_at=written_at,
        final=False,
        snapshot_interval_s=interval,
    )


@pytest.mark.timing
def test_a_run_with_a_live_local_worker_is_live_and_says_when_the_silent_one_writes(tmp_path, pids):
    alive, _ = pids
    now = time.time()
    run = tmp_path / "run"
    busy = worker_doc(
        role="actor",
        pid=alive,
        host=HERE,
        start_time=now - 20.0,
        written_at=now - 2.0,
        final=False,
        threads=[Ph(("step",), [S])],
    )
    write_worker(run, busy)
    write_worker(run, _silent(alive + 100_000, now - 12.0, interval=30.0, host="elsewhere"))
    before = time.time()
    merged = merge_run(run)
    after = time.time()
    # newest write 2 s before `now`; read between `before` and `after`
    assert before - (now - 2.0) - 0.01 <= merged.live_s <= after - (now - 2.0) + 0.01
    (silent,) = [w for w in merged.workers if w.host == "elsewhere"]
    # written 12 s before now, every 30 s: due 18 s after now
    due = (now - 12.0) + 30.0
    assert due - after - 0.01 <= silent.next_write_s <= due - before + 0.01
    (busy_w,) = [w for w in merged.workers if w.host == HERE]
    assert busy_w.next_write_s is None  # it has written phases: nothing pending
    assert merged.live_s < 60 and silent.stale_s is None


def test_a_run_whose_only_local_worker_is_gone_is_not_live(tmp_path, pids):
    _, dead = pids
    now = time.time()
    run = tmp_path / "run"
    write_worker(run, _silent(dead, now - 1.0))
    merged = merge_run(run)
    assert merged.live_s is None  # its process is gone: killed before it closed, not running
    assert merged.workers[0].next_write_s is None


def test_a_worker_on_another_host_counts_as_alive_whatever_its_pid(tmp_path, pids):
    _, dead = pids
    now = time.time()
    run = tmp_path / "run"
    write_worker(run, _silent(dead, now - 1.0, host="not-" + HERE))
    merged = merge_run(run)
    assert merged.live_s is not None and merged.live_s < 60


def test_gone_checks_this_hosts_pids_only(pids):
    alive, dead = pids

    class W:
        def __init__(self, host: str, pid: int) -> None:
            self.host, self.pid = host, pid

    assert merge._gone(W(HERE, dead), HERE) is True
    assert merge._gone(W(HERE, alive), HERE) is False
    time.sleep(0.5)  # a signal, had one been sent, has been delivered by now
    assert os.waitpid(alive, os.WNOHANG) == (0, 0)  # asked, not signalled: still running
    assert merge._gone(W("other", dead), HERE) is False
    # pid 1 exists on every Linux host (init); as another user it answers EPERM: still there
    assert merge._gone(W(HERE, 1), HERE) is False


def test_an_old_run_is_not_live(tmp_path, pids):
    alive, _ = pids
    run = tmp_path / "run"
    write_worker(run, _silent(alive, time.time() - 3600.0))
    merged = merge_run(run)
    assert merged.live_s is None  # its newest write is an hour old: over any stale bound
