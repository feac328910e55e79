"""Line tracer cost, side by side with line_profiler (PyPI) in one process.

    python benchmarks/bench_line.py [--json] [--rounds N] [--hogs K] [--processes P]

Measures (best of interleaved rounds, so machine noise hits all variants alike):
  * ns added per traced line event on a tight in-project loop: this tracer vs line_profiler;
  * the cost out-of-project code pays while tracing is on (ratio to untraced), for a call-heavy
    and a loop-heavy function;
  * how far the tracer's own cost inflates the times it prints: printed total of an in-project
    workload / its untraced run time, raw and with the calibrated per-event cost subtracted;
  * an in-project line calling outside-project Python: block time traced / untraced;
  * the tight loop's printed / untraced time in P fresh processes (each calibrates on its own,
    as a user's does): median and range over the processes of each one's best block (the
    floor: never below 1.0x), and the margin on the calibrated cost that would have put the
    lowest process exactly at 1.0x, with the median there;
  * a followed child process.

``--hogs K`` runs all of it beside K busy processes started here (``while True: pass``), the
load the "under 2 CPU hogs" rows are measured under; ``--json`` gives the same numbers.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import tempfile
import textwrap
import time
from pathlib import Path

from lineprofiler import LineProfiler, _core
from lineprofiler.line import _calibrate

SOURCE = """
def loop(n):
    total = 0
    for i in range(n):
        total += i
    return total


def fib(n):
    if n < 2:
        return n
    return fib(n - 1) + fib(n - 2)


def mixed(n):
    acc = 0
    for i in range(n):
        acc += fib(10)
        acc += loop(20)
    return acc
"""


def _load(path: Path, name: str):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(SOURCE))
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _time(fn, *args) -> int:
    t0 = time.perf_counter_ns()
    fn(*args)
    return time.perf_counter_ns() - t0


class Variants:
    """Runs fn(*args) untraced, under this tracer, and under line_profiler."""

    def __init__(self, root: Path, lp_functions):
        self.ours = LineProfiler(root)
        self.lp = None
        try:
            import line_profiler

            self.lp = line_profiler.LineProfiler(*lp_functions)
        except ImportError:
            pass

    def plain(self, fn, *args):
        return _time(fn, *args)

    def traced(self, fn, *args):
        self.ours.clear()
        self.ours.enable()
        try:
            return _time(fn, *args)
        finally:
            self.ours.disable()

    def noop(self, fn, *args):
        """A C trace function that does nothing: the floor of any PyEval_SetTrace tracer."""
        _core._noop_trace(True)
        try:
            return _time(fn, *args)
        finally:
            _core._noop_trace(False)

    def line_profiler(self, fn, *args):
        if self.lp is None:
            return None
        self.lp.enable_by_count()
        try:
            return _time(fn, *args)
        finally:
            self.lp.disable_by_count()


def best_of(rounds, variants: dict) -> dict:
    best = {k: None for k in variants}
    for _ in range(rounds):
        for k, run in variants.items():
            t = run()
            if t is not None and (best[k] is None or t < best[k]):
                best[k] = t
    return best


# One fresh process's blocks of the tight loop of tests/line/test_truth.py (argv: root, blocks,
# 1 to subtract the calibrated cost as a user's profiler does, 0 for raw times): the untraced
# time, the fastest of the runs before the blocks (12 before the first, 3 before each other), the
# SAFETY in use, and per block its printed total, its raw total, the line cost subtracted, its
# line events and the loop's callbacks weighted as the subtraction weighs them.
TIGHT_CHILD = """
import json, sys, time
from pathlib import Path
from lineprofiler import LineProfiler
from lineprofiler.line import _calibrate

root = Path(sys.argv[1])
sys.path.insert(0, str(root))
import tight as mod

plain, blocks = [], []
for run in range(int(sys.argv[2])):
    # 3.12 leaves a code object that ran under sys.monitoring ~1.2x slower for good: only runs
    # before the first block time the loop as it runs unprofiled, so they are most of them
    for _ in range(12 if run == 0 else 3):
        t0 = time.perf_counter_ns()
        mod.loop(5000)
        plain.append(time.perf_counter_ns() - t0)
    profiler = LineProfiler(root, subtract_overhead=sys.argv[3] == "1")
    with profiler:
        mod.loop(5000)
    rep = profiler.report()
    (fs,) = [f for f in rep.functions.values() if f.name == "loop"]
    used = rep.overhead_ns_per_event["line"] if profiler.subtract_overhead else 0.0
    # the loop's callbacks, as the subtraction counts them (a call is two)
    rows = [r for code, rs in profiler._tracer.results() if code is mod.loop.__code__ for r in rs]
    weighted = sum(r[3] + 2 * r[4] + 2 * r[5] for r in rows)
    blocks.append((fs.total_time_ns, fs.raw_total_time_ns, used, rep.events["lines"], weighted))
