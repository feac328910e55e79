"""Phase cost of this build against another build of _core, in one process (interleaved rounds).

    python benchmarks/bench_builds.py [--baseline PATH/_core.so] [--json] [--rounds N]

Loads the baseline's extension module under another name beside the installed one, so both are
timed in the same rounds on the same noisy machine. Each build's rows are ratios to its own floor
(`with front._bench_floor('x'): pass`): an enabled phase() outside any task, the same phase inside
one asyncio task's step, and count(). Without --baseline, this build only.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.machinery
import importlib.util
import json
import sys
import tempfile
from pathlib import Path
from types import ModuleType

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _timing import best_ns_per_call, table  # noqa: E402
from lineprofiler import _core  # noqa: E402


def load_core(path: str) -> ModuleType:
    loader = importlib.machinery.ExtensionFileLoader("_core", path)
    spec = importlib.util.spec_from_file_location("_core", path, loader=loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def in_task(timer, number: int) -> float:
    async def batch() -> float:
        return timer.timeit(number)

    return asyncio.run(batch())


def cases_for(tag: str, core: ModuleType, run_dir: Path) -> tuple[dict, object]:
    rec = core.Recorder(str(run_dir / f"{tag}.json"), "{}", True)
    g = {"front": core.PhaseFront(), "rec": rec}
    return {
        f"{tag}: floor": ("with front._bench_floor('x'): pass", g),
        f"{tag}: phase(), enabled": ("with rec.phase('x'): pass", g),
        f"{tag}: phase() inside an asyncio task": ("with rec.phase('x'): pass", g, "pass", in_task),
        f"{tag}: count()": ("rec.count('x', 1)", g),
    }, rec


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--baseline", help="another build's _core*.so to time beside this one")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--rounds", type=int, default=300)
    ap.add_argument(
        "--batch-ms",
        type=float,
        default=2.0,
        help="length of one timed batch: short batches often run unpreempted on a loaded host",
    )
    args = ap.parse_args()
    builds = {"this": _core}
    if args.baseline:
        builds["baseline"] = load_core(args.baseline)
    with tempfile.TemporaryDirectory() as tmp:
        cases: dict = {}
        keep = []
        for tag, core in builds.items():
            c, rec = cases_for(tag, core, Path(tmp))
            cases.update(c)
            keep.append(rec)
        ns = best_ns_per_call(cases, rounds=args.rounds, batch_s=args.batch_ms / 1000)
    ratio = {}
    for name, v in ns.items():
        tag = name.split(":")[0]
        ratio[name] = v / ns[f"{tag}: floor"]
    in_task_ratio = {
        tag: ns[f"{tag}: phase() inside an asyncio task"] / ns[f"{tag}: phase(), enabled"]
        for tag in builds
    }
    if args.json:
        print(json.dumps({"ns_per_call": ns, "ratio": ratio, "in_task": in_task_ratio}, indent=2))
        return 0
    rows = [(n, v, f"{ratio[n]:.2f}x floor") for n, v in ns.items()]
    print(table(rows, "phase cost by build (each build's own floor)"))
    for tag, r in in_task_ratio.items():
        print(f"{tag}: phase() inside a task against the same phase outside: {r:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
