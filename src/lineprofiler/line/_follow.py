"""Following child processes under ``lineprofiler run``: their per-line stats merged into one.

The parent (``Follow``) makes a private directory (mode 0700) holding ``config`` (the
scope) and a ``sitecustomize.py``, and puts both in the environment: LINEPROFILER_LINE_FOLLOW
names the directory and PYTHONPATH starts with it. A Python process started with the same
interpreter (``subprocess``, multiprocessing's spawn and forkserver) imports that
sitecustomize at start-up, which arms a wake-up call (then runs the sitecustomize it shadows, if
any): the child starts a tracer with the parent's scope only when code from a file in scope is
about to run (``_follow_hook``, an audit hook on exec/run_file), so a child that never runs
such code runs untraced and writes nothing. A forked child (multiprocessing's fork, os.fork)
keeps the tracer it inherited and forgets the parent's statistics. The forkserver daemon traces
nothing itself: the children it forks start tracing at the fork when the daemon had imported
code in scope (its preloaded main module), else when they first run such code. Each child
writes its statistics as ``child_<pid>_<random>.json`` into the directory when it exits
(atexit, multiprocessing's exit finalizers, SIGTERM from ``Pool.terminate``); the parent merges
them and removes the directory, so nothing is left behind. A child that ends with os._exit() or
SIGKILL is not counted.
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
    import os, sys
    try:
        from lineprofiler.line import _follow
        _follow.start_child()
    except Exception as exc:  # never break the child's start-up
        sys.stderr.write(f"lineprofiler: not following this process: {exc!r}\\n")
    # The sitecustomize this one shadows, if any, found and run with the import system's own
    # (frozen, always loaded) machinery: importlib.util would cost the child's start-up.
    here = os.path.dirname(os.path.abspath(__file__))
    path = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    machinery = sys.modules["_frozen_importlib_external"]
    spec = machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is not None and spec.loader is not None:
        module = sys.modules["_frozen_importlib"].module_from_spec(spec)
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
        import py_compile

        # compiled once here, not in every child (PYTHONDONTWRITEBYTECODE still reads a .pyc)
        py_compile.compile(str(self.dir / "sitecustomize.py"), doraise=False, quiet=2)
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
    """A child's tracer (over a ProjectScope), started with only _core and the scope loaded; the
    LineProfiler that reports it is built at exit, and only if it traced something."""

    def __init__(self, config: dict[str, Any], scope: Any) -> None:
        from lineprofiler import _core

        self.config = config
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
    """In a child started with LINEPROFILER_LINE_FOLLOW: trace it with the parent's scope, from
    the moment code from a file in scope is about to run (``_wake``). Until then the child runs
    with no tracer at all: a process that never runs code in scope pays only this start-up."""
    folder = os.environ.get(ENV)
    if not folder or _state:
        return
    with open(os.path.join(folder, "config")) as f:
        flag, project, *paths = f.read().splitlines()
    config = {"project_folder": project, "paths": paths, "subtract_overhead": flag == "1"}
    _state.update(dir=folder, parent=False, config=config)
    _install_profile_builtin()
    if _is_forkserver_daemon():
        _state["defer"] = True  # wake its children at the fork instead (_after_fork_in_child)
        _register_fork_hook()
    from lineprofiler import _follow_hook

    _follow_hook.arm(_wake)


def _install_profile_builtin() -> None:
    """``profile`` as a builtin, as under ``run`` in the parent (a spawned child re-imports a
    script decorated with a bare ``@profile``): it marks the function to trace and returns it
    unchanged; marked before the tracer starts, it is added when it starts."""
    import builtins

    if "profile" in builtins.__dict__:
        return

    def profile(func):
        code = getattr(getattr(func, "__func__", func), "__code__", None)
        tracer = _state.get("profiler")
        if tracer is not None and hasattr(code, "co_code"):
            tracer._tracer.add_code(code)
        elif hasattr(code, "co_code"):
            _state.setdefault("marked", []).append(code)
        return func

    builtins.profile = profile  # type: ignore[attr-defined]


def _is_forkserver_daemon() -> bool:
    argv = getattr(sys, "orig_argv", ())
    return any(a.startswith("from multiprocessing.forkserver import main") for a in argv)


def _wake(filename: str) -> bool:
    """Called by _follow_hook's audit hook before code from ``filename`` first runs here: starts
    the tracer and returns True when the file is in scope; False keeps waiting."""
    config = _state.get("config")
    if config is None or _state.get("profiler") is not None:
        return True  # nothing to follow, or already tracing: disarm
    if not _may_be_in_scope(filename, config):
        return False
    scope = _state.get("scope")
    if scope is None:
        from lineprofiler.line._scope import ProjectScope

        scope = _state["scope"] = ProjectScope(config["project_folder"], extra=config["paths"])
    if not scope(filename):
        return False
    if _state.get("defer"):
        _state["pending"] = True  # the forkserver daemon: its children trace from the fork
        return True
    try:
        _start_tracer(config, scope)
    except Exception as exc:  # another tracer runs here (a debugger, coverage): say so, once
        sys.stderr.write(f"lineprofiler: not following this process: {exc!r}\n")
    return True


def _start_tracer(config: dict[str, Any], scope: Any) -> None:
    tracer = _ChildTracer(config, scope)
    for code in _state.pop("marked", ()):  # marked with @profile before the tracer started
        tracer._tracer.add_code(code)
    tracer.enable()  # raises when another tracer is installed
    _state["profiler"] = tracer
    _arm_exit()
    # A multiprocessing child woken before its Process._bootstrap (spawn and forkserver children
    # import the main module first) has its finalizers cleared there: re-arm after it.
    _rearm_finalizer()
    _register_fork_hook()


def _may_be_in_scope(filename: str, config: dict[str, Any]) -> bool:
    """A cheap test that never says no to a file in scope: its folder (symlinks resolved) lies
    under the project folder or an extra path, or the file itself is a symbolic link."""
    if not filename or filename.startswith("<"):
        return False
    roots = _state.get("roots")
    if roots is None:
        folders = [config["project_folder"], *config["paths"]]
        roots = _state["roots"] = [os.path.realpath(p).rstrip(os.sep) + os.sep for p in folders]
    dirs = _state.setdefault("dirs", {})
    folder = os.path.dirname(os.path.abspath(filename))
    real = dirs.get(folder)
    if real is None:
        real = dirs[folder] = os.path.realpath(folder) + os.sep
    return any(real.startswith(root) for root in roots) or os.path.islink(filename)


def _arm_exit() -> None:
    atexit.register(_finish)
    try:
        from lineprofiler import _signal_guard

        if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
            # Python's SIG_DFL may hide a library's C handler (installed outside Python, as
            # torch's DataLoader worker does): keep it, to call after saving (_die).
            _signal_guard.note_foreign(signal.SIGTERM)
            signal.signal(signal.SIGTERM, _on_sigterm)
        if signal.getsignal(signal.SIGTERM) is _on_sigterm:
            # A SIGTERM landing just before the main thread blocks (a Pool worker waiting for a
            # task) would leave the handler unrun and Pool.terminate() waiting forever.
            _signal_guard.guard(signal.SIGTERM)
    except (ValueError, OSError):  # not the main thread
        pass
    _cooperate_with_torch()
    mp_util = sys.modules.get("multiprocessing.util")
    if mp_util is not None:  # a multiprocessing child ends with os._exit after its finalizers
        mp_util.Finalize(None, _finish, exitpriority=-1000)


_TORCH_SIGNALS = "torch.utils.data._utils.signal_handling"


def _cooperate_with_torch() -> None:
    """A torch DataLoader worker installs a C SIGTERM handler over ours at the start of its loop
    (it ends the worker at once, saving nothing): when torch's data loading is loaded, ours goes
    back in front right after that set-up, keeping torch's to call after saving (_die); when it
    is not loaded yet (a spawned worker wakes before it imports torch), right after it loads."""
    if _TORCH_SIGNALS not in sys.modules:
        if _TorchSignalsFinder not in sys.meta_path:
            sys.meta_path.insert(0, _TorchSignalsFinder)  # type: ignore[arg-type]
        return
    try:
        from lineprofiler import _torch_worker

        _torch_worker.cooperate(_reclaim_sigterm)
    except Exception:  # never break the child
        pass


class _TorchSignalsFinder:
    """On sys.meta_path until torch's DataLoader signal module is imported: finds it with the
    finders after it and has its loader call _cooperate_with_torch() once it has run."""

    @staticmethod
    def find_spec(name: str, path: Any = None, target: Any = None) -> Any:
        if name != _TORCH_SIGNALS:
            return None
        try:
            sys.meta_path.remove(_TorchSignalsFinder)  # type: ignore[arg-type]
        except ValueError:
            pass
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            spec = find(name, path, target) if find is not None else None
            if spec is not None:
                break
        else:
            return None
        loader = spec.loader
        exec_module = getattr(loader, "exec_module", None)
        if exec_module is None:
            return spec

        def exec_then_cooperate(module: Any) -> None:
            exec_module(module)
            _cooperate_with_torch()

        try:
            loader.exec_module = exec_then_cooperate  # this spec's own loader
        except (AttributeError, TypeError):
            pass
        return spec


def _reclaim_sigterm() -> None:
    try:
        from lineprofiler import _signal_guard

        if signal.getsignal(signal.SIGTERM) is _on_sigterm and _signal_guard.note_foreign(
            signal.SIGTERM
        ):
            _signal_guard.guard(signal.SIGTERM)  # ours in front of the library's again
    except (ValueError, OSError):  # not the main thread
        pass


def _on_sigterm(signum: int, frame: Any) -> None:
    from lineprofiler import _signal_guard

    _signal_guard.seen(signum)
    if _state.get("writing"):  # Pool.terminate() while the child saves at its normal exit
        _state["terminate"] = True
        return
    _finish()
    _die()


def _die() -> None:
    """SIGTERM's action once this child saved: a library's C handler that Python's SIG_DFL hid
    (kept by _arm_exit) has the last word, as it would have had without us; else the default."""
    from lineprofiler import _signal_guard

    if _signal_guard.call_foreign(signal.SIGTERM):
        return  # the library's handler ran and did not end the process: neither do we
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
    if _state.pop("defer", False) and _state.pop("pending", False):
        _start_tracer(_state["config"], _state["scope"])  # forked by the forkserver daemon
        return
    profiler = _state.get("profiler")
    if profiler is None or not profiler.active:
        return
    profiler.clear()  # the parent's statistics are the parent's
    _state["parent"] = False
    _state.pop("written", None)
    _arm_exit()
    _rearm_finalizer()


def _rearm_finalizer() -> None:
    mp_util = sys.modules.get("multiprocessing.util")
    if mp_util is not None:  # multiprocessing clears its finalizers in the child: re-arm after
        mp_util.register_after_fork(_token, _after_multiprocessing_fork)


def _after_multiprocessing_fork(_obj: Any) -> None:
    mp_util = sys.modules["multiprocessing.util"]
    mp_util.Finalize(None, _finish, exitpriority=-1000)
    # (a forked child of a process that loaded torch after arming; multiprocessing runs no
    # after-fork callbacks in a spawned child: there _TorchSignalsFinder does it)
    _cooperate_with_torch()


def _register_fork_hook() -> None:
    global _fork_hook_registered
    if not _fork_hook_registered:
        os.register_at_fork(after_in_child=_after_fork_in_child)
        _fork_hook_registered = True
