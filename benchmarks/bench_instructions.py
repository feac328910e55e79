"""Instructions per call of the hot paths, counted by valgrind: figures that other load cannot move.

    python benchmarks/bench_instructions.py [--json] [--repeats 2] [--calls 200000] [--no-native]
    python benchmarks/bench_instructions.py --merge [--against DIR] [--json]

Several rows of bench_accounting.py differ by a few ns (`lines=` set for another phase against
the same phase without it, accounting.phase() over profiler.phase(), count() over an empty C
call), and on the shared 2-core guest a row moves by more than that between two runs of one build:
where the code and the objects land in memory, what else runs. The instructions a call executes
do not move. Each case here runs in its own interpreter under
`valgrind --tool=cachegrind --cache-sim=no`, once with LO calls and once with LO + CALLS calls in
bench_accounting's own timeit loop (the same statements and objects, built by its build_cases);
(Ir(LO + CALLS) - Ir(LO)) / CALLS is one call with its loop step, and the empty loop's
(`pass`) is subtracted. Everything else the interpreter does (start-up, imports, building the
profilers) is the same in both runs and cancels. The C++ rows take bench_native.py's loops
(examples/native/extension, built once) the same way.

An instruction is not a unit of time: a TSC read is one instruction and costs 10-25 ns in a
virtual machine, a cache miss costs more than a hundred adds. So this table shows what work a
path adds (0 instructions is 0 ns, whatever the timing noise), and bench_accounting.py and
bench_native.py remain the figures for time. --repeats runs each case again (PYTHONHASHSEED=0):
the spread between repeats is printed.

--merge counts one `merge_run(run, with_samples=False, jobs=1)` instead, on bench_merge.py's
tree64 and flat1024 runs ((Ir of three merges - Ir of one) / 2), for this tree and, with
--against DIR (a directory holding another build's `lineprofiler` package, e.g. from
`pip install --no-deps --target DIR <tree>`), for that one too: a before/after of the merge that
load cannot move (the kernel's side of each syscall is not counted).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
import timeit
from pathlib import Path

HERE = Path(__file__).resolve().parent
LO = 20_000

# bench_accounting.py's cases counted here, with the empty loop they are measured over.
PY_CASES = [
    "floor: with on an empty C context manager",
    "floor: empty C method call, two arguments",
    "phase(), enabled=False",
    "phase(), enabled=True, measure_cpu=False",
    "phase(), measure_cpu=False, lines= set for another phase",
    "phase(), measure_cpu=False, a second profiler alike (control)",
    "accounting.phase(), installed, measure_cpu=False",
    "profiler.phase() of that installed profiler",
    "count()",
    "accounting.count(), nothing installed",
    "accounting.phase(), nothing installed",
]
EMPTY_LOOP = "the empty loop (pass)"
# bench_native.py's C++ loops: name -> (kind of ext.bench, a profiler installed).
NATIVE_CASES = {
    "C++: empty iteration": ("empty", True),
    "C++: two clock reads": ("clock_pair", True),
    "C++: LP_PHASE, installed": ("phase", True),
    "C++: LP_COUNT, installed": ("count", True),
    "C++: LP_PHASE, nothing installed": ("phase", False),
}

# (label, case, base, target): a difference or a ratio of two cases' instructions.
DELTAS = [
    (
        "lines= set for another phase - the same phase without",
        "phase(), measure_cpu=False, lines= set for another phase",
        "phase(), enabled=True, measure_cpu=False",
        "within 2 ns (issue 32)",
    ),
    (
        "a second profiler alike (control) - the same phase",
        "phase(), measure_cpu=False, a second profiler alike (control)",
        "phase(), enabled=True, measure_cpu=False",
        "0",
    ),
    (
        "accounting.phase(), installed - profiler.phase()",
        "accounting.phase(), installed, measure_cpu=False",
        "profiler.phase() of that installed profiler",
        "<= +5 ns (issue 35)",
    ),
    (
        "LP_PHASE, installed - two clock reads (the bookkeeping)",
        "C++: LP_PHASE, installed",
        "C++: two clock reads",
        "",
    ),
]
RATIOS = [
    (
        "count() / an empty two-argument C call",
        "count()",
        "floor: empty C method call, two arguments",
        "<= 1.2x (issue 35)",
    ),
    (
        "accounting.count(), nothing installed / an empty C call",
        "accounting.count(), nothing installed",
        "floor: empty C method call, two arguments",
        "<= 1.2x (issue 35)",
    ),
    (
        "accounting.phase(), nothing installed / phase(), enabled=False",
        "accounting.phase(), nothing installed",
        "phase(), enabled=False",
        "the same cost (spec)",
    ),
]


def child_py(case: str, number: int) -> None:
    """Runs one bench_accounting case `number` times (in the parent's valgrind)."""
    sys.modules["torch"] = None  # type: ignore[assignment]  # its peer row: a minute under valgrind
    sys.path.insert(0, str(HERE))
    from bench_accounting import build_cases

    with tempfile.TemporaryDirectory() as tmp:
        cases, opened = build_cases(Path(tmp))
        try:
            if case == EMPTY_LOOP:
                stmt, g, setup = "pass", {}, "pass"
            else:
                c = cases[case]
                stmt, g, setup = c[0], c[1], c[2] if len(c) > 2 else "pass"
            timeit.Timer(stmt, setup, globals=g).timeit(number)
        finally:
            for p in opened:
                p.close()


def child_native(ext_dir: str, case: str, number: int) -> None:
    """Runs one of bench_native's C++ loops `number` times (in the parent's valgrind)."""
    from lineprofiler import _core
    from lineprofiler.accounting import Profiler

    sys.path.insert(0, ext_dir)
    import mcts_native as ext

    kind, installed = NATIVE_CASES[case]
    with tempfile.TemporaryDirectory() as tmp:
        prof = Profiler(
            run_dir=tmp,
            enabled=True,
            install=installed,
            measure_cpu=False,
            snapshot_interval_s=None,
            sample_interval_s=None,
        )
        try:
            if not installed:
                _core.set_installed(None)
            ext.bench(kind, number)
        finally:
            prof.close()


def child_merge(run: str, number: int) -> None:
    """Merges run `number` times in this process (in the parent's valgrind)."""
    from lineprofiler.report.merge import merge_run

    for _ in range(number):
        merge_run(run, with_samples=False, jobs=1)


def instructions(valgrind: str, child_args: list[str], first_path: str | None = None) -> int:
    """The instructions (Ir) one child interpreter executed under cachegrind; first_path: put
    first on its PYTHONPATH (another build's package)."""
    env = dict(os.environ, PYTHONHASHSEED="0")
    if first_path:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [first_path, env.get("PYTHONPATH")]))
    cmd = [
        valgrind,
        "--tool=cachegrind",
        "--cache-sim=no",
        "--cachegrind-out-file=/dev/null",
        sys.executable,
        str(Path(__file__).resolve()),
        "--child",
        *child_args,
    ]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True)
    m = re.search(r"I\s+refs:\s+([\d,]+)", out.stderr)
    if out.returncode != 0 or not m:
        raise SystemExit(
            f"bench_instructions: {' '.join(child_args)} failed:\n{out.stderr[-2000:]}"
        )
    return int(m.group(1).replace(",", ""))


