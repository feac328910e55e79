"""Cost of one ``lineprofiler top`` refresh, and of ``report --html``, on 1,024 synthetic workers.

    PYTHONPATH=src python benchmarks/bench_top.py [--workers 1024] [--rounds 3] [--json]

The run (benchmarks/synth/runs.py ``big_run``): 1,024 worker files of 4 phases each, with 60 sampler
rows per worker. Measured in this process, best of ``--rounds``:

  floor     read and json-parse every worker file (what any refresh must at least do)
  refresh   one top refresh: merge_run(with_samples=False) + the sidecars' tails + the frame,
            folded in this process (jobs=1, as top does) and with merge's default jobs
            (at >= 1,024 files that starts one interpreter per CPU, up to 16)
  html      merge_run(with_samples=True) + render_html (incl. the timelines' re-read)

Printed as seconds and as ratios to the floor; ``--json`` prints the same as one JSON object.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def best(fn, rounds: int) -> tuple[float, object]:
    out, times = None, []
    for _ in range(rounds):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return min(times), out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=1024)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    from benchmarks.synth.runs import T0, big_run

    from lineprofiler.report.html import render_html
    from lineprofiler.report.live import frame, snapshot
    from lineprofiler.report.merge import merge_run

    with tempfile.TemporaryDirectory() as tmp:
        run_dir = big_run(Path(tmp) / "run", args.workers)
        files = sorted(run_dir.glob("workers/*/w_*.json"))

        def floor() -> int:
            return sum(len(json.loads(f.read_bytes())) for f in files)

        state: dict = {}

        def refresh(jobs: int | None = 1) -> int:
            run = merge_run(run_dir, with_samples=False, jobs=jobs)
            lines = frame(run, state.get("prev"), 2.0, T0 + 61.0, 2.0)
            state["prev"] = snapshot(run)
            return len(lines)

        def html() -> int:
            return len(render_html(merge_run(run_dir, with_samples=True, jobs=1)).encode())

        t_floor, _ = best(floor, args.rounds)
        t_refresh, _ = best(refresh, args.rounds)
        t_refresh_par, _ = best(lambda: refresh(None), args.rounds)
        t_html, size = best(html, max(1, args.rounds - 1))
    result = {
        "workers": args.workers,
        "floor_s": round(t_floor, 4),
        "refresh_s": round(t_refresh, 4),
        "refresh_x_floor": round(t_refresh / t_floor, 2),
        "refresh_default_jobs_s": round(t_refresh_par, 4),
        "html_s": round(t_html, 4),
        "html_x_floor": round(t_html / t_floor, 2),
        "html_bytes": size,
    }
    if args.json:
        print(json.dumps(result))
        return 0
    print(f"{'measurement':<34}{'seconds':>10}{'x floor':>10}")
    print(f"{'floor: read + json.loads':<34}{t_floor:>10.3f}{1.0:>10.2f}")
    print(
        f"{'top refresh (merge + tails + frame)':<34}{t_refresh:>10.3f}{t_refresh / t_floor:>10.2f}"
    )
    print(
        f"{'  the same, default merge jobs':<34}{t_refresh_par:>10.3f}"
        f"{t_refresh_par / t_floor:>10.2f}"
    )
    print(f"{'report --html (samples + render)':<34}{t_html:>10.3f}{t_html / t_floor:>10.2f}")
    print(f"html size: {size:,} bytes for {args.workers:,} workers (target < 5 MB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
