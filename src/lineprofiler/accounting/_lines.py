"""The lines of a phase (issue 32): ``Profiler(lines=..., lines_entries=...)`` and
``LINEPROFILER_LINES`` / ``LINEPROFILER_LINES_ENTRIES``.

How it works:

* Every ``phase(name)`` whose name is the last element of a requested path takes the recorder's
  general path (the name is never marked seen: ``lines_scope`` in phase_args.cpp); every other
  name keeps the all-C inline path, untouched. There the recorder counts the name's entries and
  runs the schedule below (a few compares: the "one branch" of an entry not chosen) and calls
  :meth:`PhaseLines.__call__` (``Recorder.set_lines_hook``) only for a chosen one. A name that a
  "/"-joined request ends in calls in for every entry: its path is matched, and :class:`Schedule`
  (the same rule) run, here. A process whose phases match nothing never calls in here and never
  makes a tracer.
* A chosen entry is a :class:`_TracedEntry`: it enters the scope and then enables a
  ``_core.LineTracer`` restricted to the calling thread (and, inside an asyncio task, to that
  task's context), with LineProfiler's scope rules (line/_scope.py). Each traced path has its own
  tracer, so its lines are its own.
* Which entries are traced (``lines_entries=N``): the run's length is unknown, so the schedule
  thins out as it goes: the entries are taken in ``ceil(N / 5)``-entry groups, the first group
  consecutive (stride 1), each next group at twice the previous stride (1, 2, 4, 8, 16, ...),
  until N entries were traced. For N = 20: entries 0-3, then 5, 7, 9, 11, then 15, 19, 23, 27,
  then 35, 43, 51, 59, then 75, 91, 107, 123 (0-based, per requested name and process).
  ``None`` (``all``) traces every entry.
* The sidecar (runfile/layout.py ``lines_path``; docs/worker-file.md "Lines of a phase") is
  written at every snapshot (the snapshot thread's periodic hook), at a flush signal and at close,
  through safe_write (a fresh temporary file renamed over the target; a link there is replaced,
  never followed), at most ``LINES_MAX_BYTES`` (the functions of least time are dropped first and
  each phase says how many: ``dropped_functions``).
* Calibration (line/_calibrate.py): measured once per process, right after the first traced entry
  closes (never while a tracer is active); the sidecar carries it, and times are calibrated.
"""

from __future__ import annotations

import json
import math
import os
import sys
import threading
import time
import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from lineprofiler import _core
from lineprofiler.runfile.layout import (
    ENV_LINES,
    ENV_LINES_ENTRIES,
    LINES_FORMAT,
    LINES_MAX_BYTES,
    LINES_VERSION,
    lines_path,
)

DEFAULT_ENTRIES = 20
GROUPS = 5  # lines_entries=N: N entries in GROUPS groups (at most), each at twice the stride


# ------------------------------------------------------------------------------------------------
# options


def parse_lines(value: Any, what: str = "lines") -> tuple[str, ...]:
    """``lines=``: a phase name or "/"-joined path, or a list of them -> a tuple (empty: none).
    Raises TypeError/ValueError on anything else."""
    if value is None:
        return ()
    items: Iterable[Any] = [value] if isinstance(value, str) else value
    try:
        items = list(items)
    except TypeError:
        raise TypeError(
            f"{what} must be a phase name, a '/'-joined phase path or a list of them, got {value!r}"
        ) from None
    out: list[str] = []
    for item in items:
        if not isinstance(item, str):
            raise TypeError(
                f"{what}: each entry must be a str (a phase name or path), got {item!r}"
            )
        text = item.strip().strip("/")
        if not text or any(not part.strip() for part in text.split("/")):
            raise ValueError(
                f"{what}: {item!r} is not a phase name or path ('train_step', 'iteration/train_step')"
            )
        if text not in out:
            out.append(text)
    return tuple(out)