print(json.dumps({"plain_ns": min(plain), "blocks": blocks, "safety": _calibrate.SAFETY}))
"""


def _run_child(root: Path, blocks: int, subtract: bool) -> tuple[int, list, float]:
    """TIGHT_CHILD in a fresh process: (its untraced time, its blocks, the SAFETY in use)."""
    import subprocess

    out = subprocess.run(
        [sys.executable, "-c", TIGHT_CHILD, str(root), str(blocks), "1" if subtract else "0"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    got = json.loads(out.strip().splitlines()[-1])
    return got["plain_ns"], got["blocks"], got["safety"]


def _floor_in_processes(root: Path, processes: int, blocks: int) -> dict:
    """The floor any subtraction has beside this load: the tracer's cost per line event varies
    from block to block within one process, and a per-event cost that keeps every block of a
    process at or above its untraced time can be at most its cheapest block's. With exactly that
    (an oracle no calibration can beat), the process's median block prints this much."""
    import statistics

    cheapest_vs_median: list[float] = []
    median_block: list[float] = []
    cost: list[float] = []
    own: list[float] = []
    for _ in range(processes):
        plain, got, _safety = _run_child(root, blocks, subtract=False)
        costs = [(raw - plain) / events for _printed, raw, _used, events, _n in got]
        events = got[0][3]
        mid = statistics.median(costs)
        cheapest_vs_median.append(min(costs) / mid)
        median_block.append(1.0 + (mid - min(costs)) * events / plain)
        cost.append(mid)
        own.append(plain / events)
    return {
        "processes": processes,
        "blocks_per_process": blocks,
        "tracer_ns_per_event_median": statistics.median(cost),
        "untraced_ns_per_event_median": statistics.median(own),
        "cheapest_vs_median_block_cost": statistics.median(cheapest_vs_median),
        "cheapest_vs_median_block_cost_range": [min(cheapest_vs_median), max(cheapest_vs_median)],
        "median_block_printed_at_floor": statistics.median(median_block),
        "median_block_printed_at_floor_range": [min(median_block), max(median_block)],
    }


def _tight_in_processes(root: Path, processes: int, blocks: int) -> dict:
    """printed / untraced time of a tight loop, over `blocks` blocks in each of `processes` fresh
    processes (each process calibrates on its own): the median and range over the processes of
    each one's best block (its calibration's over-statement: a block a preemption hit is
    slower, not truer; under two hogs a 1 ms block is hit often), the smallest being the floor."""
    import statistics

    ratios: list[float] = []
    per_process: list[float] = []  # each process's best block (one a preemption missed)
    estimate: list[float] = []  # in that block: the line cost subtracted / the cost it paid
    runs: list[tuple[int, list]] = []
    safety = 1.0
    for _ in range(processes):
        plain, got, safety = _run_child(root, blocks, subtract=True)
        runs.append((plain, got))
        # per block: printed / untraced, and the line cost subtracted / what the block's
        # recorded intervals paid per line event ((their raw sum - the untraced run) / events)
        per_block = [
            (printed / plain, used / max(1e-9, (raw - plain) / max(1, events)))
            for printed, raw, used, events, _n in got
        ]
        ratios += [r for r, _ in per_block]
        best = min(per_block)
        per_process.append(best[0])
        estimate.append(best[1])
    return {
        "processes": processes,
        "blocks": len(ratios),
        "median": statistics.median(per_process),
        "min": min(per_process),
        "max": max(per_process),
        "process_best": sorted(per_process),
        "all_blocks_median": statistics.median(ratios),
        # the calibration's line cost (as subtracted) / what those blocks paid per line event:
        # below 1.0 is the over-statement's cause (the estimate is a lower bound by design)
        "estimate_vs_block_cost_median": statistics.median(estimate),
        "estimate_vs_block_cost_range": [min(estimate), max(estimate)],
        "one_margin": _one_margin(runs, safety),
    }


