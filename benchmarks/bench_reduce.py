"""The big-job recipe at 65,536 workers: reduce per host, then report from the summaries.

    python benchmarks/bench_reduce.py [--json] [--workers 65536] [--hosts 64] [--keep DIR]

A synthetic run of ``--workers`` phase-only workers (8 phases each, real worker-file format,
written by benchmarks/synth/runs.py) spread over ``--hosts`` host directories. Each step runs in a
fresh child process and reports its wall time and peak RSS (ru_maxrss):
  reduce     ``lineprofiler reduce DIR --host H`` for every host, one child per host (what
             ``srun --ntasks-per-node=1`` runs on each node); the slowest and the largest shown
  report     ``lineprofiler report DIR --no-samples`` reading the summaries
  direct     the same report with no summaries (every worker file read by one reader)
Target (issue 17): peak RSS per process < 1 GB.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

CHILD = r"""
import json, resource, sys, time
from lineprofiler.cli import main
t0 = time.perf_counter()
rc = main(sys.argv[1:])
out = {"rc": rc, "s": time.perf_counter() - t0,
       "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0}
print(json.dumps(out), file=sys.stderr)
"""


def make_run(run_dir: Path, workers: int, hosts: int) -> None:
    from benchmarks.synth.runs import MS, Ph, worker_doc

    flat = [("iteration",)] + [("iteration", f"phase_{k}") for k in range(7)]
    phases = [Ph(p, dist=[(2 * MS, 50), (3 * MS, 50)], cpu=0.5) for p in flat]
    template = worker_doc(role="actor", pid=1, host="H", rank=0, threads=phases)
    for h in range(hosts):
        (run_dir / "workers" / f"node{h:03d}").mkdir(parents=True, exist_ok=True)
    for w in range(workers):
        meta = template["meta"]
        meta.update(pid=100_000 + w, rank=w, host=f"node{w % hosts:03d}", uuid=f"{w:08x}")
        meta["role"] = ("actor", "learner", "evaluator")[w % 3]
        name = f"w_{meta['run_id']}_{meta['pid']}_{meta['uuid']}.json"
        (run_dir / "workers" / meta["host"] / name).write_text(json.dumps(template))


def child(*args: str) -> dict:
    from benchmarks.synth.child import child_env

    proc = subprocess.run(
        [sys.executable, "-c", CHILD, *args],
        capture_output=True,
        text=True,
        env=child_env(),
        check=False,
    )
    got = json.loads(proc.stderr.strip().splitlines()[-1])
    if got["rc"] != 0:
        raise SystemExit(f"lineprofiler {' '.join(args)} failed: {proc.stderr[-2000:]}")
    return got


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--workers", type=int, default=65_536)
    parser.add_argument("--hosts", type=int, default=64)
    parser.add_argument("--keep", metavar="DIR", help="write the run here and keep it")
    args = parser.parse_args()
    tmp = None if args.keep else tempfile.TemporaryDirectory(prefix="bench_reduce_")
    base = Path(args.keep) if args.keep else Path(tmp.name)  # type: ignore[union-attr]
    run_dir = base / "run"
    try:
        if not (run_dir / "workers").is_dir():
            t0 = time.perf_counter()
            make_run(run_dir, args.workers, args.hosts)
            print(
                f"wrote {args.workers} workers in {time.perf_counter() - t0:.0f} s", file=sys.stderr
            )
        shutil.rmtree(run_dir / "summaries", ignore_errors=True)
        direct = child("report", str(run_dir), "--no-samples")
        reduces = [
            child("reduce", str(run_dir), "--host", h.name)
            for h in sorted((run_dir / "workers").iterdir())
        ]
        report = child("report", str(run_dir), "--no-samples")
    finally:
        if tmp is not None:
            tmp.cleanup()
    rows = [
        (
            "reduce (slowest host)",
            max(r["s"] for r in reduces),
            max(r["peak_rss_mb"] for r in reduces),
        ),
        ("report from summaries", report["s"], report["peak_rss_mb"]),
        ("report, no summaries", direct["s"], direct["peak_rss_mb"]),
    ]
    if args.json:
        doc = {
            "benchmark": "bench_reduce",
            "workers": args.workers,
            "hosts": args.hosts,
            "results": [
                {"step": n, "s": round(s, 3), "peak_rss_mb": round(m, 1)} for n, s, m in rows
            ],
        }
        print(json.dumps(doc, indent=2))
        return 0
    print(f"{args.workers:,} workers x 8 phases on {args.hosts} hosts")
    print(f"{'step':<24}{'wall s':>10}{'peak MB':>10}")
    for n, s, m in rows:
        print(f"{n:<24}{s:>10.2f}{m:>10.1f}")
    print("target: peak RSS per process < 1 GB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
