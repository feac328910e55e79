"""Children keep the run, however they were started (issue 14): forked Pool workers with a
profiler per task, idle Pool workers, spawned workers that only call the module-level functions,
and torch DataLoader workers under fork and spawn.

Each test counts what its own code did (tasks run, samples loaded) and checks the merged run
against it.
"""

from __future__ import annotations

import importlib.util
import json

import pytest

from lineprofiler.accounting import merge_run
from tests.helpers import run_python

# A fork Pool(4) whose task builds a Profiler of its own each time (enabled through the
# environment the parent exported): closing one must not take the run away from the next.
POOL_PER_TASK = """
import multiprocessing as mp, os
from lineprofiler.accounting import Profiler

def task(i):
    with Profiler(role="task", snapshot_interval_s=None, sample_interval_s=None) as p:
        with p.phase("task"):
            p.count("items", i)
    return i, os.getpid()

if __name__ == "__main__":
    prof = Profiler(run_dir="run", role="driver", enabled=True,
                    snapshot_interval_s=None, sample_interval_s=None)
    with prof.phase("map"):
        with mp.get_context("fork").Pool(4) as pool:
            done = pool.map(task, range(64), chunksize=1)
    print("done", len(done), sum(i for i, _ in done), "pids", len({pid for _, pid in done}))
    prof.close()
"""


def test_fork_pool_with_a_profiler_per_task_records_every_task(tmp_path):
    out = run_python(POOL_PER_TASK, cwd=tmp_path, timeout=240).stdout
    assert "done 64 2016" in out
    pids = int(out.split("pids", 1)[1].split()[0])  # the pool processes that ran a task
    run = merge_run(tmp_path / "run", with_samples=False)
    assert len(run.roles["task"].workers) == 64  # a worker file per task profiler
    assert run.roles["task"].processes == pids  # counted once per process, not per file
    assert run.roles["task"].tree[("task",)].calls == 64
    assert run.roles["task"].tree[("task",)].counters == {"items": sum(range(64))}
    assert run.roles["driver"].processes == 1
    assert run.superseded == [] and run.unreadable == []
    assert "recorded_nothing" not in [c.kind for c in run.caveats]


# Four fork Pool workers inherit the installed profiler; one task for the whole pool, so three
# workers close cleanly having recorded nothing: idle, not "recorded nothing".
IDLE_POOL = """
import multiprocessing as mp, os
from lineprofiler import accounting
from lineprofiler.accounting import Profiler

def task(i):
    with accounting.phase("work"):
        accounting.count("items", 5)
    return os.getpid()

if __name__ == "__main__":
    prof = Profiler(run_dir="run", role="driver", enabled=True, install=True,
                    snapshot_interval_s=None, sample_interval_s=None)
    with accounting.phase("supervise"):
        pool = mp.get_context("fork").Pool(4)
        [busy] = pool.map(task, [0])
        pool.close()
        pool.join()
    print("busy", busy)
    prof.close()
"""


def test_idle_pool_workers_are_listed_not_caveats(tmp_path):
    # RANK=0 as a launcher would set it: the Pool workers inherit it, and claim nothing by it
    out = run_python(IDLE_POOL, cwd=tmp_path, timeout=120, env={"RANK": "0"}).stdout
    busy = int(out.split("busy", 1)[1].split()[0])
    run = merge_run(tmp_path / "run", with_samples=False)
    assert {n: r.processes for n, r in run.roles.items()} == {"driver": 1, "driver.child": 4}
    children = run.roles["driver.child"]
    assert [w.pid for w in children.workers if not w.idle] == [busy]
    assert sum(w.idle for w in children.workers) == 3
    assert children.tree[("work",)].calls == 1
    assert children.tree[("work",)].counters == {"items": 5}
    assert [c.kind for c in run.caveats] == []  # idle is healthy
    names = sorted(w.process_name or "" for w in children.workers)
    assert all(n.startswith("ForkPoolWorker-") for n in names), names
    text = run_python(
        "import sys; from lineprofiler.cli import main; sys.exit(main())",
        cwd=tmp_path,
        args=["report", "run", "--no-samples"],
    ).stdout
    assert "idle: 3 processes closed without recording a phase" in text
    assert "recorded nothing" not in text
    doc = json.loads(
        run_python(
            "import sys; from lineprofiler.cli import main; sys.exit(main())",
            cwd=tmp_path,
            args=["report", "run", "--json", "--no-samples"],
        ).stdout
    )
    [role] = [r for r in doc["roles"] if r["role"] == "driver.child"]
    assert len(role["idle"]) == 3 and role["busiest"]["pid"] == busy
    assert doc["caveats"] == []