def _one_margin(runs: list[tuple[int, list]], safety: float) -> dict:
    """What any single margin (the calibration's SAFETY) could have done in this run: the one
    that puts the lowest process's best block exactly at its untraced time, and the median over
    the processes there. Each block's calibrated cost before the margin is its subtracted cost /
    SAFETY (capped() scales by the same margin); printed times are recomputed unclamped,
    (raw - margin x cost x the loop's weighted callbacks) / untraced. A median above the target
    here means the processes' calibrations miss their blocks' cost by more than the target
    leaves room for, whatever the margin."""
    import statistics

    def best_blocks(margin: float) -> list[float]:
        return [
            min((raw - margin * used / safety * n) / plain for _p, raw, used, _e, n in got)
            for plain, got in runs
        ]

    low, high = 0.0, 3.0  # the lowest process falls as the margin grows: bisect for 1.0
    for _ in range(40):
        mid = (low + high) / 2
        if min(best_blocks(mid)) >= 1.0:
            low = mid
        else:
            high = mid
    return {
        "safety_in_use": safety,
        "median_in_use_unclamped": statistics.median(best_blocks(safety)),
        "margin_for_lowest_at_1": low,
        "median_at_that_margin": statistics.median(best_blocks(low)),
    }


def _start_hogs(k: int) -> list:
    import subprocess

    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(k)]


def _stop_hogs(hogs: list) -> None:
    for h in hogs:
        h.kill()
    for h in hogs:
        h.wait()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--json", action="store_true", help="print the results as JSON")
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--hogs", type=int, default=0, help="run beside K busy processes")
    ap.add_argument(
        "--processes", type=int, default=8, help="fresh processes for the tight-loop truth rows"
    )
    args = ap.parse_args(argv)
    import signal

    # ended by a signal (a timeout's SIGTERM), the hogs still go with us
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    hogs = _start_hogs(args.hogs)
    try:
        return _main(args)
    finally:
        _stop_hogs(hogs)


