"""Cost of phase(name, io=True) against the phase without it and two preads of the thread's
/proc io file (the target: io=True costs at most the plain phase plus two preads).

    python benchmarks/bench_io.py [--json] [--rounds N]

Measured in one process in interleaved rounds (best round kept); compare the ratios. The "two
preads" row is os.pread() from Python, so it includes two Python calls (~50-100 ns) the C path
does not pay: a conservative yardstick.
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

FLOOR = "floor: with on an empty C context manager"
PLAIN = "phase(), enabled=True, measure_cpu=True"
IO = "phase(io=True), measure_cpu=True"
PREADS = "two preads of /proc/thread-self/io (os.pread)"
IO_NOCPU = "phase(io=True), measure_cpu=False"
PLAIN_NOCPU = "phase(), enabled=True, measure_cpu=False"


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--rounds", type=int, default=15)
    args = ap.parse_args()
    fd = os.open("/proc/thread-self/io", os.O_RDONLY)
    with tempfile.TemporaryDirectory() as tmp:
        quiet = dict(snapshot_interval_s=None, sample_interval_s=None, enabled=True)
        cpu = Profiler(run_dir=tmp, **quiet)
        nocpu = Profiler(run_dir=tmp, measure_cpu=False, **quiet)
        g = {
            "null": _core.PhaseFront(),  # unbound: its _bench_floor is the floor
            "cpu": cpu,
            "nocpu": nocpu,
            "pread": os.pread,
            "fd": fd,
        }
        cases = {
            FLOOR: ("with null._bench_floor('x'): pass", g),
            PLAIN_NOCPU: ("with nocpu.phase('x'): pass", g),
            IO_NOCPU: ("with nocpu.phase('x', io=True): pass", g),
            PLAIN: ("with cpu.phase('x'): pass", g),
            IO: ("with cpu.phase('x', io=True): pass", g),
            PREADS: ("pread(fd, 512, 0); pread(fd, 512, 0)", g),
        }
        try:
            ns = best_ns_per_call(cases, rounds=args.rounds)
        finally:
            cpu.close()
            nocpu.close()
            os.close(fd)
    target = ns[PLAIN] + ns[PREADS]
    result = {
        "info": {
            "date": time.strftime("%Y-%m-%d"),
            "python": platform.python_version(),
            "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        },
        "ns_per_call": ns,
        "io_over_plain_plus_two_preads": ns[IO] / target,
        "io_extra_over_two_preads": (ns[IO] - ns[PLAIN]) / ns[PREADS],
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    rows = [(name, v, f"{v / ns[FLOOR]:.2f}x floor") for name, v in ns.items()]
    print(table(rows, f"phase(io=True) cost (Python {result['info']['python']})"))
    print(
        f"\nphase(io=True) / (phase() + two preads) = {result['io_over_plain_plus_two_preads']:.2f}"
        f"   (target <= 1.00; io=True's extra = {result['io_extra_over_two_preads']:.2f}x two preads)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
