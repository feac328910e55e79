"""The attempt rule decides by evidence: how processes ended, who launched them, what a damaged
file still says (issue 27 items 1-4, 7, 8; issue 29 item 8).

Every test starts real processes, records their pids itself (each worker writes its pid to a
file the test reads; a launcher's pid is ``Popen.pid``) and checks attempts, process counts, pids
and phase counts against those. Processes that must overlap meet at a file barrier.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lineprofiler.accounting import merge_run
from tests.helpers import child_env, run_python

# argv: run_dir role steps barrier_dir peers pids_dir [die]. Builds its own profiler (default
# 30 s snapshot interval: no periodic write in these runs), meets `peers` processes, records
# `steps` steps, then closes, or with "die" SIGKILLs itself, with "_exit" leaves through os._exit
# (no final write either way).
WORKER = """
import os, signal, sys, time
from pathlib import Path
from lineprofiler.accounting import Profiler

run_dir, role, steps, barrier, peers, pids = sys.argv[1:7]
die = sys.argv[7:] == ["die"]
quit_now = sys.argv[7:] == ["_exit"]
p = Profiler(run_dir=run_dir, role=role, enabled=True, sample_interval_s=None)
Path(pids, str(os.getpid())).write_text("die" if die else "live")
Path(barrier, str(os.getpid())).touch()
deadline = time.monotonic() + 60
while len(os.listdir(barrier)) < int(peers) and time.monotonic() < deadline:
    time.sleep(0.02)
busy_s = 0.0  # the process's own outer time of its phases: the test's ground truth
for _ in range(int(steps)):
    t0 = time.perf_counter()
    with p.phase("step"):
        p.count("items", 1)
        time.sleep(0.01)
    busy_s += time.perf_counter() - t0
Path(pids, f"busy-{os.getpid()}").write_text(repr(busy_s))
if die:
    os.kill(os.getpid(), signal.SIGKILL)
if quit_now:
    os._exit(0)
