"""Cost of one ``lineprofiler top`` refresh, and of ``report --html``, on 1,024 synthetic workers.

    PYTHONPATH=src python benchmarks/bench_top.py [--workers 1024] [--rounds 3] [--json]

The run (benchmarks/synth/runs.py ``big_run``): 1,024 worker files of 4 phases each, with 60 sampler
rows per worker. Measured in this process, best of ``--rounds``:

  floor     read and json-parse every worker file (what any refresh must at least do)
  refresh   one top refresh: merge_run(with_samples=False) + the sidecars' tails + the frame,
            folded in this process (jobs=1, as top does) and with merge's default jobs (at >=
            1,024 files that starts one interpreter per CPU, up to 16): the *cold* refresh, every
            file parsed and checked (top's first refresh)
  steady    top's steady state: the same refresh with top's DocCache kept from the previous
            one (and the run's directories opened once per refresh, as top does), after one worker
            file was rewritten (new bytes): every file is read and
            digested, one is parsed and checked (before each timed refresh, a different file)
  html      what ``report --html`` does: merge_run(with_samples=True, timeline_bins=240) (the
            timelines binned during the merge's one read of the sidecars) + render_html
  html, re-read   the same with the timelines read from the sidecars a second time by
            render_html (the path before issue 35's round 2, still taken by a caller that merges
            without timeline_bins): side by side with the above
  files floor     open + read the 3 files of each worker (document, .samples, .tags) through
            safe_read and json-parse the documents: what any report with samples must at least do

Printed as seconds and as ratios to the floor; ``--json`` prints the same as one JSON object;
``--cpu`` measures this process's CPU seconds instead of wall time (steadier under load).
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


CLOCK = time.perf_counter  # --cpu: time.process_time


def best(fn, rounds: int) -> tuple[float, object]:
    out, times = None, []
    for _ in range(rounds):
        t0 = CLOCK()
        out = fn()
        times.append(CLOCK() - t0)
    return min(times), out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=1024)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    ap.add_argument(
        "--cpu",
        action="store_true",
        help="CPU seconds of this process (user + system) instead of wall time: steadier on a "
        "loaded machine (the default-jobs refresh's child processes are then not counted)",
    )
    args = ap.parse_args()
    global CLOCK
    if args.cpu:
        CLOCK = time.process_time

    from benchmarks.synth.runs import T0, big_run

    from lineprofiler.report.fold import DocCache
    from lineprofiler.report.html import render_html
    from lineprofiler.report.live import frame, snapshot
    from lineprofiler.report.merge import merge_run
    from lineprofiler.report.timeline import DEFAULT_BINS
    from lineprofiler.runfile.safe_read import read_regular, reuse_dirs

    with tempfile.TemporaryDirectory() as tmp:
        run_dir = big_run(Path(tmp) / "run", args.workers)
        files = sorted(run_dir.glob("workers/*/w_*.json"))

        def floor() -> int:
            return sum(len(json.loads(f.read_bytes())) for f in files)

        state: dict = {}

        def refresh(jobs: int | None = 1, cache: DocCache | None = None) -> int:
            if cache is None:  # the cold refresh, as top's first
                run = merge_run(run_dir, with_samples=False, jobs=jobs)
                lines = frame(run, state.get("prev"), 2.0, T0 + 61.0, 2.0)
            else:  # as top refreshes: its cache, the run's directories opened once
                with reuse_dirs():
                    run = merge_run(run_dir, with_samples=False, jobs=jobs, cache=cache)
                    lines = frame(run, state.get("prev"), 2.0, T0 + 61.0, 2.0)
            state["prev"] = snapshot(run)
            return len(lines)

        def html() -> int:
            run = merge_run(run_dir, with_samples=True, jobs=1, timeline_bins=DEFAULT_BINS)
            return len(render_html(run).encode())

        def html_reread() -> int:
            return len(render_html(merge_run(run_dir, with_samples=True, jobs=1)).encode())

        sidecars = [(f.with_suffix(".samples"), f.with_suffix(".tags")) for f in files]

        def files_floor() -> int:
            n = 0
            for f, (s, t) in zip(files, sidecars, strict=True):
                n += len(json.loads(read_regular(f, 1 << 30, run_dir)))
                n += len(read_regular(s, 1 << 30, run_dir)) + len(read_regular(t, 1 << 30, run_dir))
            return n

        t_floor, _ = best(floor, args.rounds)
        t_refresh, _ = best(refresh, args.rounds)
        t_refresh_par, _ = best(lambda: refresh(None), args.rounds)
        cache = DocCache()
        refresh(1, cache)  # the first (cold) refresh fills it
        steady = []
        for k in range(max(3, args.rounds)):
            f = files[(k * 97) % len(files)]  # one worker's new snapshot (same size: new bytes)
            f.write_bytes(f.read_bytes().replace(b'"snapshot_seq": 3', b'"snapshot_seq": 4', 1))
            t0 = CLOCK()
            refresh(1, cache)
            steady.append(CLOCK() - t0)
            assert cache.misses == 1 and cache.hits == len(files) - 1, (cache.hits, cache.misses)
        t_steady = min(steady)
        t_files, _ = best(files_floor, args.rounds)
        t_html, size = best(html, max(1, args.rounds - 1))
        t_reread, _ = best(html_reread, max(1, args.rounds - 1))
    result = {
        "workers": args.workers,
        "clock": "cpu" if args.cpu else "wall",
        "floor_s": round(t_floor, 4),
        "refresh_s": round(t_refresh, 4),
        "refresh_x_floor": round(t_refresh / t_floor, 2),
        "refresh_default_jobs_s": round(t_refresh_par, 4),
        "steady_refresh_s": round(t_steady, 4),
        "steady_refresh_x_floor": round(t_steady / t_floor, 2),
        "html_s": round(t_html, 4),
        "html_x_floor": round(t_html / t_floor, 2),
        "html_bytes": size,
        "html_reread_s": round(t_reread, 4),
        "html_reread_x_floor": round(t_reread / t_floor, 2),
        "files_floor_s": round(t_files, 4),
        "files_floor_x_floor": round(t_files / t_floor, 2),
        "html_x_files_floor": round(t_html / t_files, 2),
    }
    if args.json:
        print(json.dumps(result))
        return 0
    print(f"{'measurement':<34}{'cpu s' if args.cpu else 'seconds':>10}{'x floor':>10}")
    print(f"{'floor: read + json.loads':<34}{t_floor:>10.3f}{1.0:>10.2f}")
    print(
        f"{'top refresh (merge + tails + frame)':<34}{t_refresh:>10.3f}{t_refresh / t_floor:>10.2f}"
    )
    print(
        f"{'  the same, default merge jobs':<34}{t_refresh_par:>10.3f}"
        f"{t_refresh_par / t_floor:>10.2f}"
    )
    print(f"{'top refresh, steady (1 file new)':<34}{t_steady:>10.3f}{t_steady / t_floor:>10.2f}")
    print(f"{'files floor: 3 files/worker read':<34}{t_files:>10.3f}{t_files / t_floor:>10.2f}")
    print(f"{'report --html (samples + render)':<34}{t_html:>10.3f}{t_html / t_floor:>10.2f}")
    print(f"{'  the same, timelines re-read':<34}{t_reread:>10.3f}{t_reread / t_floor:>10.2f}")
    print(f"report --html = {t_html / t_files:.2f}x the files floor")
    print(f"html size: {size:,} bytes for {args.workers:,} workers (target < 5 MB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
