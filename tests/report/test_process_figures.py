"""Figures derived from *processes*, where one process wrote several worker files (a Pool worker
with one profiler per task) and where workers closed, died or never closed: imbalance, the
processes per phase, which workers a caveat names, and which workers ran together.

The truth is the test's own: which pid wrote which file, each file's durations, start and last
write. In-process merge + the text and JSON renderers the CLI prints.
"""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

from lineprofiler.report.json import render_json
from lineprofiler.report.merge import merge_run
from lineprofiler.report.text import render_text
from tests.report.synth import MS, T0, Ph, worker_doc, write_worker


def _file(run_dir: Path, pid: int, n: int, phases: list[Ph], **kw) -> Path:
    """One worker file of process ``pid`` (its ``n``-th profiler: own uuid, same process)."""
    doc = worker_doc(role="pool", pid=pid, uuid=f"{pid:04x}{n:04x}", threads=phases, **kw)
    doc["meta"]["process_start"] = f"boot-1:{pid * 1000}"  # one process, however many files
    return write_worker(run_dir, doc)


def _pool_run(run_dir: Path) -> dict[int, dict[str, list[int]]]:
    """pid 11 ran 3 tasks (a file each: 1 x 1 s task, + a 1 s load in the first two);
    pid 12 ran 1 task of 3 s; pid 13 ran 2 tasks of 0.5 s (each with a 0.25 s load).
    Returns each process's durations per phase, over its files."""
    plan = {
        11: [[1000], [1000], [1000]],
        12: [[3000]],
        13: [[500], [500]],
    }
    loads = {11: [1000, 1000, 0], 12: [0], 13: [250, 250]}
    truth: dict[int, dict[str, list[int]]] = {}
    for pid, files in plan.items():
        truth[pid] = {"task": [], "load": []}
        for n, task in enumerate(files):
            phases = [Ph(("task",), durations=[d * MS for d in task])]
            truth[pid]["task"] += [d * MS for d in task]
            if loads[pid][n]:
                phases.append(Ph(("load",), durations=[loads[pid][n] * MS]))
                truth[pid]["load"].append(loads[pid][n] * MS)
            _file(run_dir, pid, n, phases, start_time=T0 + 100 * n, written_at=T0 + 100 * n + 90)
    return truth


def test_imbalance_and_processes_per_phase_count_processes_not_files(tmp_path):
    truth = _pool_run(tmp_path)
    busy = [sum(sum(v) for v in phases.values()) for phases in truth.values()]  # per process
    imbalance = max(busy) / statistics.fmean(busy)  # 5 s / ((5 + 3 + 1.5) / 3) = 1.58
    doc = json.loads(render_json(merge_run(tmp_path)))
    (role,) = doc["roles"]
    assert role["processes"] == 3
    assert math.isclose(role["imbalance"], imbalance, abs_tol=1e-6)  # JSON: 6 decimals
    text = render_text(merge_run(tmp_path))
    assert f"POOL  (3 processes, imbalance {imbalance:.2f}, busiest " in text
    phases = {p["name"]: p for p in role["phases"] if p["path"]}
    for name in ("task", "load"):
        recorded = sum(1 for t in truth.values() if t[name])  # processes with time in it
        assert phases[name]["processes"] == recorded, name
        assert phases[name]["calls"] == sum(len(t[name]) for t in truth.values())


def test_two_files_of_one_process_in_a_phase_are_one_process(tmp_path):
    """The smallest case: one process, two files, both in the phase; another process beside."""
    for n in range(2):
        _file(tmp_path, 21, n, [Ph(("step",), durations=[10 * MS])], start_time=T0 + 10 * n)
    _file(tmp_path, 22, 0, [Ph(("step",), durations=[20 * MS])])
    doc = json.loads(render_json(merge_run(tmp_path)))
    (step,) = [p for p in doc["roles"][0]["phases"] if p["path"] == ["step"]]
    assert step["processes"] == 2 and step["calls"] == 3
    assert math.isclose(doc["roles"][0]["imbalance"], 1.0)  # 20 ms each


def test_a_closed_worker_is_never_named_stale(tmp_path):
    """A worker that closed 10.5 minutes before the others is finished, not 'died or hung'; one
    that never closed and stopped writing as long ago is, and the caveat names it and how far
    behind it is."""
    ph = [Ph(("step",), durations=[10 * MS] * 3)]
    write_worker(tmp_path, worker_doc(role="w", pid=1, threads=ph, written_at=T0 + 10))
    write_worker(tmp_path, worker_doc(role="w", pid=2, threads=ph, written_at=T0 + 640))
    run = merge_run(tmp_path)
    assert [c.kind for c in run.caveats if c.kind == "stale"] == []
    assert "died or hung" not in render_text(run)
    write_worker(tmp_path, worker_doc(role="w", pid=3, threads=ph, written_at=T0 + 10, final=False))
    run = merge_run(tmp_path)
    (stale,) = [c for c in run.caveats if c.kind == "stale"]
    (hung,) = [w for w in run.workers if w.pid == 3]
    assert stale.workers == [hung.path]
    assert stale.message.startswith("1 worker(s) stopped writing")
    assert hung.stale_s == 630.0  # +640 s against +10 s
    assert stale.message.endswith(f": w {hung.label} 10m behind")  # 630 s, 2 significant digits


def test_a_killed_workers_lifetime_runs_one_interval_past_its_last_write(tmp_path):
    """Worker 1 never closed (killed): last write at +100 s, snapshots every 30 s, so it lived
    until +130 s. Worker 2 started at +110 s, inside that interval: one attempt, both merged."""
    ph = [Ph(("step",), durations=[10 * MS] * 3)]
    write_worker(
        tmp_path,
        worker_doc(
            role="w",
            pid=41,
            threads=ph,
            written_at=T0 + 100,
            final=False,
            snapshot_interval_s=30.0,
        ),
    )
    write_worker(
        tmp_path,
        worker_doc(role="w", pid=42, threads=ph, start_time=T0 + 110, written_at=T0 + 300),
    )
    run = merge_run(tmp_path)
    assert len(run.attempts) == 1 and run.superseded == []
    assert run.processes == 2
    assert not [c for c in run.caveats if "attempt" in c.kind]
    doc = json.loads(render_json(run))
    (role,) = doc["roles"]
    (step,) = [p for p in role["phases"] if p["path"] == ["step"]]
    assert step["calls"] == 6 and step["time_ns"] == 6 * 10 * MS
    # started after worker 1's lifetime (+130 s, and the 1 s of clock slack): a new attempt
    later = tmp_path / "later"
    write_worker(
        later,
        worker_doc(
            role="w", pid=41, threads=ph, written_at=T0 + 100, final=False, snapshot_interval_s=30.0
        ),
    )
    write_worker(
        later, worker_doc(role="w", pid=42, threads=ph, start_time=T0 + 132, written_at=T0 + 300)
    )
    run = merge_run(later)
    assert len(run.attempts) == 2 and run.processes == 1