def parse_entries(value: Any, what: str = "lines_entries") -> int | None:
    """``lines_entries=``: a positive int, or None (every entry)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{what} must be a positive int or None (every entry), got {value!r}")
    return int(value)


def from_environment() -> tuple[tuple[str, ...], int | None]:
    """``LINEPROFILER_LINES`` (comma-separated) and ``LINEPROFILER_LINES_ENTRIES`` (an int or
    ``all``). A bad value warns (RuntimeWarning) and is ignored; never raises."""
    names: tuple[str, ...] = ()
    raw = os.environ.get(ENV_LINES, "")
    if raw.strip():
        try:
            names = parse_lines([p for p in raw.split(",") if p.strip()], ENV_LINES)
        except (TypeError, ValueError) as exc:
            warnings.warn(f"lineprofiler: {exc}; ignored", RuntimeWarning, stacklevel=4)
    return names, entries_from_environment()


def entries_from_environment() -> int | None:
    raw = os.environ.get(ENV_LINES_ENTRIES, "").strip()
    if not raw:
        return DEFAULT_ENTRIES
    if raw.lower() in ("all", "none"):
        return None
    try:
        return parse_entries(int(raw), ENV_LINES_ENTRIES)
    except ValueError:
        warnings.warn(
            f"lineprofiler: {ENV_LINES_ENTRIES}={raw!r} is not a positive int or 'all'; "
            f"the default {DEFAULT_ENTRIES} is used",
            RuntimeWarning,
            stacklevel=5,
        )
        return DEFAULT_ENTRIES


def environment_values(names: tuple[str, ...], entries: int | None) -> dict[str, str]:
    """What a profiler with lines= exports, so that every child process traces the same."""
    if not names:
        return {}
    return {
        ENV_LINES: ",".join(names),
        ENV_LINES_ENTRIES: "all" if entries is None else str(entries),
    }


class Schedule:
    """Which entries of one requested name are traced (see the module doc)."""

    __slots__ = ("group", "left", "next", "seen", "stride", "taken")

    def __init__(self, limit: int | None) -> None:
        self.seen = 0  # entries so far
        self.taken = 0  # entries chosen so far
        self.next = 0  # the index of the next chosen entry
        self.stride = 1
        self.group = 0 if limit is None else max(1, math.ceil(limit / GROUPS))
        self.left = -1 if limit is None else limit  # chosen entries still to come (-1: no limit)

    def choose(self) -> bool:
        """Counts one entry; whether it is traced."""
        n = self.seen
        self.seen = n + 1
        if n != self.next or self.left == 0:
            return False
        self.taken += 1
        if self.left > 0:
            self.left -= 1
            if self.taken % self.group == 0:
                self.stride *= 2
        self.next = n + self.stride
        return True


# ------------------------------------------------------------------------------------------------
# the traced phases


class _PathLines:
    """One traced phase path: its tracer and what its traced entries took."""

    __slots__ = ("path", "requested", "skipped", "traced_entries", "traced_wall_ns", "tracer")

    def __init__(self, path: tuple[str, ...], requested: str, tracer: Any) -> None:
        self.path = path
        self.requested = requested
        self.tracer = tracer
        self.traced_entries = 0
        self.traced_wall_ns = 0
        self.skipped = 0  # chosen entries that could not be traced (another tracer was active)


class PhaseLines:
    """The recorder's lines hook of one Profiler (see the module doc)."""

    def __init__(self, rec: Any, names: tuple[str, ...], entries: int | None) -> None:
        from lineprofiler.line._scope import ProjectScope, find_project_folder

        self._rec = rec  # the Profiler's _core.Recorder (which holds this hook until close())
        self.names = names
        self.entries = entries
        self.project_folder = Path(os.path.realpath(find_project_folder()))
        self.paths: list[Path] = []
        self._scope = ProjectScope(self.project_folder, extra=self.paths)
        # leaf name -> the requests ending in it; and one schedule per request
        self._by_leaf: dict[str, list[str]] = {}
        for req in names:
            self._by_leaf.setdefault(req.rsplit("/", 1)[-1], []).append(req)
        self._schedules = {req: Schedule(entries) for req in names}
        self._needs_path = {
            leaf: any("/" in r for r in reqs) for leaf, reqs in self._by_leaf.items()
        }
        self._paths: dict[tuple[str, ...], _PathLines] = {}
        self._lock = threading.Lock()  # the snapshot thread reads while the owner records
        self._calibration: Any = None
        self._calibrated = False
        self.closed = False

    def forked(self) -> PhaseLines:
        """A forked child's own (nothing traced yet, its own schedule; the calibration kept)."""
        fresh = PhaseLines(self._rec, self.names, self.entries)
        fresh._calibration, fresh._calibrated = self._calibration, self._calibrated
        return fresh

    def install(self) -> None:
        """Sets this as the recorder's lines hook: the recorder counts each plain name's entries
        and calls in only for the chosen ones (the schedule below, in C); for a name a "/" path
        ends in, it calls in for every entry and :class:`Schedule` decides here."""
        self._rec.set_lines_hook(
            self, dict(self._needs_path), 0 if self.entries is None else self.entries
        )

    # -- the hook: phase(name) of a matching name --

    def __call__(self, name: str, scope: Any) -> Any:
        """An entry of a requested name: chosen by the recorder's schedule (a plain name), or
        every entry (a name a "/" path ends in: matched and scheduled here)."""
        if self.closed:
            return scope
        reqs = self._by_leaf.get(name)
        if not reqs:
            return scope
        if self._needs_path[name]:
            path = (*self._rec._open_path(), name)
            req = _match(reqs, path)
            if req is None or not self._schedules[req].choose():
                return scope
        else:
            req = reqs[0]
        return _TracedEntry(self, name, req, scope)

    def path_lines(self, path: tuple[str, ...], requested: str) -> _PathLines:
        pl = self._paths.get(path)
        if pl is None:
            with self._lock:
                pl = self._paths.get(path)
                if pl is None:
                    tracer = _core.LineTracer(self._scope, self._scope.key)
                    pl = self._paths[path] = _PathLines(path, requested, tracer)
        return pl

    def after_first_entry(self) -> None:
        """Calibrates once, outside any traced entry (a few ms, never while tracing)."""
        if self._calibrated:
            return
        if _core.line_tracer_active() is not None or sys.gettrace() is not None:
            return
        self._calibrated = True
        from lineprofiler.line import _calibrate

        try:
            self._calibration = _calibrate.measure()
        except Exception:
            self._calibration = None

    def close(self) -> None:
        """Stops any traced entry still open (close(), a signal): no tracer is left behind."""
        self.closed = True
        for pl in list(self._paths.values()):
            try:
                if pl.tracer.active:
                    pl.tracer.disable()
            except Exception:
                pass

    # -- the sidecar --

    def document(self, tree: dict[tuple[str, ...], Any], thread_names: bool) -> dict[str, Any]:
        from lineprofiler.line import _calibrate
        from lineprofiler.line.stats import build_stats

        with self._lock:
            paths = list(self._paths.values())
        phases = []
        all_rows: list[tuple[Any, list[tuple[int, ...]]]] = []
        results = []
        for pl in paths:
            r = pl.tracer.results()
            results.append(r)
            all_rows.extend(r)
        overhead = None
        if self._calibration is not None:
            rows = (row for _code, code_rows in all_rows for row in code_rows)
            overhead = _calibrate.capped(self._calibration, rows)
        for pl, r in zip(paths, results, strict=True):
            calls = wall = 0
            for key, stats in tree.items():
                if key == pl.path or (thread_names and key[1:] == pl.path):
                    calls += int(stats.calls)
                    wall += int(stats.wall_ns)
            functions = build_stats(r, overhead)
            phase: dict[str, Any] = {
                "path": "/".join(pl.path),
                "requested": pl.requested,
                "entries": max(calls, pl.traced_entries),
                "traced_entries": pl.traced_entries,
                "traced_wall_ns": pl.traced_wall_ns,
                "untraced_wall_ns": max(0, wall - pl.traced_wall_ns),
                "functions": [
                    fs.to_dict()
                    for fs in sorted(functions.values(), key=lambda f: -f.total_time_ns)
                ],
            }
            if pl.skipped:
                phase["skipped_entries"] = pl.skipped
            phases.append(phase)
        return {
            "format": LINES_FORMAT,
            "version": LINES_VERSION,
            "pid": os.getpid(),
            "python": sys.version.split()[0],
            "mechanism": _core.LINE_TRACER_MECHANISM,
            "clock": _core.wall_clock_name(),
            "project_folder": str(self.project_folder),
            "paths": [str(p) for p in self.paths],
            "requested": list(self.names),
            "lines_entries": self.entries,
            "overhead_ns_per_event": None
            if overhead is None
            else {
                "line": overhead.line_ns,
                "call": overhead.call_ns,
                "untraced_call": overhead.foreign_ns,
            },
            "phases": phases,
        }

    def has_data(self) -> bool:
        return bool(self._paths)


