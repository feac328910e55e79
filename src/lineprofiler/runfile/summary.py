"""Host summaries: ``<run_dir>/summaries/<host>.json``, written by ``lineprofiler reduce``.

A summary is the merge's fold of one host's worker files (phase trees per run id and role, each
process's summary and time per path), plus the name, size and mtime of every file it folded, so a
report uses it only while those files are unchanged. It is read as warily as a worker file: the
types below are checked on decoding, and a summary that does not decode is ignored, never trusted.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any

import msgspec

from lineprofiler.runfile import phase_fields
from lineprofiler.runfile.safe_read import UnsafeFile, read_regular
from lineprofiler.runfile.worker_doc import Ns, UnixTime
from lineprofiler.safe_write import open_own_dir, write_output

SUMMARY_FORMAT = "lineprofiler-host-summary"
SUMMARY_SCHEMA_VERSION = 3  # 2: workers carry process_start; 3: phases in the field table's order
SUMMARIES_DIR = "summaries"
# What one host summary may cost the reader: 1,024 workers' full trees are ~50 MB.
MAX_SUMMARY_BYTES = 512 << 20


def _phase_sum_fields() -> list[tuple]:
    """PhaseSum's fields: ``path_id``, then every field of the phase record but its path, typed as
    in a worker file (runfile/phase_fields.py: the one table), then what only the merge keeps."""
    out: list[tuple] = [("path_id", Annotated[int, msgspec.Meta(ge=0)])]
    for f in phase_fields.FIELDS:
        if f.combine == "key":
            continue
        hint, default = phase_fields.annotation(f.type)
        if f.type == "byte_map?":
            hint = dict[str, Ns] | None  # the fold kept integer byte sums only
        elif f.type == "rate":
            hint = Ns  # a phase no record reached has none yet (0)
        out.append((f.name, hint, msgspec.field(default=default)))
    out += [
        ("sample_rates", list[Annotated[int, msgspec.Meta(ge=1)]], msgspec.field(default=[])),
        ("processes", Ns, msgspec.field(default=0)),
        ("thread_node", bool, msgspec.field(default=False)),
        # thread records of a path under "[threads]" (work handed to other threads)
        ("threads", Ns, msgspec.field(default=0)),
    ]
    return out


# A phase path's aggregates in one role (``report.model.MergedPhase`` as data).
PhaseSum = msgspec.defstruct(
    "PhaseSum", _phase_sum_fields(), module=__name__, array_like=True, gc=False
)


class WorkerSum(msgspec.Struct, gc=False):
    """One process: the ``Worker`` fields a report needs, and its time per path id."""

    path: str
    role: str
    host: str
    pid: Ns
    run_id: str
    uuid: str
    start_time: UnixTime
    written_at: UnixTime
    times: list[Ns]
    rank: int | None = None
    local_rank: int | None = None
    job_id: str | None = None
    snapshot_seq: Ns = 0
    final: bool = False
    flush_errors: Ns = 0
    last_flush_error: str = ""
    clock_wall: str | None = None
    clock_cpu: str | None = None
    own_write_bytes: Ns | None = None
    thread_names: bool = False
    snapshot_interval_s: float | None = None
    threads: Ns = 0
    folded_entries: Ns = 0
    depth_overflow: Ns = 0
    counters_refused: Ns = 0
    signal_flush: bool = True
    paths: Ns = 0
    busy_ns: Ns = 0
    open_entries: Ns = 0
    out_of_order_exits: Ns = 0
    ppid: Ns | None = None
    process_name: str | None = None
    process_start: str | None = None
    host_dir: str | None = None
    argv: list[str] | None = None
    samples: Any = None


class PartialSum(msgspec.Struct):
    paths: list[list[str]]
    roles: dict[str, list[PhaseSum]]
    workers: list[WorkerSum]


class HostSummary(msgspec.Struct):
    host: str
    sources: list[tuple[str, Ns, Ns]]  # (path relative to the run, size, mtime_ns)
    partials: dict[str, PartialSum]
    unreadable: dict[str, list[tuple[str, str]]]
    format: str = SUMMARY_FORMAT
    schema_version: int = SUMMARY_SCHEMA_VERSION


_DECODER = msgspec.json.Decoder(HostSummary)
_ENCODER = msgspec.json.Encoder()


def summary_path(run_dir: Path, host: str) -> Path:
    return run_dir / SUMMARIES_DIR / f"{host}.json"


def file_stamp(path: Path) -> tuple[int, int] | None:
    """(size, mtime_ns) of a file, or None when it cannot be read."""
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_size, st.st_mtime_ns


def read_summary(path: Path, within: Path | str | None = None) -> HostSummary | None:
    """The summary at ``path``, or None when absent, not a regular file, or not a valid one."""
    try:
        data = read_regular(path, MAX_SUMMARY_BYTES, within)
    except UnsafeFile:
        return None
    try:
        doc = _DECODER.decode(data)
    except (msgspec.ValidationError, msgspec.DecodeError, RecursionError):
        return None
    if doc.format != SUMMARY_FORMAT or doc.schema_version != SUMMARY_SCHEMA_VERSION:
        return None
    return doc


def write_summary(run_dir: Path, summary: HostSummary) -> Path:
    """Writes ``summaries/<host>.json`` atomically and returns its path. ``summaries/`` is opened
    once, never through a link and never another user's (created 0750 when missing), and the file
    is created (O_EXCL, unpredictable temporary name, 0640 less the umask) and renamed relative
    to that descriptor: whoever can write the run directory cannot redirect root's writes."""
    fd = open_own_dir(Path(run_dir), SUMMARIES_DIR)
    try:
        write_output(f"{summary.host}.json", _ENCODER.encode(summary), mode=0o640, dir_fd=fd)
    finally:
        os.close(fd)
    return summary_path(Path(run_dir), summary.host)