def per_call(valgrind: str, args: list[str], calls: int) -> float:
    lo = instructions(valgrind, [*args, str(LO)])
    hi = instructions(valgrind, [*args, str(LO + calls)])
    return (hi - lo) / calls


def measure(valgrind: str, calls: int, repeats: int, native: bool) -> dict[str, list[float]]:
    """Instructions per call of every case, one figure per repeat (the empty loop subtracted)."""
    runs: dict[str, list[float]] = {}
    ext_dir = None
    tmp = tempfile.TemporaryDirectory()
    try:
        if native:
            sys.path.insert(0, str(HERE))
            from bench_native import build

            ext_dir = tmp.name
            build(Path(ext_dir))
        for _ in range(repeats):
            empty = per_call(valgrind, ["py", EMPTY_LOOP], calls)
            for case in PY_CASES:
                runs.setdefault(case, []).append(per_call(valgrind, ["py", case], calls) - empty)
            if ext_dir:
                # ext.bench's own loop is the C++ "empty iteration" row; its call is counted once
                # per run and cancels.
                for case in NATIVE_CASES:
                    v = per_call(valgrind, ["native", ext_dir, case], calls)
                    runs.setdefault(case, []).append(v)
    finally:
        tmp.cleanup()
    return runs


def measure_merge(valgrind: str, against: str | None) -> dict[str, dict[str, float]]:
    """Instructions of one merge of each of bench_merge's runs: {run: {build: instructions}}."""
    sys.path.insert(0, str(HERE))
    from bench_merge import make_runs

    builds: dict[str, str | None] = {"this tree": None}
    if against:
        builds[f"against {against}"] = against
    out: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        runs = make_runs(Path(tmp), 0)
        for name, run in runs.items():
            for build, first in builds.items():
                one = instructions(valgrind, ["merge", str(run), "1"], first)
                three = instructions(valgrind, ["merge", str(run), "3"], first)
                out.setdefault(name, {})[build] = (three - one) / 2
    return out


