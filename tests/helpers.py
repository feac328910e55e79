"""The one subprocess helper for tests (and its environment), the in-process test profiler, and small
readers of worker files."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

from benchmarks.synth.child import child_env

from lineprofiler.accounting import Profiler

# child_env: one definition, shared with the benchmarks' children (benchmarks/synth/child.py).


def run_python(
    code: str,
    *,
    cwd: Path,
    env: dict[str, str] | None = None,
    timeout: float = 120.0,
    args: list[str] | None = None,
    check: bool = True,
    executable: str | None = None,
    wrapper: list[str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Runs dedented ``code`` in a fresh interpreter with faulthandler on.

    On timeout the child's stacks are dumped (faulthandler) before it is killed. ``__file__`` is
    the script's path, so multiprocessing's spawn and forkserver can re-import it in workers.
    ``wrapper`` is a command line the interpreter's own is appended to (e.g. ``["unshare", ...]``).
    """
    script = cwd / f"_child_{abs(hash(code)) % 10**8}.py"
    script.write_text(textwrap.dedent(code))
    full_env = child_env(env)
    prelude = [
        "-X",
        "faulthandler",
        "-c",
        f"import faulthandler,sys; faulthandler.dump_traceback_later({timeout - 5}, exit=True); "
        f"sys.argv=[{str(script)!r}]+sys.argv[1:]; __file__={str(script)!r}; "
        f"exec(compile(open({str(script)!r}).read(), {str(script)!r}, 'exec'))",
    ]
    proc = subprocess.run(
        [*(wrapper or []), executable or sys.executable, *prelude, *(args or [])],
        cwd=cwd,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if check and proc.returncode != 0:
        raise AssertionError(
            f"child exited {proc.returncode}\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}"
        )
    return proc


def worker_files(run_dir: Path) -> list[Path]:
    return sorted(Path(run_dir).glob("workers/*/w_*.json"))


def read_worker(path: Path) -> dict[str, Any]:
    return json.loads(Path(path).read_text())


def quiet_profiler(run_dir: Path, **kw: Any) -> Profiler:
    """An enabled profiler with no snapshot or sampler thread (the spec's recipe for tests); any
    keyword overrides those defaults."""
    kw.setdefault("enabled", True)
    kw.setdefault("snapshot_interval_s", None)
    kw.setdefault("sample_interval_s", None)
    return Profiler(run_dir=run_dir, **kw)


# The lost wake-up of an idle Pool worker, made deterministic: appended to a child's code (which
# sets SIG to a signal number), it raises SIG on another thread, so that Python's C handler flags
# the Python one while the main thread sleeps in a SemLock's sem_wait. Only a signal sent to the
# main thread (the guard's re-sends) wakes it before the 30 s timeout.
SLEEP_THROUGH_A_SIGNAL = """
import multiprocessing as _mp, signal as _signal, threading as _threading
_lock = _mp.get_context("fork").Lock()
_lock.acquire()
_threading.Timer(0.2, _signal.raise_signal, (SIG,)).start()
_lock.acquire(timeout=30)  # sem_wait: woken by a signal to this thread, or in 30 s
print("not ended", flush=True)
"""
GUARDED_WITHIN_S = 15  # unguarded, the handler runs only when the 30 s wait times out


def run_sleeping_through_a_signal(
    code: str, *, cwd: Path, args: list[str] | None = None
) -> tuple[subprocess.CompletedProcess[str], float]:
    """Runs ``code`` followed by SLEEP_THROUGH_A_SIGNAL; returns the process and its wall time."""
    import time

    t0 = time.monotonic()
    proc = run_python(
        textwrap.dedent(code) + SLEEP_THROUGH_A_SIGNAL, cwd=cwd, args=args, check=False, timeout=60
    )
    return proc, time.monotonic() - t0
