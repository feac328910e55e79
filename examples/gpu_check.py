"""The checks only a GPU machine can make, in one short run (about a minute).

    python examples/gpu_check.py OUT_DIR

1. The GPU block from real NVML: a CUDA matmul loop inside phases, with the sampler on, must give
   a device whose `busy` and `this run` are measured (not n/a) and VRAM allocated/reserved peaks.
2. `sync=True`: the same matmul chain timed with and without sync; the synced phase must take
   longer than the unsynced one (the unsynced one measures the enqueue only).
3. `annotate=True` under an external torch.profiler capture: the phase names appear as NVTX /
   record_function ranges in the exported Chrome trace.
4. NVML handles across fork: a forked child records GPU work and its sampler still reads NVML.

Prints one line per check and writes the report and JSON under OUT_DIR; exits 1 if a check fails,
2 if there is no CUDA device (then nothing was checked).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from lineprofiler.accounting import Profiler


def main() -> int:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "gpu-check").resolve()
    out.mkdir(parents=True, exist_ok=True)
    import torch  # the user's import: the profiler itself never imports torch

    if not torch.cuda.is_available():
        print("no CUDA device visible: nothing checked")
        return 2
    results: dict[str, bool] = {}
    run_dir = out / "run"
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)

    prof = Profiler(run_dir=run_dir, role="trainer", enabled=True, sample_interval_s=0.2)
    with prof:
        for _ in range(20):
            with prof.phase("iteration"):
                with prof.phase("forward_unsynced"):
                    b = a @ a @ a
                with prof.phase("forward_synced", sync=True):
                    c = a @ a @ a
                del b, c
        pid = os.fork()
        if pid == 0:  # NVML and the sampler in a forked child
            with prof.phase("child_work", sync=True):
                for _ in range(10):
                    a @ a
            prof.close()
            os._exit(0)
        os.waitpid(pid, 0)
        time.sleep(0.5)  # a few more sampler intervals after the work
        tree = prof.merged_tree()

    synced = tree[("iteration", "forward_synced")].wall_ns
    unsynced = tree[("iteration", "forward_unsynced")].wall_ns
    results["sync=True bills the GPU time to its phase"] = synced > 5 * unsynced
    print(f"forward synced {synced / 1e6:.1f} ms vs unsynced {unsynced / 1e6:.1f} ms")

    report = subprocess.run(
        [sys.executable, "-m", "lineprofiler", "report", str(run_dir), "--json"],
        capture_output=True,
        text=True,
    )
    (out / "report.json").write_text(report.stdout + report.stderr)
    text = subprocess.run(
        [sys.executable, "-m", "lineprofiler", "report", str(run_dir)],
        capture_output=True,
        text=True,
    )
    (out / "report.txt").write_text(text.stdout + text.stderr)
    print(text.stdout)
    doc = json.loads(report.stdout)
    gpu = (doc.get("resources") or {}).get("gpu") or {}
    devices = gpu.get("devices") or []
    results["GPU block: a device with measured busy and this-run"] = any(
        d.get("busy") is not None and d.get("this_run") is not None for d in devices
    )
    results["GPU block: VRAM allocated and reserved peaks"] = bool(
        gpu.get("vram_allocated_peak_bytes") and gpu.get("vram_reserved_peak_bytes")
    )
    results["forked child recorded its GPU phase"] = (
        any(
            p.get("path") == ["child_work"]
            for r in doc.get("roles", [])
            for p in r.get("phases", [])
        )
        or "child_work" in text.stdout
    )

    # annotate=True under an external capture
    trace = out / "annotate_trace.json"
    with Profiler(
        run_dir=out / "annotate", enabled=True, annotate=True, sample_interval_s=None
    ) as p2:
        with torch.profiler.profile(
            activities=[torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
        ) as cap:
            for _ in range(3):
                with p2.phase("annotated_phase"):
                    a @ a
            torch.cuda.synchronize()
        cap.export_chrome_trace(str(trace))
    results["annotate=True: phase names in an external capture"] = (
        "annotated_phase" in trace.read_text()
    )

    ok = True
    for name, passed in results.items():
        print(f"{'PASS' if passed else 'FAIL'}  {name}")
        ok = ok and passed
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
