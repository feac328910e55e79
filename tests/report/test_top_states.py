"""``top``'s per-process state and its last-interval shares, away from the easy case: every
worker stale relative to the clock (none is behind the run's newest file), processes that wrote
several files (a closed per-task profiler, then an open one), the stale threshold's edge, and
two top-level phases moving at different speeds. report.live.frame is what ``top`` prints; the
clock is passed in, so the truth is the write times the test chose."""

from __future__ import annotations

from pathlib import Path

from lineprofiler.report.live import frame, snapshot
from lineprofiler.report.merge import merge_run
from tests.report.synth import MS, T0, Ph, worker_doc, write_worker

STEP = [Ph(("step",), durations=[10 * MS] * 3)]


def _file(run_dir: Path, pid: int, n: int, written_at: float, final: bool, **kw) -> Path:
    doc = worker_doc(
        role="trainer",
        pid=pid,
        uuid=f"{pid:04x}{n:04x}",
        threads=kw.pop("threads", STEP),
        written_at=written_at,
        final=final,
        snapshot_interval_s=30.0,  # stale after max(60 s, 3 x 30 s) = 90 s behind the clock
        **kw,
    )
    doc["meta"]["process_start"] = f"boot-1:{pid}"
    return write_worker(run_dir, doc)


def _states(lines: list[str]) -> tuple[str, str]:
    """The run's "Processes" line and the role's state, e.g. ``3 processes: 1 alive, ...``."""
    role = next(ln for ln in lines if ln.startswith("TRAINER"))
    return lines[1], role[len("TRAINER  (") :].split(";")[0].rstrip(")")


def test_every_worker_stale_relative_to_the_clock(tmp_path):
    """Three open workers last wrote at +100, +101 and +102 s. Read at +110 s all are alive; at
    +191.5 s two are more than 90 s behind the clock (stale) and one is not; at +1000 s all
    three are stale, though none is behind the newest file."""
    for k, at in enumerate((100.0, 101.0, 102.0)):
        _file(tmp_path, 60 + k, 0, T0 + at, final=False)
    run = merge_run(tmp_path, with_samples=False)
    for now, alive, stale in ((110.0, 3, 0), (191.5, 1, 2), (1000.0, 0, 3)):
        lines = frame(run, None, 0.0, T0 + now, 2.0)
        head, role = _states(lines)
        assert head.startswith(f"Processes 3: {alive} alive, {stale} stale, 0 finished"), head
        assert role == f"3 processes: {alive} alive, {stale} stale, 0 finished", role
        oldest = next(ln for ln in lines if ln.startswith("TRAINER"))
        assert f"oldest write {now - 100.0:.1f}s ago (pid 60 " in oldest
        assert f"last write {now - 102.0:.1f}s - {now - 100.0:.1f}s ago" in head


def test_state_is_each_process_newest_file(tmp_path):
    """pid 51 closed a per-task profiler at +50 s and runs another (open, +100 s): alive. pid 52
    left an open file at +10 s, then closed its next one at +100 s: finished. pid 53: one open
    file at +100 s. Read at +105 s: 3 processes, 2 alive, 0 stale, 1 finished."""
    _file(tmp_path, 51, 0, T0 + 50, final=True)
    _file(tmp_path, 51, 1, T0 + 100, final=False, start_time=T0 + 50)
    _file(tmp_path, 52, 0, T0 + 10, final=False)
    _file(tmp_path, 52, 1, T0 + 100, final=True, start_time=T0 + 10)
    _file(tmp_path, 53, 0, T0 + 100, final=False)
    run = merge_run(tmp_path, with_samples=False)
    assert len(run.workers) == 5
    lines = frame(run, None, 0.0, T0 + 105, 2.0)
    head, role = _states(lines)
    assert head.startswith("Processes 3: 2 alive, 0 stale, 1 finished"), head
    assert role == "3 processes: 2 alive, 0 stale, 1 finished", role
    # at +200 s the two open processes are 100 s behind the clock: stale; pid 52 stays finished
    head, role = _states(frame(run, None, 0.0, T0 + 200, 2.0))
    assert role == "3 processes: 0 alive, 2 stale, 1 finished", role


def _cell(lines: list[str], phase: str) -> list[str]:
    return next(ln for ln in lines if ln.strip().startswith(phase + " ")).split()


def test_last_share_is_over_the_last_interval(tmp_path):
    """Two top-level phases: between the refreshes fwd grew by 200 ms and io by 10 ms, so the
    last interval's shares are 200/210 and 10/210; since start, 300/410 and 110/410."""

    def write(fwd: int, io: int) -> None:
        threads = [
            Ph(("fwd",), durations=[10 * MS] * fwd),
            Ph(("io",), durations=[10 * MS] * io),
        ]
        _file(tmp_path, 70, 0, T0 + 10 + fwd, final=False, threads=threads)

    write(10, 10)
    first = merge_run(tmp_path, with_samples=False)
    write(30, 11)
    second = merge_run(tmp_path, with_samples=False)
    lines = frame(second, snapshot(first), 2.0, T0 + 41, 2.0)
    fwd, io = _cell(lines, "fwd"), _cell(lines, "io")
    # columns: name, last time, last share, last wait%, total time, total share, total wait%
    assert (fwd[2], io[2]) == (f"{200 / 210:.0%}", f"{10 / 210:.0%}")
    assert (fwd[5], io[5]) == (f"{300 / 410:.0%}", f"{110 / 410:.0%}")