def _main(args) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "proj"
        (root / ".git").mkdir(parents=True)
        inside = _load(root / "work.py", "bench_inside")
        outside = _load(Path(tmp) / "elsewhere" / "lib.py", "bench_outside")
        v = Variants(root, [inside.loop, inside.fib, inside.mixed])
        overhead = _calibrate.measure()
        results: dict = {
            "python": sys.version.split()[0],
            "hogs": args.hogs,
            "loadavg_at_start": os.getloadavg()[0],
            "mechanism": _core.LINE_TRACER_MECHANISM,
            "clock": _core.wall_clock_name(),
            "calibrated_ns": {
                "line": overhead.line_ns,
                "call": overhead.call_ns,
                "untraced_call": overhead.foreign_ns,
            },
        }

        # 1. ns per traced line event on a tight loop
        n = 20_000
        v.traced(inside.loop, 1000)
        best = best_of(
            args.rounds,
            {
                "plain": lambda: v.plain(inside.loop, n),
                "noop_c_tracer": lambda: v.noop(inside.loop, n),
                "ours": lambda: v.traced(inside.loop, n),
                "line_profiler": lambda: v.line_profiler(inside.loop, n),
            },
        )
        v.traced(inside.loop, n)
        line_events = v.ours._tracer.events[0]
        per_event = {
            k: (best[k] - best["plain"]) / line_events
            for k in ("noop_c_tracer", "ours", "line_profiler")
            if best[k] is not None
        }
        results["tight_loop"] = {
            "line_events": line_events,
            "untraced_ns_per_event": best["plain"] / line_events,
            "added_ns_per_event": per_event,
        }

        # 2. out-of-project code while tracing is on
        out_cases = {
            "call_heavy fib(18)": (outside.fib, 18),
            "loop_heavy loop(20000)": (outside.loop, 20_000),
        }
        results["out_of_project"] = {}
        for label, (fn, arg) in out_cases.items():
            v.traced(fn, arg)  # first events at each location (3.12: DISABLE)
            plain = traced = noop = None
            for _ in range(args.rounds):  # blocks of runs: tracing stays on within a block
                p = min(v.plain(fn, arg) for _ in range(5))
                v.ours.enable()
                try:
                    t = min(_time(fn, arg) for _ in range(5))
                finally:
                    v.ours.disable()
                _core._noop_trace(True)
                try:
                    z = min(_time(fn, arg) for _ in range(5))
                finally:
                    _core._noop_trace(False)
                plain = p if plain is None else min(plain, p)
                traced = t if traced is None else min(traced, t)
                noop = z if noop is None else min(noop, z)
            results["out_of_project"][label] = {
                "ours": traced / plain,
                "noop_c_tracer": noop / plain,
            }

        # 3. inflation of printed totals (best of rounds for every quantity)
        m = 30

        def mixed_totals():
            v.traced(inside.mixed, m)
            (fs,) = [f for f in v.ours.get_stats().values() if f.name == "mixed"]
            return fs.total_time_ns, fs.raw_total_time_ns

        def loop_totals():
            v.traced(inside.loop, 20_000)
            (fs,) = [f for f in v.ours.get_stats().values() if f.name == "loop"]
            return fs.total_time_ns, fs.raw_total_time_ns

        def lp_total():
            if v.lp is None:
                return None
            v.lp.enable_by_count()
            try:
                inside.mixed(m)
            finally:
                v.lp.disable_by_count()
            st = v.lp.get_stats()
            total = sum(
                t
                for (_f, _l, name), rows in st.timings.items()
                if name == "mixed"
                for _ln, _h, t in rows
            )
            return total * st.unit * 1e9

        best = dict.fromkeys(
            ["plain", "ours_run", "sub", "raw", "lp", "loop_plain", "loop_sub", "loop_raw"]
        )
        for _ in range(args.rounds):
            sample = {
                "plain": v.plain(inside.mixed, m),
                "ours_run": v.traced(inside.mixed, m),
            }
            sample["sub"], sample["raw"] = mixed_totals()
            sample["loop_plain"] = v.plain(inside.loop, 20_000)
            sample["loop_sub"], sample["loop_raw"] = loop_totals()
            for k, val in sample.items():
                if best[k] is None or val < best[k]:
                    best[k] = val
        if v.lp is not None:
            # line_profiler accumulates; one run after a fresh profiler is its printed total
            import line_profiler

            lp_best = None
            for _ in range(max(3, args.rounds // 3)):
                v.lp = line_profiler.LineProfiler(inside.loop, inside.fib, inside.mixed)
                val = lp_total()
                lp_best = val if lp_best is None else min(lp_best, val)
            best["lp"] = lp_best
        results["printed_vs_untraced"] = {
            "untraced_ns": best["plain"],
            "traced_run_ns": best["ours_run"],
            "ours_raw": best["raw"] / best["plain"],
            "ours_subtracted": best["sub"] / best["plain"],
            "line_profiler": None if best["lp"] is None else best["lp"] / best["plain"],
            "loop_raw": best["loop_raw"] / best["loop_plain"],
            "loop_subtracted": best["loop_sub"] / best["loop_plain"],
        }

        # 2b. an in-project line calling outside-project Python (the loop-heavy function)
        results["line_calling_outside"] = _line_calling_outside(v, inside, outside, args.rounds)

        # 3b. the tight loop's printed / untraced time in fresh processes
        (root / "tight.py").write_text(
            "def loop(n):\n    total = 0\n    for i in range(n):\n        total += i\n"
            "    return total\n"
        )
        results["tight_loop_processes"] = _tight_in_processes(root, args.processes, 6)
        # 3c. the floor for a typical block (3b's all-blocks median): the tracer's cost varies by block
        results["floor_processes"] = _floor_in_processes(root, args.processes, 12)

        # 4. a followed child process that traces nothing (lineprofiler run's children)
        results["followed_child"] = _followed_child(v.ours, max(5, args.rounds // 3))

    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    r = results
    print(f"Python {r['python']} ({r['mechanism']}, clock {r['clock']})")
    c = r["calibrated_ns"]
    print(
        f"calibrated tracer cost: {c['line']:.0f} ns/line event, {c['call']:.0f} ns/traced call, "
        f"{c['untraced_call']:.0f} ns/untraced call"
    )
    t = r["tight_loop"]
    print(
        f"\n1. tight in-project loop ({t['line_events']} line events; untraced "
        f"{t['untraced_ns_per_event']:.1f} ns per line)"
    )
    print(f"   {'tracer':<16}{'added ns/line event':>22}{'x ours':>10}")
    ours = t["added_ns_per_event"]["ours"]
    for k, val in t["added_ns_per_event"].items():
        print(f"   {k:<16}{val:>22.1f}{val / ours:>10.2f}")
    print("\n2. out-of-project code while tracing (time traced / untraced)")
    print(f"   {'workload':<28}{'ours':>8}{'no-op C tracer':>16}")
    for k, val in r["out_of_project"].items():
        print(f"   {k:<28}{val['ours']:>7.2f}x{val['noop_c_tracer']:>15.2f}x")
    p = r["printed_vs_untraced"]
    print(
        f"\n3. printed total / untraced run time of an in-project workload "
        f"(untraced {p['untraced_ns'] / 1e6:.2f} ms, traced run "
        f"{p['traced_run_ns'] / p['untraced_ns']:.2f}x)"
    )
    print(f"   ours, raw times             {p['ours_raw']:>8.2f}x")
    print(f"   ours, calibrated subtracted {p['ours_subtracted']:>8.2f}x")
    if p["line_profiler"] is not None:
        print(f"   line_profiler               {p['line_profiler']:>8.2f}x")
    print("   tight loop(20000), printed total / untraced run time:")
    print(f"   ours, raw times             {p['loop_raw']:>8.2f}x")
    print(f"   ours, calibrated subtracted {p['loop_subtracted']:>8.2f}x")
    o = r["line_calling_outside"]
    print(
        f"\n2b. an in-project line calling outside-project Python (loop(2000)), block time "
        f"traced / untraced: {o['ratio']:.2f}x"
    )
    q = r["tight_loop_processes"]
    print(
        f"\n3b. tight loop(5000), printed / untraced, best of {q['blocks'] // q['processes']} blocks "
        f"in each of {q['processes']} fresh processes: median {q['median']:.2f}x "
        f"(min {q['min']:.2f}x, max {q['max']:.2f}x; all blocks' median "
        f"{q['all_blocks_median']:.2f}x)"
    )
    lo, hi = q["estimate_vs_block_cost_range"]
    print(
        f"    the line cost subtracted / what those blocks' intervals paid per line event: median "
        f"{q['estimate_vs_block_cost_median']:.2f} ({lo:.2f}-{hi:.2f})"
    )
    om = q["one_margin"]
    print(
        f"    one margin for every process (SAFETY {om['safety_in_use']:.2f} in use: median "
        f"{om['median_in_use_unclamped']:.2f}x unclamped): {om['margin_for_lowest_at_1']:.2f} puts "
        f"the lowest process at 1.00x and the median at {om['median_at_that_margin']:.2f}x"
    )
    fl = r["floor_processes"]
    lo, hi = fl["median_block_printed_at_floor_range"]
    print(
        f"\n3c. the floor for a typical block (3b's all-blocks median): in {fl['processes']} fresh processes of "
        f"{fl['blocks_per_process']} raw blocks each (tracer {fl['tracer_ns_per_event_median']:.0f} "
        f"ns per line event, the loop's own {fl['untraced_ns_per_event_median']:.0f} ns), the "
        f"cheapest block's cost per event / the median block's: "
        f"{fl['cheapest_vs_median_block_cost']:.2f}; subtracting exactly the cheapest block's "
        f"(the most that keeps every block at or above its untraced time), the median block "
        f"prints {fl['median_block_printed_at_floor']:.2f}x ({lo:.2f}-{hi:.2f}x)"
    )
    f = r["followed_child"]
    print(
        f"\n4. a Python child doing out-of-project work, followed / not followed "
        f"(not followed: {f['plain_ns'] / 1e6:.1f} ms)    {f['ratio']:>6.2f}x"
    )
    return 0


def _line_calling_outside(v, inside, outside, rounds: int) -> dict:
    """Best time of an in-project function whose one line calls outside-project Python (a loop
    of 2000 iterations), traced / untraced."""
    src = "def call_out(f, n):\n    return f(n)\n"
    ns: dict = {}
    exec(compile(src, inside.__file__, "exec"), ns)  # noqa: S102 - in-project code
    call_out = ns["call_out"]
    fn = outside.loop
    v.traced(call_out, fn, 2000)
    plain = traced = None
    for _ in range(rounds):
        p = min(v.plain(call_out, fn, 2000) for _ in range(5))
        t = min(v.traced(call_out, fn, 2000) for _ in range(5))
        plain = p if plain is None else min(plain, p)
        traced = t if traced is None else min(traced, t)
    return {"untraced_ns": plain, "traced_ns": traced, "ratio": traced / plain}


CHILD = "import json\nfor _ in range(20000):\n    json.dumps({'a': [1, 2, 3]})\n"


def _followed_child(profiler, rounds: int) -> dict:
    """Best run time of a child process started with lineprofiler run's follow environment,
    against the same child without it (start-up included)."""
    import os
    import subprocess

    from lineprofiler.line import _follow

    plain_env = dict(os.environ)
    follow = _follow.Follow(profiler)
    followed_env = dict(os.environ)
    try:
        best = {"plain": None, "followed": None}
        for _ in range(rounds):
            for name, env in (("plain", plain_env), ("followed", followed_env)):
                t0 = time.perf_counter_ns()
                subprocess.run([sys.executable, "-c", CHILD], env=env, check=True)
                t = time.perf_counter_ns() - t0
                best[name] = t if best[name] is None else min(best[name], t)
    finally:
        follow.collect()
    return {
        "plain_ns": best["plain"],
        "followed_ns": best["followed"],
        "ratio": best["followed"] / best["plain"],
    }


if __name__ == "__main__":
    raise SystemExit(main())
