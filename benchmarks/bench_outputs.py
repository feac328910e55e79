"""The user-facing outputs on bench_samples' synthetic run (12-hour workers at 1 Hz; the phase
changes every minute, RSS and I/O move every second, one GPU): ``export --perfetto`` against the
report's own merge with samples (its tracks written by _core's C++, and by the Python path the pure
install takes), and a ``serve`` scrape against the phases-only merge it does.

    python benchmarks/bench_outputs.py [--workers 8] [--hours 12] [--json]

Ratios are within this one process (same files, same cache state); the trace's bytes per
worker-hour are the realistic figure next to the README's worst case (1.31 MB).
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_samples import make_run  # noqa: E402
from lineprofiler.report.merge import merge_run  # noqa: E402
from lineprofiler.report.perfetto import export_perfetto  # noqa: E402


def best(fn, repeat: int = 3) -> float:
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return min(out)


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--hours", type=float, default=12.0)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    res: dict = {"workers": args.workers, "hours": args.hours}
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp) / "run"
        make_run(run_dir, args.workers, args.hours)
        res["merge_with_samples_s"] = best(lambda: merge_run(run_dir, with_samples=True, jobs=1))
        res["merge_phases_s"] = best(lambda: merge_run(run_dir, with_samples=False, jobs=1))
        sink = io.StringIO()
        res["export_s"] = best(lambda: export_perfetto(run_dir, io.StringIO()))
        # as the pure install writes it (no _core: the tracks' Python path)
        res["export_python_s"] = best(lambda: export_perfetto(run_dir, io.StringIO(), False))
        export_perfetto(run_dir, sink)
        res["trace_bytes"] = len(sink.getvalue().encode())
        try:
            from lineprofiler.report.prometheus import RunCollector

            col = RunCollector(run_dir, 0.0, False)
            res["scrape_s"] = best(lambda: list(col.collect()))
        except ImportError:
            res["scrape_s"] = None
    worker_hours = args.workers * args.hours
    res["trace_bytes_per_worker_hour"] = res["trace_bytes"] / worker_hours
    res["export_vs_merge"] = res["export_s"] / res["merge_with_samples_s"]
    res["export_python_vs_merge"] = res["export_python_s"] / res["merge_with_samples_s"]
    if res["scrape_s"] is not None:
        res["scrape_vs_merge"] = res["scrape_s"] / res["merge_phases_s"]
    if args.json:
        print(json.dumps(res, indent=2))
        return 0
    print(f"{args.workers} workers x {args.hours:g} h at 1 Hz (best of 3)")
    print(f"  {'what':<34}{'seconds':>9}{'ratio':>8}")
    print(f"  {'merge_run, with samples':<34}{res['merge_with_samples_s']:>9.2f}{1:>8.2f}")
    print(f"  {'export --perfetto':<34}{res['export_s']:>9.2f}{res['export_vs_merge']:>8.2f}")
    print(
        f"  {'export --perfetto, pure install':<34}{res['export_python_s']:>9.2f}"
        f"{res['export_python_vs_merge']:>8.2f}"
    )
    print(f"  {'merge_run, phases only':<34}{res['merge_phases_s']:>9.2f}{1:>8.2f}")
    if res["scrape_s"] is not None:
        print(f"  {'serve: one scrape':<34}{res['scrape_s']:>9.2f}{res['scrape_vs_merge']:>8.2f}")
    print(
        f"  trace: {res['trace_bytes'] / 1e6:.1f} MB, "
        f"{res['trace_bytes_per_worker_hour'] / 1e3:.0f} kB per worker-hour"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
