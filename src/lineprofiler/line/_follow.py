"""Following child processes under ``lineprofiler run``: their per-line stats merged into one.

The parent (``Follow``) makes a private directory (mode 0700) holding ``config`` (the
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
import os
import sys

try:  # the C module: `signal` imports enum, which a followed child's start-up can do without
    import _signal as signal
except ImportError:  # pragma: no cover - not CPython
    import signal  # type: ignore[no-redef]

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


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
        import tempfile
        from pathlib import Path

        self.profiler = profiler
        self.dir = Path(tempfile.mkdtemp(prefix="lineprofiler-follow-"))  # 0700
        # config: the subtraction flag, the project folder, then one extra path per line (plain
        # lines: the child reads them without importing json and re)
        folders = [str(profiler.project_folder), *(str(p) for p in profiler.paths)]
        if any("\n" in f for f in folders):
            raise ValueError("lineprofiler run: a folder name with a newline cannot be followed")
        flag = "1" if profiler.subtract_overhead else "0"
        (self.dir / "config").write_text("\n".join([flag, *folders]) + "\n")
        (self.dir / "sitecustomize.py").write_text(_SITECUSTOMIZE)
        self._saved_env = {k: os.environ.get(k) for k in (ENV, "PYTHONPATH")}
        os.environ[ENV] = str(self.dir)
        old = os.environ.get("PYTHONPATH")
        os.environ["PYTHONPATH"] = str(self.dir) + (os.pathsep + old if old else "")
        _register_fork_hook()
        _state.update(profiler=profiler, dir=str(self.dir), parent=True)

    def collect(self) -> list[Any]:
        """The reports the children wrote; removes the directory and restores the environment."""
        _state.clear()
        for k, v in self._saved_env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        import shutil

        from lineprofiler.line.report import LineReport

        reports = []
        for path in sorted(self.dir.glob("child_*.json")):
            try:
                reports.append(LineReport.load(path))
            except (OSError, ValueError, KeyError, TypeError):
                continue  # a child killed while writing: not counted
        shutil.rmtree(self.dir, ignore_errors=True)
        return reports


class _ChildTracer:
    """A child's tracer, started with only _core and the scope loaded (start-up stays cheap);
    the LineProfiler that reports it is built at exit, and only if it traced something."""

    def __init__(self, config: dict[str, Any]) -> None:
        from lineprofiler import _core
        from lineprofiler.line._scope import ProjectScope

        self.config = config
        folder = os.path.realpath(config["project_folder"])
        paths = [os.path.realpath(p) for p in config.get("paths") or ()]
        scope = ProjectScope(folder, extra=paths)
        self._core = _core
        self._tracer = _core.LineTracer(scope, scope.key)

    @property
    def active(self) -> bool:
        return self._tracer.active

    def enable(self) -> None:
        self._tracer.enable()
        if self._core.LINE_TRACER_MECHANISM == "settrace":  # 3.11: threads started later
            import threading

            threading.settrace(self._core._thread_hook)

    def disable(self) -> None:
        if self._core.LINE_TRACER_MECHANISM == "settrace":
            import threading

            threading.settrace(None)  # type: ignore[arg-type]
        self._tracer.disable()

    def clear(self) -> None:
        self._tracer.clear()

    def traced_anything(self) -> bool:
        return bool(self._tracer.results())

    def report(self) -> Any:
        from lineprofiler.line.profiler import LineProfiler

        profiler = LineProfiler(
            self.config["project_folder"],
            paths=self.config.get("paths") or (),
            subtract_overhead=bool(self.config.get("subtract_overhead", True)),
        )
        profiler._tracer = self._tracer  # report what this child's tracer recorded
        return profiler.report()


def start_child() -> None:
    """In a child started with LINEPROFILER_LINE_FOLLOW: trace it with the parent's scope."""
    folder = os.environ.get(ENV)
    if not folder or _state:
        return
    with open(os.path.join(folder, "config")) as f:
        flag, project, *paths = f.read().splitlines()
    config = {"project_folder": project, "paths": paths, "subtract_overhead": flag == "1"}
    tracer = _ChildTracer(config)
    _state.update(profiler=tracer, dir=folder, parent=False)
    tracer.enable()
    _arm_exit()
    _register_fork_hook()


def _arm_exit() -> None:
    atexit.register(_finish)
    try:
        if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
            signal.signal(signal.SIGTERM, _on_sigterm)
    except (ValueError, OSError):  # not the main thread
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
            path = os.path.join(folder, f"child_{os.getpid()}_{os.urandom(4).hex()}.json")
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