def _match(reqs: list[str], path: tuple[str, ...]) -> str | None:
    """The request a path matches: a plain name any path ending in it, a "/" path exactly."""
    for req in reqs:
        if "/" not in req or tuple(req.split("/")) == path:
            return req
    return None


def bounded_json(doc: dict[str, Any], limit: int = LINES_MAX_BYTES) -> str:
    """doc as JSON of at most limit bytes: the functions of least time (over all phases) are
    dropped first; each phase says how many of its own were (``dropped_functions``)."""
    text = json.dumps(doc, separators=(",", ":"))
    if len(text.encode()) <= limit:
        return text
    ranked = sorted(
        (
            (f.get("total_time_ns", 0), i, j)
            for i, ph in enumerate(doc["phases"])
            for j, f in enumerate(ph["functions"])
        ),
    )
    drop: set[tuple[int, int]] = set()
    lo, hi = 1, len(ranked)
    # the fewest dropped that fits: a binary search over how many of the least-time ones
    while lo < hi:
        mid = (lo + hi) // 2
        if len(_without(doc, {(i, j) for _t, i, j in ranked[:mid]}).encode()) <= limit:
            hi = mid
        else:
            lo = mid + 1
    drop = {(i, j) for _t, i, j in ranked[:lo]}
    return _without(doc, drop)


