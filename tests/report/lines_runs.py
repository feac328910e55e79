"""Real runs whose processes traced the lines of a phase, for the reading half of issue 32.

Until the recorder writes ``.lines`` sidecars itself, each child process here does what the
contract says a tracing process does (docs/worker-file.md, "Lines of a phase"): it records
phases with a real ``Profiler``, traces the chosen entries of ``train_step`` with a real
``LineProfiler``, times traced and untraced entries itself, and writes the sidecar beside its
worker file. The test reads back what the children counted (``truth.json``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from lineprofiler.runfile.layout import LINES_FORMAT, LINES_VERSION, lines_path
from tests.helpers import run_python

# The child: ``train_step``'s loop line is marked LOOP; ``only_in_first`` runs in process 0 only;
# ``outside`` runs in a phase that is not traced.
CHILD = r"""
import json, multiprocessing as mp, os, sys, time
from pathlib import Path

RUN, ENTRIES, TRACED, ITERS, PROCS = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
SIDECAR_EXTRA = json.loads(sys.argv[6]) if len(sys.argv) > 6 else {}


def only_in_first():
    y = 0
    y += 1  # ONLY_FIRST
    return y


def train_step(n, first):
    x = 0
    for i in range(n):
        x += i  # LOOP
    if first:
        only_in_first()
    return x


def outside():
    z = 0
    for j in range(50):
        z += j  # OUTSIDE
    return z


def child(index, q):
    from lineprofiler.accounting import Profiler
    from lineprofiler.line import LineProfiler

    p = Profiler(run_dir=RUN, role="learner", enabled=True, snapshot_interval_s=None,
                 sample_interval_s=None)
    lp = LineProfiler(project_folder=os.path.dirname(os.path.abspath(__file__)))
    traced_wall = untraced_wall = 0
    for e in range(ENTRIES):
        traced = e < TRACED
        t0 = time.perf_counter_ns()
        with p.phase("iteration"):
            with p.phase("train_step"):
                if traced:
                    lp.enable()
                train_step(ITERS, index == 0)
                if traced:
                    lp.disable()
        dt = time.perf_counter_ns() - t0
        if traced:
            traced_wall += dt
        else:
            untraced_wall += dt
    with p.phase("other"):
        outside()
    worker = p.worker_path
    p.close()
    rep = lp.report().to_dict()
    doc = {
        "format": "lineprofiler-lines", "version": 1, "pid": os.getpid(),
        "python": sys.version.split()[0], "mechanism": rep["mechanism"],
        "project_folder": rep["project_folder"], "paths": rep["paths"],
        "overhead_ns_per_event": rep["overhead_ns_per_event"],
        "phases": [{
            "path": "iteration/train_step", "requested": "train_step",
            "entries": ENTRIES, "traced_entries": TRACED,
            "traced_wall_ns": traced_wall, "untraced_wall_ns": untraced_wall,
            "functions": rep["functions"],
        }],
    }
    doc.update(SIDECAR_EXTRA)
    Path(str(worker)[:-len(".json")] + ".lines").write_text(json.dumps(doc))
    q.put({"pid": os.getpid(), "worker": str(worker), "index": index})


if __name__ == "__main__":
    os.environ["LINEPROFILER_RUN_ID"] = "t32-lines"
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    procs = [ctx.Process(target=child, args=(i, q)) for i in range(PROCS)]  # one each
    for pr in procs:
        pr.start()
    got = [q.get(timeout=180) for _ in procs]
    for pr in procs:
        pr.join()
    src = Path(__file__).read_text().splitlines()
    marks = {m: next(i for i, t in enumerate(src, 1) if t.rstrip().endswith("# " + m))
             for m in ("LOOP", "ONLY_FIRST", "OUTSIDE")}
    Path(RUN, "truth.json").write_text(json.dumps({"workers": got, "lines": marks,
                                                  "file": os.path.abspath(__file__)}))
"""


def traced_run(
    tmp_path: Path,
    *,
    procs: int = 3,
    entries: int = 6,
    traced: int = 2,
    iters: int = 200,
    extra: dict[str, Any] | None = None,
) -> tuple[Path, dict[str, Any]]:
    """A run of ``procs`` spawn processes (role "learner"), each tracing the
    first ``traced`` of ``entries`` entries of ``iteration/train_step``; the run directory and
    the children's own truth (their pids, worker files, the marked lines' numbers)."""
    run = tmp_path / "run"
    run_python(
        CHILD,
        cwd=tmp_path,
        args=[str(run), str(entries), str(traced), str(iters), str(procs)]
        + ([json.dumps(extra)] if extra else []),
        timeout=240,
    )
    truth = json.loads((run / "truth.json").read_text())
    (run / "truth.json").unlink()
    return run, truth


def sidecar_of(worker_file: str | os.PathLike[str]) -> Path:
    return lines_path(Path(worker_file))


def minimal_doc(pid: int, **over: Any) -> dict[str, Any]:
    """A valid sidecar document with one traced phase and one line."""
    doc: dict[str, Any] = {
        "format": LINES_FORMAT,
        "version": LINES_VERSION,
        "pid": pid,
        "python": "3.11.9",
        "mechanism": "settrace",
        "project_folder": "/p",
        "paths": [],
        "overhead_ns_per_event": None,
        "phases": [
            {
                "path": "iteration/train_step",
                "requested": "train_step",
                "entries": 2,
                "traced_entries": 1,
                "traced_wall_ns": 2000,
                "untraced_wall_ns": 1000,
                "functions": [
                    {
                        "file": "/p/t.py",
                        "function": "f",
                        "first_line": 1,
                        "last_line": 2,
                        "lines": [
                            {
                                "line": 2,
                                "hits": 5,
                                "time_ns": 100,
                                "self_time_ns": 90,
                                "source": "  x = 1",
                            }
                        ],
                        "body": ["def f():", "  x = 1"],
                    }
                ],
            }
        ],
    }
    doc.update(over)
    return doc
