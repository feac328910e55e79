"""``top``'s "Last Ns" line (``report.timeline.recent``) against sums the test makes itself over
the rows it wrote: the window's rows whose I/O flag is set, and each process's last valid RSS,
whether the rows' times rise (the fast path: bisection and C-level sums) or a clock stepped back
(row by row)."""

from __future__ import annotations

import random

from lineprofiler import _core
from lineprofiler.report.merge import merge_run
from lineprofiler.report.timeline import recent
from tests.report.synth import MS, T0, Ph, S, worker_doc, write_samples, write_worker

F_IO = _core.SAMPLE_FLAGS["io"]
F_RSS = _core.SAMPLE_FLAGS["rss"]


def _rows(rng: random.Random, rising: bool) -> list[dict[str, int]]:
    times = [int((T0 + 1 + i) * S) for i in range(40)]
    if not rising:  # the wall clock stepped back twice
        times[25:] = [t - 7 * S for t in times[25:]]
        times[33:] = [t - 3 * S for t in times[33:]]
    rows = []
    for t in times:
        flags = (F_IO if rng.random() < 0.7 else 0) | (F_RSS if rng.random() < 0.8 else 0)
        rows.append(
            {
                "time_unix_ns": t,
                "dt_ns": S,
                "flags": flags,
                "read_bytes": rng.randrange(0, 5_000_000),
                "write_bytes": rng.randrange(0, 3_000_000),
                "rss_bytes": rng.choice([-1, rng.randrange(1, 1 << 34)]),
            }
        )
    if rng.random() < 0.5:  # the last row without a (valid) RSS: an earlier one is the latest
        rows[-1]["flags"] &= ~F_RSS
    return rows


def test_recent_sums_the_window_rows_and_takes_the_last_rss(tmp_path) -> None:
    rng = random.Random(35)
    run_dir = tmp_path / "run"
    written = []
    for w in range(12):
        doc = worker_doc(
            role="trainer",
            pid=40_000 + w,
            host="n0",
            rank=w,
            written_at=T0 + 45.0,
            threads=[Ph(("step",), dist=[(10 * MS, 10)], cpu=0.5)],
        )
        path = write_worker(run_dir, doc)
        rows = _rows(rng, rising=w % 3 != 0)
        doc["samples"] = write_samples(path, 40_000 + w, rows)
        write_worker(run_dir, doc)
        written.append(rows)
    run = merge_run(run_dir, with_samples=False)
    windows = (
        (5.0, T0 + 41.0),
        (12.0, T0 + 30.5),
        (12.0, T0 + 37.0),
        (3.0, T0 + 39.0),
        (60.0, T0 + 50),
    )
    for window_s, now in windows:  # (12 s at T0 + 37: a stepped-back tail straddles the start)
        now_ns = int(now * S)
        lo = now_ns - int(window_s * 1e9)
        # the rows recent() reads: the file's last window / interval + 2 (every row here: <= 62)
        tail = int(window_s * 1e9 // S) + 2
        read = write = rss = 0
        for rows in written:
            last = rows[-tail:]
            for r in last:
                if r["time_unix_ns"] > lo and r["flags"] & F_IO:
                    read += r["read_bytes"]
                    write += r["write_bytes"]
            valid = [r["rss_bytes"] for r in last if r["flags"] & F_RSS and r["rss_bytes"] >= 0]
            rss += valid[-1] if valid else 0
        got = recent(run, window_s, now_ns)
        assert got is not None and got.workers == 12
        assert (got.read_bytes, got.write_bytes, got.rss_bytes) == (read, write, rss), window_s
        assert read > 0 and write > 0  # the window holds flagged rows: a sum, not an empty one
