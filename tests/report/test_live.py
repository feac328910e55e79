"""``top``'s numbers (report.live.frame) against what the synthetic files were written with."""

from __future__ import annotations

from lineprofiler.report.live import frame, snapshot
from lineprofiler.report.merge import merge_run
from lineprofiler.report.units import fmt_bytes, fmt_duration
from tests.report.synth import MS, T0, Ph, big_run, worker_doc, write_worker


def _line(lines: list[str], start: str) -> str:
    return next(ln for ln in lines if ln.strip().startswith(start))


def test_last_interval_and_since_start(tmp_path):
    run_dir = big_run(tmp_path / "run", 16)
    first = merge_run(run_dir, with_samples=False)
    # a 4 s window ending at T0 + 61 holds the rows ending at T0 + 58..61: row i = 57 (read 1 MB)
    # and 58, 59 (nothing read); RSS is each process's last row, 100 MB + 1 kB x rank
    lines = frame(first, None, 0.0, T0 + 61.0, 4.0)
    assert f"disk read {fmt_bytes(16 * 1_000_000)}," in lines[2]
    # every process has finished: the last RSS is the end's, not "now"
    assert f"RSS at the end {fmt_bytes(16 * 100_000_000 + 1000 * sum(range(16)))}" in lines[2]
    assert "16 processes: 0 alive, 0 stale, 16 finished" in "\n".join(lines)

    # every process then records 50 more 2 ms entries of step/data (and 1,600 more samples)
    for w in range(16):
        back = (8 if w == 7 else 4) * MS
        doc = worker_doc(
            role="trainer", pid=30_000 + w, host=f"gpu{w // 16:03d}", rank=w,
            written_at=T0 + 62.0,
            threads=[
                Ph(("step",), dist=[(10 * MS + back, 100)], cpu=0.9, open_ns=100 * MS),
                Ph(("step", "data"), dist=[(2 * MS, 150)], cpu=0.5, counters={"samples": 4800}),
                Ph(("step", "forward"), dist=[(3 * MS, 90), (5 * MS, 10)], cpu=1.0),
                Ph(("step", "backward"), dist=[(back, 100)], cpu=1.0),
            ],
        )  # fmt: skip
        write_worker(run_dir, doc)
    second = merge_run(run_dir, with_samples=False)
    lines = frame(second, snapshot(first), 2.0, T0 + 62.5, 2.0)
    data = _line(lines, "step/data")
    # last: 16 x 50 x 2 ms; since start: 16 x 150 x 2 ms
    assert data.split()[1] == fmt_duration(16 * 50 * 2 * MS)
    assert data.split()[4] == fmt_duration(16 * 150 * 2 * MS)
    rate = _line(lines, "+ samples").split()
    assert rate[2] == f"{16 * 1600 / 2.0:,.1f}/s"  # 1,600 more per process over 2 s of wall
    assert rate[3] == f"{16 * 4800 / 62.0:,.1f}/s"  # since start: the run's 62 s runtime
    # step (the only top-level phase) moved by its entry still open: 16 x 100 ms
    step = _line(lines, "step ")
    assert step.split()[1] == fmt_duration(16 * 100 * MS)
    assert step.split()[2] == "100%"