p.close()
"""


class Launch:
    """One launch: a shell line of workers, the dirs the test reads its ground truth from."""

    def __init__(self, tmp_path: Path, tag: str) -> None:
        self.tmp_path = tmp_path
        self.barrier = tmp_path / f"barrier-{tag}"
        self.pids_dir = tmp_path / f"pids-{tag}"
        self.barrier.mkdir()
        self.pids_dir.mkdir()
        self.script = tmp_path / "worker.py"
        self.script.write_text(WORKER)

    def line(self, run_dir: Path, plan: list[tuple[str, int, bool]], peers: int = 0) -> str:
        """``python w ... & python w ... & wait`` for (role, steps, die) each."""
        n = peers or len(plan)
        cmds = [
            f"{sys.executable} {self.script} {run_dir} {role} {steps} {self.barrier} {n} "
            f"{self.pids_dir}{' die' if die else ''} &"
            for role, steps, die in plan
        ]
        return " ".join(cmds) + " wait;"

    def pids(self) -> set[int]:
        return {int(p.name) for p in self.pids_dir.iterdir() if p.name.isdigit()}

    def killed(self) -> set[int]:
        return {pid for pid in self.pids() if (self.pids_dir / str(pid)).read_text() == "die"}

    def busy_s(self, pid: int) -> float:
        """The seconds a worker measured around its own phases."""
        return float((self.pids_dir / f"busy-{pid}").read_text())


def _bash(line: str, cwd: Path, env: dict[str, str] | None = None) -> None:
    proc = subprocess.run(
        ["bash", "-c", line], cwd=cwd, env=child_env(env), capture_output=True, text=True,
        timeout=180,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lineprofiler", *args],
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )


def _attempts_json(run_dir: Path) -> list[dict]:
    proc = _cli("attempts", str(run_dir), "--json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_a_retry_loop_in_one_shell_under_one_id_is_two_attempts(tmp_path):
    """Item 1: a job script exports LINEPROFILER_RUN_ID, launches 2 workers, waits, sleeps 2 s,
    launches them again: one parent, one claimed id, still two runs. (One worker of the first
    launch is SIGKILLed: the older attempt, read again on its own, still names it.)"""
    run_dir = tmp_path / "run"
    first, second = Launch(tmp_path, "1"), Launch(tmp_path, "2")
    script = (
        "export LINEPROFILER_RUN_ID=job-1; "
        + first.line(run_dir, [("trainer", 2, False), ("trainer", 3, True)])
        + " sleep 2; "
        + second.line(run_dir, [("trainer", 4, False), ("trainer", 6, False)])
    )
    _bash(script, tmp_path)
    run = merge_run(run_dir, with_samples=False)
    assert {w.pid for w in run.workers} == second.pids()
    assert run.processes == 2 and run.tree[("step",)].calls == 10
    assert run.tree[("step",)].counters == {"items": 10}
    assert [c.kind for c in run.caveats] == ["superseded_attempt"]
    listed = _attempts_json(run_dir)
    assert [(a["id"], a["processes"], a["reported"]) for a in listed] == [
        ("job-1", 2, False),
        ("job-1~2", 2, True),
    ]
    assert listed[0]["end_time"] < listed[1]["start_time"]
    assert "claimed id job-1" in listed[0]["why"]
    assert "launched together by one parent process" in listed[1]["why"]
    assert (
        "started after every process of job-1 had ended (some ended without a final write: "
        "pid gone)" in listed[1]["why"]
    )
    old = merge_run(run_dir, with_samples=False, attempt="job-1")
    # the killed worker's 3 steps were never written (no periodic write came)
    assert {w.pid for w in old.workers} == first.pids() and old.tree[("step",)].calls == 2
    assert {w.pid for w in old.workers if w.ended_unclosed} == first.killed()
    assert "ended_without_final_write" in [c.kind for c in old.caveats]
    assert "recorded_nothing" not in [c.kind for c in old.caveats]
    text = _cli("attempts", str(run_dir)).stdout.splitlines()
    assert text[1].startswith("job-1 ") and text[2].startswith("    why: ")
    assert "launched together by one parent process" in text[2]
    assert text[3].startswith("job-1~2 ") and text[3].endswith("(reported)")


def test_a_sigkilled_worker_does_not_glue_the_rerun_onto_its_run(tmp_path):
    """Item 2: with the default 30 s snapshot interval, a worker SIGKILLed early would end at
    "last write + 30 s" and swallow a rerun 2 s later. Its pid is gone: it ended by its last
    write as far as anything says, and the rerun is its own attempt."""
    run_dir = tmp_path / "run"
    first, second = Launch(tmp_path, "1"), Launch(tmp_path, "2")
    plan1 = [("trainer", 3, False), ("trainer", 3, False), ("trainer", 3, True)]
    plan2 = [("trainer", 5, False), ("trainer", 5, False), ("trainer", 5, False)]
    _bash(first.line(run_dir, plan1) + " sleep 2; " + second.line(run_dir, plan2), tmp_path)
    before_report = time.time()
    run = merge_run(run_dir, with_samples=False)
    assert {w.pid for w in run.workers} == second.pids()
    assert run.processes == 3 and run.tree[("step",)].calls == 15
    assert run.end_time is not None and run.end_time <= before_report
    assert [c.kind for c in run.caveats] == ["superseded_attempt"]
    old = merge_run(run_dir, with_samples=False, attempt=run.attempts[0].run_id)
    assert {w.pid for w in old.workers} == first.pids()
    ended = [c for c in old.caveats if c.kind == "ended_without_final_write"]
    assert len(ended) == 1 and len(ended[0].workers) == 1
    assert {w.pid for w in old.workers if w.ended_unclosed} == first.killed()
    assert f"pid {first.killed().pop()} " in ended[0].message
    assert "killed, or exited through os._exit" in ended[0].message
    assert "recorded_nothing" not in [c.kind for c in old.caveats]
    # its numbers stop at its start write (no periodic write came): the two others' steps
    assert old.tree[("step",)].calls == 6


def test_a_killed_worker_is_named_and_left_out_of_imbalance(tmp_path):
    """Item 7: a worker SIGKILLed after its steps but before any periodic write, among balanced
    ones, is named as ended without a final write (not "recorded nothing") and is not a 0-busy
    process in imbalance or the straggler view."""
    run_dir = tmp_path / "run"
    launch = Launch(tmp_path, "1")
    plan = [("trainer", 20, False), ("trainer", 20, False), ("trainer", 20, True)]
    _bash(launch.line(run_dir, plan), tmp_path)
    run = merge_run(run_dir, with_samples=False)
    assert {w.pid for w in run.workers} == launch.pids() and run.processes == 3
    [killed] = [w for w in run.workers if w.ended_unclosed]
    assert {killed.pid} == launch.killed()
    assert killed.paths == 0 and not killed.final
    kinds = [c.kind for c in run.caveats]
    assert "ended_without_final_write" in kinds and "recorded_nothing" not in kinds
    [c] = [c for c in run.caveats if c.kind == "ended_without_final_write"]
    assert c.workers == [killed.path]
    assert f"trainer pid {killed.pid} (" in c.message and "left out of" in c.message
    assert "unaccounted" in c.message
    role = run.roles["trainer"]
    live = {w.pid for w in run.workers} - {killed.pid}
    assert {w.pid for w, _ in role.process_busy_ns()} == live
    # max over mean of what the two live processes measured around their own phases (the outer
    # time holds the inner, plus microseconds per entry); with the killed one as a 0-busy third
    # process it would be 3 x max / sum, at least 1.5
    outer = [launch.busy_s(pid) for pid in live]
    expected = max(outer) / (sum(outer) / 2)
    assert role.imbalance is not None
    assert role.imbalance == pytest.approx(expected, rel=0.1)  # preemption between the clocks
    from lineprofiler.report.view import role_view

    for s in role_view(role).stragglers:
        assert {t.worker.pid for t in s.times} == live
    doc = json.loads(_cli("report", str(run_dir), "--json").stdout)
    [wd] = [w for w in doc["workers"] if w["pid"] == killed.pid]
    assert wd["ended_without_final_write"] is True and wd["recorded_nothing"] is False
    assert 0 <= wd["unaccounted_s"] <= 30.0


FORK_EXIT = """
import os, sys
from lineprofiler.accounting import Profiler

