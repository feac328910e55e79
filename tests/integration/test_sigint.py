"""Ctrl-C (SIGINT) in a profiled Python process: Python's own handler raises KeyboardInterrupt,
which unwinds the open phases and leaves through atexit, where the profiler writes its final file;
the process still ends by SIGINT. The profiler installs nothing for SIGINT (issue 27 item 9)."""

from __future__ import annotations

import signal

from tests.helpers import run_python
from tests.integration.runfiles import workers

K = 5

INTERRUPTED = f"""
import os, signal, subprocess, time
from lineprofiler.accounting import Profiler

p = Profiler(run_dir="run", role="worker", enabled=True,
             snapshot_interval_s=None, sample_interval_s=None)
assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
for _ in range({K}):
    with p.phase("work"):
        p.count("items", 2)
subprocess.Popen(["sh", "-c", f"sleep 0.3; kill -s INT {{os.getpid()}}"])
with p.phase("blocked"):
    time.sleep(30)
print("not reached")
"""


def test_ctrl_c_unwinds_and_the_atexit_hook_writes_the_final_file(tmp_path):
    proc = run_python(INTERRUPTED, cwd=tmp_path, check=False, timeout=60)
    assert proc.returncode == -signal.SIGINT, proc.stderr  # Python re-raises it after cleanup
    assert "KeyboardInterrupt" in proc.stderr
    assert "not reached" not in proc.stdout
    [w] = workers(tmp_path / "run")
    assert w.doc["final"] is True
    assert w.calls("work") == K
    assert w.counter("items", "work") == 2 * K
    blocked = w.tree[("blocked",)]
    assert blocked["calls"] == 1 and blocked["open"] == 0  # closed by the unwinding exception
    assert blocked["wall_ns"] >= 0.25e9  # it was open when the signal came, 0.3 s in
    assert "exit_signal" not in w.meta  # not a flush signal of ours: an ordinary exit
