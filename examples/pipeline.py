"""A small real multi-process pipeline instrumented with lineprofiler.accounting.

Actor processes run a search loop (select / expand / backup inside "mcts", then an environment
step) and push finished episodes through a queue; a learner process drains the queue into batches,
takes "training" steps and checkpoints to disk with exact I/O attribution. The supervisor (this
process) enables profiling once; every child joins the run through the environment it exports.

    python examples/pipeline.py [--run-dir DIR] [--actors N] [--seconds S]
    lineprofiler report DIR
"""

from __future__ import annotations

import argparse
import hashlib
import multiprocessing as mp
import os
import queue
import random
import time
from pathlib import Path

from lineprofiler import accounting
from lineprofiler.accounting import Profiler


def busy(seconds: float) -> None:
    """Burn CPU for about `seconds` (hashing, so it is real work, not a sleep)."""
    end = time.perf_counter() + seconds
    h = hashlib.sha256()
    while time.perf_counter() < end:
        h.update(b"x" * 256)


def uct_search(rng: random.Random, simulations: int) -> None:
    # Reached with no profiler argument threaded through: the module-level functions resolve the
    # profiler installed in this process.
    with accounting.phase("mcts"):
        for _ in range(simulations):
            with accounting.phase("select"):
                busy(0.00002)
            with accounting.phase("expand"):
                busy(0.00001 * rng.random())
            with accounting.phase("backup"):
                pass
        accounting.count("mcts_simulations", simulations)


def actor(index: int, episodes: mp.Queue, stop: mp.Event) -> None:
    profiler = Profiler(role="actor", install=True, snapshot_interval_s=1.0)
    rng = random.Random(index)
    with profiler:
        while not stop.is_set():
            with profiler.phase("iteration"):
                with profiler.phase("self_play"):
                    uct_search(rng, simulations=32)
                with profiler.phase("env_step"):
                    time.sleep(0.002 * (1 + index % 2))  # a slower simulator on odd actors
                    profiler.count("env_steps")
                with profiler.phase("send"):
                    try:
                        episodes.put(rng.random(), timeout=0.1)
                    except queue.Full:
                        profiler.count("queue_full")


def learner(episodes: mp.Queue, stop: mp.Event, checkpoint_dir: str) -> None:
    profiler = Profiler(role="learner", snapshot_interval_s=1.0)
    batch: list[float] = []
    step = 0
    with profiler:
        while not stop.is_set():
            with profiler.phase("wait_batch"):
                try:
                    batch.append(episodes.get(timeout=0.1))
                except queue.Empty:
                    continue
            if len(batch) < 8:
                continue
            with profiler.phase("train_step"):
                busy(0.004)
                profiler.count("samples", len(batch))
            batch.clear()
            step += 1
            if step % 10 == 0:
                with profiler.phase("checkpoint", io=True):
                    path = Path(checkpoint_dir) / "model.bin"
                    with open(path, "wb") as f:
                        f.write(os.urandom(256 * 1024))
                        f.flush()
                        os.fsync(f.fileno())


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--run-dir", default="demo-profile")
    ap.add_argument("--actors", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=6.0)
    args = ap.parse_args()

    supervisor = Profiler(run_dir=args.run_dir, role="supervisor", enabled=True)
    ctx = mp.get_context("spawn")
    episodes: mp.Queue = ctx.Queue(maxsize=64)
    stop = ctx.Event()
    checkpoint_dir = Path(args.run_dir).resolve() / "checkpoints"
    checkpoint_dir.mkdir(parents=True, exist_ok=True)
    with supervisor:
        with supervisor.phase("start_workers"):
            procs = [
                ctx.Process(target=actor, args=(i, episodes, stop), name=f"actor-{i}")
                for i in range(args.actors)
            ]
            procs.append(
                ctx.Process(
                    target=learner, args=(episodes, stop, str(checkpoint_dir)), name="learner"
                )
            )
            for p in procs:
                p.start()
        with supervisor.phase("supervise"):
            time.sleep(args.seconds)
            stop.set()
        with supervisor.phase("join_workers"):
            for p in procs:
                p.join(timeout=30)
    failed = [p.name for p in procs if p.exitcode != 0]
    print(
        f"run written to {supervisor.run_dir} (run id {supervisor.run_id}); failed: {failed or 'none'}"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