p = Profiler(run_dir="run", role="parent", enabled=True, sample_interval_s=None)
with p.phase("before"):
    pass
pid = os.fork()
if pid == 0:
    for _ in range(5):
        with p.phase("child_work"):
            pass
    os._exit(0)
os.waitpid(pid, 0)
print("child", pid, "parent", os.getpid())
p.close()
"""


def test_a_forked_child_that_os_exits_is_named_not_idle(tmp_path):
    """Item 7: a raw os.fork child that recorded and ended with os._exit."""
    out = run_python(FORK_EXIT, cwd=tmp_path).stdout
    words = out.split()
    child_pid, parent_pid = int(words[words.index("child") + 1]), int(words[-1])
    run = merge_run(tmp_path / "run", with_samples=False)
    assert {w.pid for w in run.workers} == {child_pid, parent_pid}
    [child] = [w for w in run.workers if w.pid == child_pid]
    assert child.ended_unclosed and not child.recorded_nothing
    [c] = [c for c in run.caveats if c.kind == "ended_without_final_write"]
    assert c.workers == [child.path] and f"pid {child_pid} " in c.message
    assert "recorded_nothing" not in [c.kind for c in run.caveats]


def test_a_truncated_file_stays_in_its_run(tmp_path):
    """Item 4: three processes of one run; one file truncated to half afterwards. The two good
    files are reported, the truncated one is named unreadable in that same attempt; nothing is
    called superseded or later."""
    run_dir = tmp_path / "run"
    launch = Launch(tmp_path, "1")
    _bash(launch.line(run_dir, [("trainer", 2, False)] * 3), tmp_path)
    files = sorted(run_dir.glob("workers/*/w_*.json"))
    assert len(files) == 3
    bad = files[1]
    data = bad.read_bytes()
    bad.write_bytes(data[: len(data) // 2])
    bad_pid = int(bad.name.rsplit("_", 2)[1])
    for mtime in (None, time.time() + 5.0):  # truncated now, and "later" still
        if mtime is not None:
            os.utime(bad, (mtime, mtime))
        run = merge_run(run_dir, with_samples=False)
        assert {w.pid for w in run.workers} == launch.pids() - {bad_pid}
        assert run.tree[("step",)].calls == 4
        assert [c.kind for c in run.caveats] == ["unreadable"]
        assert run.caveats[0].workers == [bad.relative_to(run_dir).as_posix()]
        assert [(a.workers, a.unreadable, a.reported) for a in run.attempts] == [(3, 1, True)]
    # Modified an hour before the run, with a name no readable file shares: it overlaps nothing,
    # so it is an attempt of its own, named as unreadable, and the run is untouched.
    hour_before = min(w.start_time for w in run.workers) - 3600.0
    os.utime(bad, (hour_before, hour_before))
    run = merge_run(run_dir, with_samples=False)
    assert {w.pid for w in run.workers} == launch.pids() - {bad_pid}
    assert [(a.workers, a.unreadable, a.reported) for a in run.attempts] == [
        (1, 1, False),
        (2, 0, True),
    ]
    [c] = run.caveats
    assert c.kind == "superseded_attempt" and "none of its files could be read" in c.message


def test_two_runs_started_at_once_by_different_parents_are_named(tmp_path):
    """Item 8: two separate launches (two shells, generated ids) at the same moment into one
    directory: merged as one attempt, and named as separate-looking launches with each
    parent's pid (the shells' pids the test holds)."""
    run_dir = tmp_path / "run"
    a, b = Launch(tmp_path, "a"), Launch(tmp_path, "b")
    b.barrier.rmdir()
    b.barrier = a.barrier  # all four meet
    procs = [
        subprocess.Popen(
            ["bash", "-c", launch.line(run_dir, [("trainer", 3, False)] * 2, peers=4)],
            cwd=tmp_path,
            env=child_env(),
        )
        for launch in (a, b)
    ]
    assert [p.wait(timeout=180) for p in procs] == [0, 0]
    run = merge_run(run_dir, with_samples=False)
    assert {w.pid for w in run.workers} == a.pids() | b.pids()
    assert run.processes == 4 and run.tree[("step",)].calls == 12
    [c] = [c for c in run.caveats if c.kind == "merged_launches"]
    for p in procs:
        assert f"parent pid {p.pid} on " in c.message
    assert len(c.workers) == 4
    [listed] = _attempts_json(run_dir)
    assert any("separate launches" in why and str(procs[0].pid) in why for why in listed["why"])


def test_one_shell_launch_is_not_named_as_separate(tmp_path):
    """The counterpart of item 8: one shell starting every process is one launch."""
    run_dir = tmp_path / "run"
    launch = Launch(tmp_path, "1")
    _bash(launch.line(run_dir, [("actor", 1, False), ("learner", 2, False)]), tmp_path)
    run = merge_run(run_dir, with_samples=False)
    assert [c.kind for c in run.caveats] == []
    [listed] = _attempts_json(run_dir)
    assert any(why.startswith("launched by pid ") for why in listed["why"])


def test_a_planted_copy_in_another_host_dir_never_replaces_the_real_file(tmp_path):
    """Issue 29 item 8: a file under another host directory with the same (host, pid, uuid) and
    an earlier written_at is the one skipped and named; the real file is reported."""
    run_dir = tmp_path / "run"
    launch = Launch(tmp_path, "1")
    _bash(launch.line(run_dir, [("trainer", 2, False), ("trainer", 3, False)]), tmp_path)
    real = sorted(run_dir.glob("workers/*/w_*.json"))[0]
    for host_dir, earlier_s in (("zz-other", 0.0), ("aa-other", 0.5)):
        doc = json.loads(real.read_text())
        doc["written_at"] -= earlier_s  # as early as the real file's, or earlier
        doc["threads"] = []  # and claiming nothing was recorded
        planted = run_dir / "workers" / host_dir / real.name
        planted.parent.mkdir()
        planted.write_text(json.dumps(doc))
        run = merge_run(run_dir, with_samples=False)
        paths = {w.path for w in run.workers}
        assert real.relative_to(run_dir).as_posix() in paths
        assert planted.relative_to(run_dir).as_posix() not in paths
        assert {w.pid for w in run.workers} == launch.pids()
        assert run.tree[("step",)].calls == 5
        [c] = [c for c in run.caveats if c.kind == "duplicate_file"]
        assert c.workers == [planted.relative_to(run_dir).as_posix()]
        assert "disagrees with its contents" in c.message
        shutil.rmtree(planted.parent)


RESTARTED_RANK = """
import os, signal, sys, time
from pathlib import Path
from lineprofiler.accounting import Profiler

