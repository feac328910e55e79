"""What `lineprofiler run` costs a child process it follows, side by side in one run.

    python benchmarks/bench_follow.py [--json] [--rounds N]

Each child is a fresh `python -c ...` started with the follow environment of a live
``_follow.Follow`` (what ``lineprofiler run`` sets up) and, interleaved, without it; best of
N rounds of its wall time and of its CPU time (user + system, from wait4: steadier on a busy
machine, but blind to sleeps), start-up included:
  * start-up only (``pass``);
  * out-of-project work: a json.dumps loop (C-heavy) and a pure-Python call-heavy function
    defined in a file outside the project (the worst case for a 3.11 trace function).
A followed process that never runs code in scope should cost nothing measurable (ratio ~1.00).

Then the per-line cost a followed child pays: a child running an in-project tight loop times it
itself (perf_counter, best of several runs, start-up excluded), followed and not; the added ns
per line event is compared with the same loop traced in this process by a LineProfiler.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

from lineprofiler import LineProfiler, _core
from lineprofiler.line import _follow

LIB = """
def fib(n):
    if n < 2:
        return n
    return fib(n - 1) + fib(n - 2)


def loop(n):
    total = 0
    for i in range(n):
        total += i
    return total
"""

LOOP_N = 20_000
INNER_RUNS = 15

# The in-project child: times loop(LOOP_N) itself and prints the best run in ns.
TIMED = f"""
import time
import work

best = None
for _ in range({INNER_RUNS}):
    t0 = time.perf_counter_ns()
    work.loop({LOOP_N})
    t = time.perf_counter_ns() - t0
    best = t if best is None else min(best, t)
print(best)
"""


def _workloads(elsewhere: Path) -> dict[str, str]:
    return {
        "start-up only (pass)": "pass",
        "json.dumps x 20000": (
            "import json\nfor _ in range(20000):\n    json.dumps({'a': [1, 2, 3]})\n"
        ),
        "out-of-project fib(22)": (
            f"import sys\nsys.path.insert(0, {str(elsewhere)!r})\nimport lib\nlib.fib(22)\n"
        ),
    }


def _run(code: str, env: dict[str, str], cwd: Path | None = None) -> tuple[int, int, str]:
    """(wall ns, CPU ns (user + system) of the child, its stdout)."""
    t0 = time.perf_counter_ns()
    proc = subprocess.Popen(
        [sys.executable, "-c", code], env=env, cwd=cwd, stdout=subprocess.PIPE, text=True
    )
    out = proc.stdout.read()
    _pid, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter_ns() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    proc.stdout.close()
    if proc.returncode != 0:
        raise RuntimeError(f"child exited {proc.returncode}: {code!r}")
    return wall, int((usage.ru_utime + usage.ru_stime) * 1e9), out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--json", action="store_true", help="print the results as JSON")
    ap.add_argument("--rounds", type=int, default=12)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "proj"
        (root / ".git").mkdir(parents=True)
        (root / "work.py").write_text(textwrap.dedent(LIB))
        elsewhere = Path(tmp) / "elsewhere"
        elsewhere.mkdir()
        (elsewhere / "lib.py").write_text(textwrap.dedent(LIB))
        profiler = LineProfiler(root)
        plain_env = dict(os.environ)
        follow = _follow.Follow(profiler)
        followed_env = dict(os.environ)
        try:
            results = _measure(args.rounds, root, elsewhere, plain_env, followed_env)
        finally:
            follow.collect()  # restores the environment
        results["per_line"]["in_process_ns"] = _in_process_ns_per_event(root, args.rounds)
        pl = results["per_line"]
        pl["child_vs_in_process"] = pl["child_ns"] / pl["in_process_ns"]
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    print(f"Python {results['python']} ({results['mechanism']})")
    print(
        f"\n{'child process (best of rounds)':<26}{'wall: not followed':>20}{'followed':>10}"
        f"{'ratio':>8}{'CPU: not followed':>19}{'followed':>10}{'ratio':>8}"
    )
    for name, r in results["children"].items():
        print(
            f"{name:<26}{r['plain_ns'] / 1e6:>17.1f} ms{r['followed_ns'] / 1e6:>7.1f} ms"
            f"{r['ratio']:>7.2f}x{r['plain_cpu_ns'] / 1e6:>16.1f} ms"
            f"{r['followed_cpu_ns'] / 1e6:>7.1f} ms{r['cpu_ratio']:>7.2f}x"
        )
    print(
        f"\nadded ns per traced line event, loop({LOOP_N}): in this process "
        f"{pl['in_process_ns']:.1f}, in a followed child {pl['child_ns']:.1f} "
        f"({pl['child_vs_in_process']:.2f}x)"
    )
    return 0


def _measure(rounds, root, elsewhere, plain_env, followed_env) -> dict:
    workloads = _workloads(elsewhere)
    best: dict[tuple[str, str, str], int] = {}
    envs = {"plain": plain_env, "followed": followed_env}
    for _ in range(rounds):
        for name, code in workloads.items():
            for variant, env in envs.items():
                wall, cpu, _out = _run(code, env)
                for clock, t in (("wall", wall), ("cpu", cpu)):
                    key = (name, variant, clock)
                    best[key] = min(best.get(key, t), t)
    children = {
        name: {
            "plain_ns": best[(name, "plain", "wall")],
            "followed_ns": best[(name, "followed", "wall")],
            "ratio": best[(name, "followed", "wall")] / best[(name, "plain", "wall")],
            "plain_cpu_ns": best[(name, "plain", "cpu")],
            "followed_cpu_ns": best[(name, "followed", "cpu")],
            "cpu_ratio": best[(name, "followed", "cpu")] / best[(name, "plain", "cpu")],
        }
        for name in workloads
    }
    # per-line cost in a followed child (its own timing of the loop, start-up excluded)
    inner: dict[str, int] = {}
    for _ in range(max(3, rounds // 3)):
        for variant, env in envs.items():
            _wall, _cpu, out = _run(TIMED, env, cwd=root)
            inner[variant] = min(inner.get(variant, 1 << 62), int(out.split()[-1]))
    events = 2 * LOOP_N + 3  # the `for` line n+1 times, the body n times, the first and last
    return {
        "python": sys.version.split()[0],
        "mechanism": _core.LINE_TRACER_MECHANISM,
        "children": children,
        "per_line": {
            "child_plain_ns": inner["plain"],
            "child_traced_ns": inner["followed"],
            "child_ns": (inner["followed"] - inner["plain"]) / events,
        },
    }


def _in_process_ns_per_event(root: Path, rounds: int) -> float:
    """ns added per line event to loop(LOOP_N) traced by a LineProfiler in this process."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_follow_work", root / "work.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    profiler = LineProfiler(root)
    plain = traced = None
    events = 0
    for _ in range(max(3, rounds // 3) * INNER_RUNS):
        t0 = time.perf_counter_ns()
        mod.loop(LOOP_N)
        p = time.perf_counter_ns() - t0
        profiler.clear()
        with profiler:
            t0 = time.perf_counter_ns()
            mod.loop(LOOP_N)
            t = time.perf_counter_ns() - t0
        events = profiler._tracer.events[0]
        plain = p if plain is None else min(plain, p)
        traced = t if traced is None else min(traced, t)
    return (traced - plain) / max(events, 1)


if __name__ == "__main__":
    raise SystemExit(main())
