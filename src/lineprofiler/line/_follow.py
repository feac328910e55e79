"""Following child processes under ``lineprofiler run``: their per-line stats merged into one.

The parent (``Follow``) makes a private directory (mode 0700) holding ``config.json`` (the
scope) and a ``sitecustomize.py``, and puts both in the environment: LINEPROFILER_LINE_FOLLOW
names the directory and PYTHONPATH starts with it. A Python process started with the same
interpreter (``subprocess``, multiprocessing's spawn and forkserver) imports that
sitecustomize at start-up, which starts a LineProfiler with the parent's scope (then runs the
sitecustomize it shadows, if any). A forked child (multiprocessing's fork, os.fork) keeps the
tracer it inherited and forgets the parent's statistics. Each child writes its statistics as
``child_<pid>_<random>.json`` into the directory when it exits (atexit, multiprocessing's exit
finalizers, SIGTERM from ``Pool.terminate``); the parent merges them and removes the directory,
so nothing is left behind. A child that ends with os._exit() or SIGKILL is not counted.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import signal
import sys
import tempfile
import threading
import uuid
from pathlib import Path
from typing import Any

from lineprofiler.line.report import LineReport

ENV = "LINEPROFILER_LINE_FOLLOW"

_SITECUSTOMIZE = """\
# Written by lineprofiler run (removed after the run): traces this Python child process.
def _lineprofiler_follow():
    import importlib.machinery, importlib.util, os, sys
    try:
        from lineprofiler.line import _follow
        _follow.start_child()
    except Exception as exc:  # never break the child's start-up
        sys.stderr.write(f"lineprofiler: not following this process: {exc!r}\\n")
    here = os.path.dirname(os.path.abspath(__file__))
    path = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is not None and spec.loader is not None:  # the sitecustomize this one shadows
        module = importlib.util.module_from_spec(spec)
        sys.modules["sitecustomize"] = module
        spec.loader.exec_module(module)


_lineprofiler_follow()
del _lineprofiler_follow
"""

_state: dict[str, Any] = {}  # "profiler", "dir": this process's followed profiler
_fork_hook_registered = False
_token = type("_Token", (), {})()  # multiprocessing's after-fork registry needs a live object


class Follow:
    """Sets up following for the duration of a ``lineprofiler run`` (see the module doc)."""

    def __init__(self, profiler: Any) -> None:
        self.profiler = profiler
        self.dir = Path(tempfile.mkdtemp(prefix="lineprofiler-follow-"))  # 0700
        config = {
            "project_folder": str(profiler.project_folder),
            "paths": [str(p) for p in profiler.paths],
            "subtract_overhead": bool(profiler.subtract_overhead),
        }
        (self.dir / "config.json").write_text(json.dumps(config))
        (self.dir / "sitecustomize.py").write_text(_SITECUSTOMIZE)
        self._saved_env = {k: os.environ.get(k) for k in (ENV, "PYTHONPATH")}
        os.environ[ENV] = str(self.dir)
        old = os.environ.get("PYTHONPATH")
        os.environ["PYTHONPATH"] = str(self.dir) + (os.pathsep + old if old else "")
        _register_fork_hook()
        _state.update(profiler=profiler, dir=str(self.dir), parent=True)

    def collect(self) -> list[LineReport]:
        """The reports the children wrote; removes the directory and restores the environment."""
        _state.clear()
        for k, v in self._saved_env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        reports = []
        for path in sorted(self.dir.glob("child_*.json")):
            try:
                reports.append(LineReport.load(path))
            except (OSError, ValueError, KeyError, TypeError):
                continue  # a child killed while writing: not counted
        shutil.rmtree(self.dir, ignore_errors=True)
        return reports


def start_child() -> None:
    """In a child started with LINEPROFILER_LINE_FOLLOW: trace it with the parent's scope."""
    from lineprofiler.line.profiler import LineProfiler

    folder = os.environ.get(ENV)
    if not folder or _state:
        return
    config = json.loads((Path(folder) / "config.json").read_text())
    profiler = LineProfiler(
        config["project_folder"],
        paths=config.get("paths") or (),
        subtract_overhead=bool(config.get("subtract_overhead", True)),
    )
    _state.update(profiler=profiler, dir=folder, parent=False)
    profiler.enable()
    _arm_exit()
    _register_fork_hook()


def _arm_exit() -> None:
    atexit.register(_finish)
    if threading.current_thread() is threading.main_thread():
        try:
            if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
                signal.signal(signal.SIGTERM, _on_sigterm)
        except (ValueError, OSError):
            pass
    mp_util = sys.modules.get("multiprocessing.util")
    if mp_util is not None:  # a multiprocessing child ends with os._exit after its finalizers
        mp_util.Finalize(None, _finish, exitpriority=-1000)


def _on_sigterm(signum: int, frame: Any) -> None:
    if _state.get("writing"):  # Pool.terminate() while the child saves at its normal exit
        _state["terminate"] = True
        return
    _finish()
    _die()


def _die() -> None:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGTERM)


def _finish() -> None:
    """Stops this child's tracing and writes its report (once)."""
    profiler, folder = _state.get("profiler"), _state.get("dir")
    if profiler is None or _state.get("parent") or _state.get("written"):
        return
    _state["written"] = _state["writing"] = True
    try:
        profiler.disable()
        # A process that traced nothing writes nothing and skips the calibration.
        if profiler._tracer.results():
            path = Path(folder) / f"child_{os.getpid()}_{uuid.uuid4().hex[:8]}.json"
            profiler.report().dump(path)
    except Exception as exc:  # never raise at the child's exit
        sys.stderr.write(f"lineprofiler: could not save this child's line stats: {exc!r}\n")
    finally:
        _state["writing"] = False
    if _state.pop("terminate", False):
        _die()


def finish_child() -> None:
    """Saves this child's statistics now (a forked ``lineprofiler run`` ending its target)."""
    _finish()


def _after_fork_in_child() -> None:
    profiler = _state.get("profiler")
    if profiler is None or not profiler.active:
        return
    profiler.clear()  # the parent's statistics are the parent's
    _state["parent"] = False
    _state.pop("written", None)
    _arm_exit()
    mp_util = sys.modules.get("multiprocessing.util")
    if mp_util is not None:  # multiprocessing clears its finalizers in the child: re-arm after
        mp_util.register_after_fork(
            _token, lambda _obj: mp_util.Finalize(None, _finish, exitpriority=-1000)
        )


def _register_fork_hook() -> None:
    global _fork_hook_registered
    if not _fork_hook_registered:
        os.register_at_fork(after_in_child=_after_fork_in_child)
        _fork_hook_registered = True
