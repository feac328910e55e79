"""What an enabled profiler adds to os.fork(): stopping and restarting its threads in the parent,
and in the child a new worker (reset, first file write, snapshot thread).

    python benchmarks/bench_fork.py [--rounds N] [--forks N]

Measured in one process in interleaved rounds: N forks with an enabled profiler (snapshot thread
running) against N forks with none (closed profilers leave inert handlers, as in real use). Each
fork is timed in the parent from os.fork() to waitpid() of a child that exits at once with
os._exit(0), and, separately, the parent's own fork() call alone. Best round of each.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from lineprofiler.accounting import Profiler


def forks(n: int) -> tuple[float, float]:
    """(best round trip, best parent-side fork() call) over n forks, in seconds."""
    best_trip = best_call = float("inf")
    for _ in range(n):
        t0 = time.perf_counter()
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        t1 = time.perf_counter()
        os.waitpid(pid, 0)
        t2 = time.perf_counter()
        best_trip = min(best_trip, t2 - t0)
        best_call = min(best_call, t1 - t0)
    return best_trip, best_call


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--forks", type=int, default=40)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        off = [float("inf"), float("inf")]
        on = [float("inf"), float("inf")]
        for r in range(args.rounds):
            trip, call = forks(args.forks)
            off = [min(off[0], trip), min(off[1], call)]
            p = Profiler(
                run_dir=Path(tmp) / f"run{r}",
                enabled=True,
                snapshot_interval_s=1.0,
                sample_interval_s=None,
            )
            with p.phase("work"):
                p.count("n")
            trip, call = forks(args.forks)
            on = [min(on[0], trip), min(on[1], call)]
            p.close()
    print(f"{'':34}{'no profiler':>14}{'enabled':>14}{'ratio':>8}")
    for label, a, b in (
        ("fork + child exit + waitpid", off[0], on[0]),
        ("fork() call in the parent", off[1], on[1]),
    ):
        print(f"{label:34}{a * 1e6:>11.0f} us{b * 1e6:>11.0f} us{b / a:>8.2f}")


if __name__ == "__main__":
    main()
