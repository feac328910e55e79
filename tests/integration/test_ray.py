"""Ray actors on a local Ray cluster (``ray.init()`` on this machine): each actor process builds
``Profiler(run_dir=<absolute>, role="actor")`` and the driver is the learner. The actors are
started by Ray's raylet, not by the driver, and make their own run ids: the report must still
show one run with the right roles and counts (issue 14)."""

from __future__ import annotations

import importlib.util
import json
import shutil
import tempfile

import pytest

from lineprofiler.accounting import merge_run
from tests.helpers import run_python

pytestmark = [pytest.mark.slow]

RAY_RUN = """
import os, sys
import ray
from lineprofiler.accounting import Profiler

RUN_DIR = os.path.abspath("run")   # absolute: an actor's working directory is Ray's, not ours

@ray.remote(num_cpus=0)
class Actor:
    def __init__(self):
        self.p = Profiler(run_dir=RUN_DIR, role="actor", enabled=True,
                          snapshot_interval_s=None, sample_interval_s=None)
    def play(self, n):
        for _ in range(n):
            with self.p.phase("self_play"):
                self.p.count("moves", 3)
        return os.getpid()
    def close(self):          # Ray ends actor processes without atexit: close before that
        self.p.close()

if __name__ == "__main__":
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             _temp_dir=sys.argv[1])
    learner = Profiler(run_dir=RUN_DIR, role="learner", enabled=True,
                       snapshot_interval_s=None, sample_interval_s=None)
    actors = [Actor.remote() for _ in range(3)]
    with learner.phase("train"):
        pids = ray.get([a.play.remote(i + 1) for i, a in enumerate(actors)])
        ray.get([a.close.remote() for a in actors])
    learner.close()
    ray.shutdown()
    print("pids", sorted(pids), os.getpid())
"""


def test_ray_actors_and_driver_are_one_run(tmp_path):
    if importlib.util.find_spec("ray") is None:
        pytest.skip("ray is not installed (pip install ray)")
    # Ray's session directory holds Unix sockets, whose paths may not exceed 107 bytes: tmp_path
    # is too deep, so Ray alone gets a short temporary folder, removed afterwards.
    ray_tmp = tempfile.mkdtemp(prefix="lpray")
    try:
        out = run_python(
            RAY_RUN,
            cwd=tmp_path,
            args=[ray_tmp],
            env={"RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"},
            timeout=300,
        ).stdout
    finally:
        shutil.rmtree(ray_tmp, ignore_errors=True)
    line = out.split("pids", 1)[1].splitlines()[0]
    actor_pids = json.loads(line.rsplit("]", 1)[0] + "]")
    driver_pid = int(line.rsplit("]", 1)[1])
    run = merge_run(tmp_path / "run", with_samples=False)
    assert {n: r.processes for n, r in run.roles.items()} == {"actor": 3, "learner": 1}
    assert sorted(w.pid for w in run.roles["actor"].workers) == actor_pids
    assert [w.pid for w in run.roles["learner"].workers] == [driver_pid]
    assert run.roles["actor"].tree[("self_play",)].calls == 1 + 2 + 3
    assert run.roles["actor"].tree[("self_play",)].counters == {"moves": 18}
    assert run.roles["learner"].tree[("train",)].calls == 1
    assert run.superseded == [] and [c.kind for c in run.caveats] == []
    assert len(run.attempts) == 1