run_dir, pids = sys.argv[1:3]
restart = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
p = Profiler(run_dir=run_dir, role="trainer", enabled=True, sample_interval_s=None)
rank = int(os.environ["RANK"])
Path(pids, f"{restart}-{rank}-{os.getpid()}").touch()
for _ in range(rank + 1 + 10 * restart):
    with p.phase("step"):
        p.count("items", 1)
if restart == 0 and rank == 1:
    time.sleep(0.5)
    os.kill(os.getpid(), signal.SIGKILL)  # OOM-style
if restart == 0:
    time.sleep(60)  # the agent ends the others when rank 1 dies
p.close()
"""


@pytest.mark.slow
@pytest.mark.launcher
def test_torchrun_restart_after_a_sigkilled_rank_is_the_reported_attempt(tmp_path):
    """Item 3: torchrun --max-restarts=1; rank 1 of round 0 is SIGKILLed, the agent ends the
    others and starts round 1, which is reported; round 0 is an earlier attempt, not an
    overlapping one."""
    if importlib.util.find_spec("torch") is None:
        pytest.skip("torch is not installed (pip install torch==2.13.0)")
    script = tmp_path / "rank.py"
    script.write_text(RESTARTED_RANK)
    run_dir, pids = tmp_path / "run", tmp_path / "pids"
    pids.mkdir()
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2"]
    cmd += ["--max-restarts", "1", "--rdzv-backend=c10d", "--rdzv-endpoint=localhost:0"]
    cmd += ["--rdzv-id=job7", "--monitor-interval", "0.2"]
    proc = subprocess.run(
        [*cmd, str(script), str(run_dir), str(pids)],
        cwd=tmp_path,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    rounds: dict[int, dict[int, int]] = {}
    for f in pids.iterdir():
        restart, rank, pid = map(int, f.name.split("-"))
        rounds.setdefault(restart, {})[rank] = pid
    assert sorted(rounds) == [0, 1] and all(len(r) == 2 for r in rounds.values())
    run = merge_run(run_dir, with_samples=False)
    assert {w.pid for w in run.workers} == set(rounds[1].values())
    assert run.tree[("step",)].calls == (0 + 1 + 10) + (1 + 1 + 10)
    kinds = [c.kind for c in run.caveats]
    assert "overlapped_attempt" not in kinds and "superseded_attempt" in kinds
    assert [a.workers for a in run.attempts] == [2, 2]
    old = merge_run(run_dir, with_samples=False, attempt=run.attempts[0].run_id)
    assert {w.pid for w in old.workers} == set(rounds[0].values())
    assert [w.pid for w in old.workers if w.ended_unclosed] == [rounds[0][1]]


def test_a_killed_worker_not_yet_reaped_has_ended(tmp_path):
    """A SIGKILLed worker whose parent has not reaped it yet is a zombie: its pid still exists,
    with its own start, yet it has ended."""
    run_dir = tmp_path / "run"
    launch = Launch(tmp_path, "1")
    args = [str(run_dir), "trainer", "2", str(launch.barrier), "1", str(launch.pids_dir), "die"]
    proc = subprocess.Popen([sys.executable, str(launch.script), *args], env=child_env())
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            state = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            if state == "Z":
                break
            time.sleep(0.02)
        assert state == "Z"
        run = merge_run(run_dir, with_samples=False)
        assert [(w.pid, w.ended_unclosed) for w in run.workers] == [(proc.pid, True)]
    finally:
        assert proc.wait(timeout=60) == -9


def test_a_reused_pid_in_the_files_says_the_first_process_ended(tmp_path):
    """Two launches one after the other, each the first process of a fresh pid namespace (so
    both are pid 1 on this host name): the first leaves through os._exit with no final write
    (a namespace's pid 1 ignores its own SIGKILL). The second
    file's later start of the same pid says the first had ended by then, which bounds its
    unaccounted time; the two are separate attempts."""
    if os.geteuid() != 0 or not shutil.which("unshare"):
        pytest.skip("needs root and unshare(1) for a pid namespace")
    probe = subprocess.run(["unshare", "--pid", "--fork", "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"unshare --pid is not permitted here: {probe.stderr.decode().strip()}")
    run_dir = tmp_path / "run"
    launches = [Launch(tmp_path, "1"), Launch(tmp_path, "2")]
    launched_after = []
    for launch, quits in zip(launches, (True, False), strict=True):
        args = [str(run_dir), "trainer", "3", str(launch.barrier), "1", str(launch.pids_dir)]
        launched_after.append(time.time())
        proc = subprocess.run(
            ["unshare", "--pid", "--fork", sys.executable, str(launch.script), *args]
            + (["_exit"] if quits else []),
            env=child_env(),
            capture_output=True,
            timeout=120,
        )
        assert proc.returncode == 0, proc.stderr
        assert launch.pids() == {1}
    run = merge_run(run_dir, with_samples=False)
    assert [w.pid for w in run.workers] == [1] and run.tree[("step",)].calls == 3
    [first] = merge_run(run_dir, with_samples=False, attempt=run.attempts[0].run_id).workers
    assert first.pid == 1 and not first.final and first.fate == "pid reused"
    assert first.ended_unclosed and first.unaccounted_s is not None
    # it ended before the second process started, which was after the test launched it
    assert first.written_at + first.unaccounted_s <= run.workers[0].start_time
    assert first.unaccounted_s <= launched_after[1] - first.written_at + 1.0
    assert len(run.attempts) == 2


LIVE = """
import os, sys, time
from pathlib import Path
from lineprofiler.accounting import Profiler

p = Profiler(run_dir=sys.argv[1], role="trainer", enabled=True, sample_interval_s=None)
with p.phase("step"):
    pass
Path(sys.argv[2], "ready").touch()
deadline = time.monotonic() + 60
while not Path(sys.argv[2], "go").exists() and time.monotonic() < deadline:
    time.sleep(0.02)
p.close()
"""


def test_a_live_worker_is_alive_and_its_attempt_does_not_end_in_the_future(tmp_path):
    """Read while it runs (30 s snapshot interval): the process is alive, not ended, and its
    attempt's end is no later than the moment of reading."""
    run_dir, flags = tmp_path / "run", tmp_path / "flags"
    flags.mkdir()
    script = tmp_path / "live.py"
    script.write_text(LIVE)
    proc = subprocess.Popen(
        [sys.executable, str(script), str(run_dir), str(flags)], env=child_env()
    )
    try:
        deadline = time.monotonic() + 60
        while not (flags / "ready").exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        run = merge_run(run_dir, with_samples=False)
        read_by = time.time()
        [w] = run.workers
        assert (w.pid, w.fate, w.ended_unclosed, w.final) == (proc.pid, "alive", False, False)
        [a] = run.attempts
        assert a.end_time is not None and w.written_at <= a.end_time <= read_by
        assert "ended_without_final_write" not in [c.kind for c in run.caveats]
    finally:
        (flags / "go").touch()
        assert proc.wait(timeout=60) == 0
