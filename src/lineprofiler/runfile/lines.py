"""The one reader and validator of a ``.lines`` sidecar: the line statistics of the phases a
process traced (``Profiler(lines=...)``, ``LINEPROFILER_LINES``; docs/worker-file.md, "Lines of a
phase").

The file is opened through ``runfile.safe_read`` (no link, no FIFO, no hole, at most
``LINES_MAX_BYTES``) and checked whole before anything is used: a wrong format or an unknown
version, a wrong type, truncated or non-UTF-8 JSON, a number that is negative, not an integer or
beyond int64 refuses the file (``LinesFileError``, whose message is the reason); keys this reader
does not know are ignored. Plain data: nothing here imports the line profiler.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lineprofiler.runfile.layout import LINES_FORMAT, LINES_MAX_BYTES, LINES_VERSION, lines_path
from lineprofiler.runfile.safe_read import UnsafeFile, read_regular

INT64_MAX = (1 << 63) - 1


class LinesFileError(Exception):
    """A ``.lines`` sidecar that cannot be used; the message is the reason."""


@dataclass
class LineRec:
    """One traced line of one process: ``time_ns`` has the process's calibrated tracer cost
    subtracted, ``raw_time_ns`` is as measured, ``self_ns`` is ``time_ns`` less its traced
    callees."""

    line: int
    end_line: int
    hits: int
    time_ns: int
    raw_time_ns: int
    self_ns: int
    source: str


@dataclass
class FunctionRec:
    """The traced lines of one function, and its source (``body``: from ``first_line`` on)."""

    file: str
    function: str
    first_line: int
    last_line: int
    lines: list[LineRec] = field(default_factory=list)
    body: list[str] = field(default_factory=list)


@dataclass
class PhaseLinesRec:
    """One traced phase path of one process."""

    path: tuple[str, ...]
    requested: str
    entries: int
    traced_entries: int
    traced_wall_ns: int
    untraced_wall_ns: int
    functions: list[FunctionRec] = field(default_factory=list)


@dataclass
class LinesDoc:
    """A whole sidecar, checked."""

    pid: int
    python: str
    mechanism: str
    project_folder: str
    paths: list[str]
    overhead_ns_per_event: dict[str, float] | None  # None: raw times
    phases: list[PhaseLinesRec] = field(default_factory=list)


# -- checks: each raises LinesFileError naming where the document is wrong --


def _obj(v: Any, where: str) -> dict[str, Any]:
    if not isinstance(v, dict):
        raise LinesFileError(f"{where}: not an object")
    return v


def _list(v: Any, where: str) -> list[Any]:
    if not isinstance(v, list):
        raise LinesFileError(f"{where}: not a list")
    return v


def _str(v: Any, where: str) -> str:
    if not isinstance(v, str):
        raise LinesFileError(f"{where}: not a string")
    return v


def _count(v: Any, where: str) -> int:
    """A non-negative int64 (a bool is not one)."""
    if type(v) is not int:
        raise LinesFileError(f"{where}: not an integer")
    if v < 0 or v > INT64_MAX:
        raise LinesFileError(f"{where}: {v} is out of range (0 to 2^63-1)")
    return v


def _get(doc: dict[str, Any], key: str, where: str) -> Any:
    if key not in doc:
        raise LinesFileError(f"{where}: no {key!r}")
    return doc[key]


def _overhead(v: Any) -> dict[str, float] | None:
    if v is None:
        return None
    out = {}
    for k, x in _obj(v, "overhead_ns_per_event").items():
        # an int is compared as it is (10**400 has no float), a float must be finite
        ok = (type(x) is int and 0 <= x <= INT64_MAX) or (
            type(x) is float and math.isfinite(x) and 0 <= x <= INT64_MAX
        )
        if not ok:
            raise LinesFileError(f"overhead_ns_per_event.{str(k)[:40]}: not a number in range")
        out[k] = float(x)
    return out


def _line(v: Any, where: str) -> LineRec:
    d = _obj(v, where)
    line = _count(_get(d, "line", where), f"{where}.line")
    end = _count(d.get("end_line", line), f"{where}.end_line")
    time_ns = _count(_get(d, "time_ns", where), f"{where}.time_ns")
    return LineRec(
        line=line,
        end_line=max(end, line),
        hits=_count(_get(d, "hits", where), f"{where}.hits"),
        time_ns=time_ns,
        raw_time_ns=_count(d.get("raw_time_ns", time_ns), f"{where}.raw_time_ns"),
        self_ns=_count(d.get("self_time_ns", time_ns), f"{where}.self_time_ns"),
        source=_str(d.get("source", ""), f"{where}.source"),
    )


def _function(v: Any, where: str) -> FunctionRec:
    d = _obj(v, where)
    first = _count(_get(d, "first_line", where), f"{where}.first_line")
    lines = [
        _line(x, f"{where}.lines[{i}]")
        for i, x in enumerate(_list(_get(d, "lines", where), f"{where}.lines"))
    ]
    body = [
        _str(x, f"{where}.body[{i}]")
        for i, x in enumerate(_list(d.get("body", []), f"{where}.body"))
    ]
    last = _count(d.get("last_line", first), f"{where}.last_line")
    return FunctionRec(
        file=_str(_get(d, "file", where), f"{where}.file"),
        function=_str(_get(d, "function", where), f"{where}.function"),
        first_line=first,
        last_line=max(last, first),
        lines=lines,
        body=body,
    )


def _phase(v: Any, where: str) -> PhaseLinesRec:
    d = _obj(v, where)
    path = _str(_get(d, "path", where), f"{where}.path")
    if not path or any(not part for part in path.split("/")):
        raise LinesFileError(f"{where}.path: {path!r} is not a phase path")
    entries = _count(_get(d, "entries", where), f"{where}.entries")
    traced = _count(_get(d, "traced_entries", where), f"{where}.traced_entries")
    if traced > entries:
        raise LinesFileError(f"{where}: traced_entries {traced} is more than entries {entries}")
    functions = _list(_get(d, "functions", where), f"{where}.functions")
    return PhaseLinesRec(
        path=tuple(path.split("/")),
        requested=_str(d.get("requested", path), f"{where}.requested"),
        entries=entries,
        traced_entries=traced,
        traced_wall_ns=_count(_get(d, "traced_wall_ns", where), f"{where}.traced_wall_ns"),
        untraced_wall_ns=_count(_get(d, "untraced_wall_ns", where), f"{where}.untraced_wall_ns"),
        functions=[_function(f, f"{where}.functions[{i}]") for i, f in enumerate(functions)],
    )


def _no_constant(name: str) -> Any:
    raise LinesFileError(f"{name} is not a JSON number")


def parse_lines(data: bytes) -> LinesDoc:
    """A sidecar's bytes, checked whole; ``LinesFileError`` with the reason otherwise."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise LinesFileError(f"not UTF-8 (byte {exc.start:,})") from None
    try:
        raw = json.loads(text, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        what = "truncated" if exc.pos >= len(text.rstrip()) else "not JSON"
        raise LinesFileError(f"{what}: {exc.msg} at byte {exc.pos:,}") from None
    except RecursionError:
        raise LinesFileError("nested too deeply to be a lines document") from None
    doc = _obj(raw, "the document")
    if doc.get("format") != LINES_FORMAT:
        raise LinesFileError(f"format {str(doc.get('format'))[:40]!r} is not {LINES_FORMAT!r}")
    version = doc.get("version")
    if version != LINES_VERSION or type(version) is not int:
        raise LinesFileError(
            f"version {str(version)[:20]} is not one this reader knows ({LINES_VERSION})"
        )
    phases = _list(_get(doc, "phases", "the document"), "phases")
    return LinesDoc(
        pid=_count(_get(doc, "pid", "the document"), "pid"),
        python=_str(doc.get("python", ""), "python"),
        mechanism=_str(doc.get("mechanism", ""), "mechanism"),
        project_folder=_str(doc.get("project_folder", ""), "project_folder"),
        paths=[_str(p, f"paths[{i}]") for i, p in enumerate(_list(doc.get("paths", []), "paths"))],
        overhead_ns_per_event=_overhead(doc.get("overhead_ns_per_event")),
        phases=[_phase(p, f"phases[{i}]") for i, p in enumerate(phases)],
    )


def read_lines(
    worker_file: str | os.PathLike[str], within: str | os.PathLike[str] | None = None
) -> LinesDoc | None:
    """The sidecar beside ``worker_file``, checked; None when there is none (the process traced
    no lines). ``within``: the run directory (no link between it and the file). Raises
    ``LinesFileError`` for a sidecar that is there but cannot be used (a link, a FIFO, larger
    than ``LINES_MAX_BYTES``, or a document that fails the checks)."""
    path = lines_path(Path(worker_file))
    try:
        os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise LinesFileError(exc.strerror or str(exc)) from None
    try:
        data = read_regular(path, LINES_MAX_BYTES, within)
    except UnsafeFile as exc:
        raise LinesFileError(str(exc)) from None
    return parse_lines(data)
