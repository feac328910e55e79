"""Overhead of lineprofiler.accounting per phase enter+exit, side by side with the floor and peers.

    python benchmarks/bench_accounting.py [--json] [--rounds N]

Every row of the spec's overhead table, measured in one process in interleaved rounds, as ns per
call and as a ratio to the floor: `with obj._bench_floor("x"): pass`, a METH_FASTCALL method of a C
type (lineprofiler._core.PhaseFront, the base class of Profiler) returning a C object whose
ordinary C methods __enter__/__exit__ do nothing. The package's own scopes bind __enter__/__exit__
without allocating (module/cached_method.h), so `phase(), enabled=False` is the floor of that
protocol, and an enabled row divided by it is the recorder's own cost. count() is compared with an
empty C method call taking two arguments. Peers doing a comparable job are measured where installed. The same C
call plus the two wall-clock reads an enabled entry makes shows what the clock itself costs here.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import sys
import tempfile
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _timing import best_ns_per_call, table  # noqa: E402
from lineprofiler import _core, accounting  # noqa: E402
from lineprofiler.accounting import Profiler  # noqa: E402


class PyPhaseTimer:
    """The pure-Python peer: a context manager adding perf_counter_ns deltas to a dict."""

    def __init__(self) -> None:
        self.totals: dict[str, int] = {}
        self.calls: dict[str, int] = {}

    def phase(self, name: str) -> _PyScope:
        return _PyScope(self, name)


class _PyScope:
    __slots__ = ("owner", "name", "t0")

    def __init__(self, owner: PyPhaseTimer, name: str) -> None:
        self.owner, self.name = owner, name

    def __enter__(self) -> _PyScope:
        self.t0 = time.perf_counter_ns()
        return self

    def __exit__(self, *exc: object) -> None:
        dt = time.perf_counter_ns() - self.t0
        o = self.owner
        o.totals[self.name] = o.totals.get(self.name, 0) + dt
        o.calls[self.name] = o.calls.get(self.name, 0) + 1


def in_task(timer, number: int) -> float:
    """Times a batch inside one asyncio task's step (the phase stack is the task's own)."""

    async def batch() -> float:
        return timer.timeit(number)

    return asyncio.run(batch())


def _is_call_row(name: str) -> bool:
    """A row of a call (count(), an empty C function or method): measured against the empty C
    method call, not the with floor."""
    return any(s in name for s in ("count()", "C method", "C function"))


def build_cases(run_dir: Path) -> tuple[dict, list[Profiler]]:
    quiet = dict(snapshot_interval_s=None, sample_interval_s=None)
    off = Profiler(run_dir=run_dir, enabled=False)
    on_nocpu = Profiler(run_dir=run_dir, enabled=True, measure_cpu=False, **quiet)
    on_cpu = Profiler(run_dir=run_dir, enabled=True, measure_cpu=True, **quiet)
    opened = [on_nocpu, on_cpu]
    # One profiler per thread-CPU clock tier this machine has (the probe's choice is on_cpu's).
    auto_tier = _core.cpu_clock_probe()["tier"]
    tiers: dict[str, Profiler] = {}
    for tier in ("exact", "anchored", "syscall"):
        if _core.cpu_clock_reprobe(tier)["tier"] == tier:
            tiers[tier] = Profiler(run_dir=run_dir, enabled=True, measure_cpu=True, **quiet)
            opened.append(tiers[tier])
    _core.cpu_clock_reprobe(os.environ.get("LINEPROFILER_CPU_CLOCK", "auto"))
    with on_cpu.phase("skip", sample=1e-9):  # use up the one measured entry of that stride
        pass
    # A profiler whose (this) thread stays attached to another thread's path (accounting.attach):
    # its phases nest under step/[threads]; against on_cpu's plain phase (issue 33: within 10%).
    attached = Profiler(run_dir=run_dir, enabled=True, measure_cpu=True, **quiet)
    opened.append(attached)
    attached._rec._attach(("step",))
    # A closed profiler, past the one warning its first phase() gives: the C no-ops again.
    closed = Profiler(run_dir=run_dir, enabled=True, measure_cpu=True, **quiet)
    closed.close()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        closed.phase("x")
    g = {
        "_core": _core,
        "null": _core.PhaseFront(),  # unbound: phase() returns the no-op scope
        "off": off,
        "on_nocpu": on_nocpu,
        "on_cpu": on_cpu,
        "closed": closed,
        "attached": attached,
        "accounting": accounting,
        "py": PyPhaseTimer(),
        **{f"tier_{t}": p for t, p in tiers.items()},
    }
    cases: dict[str, tuple[str, dict]] = {
        "floor: with on an empty C context manager": ("with null._bench_floor('x'): pass", g),
        "floor: empty C method call, two arguments": ("null._bench_noop('x', 1)", g),
        # count()'s calling convention (a C method taking keywords), doing nothing (issue 35)
        "empty C method call taking keywords, two arguments": ("null._bench_noop_kw('x', 1)", g),
        # accounting.count()'s own calling convention (a module attribute, METH_FASTCALL |
        # METH_KEYWORDS) doing nothing: its floor apart from the count path (issue 35)
        "empty module-level C function taking keywords, two arguments": (
            "_core._bench_noop_kw('x', 1)",
            g,
        ),
        "empty C method call plus two wall-clock reads": ("null._bench_clock_pair('x', 1)", g),
        "phase(), enabled=False": ("with off.phase('x'): pass", g),
        "accounting.phase(), nothing installed": (
            "with accounting.phase('x'): pass",
            g,
            "_core.set_installed(None)",
        ),
        # Nothing installed and no run named by the environment: the join hook is not armed, so
        # this path is one extra null check (issue 14); against the disabled scope below.
        "accounting.count(), nothing installed": (
            "accounting.count('x', 1)",
            g,
            "_core.set_installed(None)",
        ),
        "phase(), enabled=True, measure_cpu=False": ("with on_nocpu.phase('x'): pass", g),
        f"phase(), enabled=True, measure_cpu=True (cpu clock: {auto_tier})": (
            "with on_cpu.phase('x'): pass",
            g,
        ),
        "phase() in a thread attached to another's path, measure_cpu=True": (
            "with attached.phase('x'): pass",
            g,
        ),
        "phase() inside an asyncio task, measure_cpu=True": (
            "with on_cpu.phase('x'): pass",
            g,
            "pass",
            in_task,
        ),
        "phase(io=True)": ("with on_cpu.phase('io', io=True): pass", g),
        # sample=1e-9: after the stride's first (measured) entry, every timed entry is skipped.
        "phase(sample=0.01), skipped entry": ("with on_cpu.phase('skip', sample=1e-9): pass", g),
        "phase(sample=0.01), 1 in 100 measured": (
            "with on_cpu.phase('sampled', sample=0.01): pass",
            g,
        ),
        "count()": ("on_cpu.count('x', 1)", g),
        "phase() on a closed profiler, after its one warning": ("with closed.phase('x'): pass", g),
        "count() on a closed profiler, after its one warning": ("closed.count('x', 1)", g),
        **{
            f"phase(), measure_cpu=True, cpu clock tier {tier}": (
                f"with tier_{tier}.phase('x'): pass",
                g,
            )
            for tier in tiers
        },
        "peer: pure-Python phase timer (dict of totals)": ("with py.phase('x'): pass", g),
    }
    # lines= (issue 32): a phase that matches no requested name keeps the inline path (against
    # on_nocpu's plain phase: within 2 ns); an entry of a requested phase takes the general path
    # and the lines hook, untraced (its schedule used up) or traced (its tracer on and off).
    lines_other = Profiler(
        run_dir=run_dir, enabled=True, measure_cpu=False, lines="lp_other", **quiet
    )
    lines_untraced = Profiler(
        run_dir=run_dir, enabled=True, measure_cpu=False, lines="lp_step", lines_entries=1, **quiet
    )
    with lines_untraced.phase("lp_step"):  # the one traced entry of its schedule
        pass
    lines_traced = Profiler(
        run_dir=run_dir,
        enabled=True,
        measure_cpu=False,
        lines="lp_step",
        lines_entries=None,
        **quiet,
    )
    # The control: a second profiler alike on_nocpu, without lines=: what two identical
    # profilers differ by here (placement in memory, the order of the interleaved cases) is the
    # resolution of the lines= row above.
    twin = Profiler(run_dir=run_dir, enabled=True, measure_cpu=False, **quiet)
    opened += [lines_other, lines_untraced, lines_traced, twin]
    g.update(
        lines_other=lines_other, lines_untraced=lines_untraced, lines_traced=lines_traced, twin=twin
    )
    cases["phase(), measure_cpu=False, lines= set for another phase"] = (
        "with lines_other.phase('x'): pass",
        g,
    )
    cases["phase(), measure_cpu=False, a second profiler alike (control)"] = (
        "with twin.phase('x'): pass",
        g,
    )
    cases["phase() of a lines= phase, entry not traced, measure_cpu=False"] = (
        "with lines_untraced.phase('lp_step'): pass",
        g,
    )
    cases["phase() of a lines= phase, traced entry, measure_cpu=False"] = (
        "with lines_traced.phase('lp_step'): pass",
        g,
    )
    # accounting.phase() with a profiler installed, against the same profiler's phase().
    inst_g = dict(g)
    installed = Profiler(run_dir=run_dir, enabled=True, measure_cpu=False, install=True, **quiet)
    opened.append(installed)
    inst_g["inst"] = installed
    install = "_core.set_installed(inst._rec)"  # the nothing-installed case's setup uninstalls
    cases["accounting.phase(), installed, measure_cpu=False"] = (
        "with accounting.phase('x'): pass",
        inst_g,
        install,
    )
    cases["profiler.phase() of that installed profiler"] = (
        "with inst.phase('x'): pass",
        inst_g,
        install,
    )
    try:
        import torch  # noqa: F401
        from torch.profiler import record_function

        g["record_function"] = record_function
        cases["peer: torch.profiler.record_function, no profiler active"] = (
            "with record_function('x'): pass",
            g,
        )
    except Exception:
        pass
    try:
        from codetiming import Timer

        g["Timer"] = Timer
        cases["peer: codetiming.Timer"] = ("with Timer('x', logger=None): pass", g)
    except Exception:
        pass
    try:
        import nvtx

        g["nvtx"] = nvtx
        cases["peer: nvtx.annotate"] = ("with nvtx.annotate('x'): pass", g)
    except Exception:
        pass
    return cases, opened


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--json", action="store_true", help="print the results as JSON")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument(
        "--batch-ms",
        type=float,
        default=20.0,
        help="length of one timed batch (on a loaded host, 2 ms batches with ~200 rounds often "
        "run unpreempted)",
    )
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        cases, opened = build_cases(Path(tmp))
        try:
            ns = best_ns_per_call(cases, rounds=args.rounds, batch_s=args.batch_ms / 1000)
        finally:
            for p in opened:
                p.close()
    floor = ns["floor: with on an empty C context manager"]
    call_floor = ns["floor: empty C method call, two arguments"]
    ratios: dict[str, float] = {}
    for name, v in ns.items():
        base = call_floor if _is_call_row(name) else floor
        ratios[name] = v / base
    delta = (
        ns["accounting.phase(), installed, measure_cpu=False"]
        - ns["profiler.phase() of that installed profiler"]
    )
    # What the clock itself costs: an enabled entry reads it twice, whatever the code around it.
    clock_pair_ns = max(0.0, ns["empty C method call plus two wall-clock reads"] - call_floor)
    enabled_ns = ns["phase(), enabled=True, measure_cpu=False"]
    clock = {
        "two_reads_ns": clock_pair_ns,
        "two_reads_ratio_to_floor": clock_pair_ns / floor,
        "enabled_nocpu_less_clock_ratio": (enabled_ns - clock_pair_ns) / floor,
    }
    # The scopes bind __enter__/__exit__ without allocating, the floor's ordinary C methods do not:
    # against the disabled scope (the same protocol, no recording) an enabled one shows what
    # recording itself adds.
    same_protocol = enabled_ns / ns["phase(), enabled=False"]
    # The module-level functions with nothing installed (join hook not armed) against a disabled
    # profiler's phase(): the spec promises the same cost.
    nothing_installed = ns["accounting.phase(), nothing installed"] / ns["phase(), enabled=False"]
    on_cpu_name = next(n for n in ns if n.startswith("phase(), enabled=True, measure_cpu=True"))
    task_ratio = ns["phase() inside an asyncio task, measure_cpu=True"] / ns[on_cpu_name]
    lines_other_delta = (
        ns["phase(), measure_cpu=False, lines= set for another phase"]
        - ns["phase(), enabled=True, measure_cpu=False"]
    )
    twin_delta = (
        ns["phase(), measure_cpu=False, a second profiler alike (control)"]
        - ns["phase(), enabled=True, measure_cpu=False"]
    )
    # The calls against the empty C function of their own calling convention: what count()
    # does beyond being called (issue 35: on 3.12 the module-level convention alone is ~1.4x)
    conventions = {
        "count_ratio_to_empty_kw_method": ns["count()"]
        / ns["empty C method call taking keywords, two arguments"],
        "accounting_count_ratio_to_empty_kw_function": ns["accounting.count(), nothing installed"]
        / ns["empty module-level C function taking keywords, two arguments"],
    }
    untraced_ns = ns["phase() of a lines= phase, entry not traced, measure_cpu=False"]
    traced_ratio = ns["phase() of a lines= phase, traced entry, measure_cpu=False"] / untraced_ns
    info = {
        "date": time.strftime("%Y-%m-%d"),
        "python": platform.python_version(),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        "wall_clock": _core.wall_clock_name(),
    }
    if args.json:
        print(
            json.dumps(
                {
                    "info": info,
                    "ns_per_call": ns,
                    "ratio": ratios,
                    "installed_dispatch_delta_ns": delta,
                    "wall_clock_cost": clock,
                    "enabled_nocpu_ratio_to_disabled_scope": same_protocol,
                    "nothing_installed_ratio_to_disabled": nothing_installed,
                    "in_task_ratio_to_same_phase_outside": task_ratio,
                    "lines_for_another_phase_delta_ns": lines_other_delta,
                    "second_profiler_alike_delta_ns": twin_delta,
                    "lines_traced_entry_ratio_to_untraced": traced_ratio,
                    "calling_conventions": conventions,
                },
                indent=2,
            )
        )
        return 0
    rows = []
    for name, v in ns.items():
        base = "empty C call" if _is_call_row(name) else "floor"
        rows.append((name, v, f"{ratios[name]:.2f}x {base}"))
    print(
        table(
            rows,
            f"lineprofiler.accounting overhead per enter+exit ({info['date']}, Python {info['python']}, {info['machine']}, wall clock {info['wall_clock']})",
        )
    )
    print(f"\naccounting.phase() vs profiler.phase(), enabled: {delta:+.1f} ns")
    print(
        f"two wall-clock reads ({info['wall_clock']}): {clock_pair_ns:.1f} ns = "
        f"{clock['two_reads_ratio_to_floor']:.2f}x floor; phase(), enabled=True, "
        f"measure_cpu=False without them: {clock['enabled_nocpu_less_clock_ratio']:.2f}x floor"
    )
    print(
        f"accounting.phase() with nothing installed against phase(), enabled=False: "
        f"{nothing_installed:.2f}x"
    )
    print(
        f"phase(), enabled=True, measure_cpu=False against phase(), enabled=False (the same "
        f"cached-method scope protocol, nothing recorded): {same_protocol:.2f}x"
    )
    print(f"phase() inside an asyncio task against the same phase outside one: {task_ratio:.2f}x")
    print(
        f"count() against an empty C method taking keywords: "
        f"{conventions['count_ratio_to_empty_kw_method']:.2f}x; accounting.count() with nothing "
        f"installed against an empty module-level C function taking keywords: "
        f"{conventions['accounting_count_ratio_to_empty_kw_function']:.2f}x"
    )
    print(
        f"phase() with lines= set for another phase against the same phase without: "
        f"{lines_other_delta:+.1f} ns (a second profiler alike, the control: {twin_delta:+.1f} ns)"
    )
    print(
        f"a traced entry of a lines= phase against an untraced one: {traced_ratio:.1f}x "
        f"({untraced_ns:.0f} ns untraced)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
