"""Interleaved, side-by-side timing: the machine is shared and noisy, so every case is measured in
the same process in alternating rounds and the best round is kept; compare ratios, not absolutes."""

from __future__ import annotations

import gc
import timeit


def calibrate(stmt: str, g: dict, target_s: float = 0.02, setup: str = "pass") -> int:
    number = 1000
    while True:
        t = timeit.Timer(stmt, setup, globals=g).timeit(number)
        if t >= target_s / 4 or number >= 10_000_000:
            return max(100, int(number * target_s / max(t, 1e-9)))
        number *= 4


def best_ns_per_call(
    cases: dict[str, tuple], rounds: int = 15, batch_s: float = 0.02
) -> dict[str, float]:
    """Best-of-rounds ns per execution of each case's statement, rounds interleaved across cases.

    A case is (stmt, globals), (stmt, globals, setup) or (stmt, globals, setup, runner); setup runs
    before each timed batch; runner(timer, number) -> seconds times a batch (default
    timer.timeit, e.g. one that runs the batch inside an asyncio task).
    """
    runners = {name: c[3] for name, c in cases.items() if len(c) > 3}
    cases = {name: (c[0], c[1], c[2] if len(c) > 2 else "pass") for name, c in cases.items()}
    numbers = {
        name: calibrate(stmt, g, target_s=batch_s, setup=setup)
        for name, (stmt, g, setup) in cases.items()
    }
    best = {name: float("inf") for name in cases}
    timers = {
        name: timeit.Timer(stmt, setup, globals=g) for name, (stmt, g, setup) in cases.items()
    }
    gc_was = gc.isenabled()
    gc.disable()
    try:
        for _ in range(rounds):
            for name, timer in timers.items():
                run = runners.get(name)
                s = run(timer, numbers[name]) if run else timer.timeit(numbers[name])
                t = s / numbers[name] * 1e9
                best[name] = min(best[name], t)
    finally:
        if gc_was:
            gc.enable()
    return best


def table(rows: list[tuple[str, float, str]], title: str) -> str:
    width = max(len(r[0]) for r in rows) + 2
    out = [title, "", f"{'case':<{width}}{'ns/call':>10}  {'ratio':>16}"]
    for name, ns, ratio in rows:
        out.append(f"{name:<{width}}{ns:>10.1f}  {ratio:>16}")
    return "\n".join(out)
