"""Merge + render speed and peak memory of ``lineprofiler report`` on synthetic runs.

    PYTHONPATH=src python benchmarks/bench_merge.py [--json] [--rounds 3] [--keep DIR]
        [--against DIR]

``--against DIR`` (a source tree's ``src``, e.g. ``git archive <commit> src | tar -x -C /tmp/b``)
also times the merge with the lineprofiler found there, in the same rounds, interleaved: the
``vs`` column is this tree's merge+text+json time over that one's (below 1: faster).

Runs (real worker-file format, written by benchmarks/synth/runs.py):
  tree64     64 workers x a 200-path phase tree (histograms, counters)
  flat1024   1,024 phase-only workers x 8 phases
  tree8192   8,192 workers x the 200-path tree (--big N changes the count; 0 leaves it out)
Each measurement runs in a fresh child process: wall time of merge_run(with_samples=False) and
of the text and JSON renders, and the child's peak RSS (ru_maxrss) before and after. The
``floor`` column is the same child only reading and json-parsing every worker file, so
``x floor`` is merge + text render as a ratio to the parsing they cannot avoid.
Targets: flat1024 merge+render < 5 s and peak RSS < 300 MB; tree8192 merge + text render
<= 2x floor and peak RSS < 1 GB (issue 17).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

CHILD = r"""
import json, resource, sys, time
from pathlib import Path
run_dir, mode = sys.argv[1], sys.argv[2]
def rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
import lineprofiler.accounting, lineprofiler.report.text, lineprofiler.report.json
base = rss_mb()
out = {"base_rss_mb": base}
if mode == "floor":
    t0 = time.perf_counter()
    n = 0
    for f in sorted(Path(run_dir).glob("workers/*/w_*.json")):
        json.loads(f.read_bytes()); n += 1
    out["parse_s"] = time.perf_counter() - t0
else:
    from lineprofiler.accounting import merge_run
    from lineprofiler.report.text import render_text
    from lineprofiler.report.json import render_json
    t0 = time.perf_counter()
    run = merge_run(run_dir, with_samples=False)
    t1 = time.perf_counter()
    text = render_text(run)
    t2 = time.perf_counter()
    doc = render_json(run)
    t3 = time.perf_counter()
    out.update(merge_s=t1 - t0, text_s=t2 - t1, json_s=t3 - t2, workers=run.processes,
               paths=len(run.tree), text_bytes=len(text), json_bytes=len(doc))
