"""Publish per-interval phase metrics while a run is going: TensorBoard, or JSON lines.

    python examples/export_tensorboard.py --run-dir profile --steps 200 [--logger jsonl|tensorboard]

Each periodic snapshot calls ``export``, which takes ``profiler.deltas()`` — what every phase
did since the previous export, idle phases left out, quantiles of the interval alone — and logs
wall time, wait share, p50 and calls per phase. ``tensorboard`` needs torch and the tensorboard
package (``torch.utils.tensorboard.SummaryWriter``); ``jsonl`` (the default when those are
missing) appends one JSON object per metric to ``<run_dir>/metrics.jsonl``.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path
from typing import Any

from lineprofiler.accounting import Profiler


class JsonLinesLogger:
    """A stand-in for a metrics service: one JSON object per scalar, one file."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._f = open(path, "a", encoding="utf-8")  # noqa: SIM115 (closed by close())

    def add_scalar(self, tag: str, value: float, step: int) -> None:
        self._f.write(json.dumps({"tag": tag, "value": value, "step": step}) + "\n")
        self._f.flush()

    def close(self) -> None:
        self._f.close()


def make_logger(kind: str, run_dir: Path) -> Any:
    if kind in ("tensorboard", "auto"):
        try:
            from torch.utils.tensorboard import SummaryWriter

            return SummaryWriter(log_dir=str(run_dir / "tensorboard"))
        except Exception:
            if kind == "tensorboard":
                raise
    return JsonLinesLogger(run_dir / "metrics.jsonl")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run-dir", default="profile")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--interval", type=float, default=0.1, help="snapshot_interval_s")
    ap.add_argument("--logger", choices=["auto", "jsonl", "tensorboard"], default="auto")
    args = ap.parse_args(argv)

    profiler = Profiler(
        run_dir=args.run_dir,
        role="learner",
        enabled=True,
        snapshot_interval_s=args.interval,
        sample_interval_s=None,
    )
    logger = make_logger(args.logger, profiler.run_dir)
    interval = {"n": 0}

    @profiler.on_snapshot
    def export(_tree: Any) -> None:
        interval["n"] += 1
        step = interval["n"]
        for path, stats in profiler.deltas().items():
            name = "/".join(path) or "(root)"
            if stats.calls:
                logger.add_scalar(f"profile/{name}/wall_s", stats.wall_ns / 1e9, step)
                logger.add_scalar(f"profile/{name}/calls", stats.calls, step)
                p50 = stats.hist.quantile(0.5)
                if not math.isnan(p50):
                    logger.add_scalar(f"profile/{name}/p50_ms", p50 / 1e6, step)
                if stats.wait_fraction is not None:  # wall, not self
                    logger.add_scalar(f"profile/{name}/wait", stats.wait_fraction, step)
            for counter, value in stats.counters.items():
                logger.add_scalar(f"profile/{name}/{counter}", value, step)

    try:
        for _ in range(args.steps):
            with profiler.phase("iteration"):
                with profiler.phase("load_batch"):
                    time.sleep(0.002)  # waiting: shows up as wait
                with profiler.phase("train_step"):
                    end = time.perf_counter() + 0.003
                    while time.perf_counter() < end:  # busy: no wait
                        pass
                    profiler.count("samples", 32)
    finally:
        profiler.close()  # the last partial interval is not exported: read run_dir for it
        logger.close()
    print(f"exported {interval['n']} intervals under {profiler.run_dir}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