def print_merge(merges: dict[str, dict[str, float]], as_json: bool) -> None:
    if as_json:
        print(json.dumps({"merge_instructions": merges}, indent=2))
        return
    print("Instructions of one merge_run(with_samples=False, jobs=1), cachegrind\n")
    for run, builds in merges.items():
        base = next(iter(builds.values()))
        for build, ir in builds.items():
            ratio = f"  this tree / it: {base / ir:.3f}x" if ir is not base else ""
            print(f"{run:<10}{build:<40}{ir / 1e6:>10.1f} M{ratio}")


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--json", action="store_true", help="print the results as JSON")
    ap.add_argument("--repeats", type=int, default=2, help="runs of each case (default 2)")
    ap.add_argument("--calls", type=int, default=200_000, help="calls counted per case")
    ap.add_argument("--no-native", action="store_true", help="skip the C++ rows (no compiler)")
    ap.add_argument("--merge", action="store_true", help="count a merge_run instead")
    ap.add_argument("--against", help="with --merge: another build's package directory")
    ap.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        kind, *rest = args.child
        if kind == "py":
            child_py(rest[0], int(rest[1]))
        elif kind == "merge":
            child_merge(rest[0], int(rest[1]))
        else:
            child_native(rest[0], rest[1], int(rest[2]))
        return 0
    valgrind = shutil.which("valgrind")
    if not valgrind:
        print(
            "bench_instructions: valgrind is not installed (apt-get install valgrind)",
            file=sys.stderr,
        )
        return 2
    if args.merge:
        print_merge(measure_merge(valgrind, args.against), args.json)
        return 0
    runs = measure(valgrind, args.calls, max(1, args.repeats), not args.no_native)
    best = {name: min(v) for name, v in runs.items()}
    spread = {name: max(v) - min(v) for name, v in runs.items()}
    deltas = {label: best[case] - best[base] for label, case, base, _ in DELTAS if case in best}
    ratios = {label: best[case] / best[base] for label, case, base, _ in RATIOS}
    info = {
        "date": time.strftime("%Y-%m-%d"),
        "python": platform.python_version(),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        "calls": args.calls,
        "repeats": args.repeats,
    }
    if args.json:
        doc = {
            "info": info,
            "instructions_per_call": runs,
            "deltas": deltas,
            "ratios": ratios,
        }
        print(json.dumps(doc, indent=2))
        return 0
    width = max(len(n) for n in best) + 2
    print(
        f"Instructions per call, cachegrind ({info['date']}, Python {info['python']}, "
        f"{info['machine']}; {args.calls} calls, {args.repeats} repeat(s); empty loop subtracted)\n"
    )
    print(f"{'case':<{width}}{'instructions':>13}  {'spread':>7}")
    for name in best:
        print(f"{name:<{width}}{best[name]:>13.1f}  {spread[name]:>7.1f}")
    lw = max(len(r[0]) for r in DELTAS + RATIOS) + 2
    print()
    for label, _case, _, target in DELTAS:
        if label in deltas:
            print(f"{label:<{lw}}{deltas[label]:>+8.1f} instructions  {target}")
    for label, _, _, target in RATIOS:
        print(f"{label:<{lw}}{ratios[label]:>8.2f}x              {target}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
