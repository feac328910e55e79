"""Issue 35's table in one run: each hot-path row re-measured by the benchmark that owns it, with
its target and whether it is met.

    python benchmarks/bench_hot_paths.py [--only NAME ...] [--json]

NAME is a benchmark: accounting, native, line, top, outputs (default: all). Each runs in its own
process with ``--json``, under this interpreter and its environment (run it once per Python for
the per-interpreter rows: ``--only accounting line`` under 3.12). Settings are the ones that hold
on a loaded 2-core guest: short batches and many rounds (accounting, native), CPU seconds (top),
two CPU hogs started by bench_line itself (its rows are defined beside them). Ratios are taken
within each benchmark's own process; a run takes about 1.5 minutes on the 2-core guest.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

# benchmark -> its command line (after the interpreter)
RUNS = {
    "accounting": ["bench_accounting.py", "--rounds", "200", "--batch-ms", "2", "--json"],
    "native": ["bench_native.py", "--rounds", "300", "--loops", "20000", "--json"],
    "line": ["bench_line.py", "--hogs", "2", "--rounds", "15", "--processes", "24", "--json"],
    "top": ["bench_top.py", "--cpu", "--rounds", "3", "--json"],
    "outputs": ["bench_outputs.py", "--workers", "4", "--json"],
}


def _rows(name: str, doc: dict) -> list[tuple[str, float, str, bool | None]]:
    """(row, value, target text, met: None where the row has no target) of one benchmark."""
    if name == "accounting":
        r = doc["ratio"]
        conv = doc["calling_conventions"]
        return [
            ("phase(), enabled, measure_cpu=False ÷ with floor", r["phase(), enabled=True, measure_cpu=False"], "≤ 1.25x", r["phase(), enabled=True, measure_cpu=False"] <= 1.25),  # noqa: E501
            ("accounting.phase() over profiler.phase(), ns", doc["installed_dispatch_delta_ns"], "≤ +5 ns", doc["installed_dispatch_delta_ns"] <= 5),  # noqa: E501
            ("count() ÷ empty C method call", r["count()"], "≤ 1.2x", r["count()"] <= 1.2),
            ("  count() ÷ empty C method taking keywords", conv["count_ratio_to_empty_kw_method"], "", None),  # noqa: E501
            ("accounting.count(), nothing installed ÷ empty C method call", r["accounting.count(), nothing installed"], "≤ 1.2x", r["accounting.count(), nothing installed"] <= 1.2),  # noqa: E501
            ("  ÷ empty module-level C function taking keywords", conv["accounting_count_ratio_to_empty_kw_function"], "", None),  # noqa: E501
            ("  empty module-level C function taking keywords ÷ empty C method call", r["empty module-level C function taking keywords, two arguments"], "", None),  # noqa: E501
        ]  # fmt: skip
    if name == "native":
        r = doc["ratio_to_two_clock_reads"]["phase, installed"]
        return [("C++ LP_PHASE, enabled ÷ two TSC reads", r, "≤ 1.25x", r <= 1.25)]
    if name == "line":
        tight = doc["tight_loop_processes"]
        out = doc["line_calling_outside"]["ratio"]
        ok = tight["median"] <= 1.3 and tight["min"] >= 1.0
        return [
            ("LineProfiler tight loop, printed ÷ untraced, 2 hogs, median", tight["median"], "≤ 1.3x", ok),  # noqa: E501
            ("  the same, lowest process (never below 1.0x)", tight["min"], "≥ 1.0x", tight["min"] >= 1.0),  # noqa: E501
            ("  the same, every block's median", tight["all_blocks_median"], "", None),
            ("  its floor: the median block, subtracting its process's cheapest block's cost", doc["floor_processes"]["median_block_printed_at_floor"], "", None),  # noqa: E501
            ("  one margin for all processes: the median with the lowest at 1.0x", tight["one_margin"]["median_at_that_margin"], "", None),  # noqa: E501
            ("LineProfiler, a line calling outside-project Python", out, "≤ 1.5x", out <= 1.5),
        ]  # fmt: skip
    if name == "top":
        return [
            ("report --html, 1,024 workers ÷ json.loads floor", doc["html_x_floor"], "≤ 4x", doc["html_x_floor"] <= 4),  # noqa: E501
            ("  the same ÷ the three-files-per-worker floor", doc["html_x_files_floor"], "", None),  # noqa: E501
            ("top, steady refresh (1 file new) ÷ floor", doc["steady_refresh_x_floor"], "≤ 2x", doc["steady_refresh_x_floor"] <= 2),  # noqa: E501
            ("top, cold refresh (the first) ÷ floor", doc["refresh_x_floor"], "≤ 2x", doc["refresh_x_floor"] <= 2),  # noqa: E501
        ]  # fmt: skip
    r = doc["export_vs_merge"]
    return [
        ("export --perfetto, 4 x 12 h ÷ merge with samples", r, "≤ 2x", r <= 2),
        ("  the same, pure install (Python)", doc["export_python_vs_merge"], "", None),
    ]


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--only", nargs="+", choices=sorted(RUNS), help="these benchmarks only")
    ap.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = ap.parse_args()
    info = {
        "date": time.strftime("%Y-%m-%d"),
        "python": platform.python_version(),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        "loadavg_at_start": os.getloadavg()[0],
    }
    rows: list[tuple[str, float, str, bool | None]] = []
    errors: dict[str, str] = {}
    seconds: dict[str, float] = {}
    for name in args.only or list(RUNS):
        t0 = time.monotonic()
        proc = subprocess.run(
            [sys.executable, str(HERE / RUNS[name][0]), *RUNS[name][1:]],
            capture_output=True,
            text=True,
            cwd=HERE.parent,
        )
        try:
            doc = json.loads(proc.stdout)
        except ValueError:
            errors[name] = (proc.stderr or proc.stdout)[-2000:]
            continue
        rows += _rows(name, doc)
        seconds[name] = round(time.monotonic() - t0, 1)
    info["seconds"] = seconds
    if args.json:
        print(json.dumps({"info": info, "rows": rows, "errors": errors}, indent=2))
        return 1 if errors else 0
    print(
        f"Issue 35's hot paths ({info['date']}, Python {info['python']}, {info['machine']}, "
        f"load average {info['loadavg_at_start']:.1f} at the start)\n"
    )
    width = max(len(r[0]) for r in rows) if rows else 10
    for row, value, target, met in rows:
        state = "" if met is None else ("met" if met else "MISSED")
        print(f"{row:<{width}}  {value:8.2f}  {target:<8}  {state}")
    print("\n" + ", ".join(f"{n} {s:.0f} s" for n, s in seconds.items()))
    for name, err in errors.items():
        print(f"\n{name}: failed\n{err}", file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    raise SystemExit(main())