def _without(doc: dict[str, Any], drop: set[tuple[int, int]]) -> str:
    phases = []
    for i, ph in enumerate(doc["phases"]):
        kept = [f for j, f in enumerate(ph["functions"]) if (i, j) not in drop]
        dropped = len(ph["functions"]) - len(kept)
        phases.append(
            {**ph, "functions": kept, **({"dropped_functions": dropped} if dropped else {})}
        )
    return json.dumps({**doc, "phases": phases}, separators=(",", ":"))


def write_sidecar(lines: PhaseLines, worker_file: Path, tree: Any, thread_names: bool) -> None:
    """Replaces the sidecar beside worker_file (nothing while no entry was traced)."""
    from lineprofiler.safe_write import output_file

    if not lines.has_data():
        return
    text = bounded_json(lines.document(tree, thread_names))
    with output_file(lines_path(worker_file), follow_links=False) as f:
        f.write(text)


# ------------------------------------------------------------------------------------------------
# a traced entry


def _in_task() -> bool:
    asyncio = sys.modules.get("asyncio")
    if asyncio is None:
        return False
    try:
        return asyncio.current_task() is not None
    except RuntimeError:  # no running loop on this thread
        return False


class _TracedEntry:
    """A chosen entry: the phase's scope, with its path's tracer on this thread inside it."""

    __slots__ = ("_lines", "_name", "_pl", "_req", "_scope", "_t0")

    def __init__(self, lines: PhaseLines, name: str, req: str, scope: Any) -> None:
        self._lines = lines
        self._name = name
        self._req = req
        self._scope = scope
        self._pl: _PathLines | None = None
        self._t0 = 0

    def __enter__(self) -> Any:
        lines = self._lines
        # the path before entering: an entry sample= does not measure is on no stack
        try:
            path: tuple[str, ...] | None = (*lines._rec._open_path(), self._name)
        except Exception:
            path = None
        out = self._scope.__enter__()
        if path is None:
            return out
        try:
            pl = lines.path_lines(path, self._req)
            if lines.closed or pl.tracer.active:
                return out
            try:
                pl.tracer.enable(thread_only=True, task_only=_in_task())
            except RuntimeError:  # another tracer (a LineProfiler, a debugger, a nested entry)
                pl.skipped += 1
                return out
            self._pl = pl
            self._t0 = time.perf_counter_ns()
        except Exception:  # never into user code: the entry just goes untraced
            pass
        return out

    def __exit__(self, *exc: Any) -> Any:
        return self._exit(exc, 2)

    def _exit(self, exc: Any, depth: int) -> Any:
        pl = self._pl
        if pl is not None:
            t1 = time.perf_counter_ns()
            self._pl = None
            caller = sys._getframe(depth)  # the frame of the with block
            try:
                # the `with` line runs this __exit__: its open interval is our own exit
                pl.tracer.disable(caller.f_code, caller.f_lineno)
            except Exception:
                pass
            pl.traced_entries += 1
            pl.traced_wall_ns += t1 - self._t0
        out = self._scope.__exit__(*exc)
        if pl is not None and not self._lines._calibrated:
            self._lines.after_first_entry()
        return out

    async def __aenter__(self) -> Any:
        return self.__enter__()

    async def __aexit__(self, *exc: Any) -> Any:
        return self._exit(exc, 2)
