"""Issue 32 end to end: the recorder's own sidecars (env only, no code change) read by the report.

Four spawn processes inherit ``LINEPROFILER_LINES=train_step`` and
``LINEPROFILER_LINES_ENTRIES=all``; each counts its own loop iterations inside ``train_step``.
The report's JSON must show the loop line with exactly the hits they counted, seen in all four
processes, and no line of code that ran outside the phase."""

from __future__ import annotations

import json

import pytest

from tests.helpers import run_python

CLI = "from lineprofiler.cli import main; raise SystemExit(main())"
PROCS, ENTRIES, ITERS = 4, 5, 300

CHILD = f"""
import json, multiprocessing as mp, os, sys
from pathlib import Path

from lineprofiler.accounting import Profiler

ENTRIES, ITERS = {ENTRIES}, {ITERS}


def train_step(n):
    x = 0
    for i in range(n):
        x += i  # LOOP
    return x


def outside():
    z = 0
    for j in range(40):
        z += j  # OUTSIDE
    return z


def learner(q):
    p = Profiler(run_dir="run", role="learner", enabled=True, snapshot_interval_s=None,
                 sample_interval_s=None)
    loops = 0
    for _ in range(ENTRIES):
        with p.phase("iteration"):
            with p.phase("train_step"):
                train_step(ITERS)
                loops += ITERS
            outside()
    p.close()
    q.put(loops)


if __name__ == "__main__":
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    procs = [ctx.Process(target=learner, args=(q,)) for _ in range({PROCS})]
    for pr in procs:
        pr.start()
    counted = [q.get(timeout=120) for _ in procs]
    for pr in procs:
        pr.join()
    src = Path(__file__).read_text().splitlines()
    marks = {{m: next(i for i, t in enumerate(src, 1) if t.rstrip().endswith("# " + m))
             for m in ("LOOP", "OUTSIDE")}}
    print(json.dumps({{"loops": sum(counted), "file": os.path.realpath(__file__), **marks}}))
"""


def test_four_spawn_processes_env_only_every_entry(tmp_path):
    proc = run_python(
        CHILD,
        cwd=tmp_path,
        env={"LINEPROFILER_LINES": "train_step", "LINEPROFILER_LINES_ENTRIES": "all"},
        timeout=240,
    )
    truth = json.loads(proc.stdout.strip().splitlines()[-1])
    assert truth["loops"] == PROCS * ENTRIES * ITERS
    rep = run_python(CLI, cwd=tmp_path, args=["report", "--json", str(tmp_path / "run")])
    doc = json.loads(rep.stdout)
    (role,) = doc["roles"]
    phase = next(p for p in role["phases"] if p["name"] == "iteration/train_step")
    traced = phase["lines_traced"]
    assert traced["entries"] == PROCS * ENTRIES == traced["traced_entries"]
    assert traced["processes"] == PROCS and traced["slowdown"] is None  # every entry traced
    lines = {(ln["file"], ln["line"]): ln for ln in phase["lines"]}
    loop = lines[(truth["file"], truth["LOOP"])]
    assert loop["hits"] == truth["loops"]
    assert loop["processes"] == PROCS
    assert (truth["file"], truth["OUTSIDE"]) not in lines
    assert not [c for c in doc["caveats"] if c["kind"] == "lines_unreadable"]
    text = run_python(CLI, cwd=tmp_path, args=["report", str(tmp_path / "run")]).stdout
    assert "LINES IN iteration/train_step" in text and f"{truth['loops']:,}" in text


THREAD_NAMES = """
from lineprofiler.accounting import Profiler


def train_step():
    x = 0
    for i in range(100):
        x += i  # LOOP
    return x


p = Profiler(run_dir="run", role="learner", enabled=True, thread_names=True, lines="train_step",
             lines_entries=None, snapshot_interval_s=None, sample_interval_s=None)
for _ in range(3):
    with p.phase("iteration"):
        with p.phase("train_step"):
            train_step()
p.close()
"""


