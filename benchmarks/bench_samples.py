"""Merging resource samples at scale: 64 synthetic workers x 12 hours at 1 Hz (the spec's large
run), written in the real sidecar format, then the full report (merge_run with samples, text and
JSON) timed and its peak RSS measured in a fresh child process.

    python benchmarks/bench_samples.py [--workers 64] [--hours 12] [--json] [--keep DIR]

Targets: under 10 s and under 500 MB peak RSS for the full report. Also prints the worker files'
total size on disk (JSON + .samples + .tags). The rows carry moving I/O, RSS, a changing phase tag
and one GPU, so every reduction path runs.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from array import array
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.synth.child import child_env  # noqa: E402
from benchmarks.synth.runs import T0, Ph, worker_doc, write_worker  # noqa: E402
from benchmarks.synth.samples import S, attach_samples  # noqa: E402

from lineprofiler.runfile.samples import (  # noqa: E402
    BASE_WORDS,
    F_GPU,
    F_IO,
    F_RSS,
    W_DT,
    W_FLAGS,
    W_RB,
    W_RC,
    W_RSS,
    W_T,
    W_TAG,
    W_WB,
    W_WC,
)

CHILD = """
import json, resource, sys, time
t0 = time.perf_counter()
from lineprofiler.accounting import merge_run
from lineprofiler.report.text import render_text
from lineprofiler.report.json import render_json
run = merge_run(sys.argv[1], with_samples=True)
t_merge = time.perf_counter() - t0
text = render_text(run)
doc = render_json(run)
total = time.perf_counter() - t0
print(json.dumps({"merge_s": t_merge, "report_s": total,
                  "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                  "text_lines": text.count("\\n"), "json_bytes": len(doc)}))
"""


def make_run(run_dir: Path, workers: int, hours: float) -> int:
    n = int(hours * 3600)
    t = array("q", (int(T0 * 1e9) + (i + 1) * S for i in range(n)))
    dt = array("q", [S]) * n
    tag = array("q", ((i // 60) % 4 for i in range(n)))  # phase changes every minute
    flags = array("q", [F_IO | F_RSS | F_GPU]) * n
    rb = array("q", ((i % 7) * 4096 for i in range(n)))
    rc = array("q", ((i % 7) * 4096 + (i % 3) * 65536 for i in range(n)))
    wb = array("q", ((i % 600 == 0) * 50_000_000 for i in range(n)))
    wc = wb
    rss = array("q", (500_000_000 + (i % 1000) * 1000 for i in range(n)))
    busy = array("q", ((i * 7) % 101 for i in range(n)))
    mine = array("q", ((i * 3) % 50 if i % 5 else -2 for i in range(n)))
    phases = [
        Ph(("iteration",), dist=[(10_000_000, n * 50)]),
        Ph(("iteration", "mcts"), dist=[(8_000_000, n * 50)]),
    ]
    for k in range(workers):
        doc = worker_doc(
            role="actor" if k else "learner",
            pid=1000 + k,
            host=f"node{k // 8:02d}",
            start_time=T0,
            written_at=T0 + n,
            threads=phases,
        )
        path = write_worker(run_dir, doc)
        attach_samples(
            doc,
            path,
            {
                W_T: t,
                W_DT: dt,
                W_TAG: tag,
                W_FLAGS: flags,
                W_RB: rb,
                W_RC: rc,
                W_WB: wb,
                W_WC: wc,
                W_RSS: rss,
                BASE_WORDS: busy,
                BASE_WORDS + 1: mine,
            },
            n,
            n_gpu=1,
            tags={1: ("iteration",), 2: ("iteration", "mcts"), 3: ("iteration", "env_step")},
        )
    return sum(f.stat().st_size for f in run_dir.rglob("*") if f.is_file())


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--workers", type=int, default=64)
    ap.add_argument("--hours", type=float, default=12.0)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--keep", help="write the run here and keep it")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(args.keep or tmp) / "run"
        t0 = time.perf_counter()
        size = make_run(run_dir, args.workers, args.hours)
        gen_s = time.perf_counter() - t0
        out = subprocess.run(
            [sys.executable, "-c", CHILD, str(run_dir)],
            capture_output=True,
            text=True,
            env=child_env(),
            check=True,
        )
        res = json.loads(out.stdout)
    res.update(
        workers=args.workers,
        hours=args.hours,
        rows=int(args.workers * args.hours * 3600),
        worker_files_bytes=size,
        generate_s=gen_s,
    )
    if args.json:
        print(json.dumps(res, indent=2))
        return 0
    print(
        f"{args.workers} workers x {args.hours:g} h at 1 Hz ({res['rows']:,} sample rows)\n"
        f"  worker files on disk   {size / 1e6:10.1f} MB  ({size / args.workers / 1e6:.1f} MB per worker)\n"
        f"  merge_run (samples)    {res['merge_s']:10.2f} s\n"
        f"  full report (text+json){res['report_s']:10.2f} s   target < 10 s  ({res['report_s'] / 10:.2f} of it)\n"
        f"  peak RSS               {res['peak_rss_bytes'] / 1e6:10.1f} MB  target < 500 MB  ({res['peak_rss_bytes'] / 500e6:.2f} of it)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
