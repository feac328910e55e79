"""The reading side with no compiled core: a run recorded by the full build reads the same.

Each reader here runs with ``lineprofiler._core`` (and the two small C modules) made unimportable,
as on the pure install (docs/guide/pure-build.md); tests/integration/test_pure_wheel.py does the
same with a real py3-none-any wheel in a fresh venv. The ground truth is the full build's own
output for the same run: byte for byte.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.helpers import child_env, run_python

NATIVE = ("lineprofiler._core", "lineprofiler._follow_hook", "lineprofiler._signal_guard")

RECORD = """
import multiprocessing as mp, time
from lineprofiler.accounting import Profiler

def work(role):
    with Profiler(run_dir="run", role=role, enabled=True, snapshot_interval_s=None,
                  sample_interval_s=0.01) as p:
        for i in range(40):
            with p.phase("step"):
                with p.phase("load", io=True):
                    with open(__file__, "rb") as f:
                        f.read()
                with p.phase("compute"):
                    sum(range(20000))
                p.count("items", 3)
            time.sleep(0.002)

if __name__ == "__main__":
    ps = [mp.get_context("spawn").Process(target=work, args=(r,)) for r in ("actor", "learner")]
    [x.start() for x in ps]
    [x.join() for x in ps]
    assert [x.exitcode for x in ps] == [0, 0]

    from lineprofiler import LineProfiler
    def traced():
        total = 0
        for i in range(2000):
            total += i * i
        return total
    lp = LineProfiler(project_folder=".")
    with lp:
        traced()
    lp.dump_json("lines.json")
"""

# The CLI with the compiled modules unimportable (an ImportError, as where they were never built).
WITHOUT_CORE = (
    "import sys\n"
    f"for m in {NATIVE!r}:\n"
    "    sys.modules[m] = None\n"
    "from lineprofiler.cli import main\n"
    "sys.exit(main(sys.argv[1:]))\n"
)
WITH_CORE = "import sys\nfrom lineprofiler.cli import main\nsys.exit(main(sys.argv[1:]))\n"

COMMANDS = [
    ["report", "run"],
    ["report", "run", "--json"],
    ["report", "run", "--html", "{out}/report.html"],
    ["compare", "run", "run"],
    ["attempts", "run"],
    ["export", "run", "--perfetto", "{out}/trace.json"],
    ["show", "lines.json"],
]


def _read_all(cwd: Path, script: str, out: Path) -> list[tuple[int, bytes, bytes]]:
    out.mkdir()
    results = []
    for argv in COMMANDS:
        argv = [a.format(out=out) for a in argv]
        proc = subprocess.run(
            [sys.executable, "-c", script, *argv],
            cwd=cwd,
            env=child_env({"COLUMNS": "100"}),
            capture_output=True,
            timeout=120,
        )
        written = b"".join(p.read_bytes() for p in sorted(out.iterdir()) if p.name in argv[-1])
        results.append((proc.returncode, proc.stdout.replace(str(out).encode(), b"OUT"), written))
        assert proc.returncode == 0, (argv, proc.stderr.decode())
    return results


def test_a_run_reads_byte_identical_without_the_core(tmp_path):
    run_python(RECORD, cwd=tmp_path)
    samples = list((tmp_path / "run").glob("workers/*/*.samples"))
    assert len(samples) == 2  # the sampler's sidecars are read too (the timeline, the export)
    full = _read_all(tmp_path, WITH_CORE, tmp_path / "full")
    pure = _read_all(tmp_path, WITHOUT_CORE, tmp_path / "pure")
    for argv, a, b in zip(COMMANDS, full, pure, strict=True):
        assert a == b, argv
    # the outputs are the run's: two processes, 40 entries of step each, 120 items each
    doc = json.loads(full[1][1])
    assert doc["run"]["processes"] == 2
    assert len(full[2][2]) > 10_000 and len(full[5][2]) > 100  # the HTML and the trace


PURE_RECORDING = f"""
import json, sys, warnings
for m in {NATIVE!r}:
    sys.modules[m] = None
warnings.simplefilter("always")  # "once" must be the profiler's own, not the default filter's
from lineprofiler import LineProfiler, accounting
from lineprofiler._native import RecordingUnavailableWarning

with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    p = accounting.Profiler(run_dir="run", role="actor", enabled=True, install=True)
    with p.phase("step"):
        p.count("items", 2)
        current = p.current()
    with accounting.phase("module-level"):
        accounting.count("n")
    try:
        p.count("items", 1.5)
        float_count = "accepted"
    except TypeError:
        float_count = "TypeError"
    p.close()
    again = accounting.Profiler(run_dir="run", enabled=True)  # no second warning
    again.close()

    lp = LineProfiler(project_folder=".")
    with lp:
        sum(range(100))
    LineProfiler(project_folder=".")
    lp.print_stats()

messages = [(w.category.__name__, str(w.message)) for w in caught]
print(json.dumps(dict(messages=messages, current=current, float_count=float_count,
                      enabled=p.enabled, stats=len(lp.get_stats()), flush=p.flush_stats())))
"""


def test_recording_on_the_pure_install_warns_once_and_records_nothing(tmp_path):
    proc = run_python(PURE_RECORDING, cwd=tmp_path)
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    names = [m[0] for m in got["messages"]]
    assert names == ["RecordingUnavailableWarning", "RecordingUnavailableWarning"]
    assert "Profiler(enabled=True) records nothing" in got["messages"][0][1]
    assert "LineProfiler records nothing" in got["messages"][1][1]
    assert all("Linux" in m[1] for m in got["messages"])
    assert got["current"] == "" and got["enabled"] is False and got["stats"] == 0
    assert got["float_count"] == "TypeError"  # as the full build: a float count is a caller bug
    assert got["flush"]["writes"] == 0
    assert not (tmp_path / "run").exists()  # nothing was written
    assert "LineProfiler:" in proc.stdout  # print_stats printed the (empty) report's header


BROKEN_CORE = """
import importlib.abc, json, sys, warnings

class Broken(importlib.abc.MetaPathFinder):  # a _core that is here but cannot load
    def find_spec(self, name, path, target=None):
        if name == "lineprofiler._core":
            raise ImportError("/lib/libc.so.6: version `GLIBC_2.99' not found")
        return None

sys.meta_path.insert(0, Broken())
from lineprofiler.accounting import Profiler

with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    Profiler(run_dir="run", enabled=True).close()
print(json.dumps([str(w.message) for w in caught]))
"""


def test_a_core_that_does_not_load_is_named_in_the_warning(tmp_path):
    """Not "this is the pure install" when the wheel's _core is there but its glibc is too old."""
    proc = run_python(BROKEN_CORE, cwd=tmp_path)
    (message,) = json.loads(proc.stdout.strip().splitlines()[-1])
    assert "lineprofiler._core is installed but does not load here" in message
    assert "GLIBC_2.99" in message and "pure" not in message
    assert not (tmp_path / "run").exists()