def test_with_thread_names_the_lines_go_under_the_thread_named_phase(tmp_path):
    """thread_names=True puts a thread's name first in every path; the sidecar names the phase's
    own path, and its lines go under the one row that ends in it."""
    run_python(THREAD_NAMES, cwd=tmp_path)
    rep = run_python(CLI, cwd=tmp_path, args=["report", "--json", str(tmp_path / "run")])
    (role,) = json.loads(rep.stdout)["roles"]
    traced = [p for p in role["phases"] if "lines" in p]
    assert [p["name"] for p in traced] == ["MainThread/iteration/train_step"]
    (loop,) = [ln for ln in traced[0]["lines"] if ln["source"].endswith("# LOOP")]
    assert loop["hits"] == 3 * 100  # every entry traced
    text = run_python(CLI, cwd=tmp_path, args=["report", str(tmp_path / "run")]).stdout
    assert "LINES IN MainThread/iteration/train_step" in text
    show = run_python(
        CLI,
        cwd=tmp_path,
        args=[
            "show",
            str(tmp_path / "run"),
            "--role",
            "learner",
            "--phase",
            "iteration/train_step",
        ],
    )
    assert show.returncode == 0 and " 300 " in show.stdout, show.stdout


SOME_ENTRIES = """
import json, time
from lineprofiler.accounting import Profiler

p = Profiler(run_dir="run", role="learner", enabled=True, lines="train_step", lines_entries=20,
             snapshot_interval_s=None, sample_interval_s=None)
slept = 0
for e in range(500):
    with p.phase("train_step"):
        x = 0
        for i in range(20):
            x += i
        if e % 100 == 0:
            t0 = time.perf_counter_ns()
            time.sleep(0.02)  # SLEEP
            slept += time.perf_counter_ns() - t0
p.close()
print(json.dumps({"slept_ns": slept}))
"""


def test_twenty_of_500_entries_traced_and_the_note_says_how_much_slower(tmp_path):
    """lines_entries=20 of a 500-entry phase: the report says 20 traced of 500, the phase's own
    counts are every entry, and the slowdown is the traced entries' mean wall over the others'.
    The sleep line (20 ms in 5 of the entries, the first of them always traced) shows at least
    95% of 20 ms per hit and never more than 105% of the sleeps the child timed itself (all of
    them, within 5%, when all 5 were traced)."""
    proc = run_python(SOME_ENTRIES, cwd=tmp_path)
    slept = json.loads(proc.stdout.strip().splitlines()[-1])["slept_ns"]
    rep = run_python(CLI, cwd=tmp_path, args=["report", "--json", str(tmp_path / "run")])
    (role,) = json.loads(rep.stdout)["roles"]
    phase = next(p for p in role["phases"] if p["name"] == "train_step")
    assert phase["calls"] == 500
    traced = phase["lines_traced"]
    assert (traced["entries"], traced["traced_entries"]) == (500, 20)
    assert traced["slowdown"] == pytest.approx(
        (traced["traced_wall_ns"] / 20) / (traced["untraced_wall_ns"] / 480), rel=1e-3
    )
    sleep = [ln for ln in phase["lines"] if ln["source"].endswith("# SLEEP")]
    (line,) = sleep  # entry 0 sleeps, and every schedule traces a process's first entries
    assert 1 <= line["hits"] <= 5
    assert line["hits"] * 20_000_000 * 0.95 <= line["time_ns"] <= slept * 1.05
    if line["hits"] == 5:  # every sleeping entry was traced: the whole sleep
        assert line["time_ns"] == pytest.approx(slept, rel=0.05)
    text = run_python(CLI, cwd=tmp_path, args=["report", str(tmp_path / "run")]).stdout
    assert (
        f"traced 20 of 500 entries in 1 process; traced entries took {traced['slowdown']:.2f}x"
        in text
    )
