"""Cost of a skipped sampled entry, side by side with the floor and a measured phase.

    python benchmarks/bench_sampled.py [--rounds 15] [--loops 20000] [--json]

Rows are ns per ``with ... : pass`` (enter + exit), the best of interleaved rounds in one
process, and the ratio to the floor: a ``with`` on an empty C context manager with ordinary C
methods (``_core.PhaseFront()._bench_floor``).
``phase(sample=0.01), skipped entry`` uses a stride so long (1 in 10^9) that every timed entry
is a skipped one; ``phase(sample=0.01), 1 in 100 measured`` is the mix a loop really sees.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Callable

from lineprofiler import _core
from lineprofiler.accounting import Profiler


def _loop_null(n: int) -> int:
    phase = _core.PhaseFront()._bench_floor
    t0 = time.perf_counter_ns()
    for _ in range(n):
        with phase("x"):
            pass
    return time.perf_counter_ns() - t0


def _make_loop(phase: Callable, **kw) -> Callable[[int], int]:
    if kw:
        rate = kw["sample"]

        def loop(n: int) -> int:
            t0 = time.perf_counter_ns()
            for _ in range(n):
                with phase("x", sample=rate):
                    pass
            return time.perf_counter_ns() - t0

    else:

        def loop(n: int) -> int:
            t0 = time.perf_counter_ns()
            for _ in range(n):
                with phase("x"):
                    pass
            return time.perf_counter_ns() - t0

    return loop


def _loop_empty(n: int) -> int:
    t0 = time.perf_counter_ns()
    for _ in range(n):
        pass
    return time.perf_counter_ns() - t0


def measure(rounds: int, loops: int) -> list[dict]:
    with tempfile.TemporaryDirectory() as tmp:
        kw = dict(enabled=True, snapshot_interval_s=None, sample_interval_s=None)
        cpu = Profiler(run_dir=f"{tmp}/a", measure_cpu=True, **kw)
        nocpu = Profiler(run_dir=f"{tmp}/b", measure_cpu=False, **kw)
        skipper = Profiler(run_dir=f"{tmp}/c", measure_cpu=True, **kw)
        with skipper.phase("x", sample=1e-9):  # uses up the one measured entry of the stride
            pass
        rows = [
            ("with _bench_floor('x'): pass (the floor)", _loop_null),
            ("phase(sample=0.01), skipped entry", _make_loop(skipper.phase, sample=1e-9)),
            ("phase(sample=0.01), 1 in 100 measured", _make_loop(cpu.phase, sample=0.01)),
            ("phase(), measure_cpu=False", _make_loop(nocpu.phase)),
            ("phase(), measure_cpu=True", _make_loop(cpu.phase)),
        ]
        best = {name: float("inf") for name, _ in rows}
        empty = float("inf")
        try:
            for _ in range(rounds):
                empty = min(empty, _loop_empty(loops) / loops)
                for name, fn in rows:
                    best[name] = min(best[name], fn(loops) / loops)
        finally:
            for p in (cpu, nocpu, skipper):
                p.close()
    floor = best[rows[0][0]] - empty
    return [
        {
            "row": name,
            "ns_per_call": round(best[name] - empty, 1),
            "ratio_to_floor": round((best[name] - empty) / floor, 3),
        }
        for name, _ in rows
    ]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--loops", type=int, default=20_000)
    ap.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = ap.parse_args(argv)
    rows = measure(args.rounds, args.loops)
    if args.json:
        json.dump(
            {"python": sys.version.split()[0], "clock": _core.wall_clock_name(), "rows": rows},
            sys.stdout,
            indent=2,
        )
        print()
        return 0
    print(f"{'':48}{'ns/call':>10}{'x floor':>10}")
    for r in rows:
        print(f"{r['row']:48}{r['ns_per_call']:10.0f}{r['ratio_to_floor']:10.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
