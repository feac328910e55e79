"""A C handler a library installed outside Python (Python still reports SIG_DFL) stays the last
word on the signal: the profiler writes its final file first, then calls it (issue 27: torch's
DataLoader worker SIGTERM handler is one). Here the library handler is libc's ``_exit`` itself,
installed through ctypes, so the exit status says whether it ran: 15 from ``_exit(15)``, where
Python's own handler in its place would end the process by the signal (-15)."""

from __future__ import annotations

import signal

from tests.helpers import run_python
from tests.integration.runfiles import workers

K = 4

FOREIGN = f"""
import ctypes, os, signal, sys, time
from lineprofiler.accounting import Profiler

libc = ctypes.CDLL(None, use_errno=True)
libc.signal.restype = ctypes.c_void_p
libc.signal.argtypes = [ctypes.c_int, ctypes.c_void_p]
exit_now = ctypes.cast(libc._exit, ctypes.c_void_p)  # _exit(signum): a C handler of a library
assert libc.signal(signal.SIGTERM, exit_now) is None  # was SIG_DFL (0)
assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL  # Python does not know of it

p = Profiler(run_dir="run", role="worker", enabled=True,
             snapshot_interval_s=None, sample_interval_s=None)
for _ in range({K}):
    with p.phase("work"):
        p.count("items", 5)
if sys.argv[1] == "close-first":
    p.close()  # puts the library's handler back, not SIG_DFL
    assert libc.signal(signal.SIGTERM, exit_now) == exit_now.value
with p.phase("blocked"):
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(30)
print("not reached")
"""


def test_a_library_handler_under_python_runs_after_the_final_write(tmp_path):
    proc = run_python(FOREIGN, cwd=tmp_path, args=["signal"], check=False, timeout=60)
    assert proc.returncode == signal.SIGTERM, proc.stderr  # _exit(15): the library's handler
    assert "not reached" not in proc.stdout
    [w] = workers(tmp_path / "run")
    assert w.doc["final"] is True
    assert w.meta["exit_signal"] == "SIGTERM"
    assert w.calls("work") == K and w.counter("items", "work") == 5 * K
    assert w.tree[("blocked",)]["open"] == 1


def test_close_puts_the_library_handler_back(tmp_path):
    proc = run_python(FOREIGN, cwd=tmp_path, args=["close-first"], check=False, timeout=60)
    assert proc.returncode == signal.SIGTERM, proc.stderr  # its handler, not the default action
    [w] = workers(tmp_path / "run")
    assert w.doc["final"] is True
    assert "exit_signal" not in w.meta  # closed before the signal: nothing of ours ran
    assert w.calls("work") == K
