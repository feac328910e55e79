"""Cost of reading the thread's CPU time, per tier, and of a measure_cpu=True phase per tier.

    python benchmarks/bench_cpu_clock.py [--json] [--rounds N] [--audit-s S]

Side by side in one process, interleaved rounds, best round kept (see _timing.py):
  - raw read: one ThreadCpuClock.now_ns() in a C++ loop, per tier (exact, anchored, syscall),
    and time.thread_time_ns() from Python for reference;
  - `with profiler.phase("x"): pass` with measure_cpu=True for each tier, with measure_cpu=False,
    and the floor `with _core.PhaseFront()._bench_floor("x"): pass` (a with on an empty C context
    manager with ordinary C methods).
Ratios are to the floor. A tier this machine lacks is listed as unavailable, not measured.
Each profiler's recorder takes the tier probed when it was made (_core.cpu_clock_reprobe).

--audit-s S also spins S seconds reading an anchored clock and reports its self-audit: of the
wall time it extrapolated without a context switch, the share the kernel did not bill to the
thread (host pauses of the vCPU; the anchored tier's over-count of CPU time), next to the steal
/proc/stat reported meanwhile.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _timing import best_ns_per_call, table  # noqa: E402
from lineprofiler import _core  # noqa: E402
from lineprofiler.accounting import Profiler  # noqa: E402

TIERS = ("exact", "anchored", "syscall")
FLOOR = "floor: with on an empty C context manager"


def raw_read_ns(rounds: int) -> dict[str, float | None]:
    """Best-of-rounds ns per now_ns() of each tier, read in a C++ loop; None where unavailable."""
    clocks = {t: _core.ThreadCpuClock(t) for t in TIERS}
    out: dict[str, float | None] = {}
    best = {t: float("inf") for t in TIERS}
    for _ in range(rounds):
        for t, c in clocks.items():
            if c.tier == t:
                best[t] = min(best[t], c.read_cost_ns(20_000 if t == "syscall" else 200_000))
    for t in TIERS:
        out[t] = best[t] if clocks[t].tier == t else None
    return out


def _steal_ns() -> int:
    try:
        fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()
        return int(fields[8]) * (1_000_000_000 // os.sysconf("SC_CLK_TCK"))
    except (OSError, IndexError, ValueError):
        return 0


def audit(seconds: float) -> dict | None:
    """The anchored tier's self-audit over a spin of `seconds`; None where it is unavailable."""
    clock = _core.ThreadCpuClock("anchored")
    if clock.tier != "anchored":
        return None
    steal0, t0, c0 = _steal_ns(), time.perf_counter(), time.thread_time_ns()
    while time.perf_counter() - t0 < seconds:
        clock.now_ns()
    wall_ns = int((time.perf_counter() - t0) * 1e9)
    return {
        "wall_ns": wall_ns,
        "cpu_ns": time.thread_time_ns() - c0,
        "audited_ns": clock.audited_ns,
        "unbilled_ns": clock.unbilled_ns,
        "unbilled_share": clock.unbilled_ns / clock.audited_ns if clock.audited_ns else None,
        "slow_reads": clock.slow_reads,
        "proc_stat_steal_ns": _steal_ns() - steal0,
    }


def build_cases(run_dir: Path) -> tuple[dict, list[Profiler], dict[str, str]]:
    quiet = dict(snapshot_interval_s=None, sample_interval_s=None)
    opened: list[Profiler] = []
    g: dict = {
        "null": _core.PhaseFront(),  # unbound: its _bench_floor is the floor
        "thread_time_ns": time.thread_time_ns,
    }
    cases: dict[str, tuple[str, dict]] = {FLOOR: ("with null._bench_floor('x'): pass", g)}
    nocpu = Profiler(run_dir=run_dir, enabled=True, measure_cpu=False, **quiet)
    opened.append(nocpu)
    g["nocpu"] = nocpu
    cases["phase(), enabled=True, measure_cpu=False"] = ("with nocpu.phase('x'): pass", g)
    unavailable: dict[str, str] = {}
    env_mode = os.environ.get("LINEPROFILER_CPU_CLOCK", "auto")
    try:
        for tier in TIERS:
            probe = _core.cpu_clock_reprobe(tier)
            if probe["tier"] != tier:
                unavailable[tier] = probe["detail"]
                continue
            p = Profiler(run_dir=run_dir, enabled=True, measure_cpu=True, **quiet)
            opened.append(p)
            assert p._rec.cpu_clock == tier
            g[f"cpu_{tier}"] = p
            cases[f"phase(), enabled=True, measure_cpu=True, cpu clock {tier}"] = (
                f"with cpu_{tier}.phase('x'): pass",
                g,
            )
    finally:
        _core.cpu_clock_reprobe(env_mode)
    cases["time.thread_time_ns() (Python call, reference)"] = ("thread_time_ns()", g)
    return cases, opened, unavailable


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--json", action="store_true", help="print the results as JSON")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--audit-s", type=float, default=0.0, help="also run the anchored self-audit")
    args = ap.parse_args()
    probe = _core.cpu_clock_probe()
    raw = raw_read_ns(args.rounds)
    with tempfile.TemporaryDirectory() as tmp:
        cases, opened, unavailable = build_cases(Path(tmp))
        try:
            ns = best_ns_per_call(cases, rounds=args.rounds)
        finally:
            for p in opened:
                p.close()
    audited = audit(args.audit_s) if args.audit_s > 0 else None
    floor = ns[FLOOR]
    ratios = {name: v / floor for name, v in ns.items()}
    info = {
        "date": time.strftime("%Y-%m-%d"),
        "python": platform.python_version(),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        "wall_clock": _core.wall_clock_name(),
        "cpu_clock_auto": probe["tier"],
        "cpu_clock_detail": probe["detail"],
    }
    if args.json:
        print(
            json.dumps(
                {
                    "info": info,
                    "raw_read_ns": raw,
                    "ns_per_call": ns,
                    "ratio": ratios,
                    "unavailable": unavailable,
                    "anchored_audit": audited,
                },
                indent=2,
            )
        )
        return 0
    rows = [(name, v, f"{ratios[name]:.2f}x floor") for name, v in ns.items()]
    for tier in TIERS:
        v = raw[tier]
        if v is not None:
            rows.append((f"raw read, cpu clock {tier} (C++ loop)", v, ""))
    print(
        table(
            rows,
            f"thread-CPU clock cost ({info['date']}, Python {info['python']}, {info['machine']}, "
            f"wall clock {info['wall_clock']}; auto picks {info['cpu_clock_auto']}: "
            f"{info['cpu_clock_detail']})",
        )
    )
    for tier, why in unavailable.items():
        print(f"cpu clock {tier}: unavailable here ({why})")
    if audited:
        a = audited
        share = a["unbilled_share"]
        print(
            f"\nanchored self-audit over {a['wall_ns'] / 1e9:.1f} s of spinning: "
            f"{a['audited_ns'] / 1e6:.1f} ms extrapolated without a switch, of which "
            f"{a['unbilled_ns'] / 1e6:.3f} ms ({'n/a' if share is None else f'{share:.3%}'}) the "
            f"kernel did not bill; /proc/stat steal meanwhile: {a['proc_stat_steal_ns'] / 1e6:.0f} "
            f"ms; {a['slow_reads']} system calls"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
