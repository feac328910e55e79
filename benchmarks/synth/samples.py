"""Writes sampler sidecars (``.samples`` + ``.tags``) in the real binary layout
(docs/worker-file.md), for the resource merge's tests and benchmarks/bench_samples.py.

Rows are given column-wise, so the ground truth of every reduced number is arithmetic the test
does on the columns it chose.
"""

from __future__ import annotations

import json
import sys
from array import array
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from lineprofiler.runfile.samples import BASE_WORDS, HEADER_BYTES, MAGIC

S = 1_000_000_000


def samples_bytes(
    columns: Mapping[int, Sequence[int]],
    rows: int,
    *,
    n_gpu: int = 0,
    pid: int = 1,
    interval_ns: int = S,
    start_unix_ns: int = 0,
) -> bytes:
    """A whole sidecar; ``columns``: word index -> values (missing words are 0)."""
    words = BASE_WORDS + 2 * n_gpu
    header = bytearray(HEADER_BYTES)
    header[:8] = MAGIC
    for off, v in ((8, 1), (12, HEADER_BYTES), (16, words), (20, n_gpu)):
        header[off : off + 4] = v.to_bytes(4, "little")
    for off, v in ((24, interval_ns), (32, pid), (40, start_unix_ns)):
        header[off : off + 8] = v.to_bytes(8, "little")
    body = array("q", bytes(8 * words * rows))
    for k, values in columns.items():
        body[k::words] = array("q", values)
    if sys.byteorder == "big":
        body.byteswap()
    return bytes(header) + body.tobytes()


def attach_samples(
    doc: dict[str, Any],
    worker_json: Path,
    columns: Mapping[int, Sequence[int]],
    rows: int,
    *,
    n_gpu: int = 0,
    tags: Mapping[int, Sequence[str]] | None = None,
    dropped: int = 0,
    rss_failed: int = 0,
    gpu_error: str = "",
) -> None:
    """Writes the sidecar beside ``worker_json`` and the matching ``samples`` status into doc
    (rewrite the worker file afterwards)."""
    stem = worker_json.with_suffix("")
    side = stem.with_suffix(".samples")
    side.write_bytes(
        samples_bytes(columns, rows, n_gpu=n_gpu, pid=int(doc["meta"]["pid"]), interval_ns=S)
    )
    tag_lines = [json.dumps([0, []])] + [
        json.dumps([int(k), list(v)]) for k, v in (tags or {}).items() if int(k) != 0
    ]
    stem.with_suffix(".tags").write_text("\n".join(tag_lines) + "\n")
    doc["samples"] = {
        "file": side.name,
        "tags_file": stem.with_suffix(".tags").name,
        "interval_ns": S,
        "rows": rows,
        "dropped": dropped,
        "rss_failed": rss_failed,
        "write_errors": 0,
        "last_error": "",
        "io_source": "proc",
        "gpu_devices": n_gpu,
        "gpu_error": gpu_error,
        "own_io": {"read_chars": 0, "write_chars": 0, "read_bytes": 0, "write_bytes": 0},
    }
    worker_json.write_text(json.dumps(doc))
