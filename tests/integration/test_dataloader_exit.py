"""Persistent torch DataLoader workers whose loader is still alive at interpreter exit (issue 27).

multiprocessing's exit handler SIGTERMs them; torch's own SIGTERM handler (installed at the start
of each worker's loop) ends a worker at once when its parent sent the signal. The profiler must
write each worker's final file first, under the loader role, and must not turn torch's quiet
exit into a death by signal that the parent reports ("DataLoader worker ... is killed by
signal"). Ground truth: every load_sample appends its pid to a file of the script's own.
"""

from __future__ import annotations

import importlib.util
from collections import Counter

import pytest

from lineprofiler.accounting import merge_run
from tests.helpers import run_python
from tests.integration.runfiles import workers

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        importlib.util.find_spec("torch") is None,
        reason="torch is not installed (pip install torch==2.13.0)",
    ),
]

# The loader is never deleted and the trainer's profiler never closed: both go at exit.
LOADER_ALIVE_AT_EXIT = """
import atexit, glob, json, os, sys, time

# Registered before multiprocessing is imported, so it runs after multiprocessing's exit handler
# has terminated and joined the workers: how each ended, as multiprocessing saw it.
workers = []
atexit.register(lambda: print("exitcodes", sorted(w.exitcode for w in workers)))

import multiprocessing
import torch
from torch.utils.data import DataLoader, Dataset
from lineprofiler import accounting
from lineprofiler.accounting import Profiler

method, n, epochs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
snapshot_s = float(sys.argv[4]) or None
LOADS = os.path.abspath("loads.txt")

class Samples(Dataset):
    def __len__(self):
        return n
    def __getitem__(self, i):
        with accounting.phase("load_sample"):
            accounting.count("samples", 1)
            fd = os.open(LOADS, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
            os.write(fd, f"{os.getpid()}\\n".encode())
            os.close(fd)
            return torch.tensor([i])

if __name__ == "__main__":
    prof = Profiler(run_dir="run", role="trainer", enabled=True, install=True,
                    snapshot_interval_s=snapshot_s, sample_interval_s=None)
    loader = DataLoader(Samples(), batch_size=4, num_workers=2,
                        multiprocessing_context=method, persistent_workers=True)
    seen = 0
    for _ in range(epochs):
        for batch in loader:
            with accounting.phase("train_step"):
                seen += len(batch)
    workers.extend(multiprocessing.active_children())
    print("seen", seen, "workers", len(workers))
    if snapshot_s:  # the workers' files on disk while they live (what a SIGKILL would leave)
        pids, deadline = {w.pid for w in workers}, time.monotonic() + 20
        while True:
            metas = [json.load(open(f))["meta"] for f in glob.glob("run/workers/*/w_*.json")]
            mid_run = sorted(m["role"] for m in metas if m["pid"] in pids)
            if mid_run.count("trainer.loader") == len(pids) or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        print("mid-run roles", mid_run)
"""


def run_and_check(tmp_path, method: str, n: int, epochs: int, snapshot_s: float) -> None:
    tmp_path.mkdir(exist_ok=True)
    args = [method, str(n), str(epochs), str(snapshot_s)]
    proc = run_python(LOADER_ALIVE_AT_EXIT, cwd=tmp_path, args=args, timeout=300)
    assert f"seen {n * epochs} workers 2" in proc.stdout
    assert "exitcodes [0, 0]" in proc.stdout  # torch's quiet exit, not a death by SIGTERM
    if snapshot_s:  # the periodic writes name the loader role before any final write
        assert "mid-run roles ['trainer.loader', 'trainer.loader']" in proc.stdout, proc.stdout
    # torch's quiet exit stays quiet: no worker reported killed by a signal at exit.
    assert "Exception ignored" not in proc.stderr, proc.stderr
    assert "killed by signal" not in proc.stderr, proc.stderr
    loads = Counter(int(line) for line in (tmp_path / "loads.txt").read_text().split())
    assert sum(loads.values()) == n * epochs

    run = merge_run(tmp_path / "run", with_samples=False)
    assert {name: r.processes for name, r in run.roles.items()} == {
        "trainer": 1,
        "trainer.loader": 2,
    }
    loader = run.roles["trainer.loader"]
    assert loader.tree[("load_sample",)].calls == n * epochs
    assert loader.tree[("load_sample",)].counters == {"samples": n * epochs}
    assert run.roles["trainer"].tree[("train_step",)].calls == -(-n // 4) * epochs
    assert [c.kind for c in run.caveats] == []

    # Each worker file holds exactly what that process loaded, and is final.
    by_pid = {w.meta["pid"]: w for w in workers(tmp_path / "run") if w.meta["role"] != "trainer"}
    assert set(by_pid) == set(loads)
    for pid, w in by_pid.items():
        assert w.calls("load_sample") == loads[pid], pid
        assert w.doc["final"] is True
        assert w.meta["role"] == "trainer.loader"
        assert w.meta["exit_signal"] == "SIGTERM"


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_persistent_workers_alive_at_exit_keep_every_sample(tmp_path, method):
    for attempt in range(3):  # the exit races the parent's SIGCHLD handler: run it several times
        run_and_check(tmp_path / str(attempt), method, n=24, epochs=2, snapshot_s=0)


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_a_longer_run_with_periodic_writes_keeps_every_sample(tmp_path, method):
    run_and_check(tmp_path, method, n=240, epochs=2, snapshot_s=0.2)