# Spawned workers that only call accounting.phase()/count(): nothing installed in them, but the
# environment names the parent's run, so the first call joins it with a profiler of their own.
SPAWN_MODULE_LEVEL = """
import multiprocessing as mp, os, sys
from lineprofiler import accounting
from lineprofiler.accounting import Profiler

def work(i):
    if i == 2:
        os.environ["LINEPROFILER_ROLE"] = "evaluator"   # its own role, set before the first call
    for _ in range(i + 1):
        with accounting.phase("load_sample"):
            accounting.count("bytes", 10)

if __name__ == "__main__":
    prof = Profiler(run_dir="run", role="trainer", enabled=True, install=True,
                    snapshot_interval_s=None, sample_interval_s=None)
    ctx = mp.get_context(sys.argv[1])
    with accounting.phase("train"):
        procs = [ctx.Process(target=work, args=(i,)) for i in range(3)]
        for p in procs:
            p.start()
        for p in procs:
            p.join()
    print("exitcodes", [p.exitcode for p in procs])
    prof.close()
"""


@pytest.mark.parametrize("method", ["spawn", "forkserver"])
def test_spawned_workers_join_at_their_first_module_level_phase(tmp_path, method):
    out = run_python(SPAWN_MODULE_LEVEL, cwd=tmp_path, args=[method], timeout=180).stdout
    assert "exitcodes [0, 0, 0]" in out
    run = merge_run(tmp_path / "run", with_samples=False)
    roles = {n: r.processes for n, r in run.roles.items()}
    assert roles == {"trainer": 1, "trainer.child": 2, "evaluator": 1}
    assert run.roles["trainer.child"].tree[("load_sample",)].calls == 1 + 2
    assert run.roles["evaluator"].tree[("load_sample",)].calls == 3
    assert run.tree[("load_sample",)].counters == {"bytes": 60}
    assert ("load_sample",) not in run.roles["trainer"].tree
    assert run.superseded == [] and [c.kind for c in run.caveats] == []


# torch DataLoader workers: every load_sample counted, under the loader role, never the trainer's.
DATALOADER = """
import sys
import torch
from torch.utils.data import DataLoader, Dataset
from lineprofiler import accounting
from lineprofiler.accounting import Profiler

N, EPOCHS, WORKERS = 24, 2, 2

class Samples(Dataset):
    def __len__(self):
        return N
    def __getitem__(self, i):
        with accounting.phase("load_sample"):
            accounting.count("samples", 1)
            return torch.tensor([i])

if __name__ == "__main__":
    method, persistent = sys.argv[1], sys.argv[2] == "persistent"
    prof = Profiler(run_dir="run", role="trainer", enabled=True, install=True,
                    snapshot_interval_s=None, sample_interval_s=None)
    loader = DataLoader(Samples(), batch_size=4, num_workers=WORKERS,
                        multiprocessing_context=method, persistent_workers=persistent)
    seen = 0
    for _ in range(EPOCHS):
        for batch in loader:
            with accounting.phase("train_step"):
                seen += len(batch)
    del loader
    print("seen", seen)
    prof.close()
"""


@pytest.mark.parametrize("persistent", ["persistent", "transient"])
@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_dataloader_workers_are_the_loader_role(tmp_path, method, persistent):
    if importlib.util.find_spec("torch") is None:
        pytest.skip("torch is not installed (pip install torch==2.13.0)")
    out = run_python(DATALOADER, cwd=tmp_path, args=[method, persistent], timeout=300).stdout
    assert "seen 48" in out
    run = merge_run(tmp_path / "run", with_samples=False)
    loaders = 2 if persistent == "persistent" else 2 * 2  # new workers each epoch otherwise
    assert {n: r.processes for n, r in run.roles.items()} == {
        "trainer": 1,
        "trainer.loader": loaders,
    }
    loader = run.roles["trainer.loader"]
    assert loader.tree[("load_sample",)].calls == 48
    assert loader.tree[("load_sample",)].counters == {"samples": 48}
    assert run.roles["trainer"].tree[("train_step",)].calls == 12
    assert ("load_sample",) not in run.roles["trainer"].tree
    names = sorted(w.process_name or "" for w in loader.workers)
    assert set(names) == {"loader worker 0", "loader worker 1"}, names
    assert run.superseded == [] and run.unreadable == []
    assert [c.kind for c in run.caveats] == []


# LINEPROFILER_PROFILE=1 and a run directory from the shell: a module-level phase before the
# script builds its own profiler joins the run; the script's own profiler then takes over.
JOIN_THEN_OWN = """
import warnings
from lineprofiler import accounting
from lineprofiler.accounting import Profiler

warnings.simplefilter("error")          # no "another profiler is already installed"
with accounting.phase("early"):
    pass
prof = Profiler(role="learner", install=True, snapshot_interval_s=None, sample_interval_s=None)
for _ in range(3):
    with accounting.phase("late"):
        pass
prof.close()
print("ok")
"""


def test_a_profiler_built_after_a_joined_phase_takes_over(tmp_path):
    env = {"LINEPROFILER_PROFILE": "1", "LINEPROFILER_RUN_DIR": str(tmp_path / "run")}
    assert "ok" in run_python(JOIN_THEN_OWN, cwd=tmp_path, env=env).stdout
    run = merge_run(tmp_path / "run", with_samples=False)
    assert {n: r.processes for n, r in run.roles.items()} == {"learner": 1, "main": 1}
    assert run.roles["main"].tree[("early",)].calls == 1
    assert run.roles["learner"].tree[("late",)].calls == 3
    assert ("early",) not in run.roles["learner"].tree
    assert run.superseded == [] and [c.kind for c in run.caveats] == []