out["peak_rss_mb"] = rss_mb()
print(json.dumps(out))
"""


def make_runs(base: Path, big: int) -> dict[str, Path]:
    from benchmarks.synth.runs import MS, Ph, worker_doc, write_worker

    runs = {"tree64": base / "tree64", "flat1024": base / "flat1024"}
    if big:
        runs["tree8192"] = base / "tree8192"
    # 200 paths: 8 top-level x 4 children x 5 grandchildren = 8 + 32 + 160
    paths = []
    for i in range(8):
        paths.append((f"stage_{i}",))
        for j in range(4):
            paths.append((f"stage_{i}", f"step_{j}"))
            for k in range(5):
                paths.append((f"stage_{i}", f"step_{j}", f"op_{k}"))
    assert len(paths) == 200
    trees: dict[int, list] = {}  # the 7 scales' phase lists, built once

    def tree_worker(run: Path, w: int) -> None:
        scale = w % 7
        if scale not in trees:
            trees[scale] = [
                Ph(
                    p,
                    dist=[
                        (int(b * MS * (1 + scale / 100) / len(p)), 40 + b)
                        for b in (1, 2, 3, 5, 8, 13)
                    ],
                    cpu=0.7,
                    counters={"items": 1000 + scale} if len(p) == 3 else {},
                )
                for p in paths
            ]
        write_worker(
            run,
            worker_doc(
                role=f"role{w % 4}",
                pid=10_000 + w,
                host=f"node{w // 8:03d}",
                rank=w,
                written_at=1_796_226_000.0 + 3600,
                threads=trees[scale],
            ),
        )

    for w in range(64):
        tree_worker(runs["tree64"], w)
    for w in range(big):
        tree_worker(runs["tree8192"], w)
    flat = [("iteration",)] + [("iteration", f"phase_{k}") for k in range(7)]
    for w in range(1024):
        phases = [Ph(p, dist=[(2 * MS, 50), (3 * MS, 50)], cpu=0.5) for p in flat]
        phases[0] = Ph(flat[0], dist=[(20 * MS, 50), (30 * MS, 50)], cpu=0.5)
        write_worker(
            runs["flat1024"],
            worker_doc(
                role=("actor", "learner", "evaluator")[w % 3],
                pid=20_000 + w,
                host=f"node{w // 16:03d}",
                rank=w,
                written_at=1_796_226_000.0 + 3600,
                threads=phases,
            ),
        )
    return runs


def child(run_dir: Path, mode: str, src: str | None = None) -> dict:
    from benchmarks.synth.child import child_env  # this lineprofiler first on the child's path

    env = child_env()
    if src:  # another tree's lineprofiler first (--against)
        env["PYTHONPATH"] = os.pathsep.join([os.path.abspath(src), env["PYTHONPATH"]])
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(run_dir), mode],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    return json.loads(proc.stdout)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--rounds", type=int, default=3, help="best of N children per run")
    parser.add_argument("--keep", metavar="DIR", help="write the runs here and keep them")
    parser.add_argument("--big", type=int, default=8192, help="workers of the big run (0: none)")
    parser.add_argument(
        "--against", metavar="SRC", help="also time the merge with the lineprofiler under SRC"
    )
    args = parser.parse_args()
    tmp = None
    if args.keep:
        base = Path(args.keep)
        base.mkdir(parents=True, exist_ok=True)
    else:
        tmp = tempfile.TemporaryDirectory(prefix="bench_merge_")
        base = Path(tmp.name)
    try:
        runs = make_runs(base, args.big)
        results = []
        for name, run_dir in runs.items():
            best: dict | None = None
            floor: dict | None = None
            other: float | None = None
            for _ in range(args.rounds):  # interleaved: floor and merge alternate
                f = child(run_dir, "floor")
                m = child(run_dir, "merge")
                if args.against:
                    o = child(run_dir, "merge", args.against)
                    t = o["merge_s"] + o["text_s"] + o["json_s"]
                    other = t if other is None else min(other, t)
                if floor is None or f["parse_s"] < floor["parse_s"]:
                    floor = f
                total = m["merge_s"] + m["text_s"] + m["json_s"]
                if best is None or total < best["total_s"]:
                    best = {**m, "total_s": total}
            assert best is not None and floor is not None
            results.append(
                {
                    "run": name,
                    "workers": best["workers"],
                    "paths": best["paths"],
                    "merge_s": round(best["merge_s"], 4),
                    "text_s": round(best["text_s"], 4),
                    "json_s": round(best["json_s"], 4),
                    "total_s": round(best["total_s"], 4),
                    "floor_parse_s": round(floor["parse_s"], 4),
                    "x_floor": round((best["merge_s"] + best["text_s"]) / floor["parse_s"], 2),
                    "peak_rss_mb": round(best["peak_rss_mb"], 1),
                    "base_rss_mb": round(best["base_rss_mb"], 1),
                    "floor_peak_rss_mb": round(floor["peak_rss_mb"], 1),
                    "against_total_s": None if other is None else round(other, 4),
                    "vs": None if other is None else round(best["total_s"] / other, 3),
                }
            )
    finally:
        if tmp is not None:
            tmp.cleanup()
    if args.json:
        print(json.dumps({"benchmark": "bench_merge", "results": results}, indent=2))
        return 0
    head = (
        f"{'run':<10}{'workers':>8}{'paths':>7}{'merge s':>9}{'text s':>8}{'json s':>8}"
        f"{'total s':>9}{'floor s':>9}{'x floor':>9}{'peak MB':>9}{'base MB':>9}"
        + (f"{'other s':>9}{'vs':>7}" if args.against else "")
    )
    print(head)
    for r in results:
        print(
            f"{r['run']:<10}{r['workers']:>8}{r['paths']:>7}{r['merge_s']:>9.3f}{r['text_s']:>8.3f}"
            f"{r['json_s']:>8.3f}{r['total_s']:>9.3f}{r['floor_parse_s']:>9.3f}{r['x_floor']:>9.2f}"
            f"{r['peak_rss_mb']:>9.1f}{r['base_rss_mb']:>9.1f}"
            + (f"{r['against_total_s']:>9.3f}{r['vs']:>7.3f}" if args.against else "")
        )
    print(
        "targets: flat1024 total < 5 s, peak < 300 MB; tree8192 merge+text <= 2x floor, peak < 1 GB"
        " (floor = read + json.loads of every file; x floor = (merge + text) / floor)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
