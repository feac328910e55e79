"""The sampler's sidecars: ``w_<...>.samples`` (fixed-width binary rows) and ``w_<...>.tags``.

The row layout is lp_core's (``src/cpp/lp_core/sampler.h``), taken from ``_core`` (through the
generated ``core_constants``) rather than copied; the format is described in docs/worker-file.md.
"""

from __future__ import annotations

import json
import os
import sys
from array import array
from dataclasses import dataclass
from pathlib import Path

from lineprofiler.runfile import core_constants as _cc
from lineprofiler.runfile.safe_read import UnsafeFile, open_regular, read_range, read_regular

MAGIC: bytes = _cc.SAMPLES_MAGIC
VERSION: int = _cc.SAMPLES_VERSION
HEADER_BYTES: int = _cc.SAMPLES_HEADER_BYTES
BASE_WORDS: int = _cc.SAMPLE_BASE_WORDS
GPU_PID_ABSENT: int = _cc.GPU_PID_ABSENT
# Row words (lp_core/sampler.h: SampleWord); GPU k adds BASE_WORDS + 2k (busy %) and + 2k + 1
# (this pid's SM %).
_W = _cc.SAMPLE_WORDS
W_T, W_DT, W_TAG, W_FLAGS = _W["time_unix_ns"], _W["dt_ns"], _W["tag"], _W["flags"]
W_RB, W_WB = _W["read_bytes"], _W["write_bytes"]
W_RC, W_WC = _W["read_chars"], _W["write_chars"]
W_RSS, W_CUDA_ALLOC, W_CUDA_RES = _W["rss_bytes"], _W["cuda_alloc"], _W["cuda_reserved"]
W_OWN_WB = _W["own_write_bytes"]
_F = _cc.SAMPLE_FLAGS
F_IO, F_RSS, F_CUDA, F_GPU = _F["io"], _F["rss"], _F["cuda"], _F["gpu"]

NO_PHASE: tuple[str, ...] = ()  # tag 0: no phase was open when the interval began


# What one sidecar may cost the reader (docs/guide/sharing-a-run-directory.md). A 12-hour worker's
# .samples is ~28 MB (8 GPUs: ~60 MB); its .tags a few KB. Anything far beyond is not a sidecar this
# recorder wrote, and is refused whole (a caveat names it). The rows are read in chunks straight
# into their columns, so a sidecar costs about its size once, never twice.
MAX_SAMPLES_BYTES = 1 << 30
MAX_SAMPLE_ROWS = 10_000_000  # 115 days of rows at the default 1 s interval, 11 days at 0.1 s
MAX_TAGS_BYTES = 64 << 20
MAX_GPUS = 1024
_CHUNK_ROWS = 1 << 14


class SamplesError(Exception):
    """A sidecar that cannot be used (the worker's resource rows are then missing)."""


def sidecar_name_ok(name: object) -> bool:
    """Whether a worker file's ``samples.file``/``tags_file`` names a file beside it: a non-empty
    plain name (no ``/``, no NUL, not ``.``/``..``)."""
    return (
        isinstance(name, str)
        and name not in ("", ".", "..")
        and "/" not in name
        and "\0" not in name
        and len(name) <= 255
    )


def read_sidecar(path: Path, limit: int, within: Path | str | None = None) -> bytes:
    """A sidecar's bytes (see ``read_regular``); SamplesError when it is not one."""
    try:
        return read_regular(path, limit, within)
    except UnsafeFile as exc:
        raise SamplesError(f"{Path(path).name}: {exc}") from None


@dataclass
class SampleTable:
    """One worker's rows as columns (``array('q')`` each)."""

    pid: int
    interval_ns: int
    n_gpu: int
    start_unix_ns: int
    rows: int
    cols: list[array]


def read_samples(path: Path, within: Path | str | None = None) -> SampleTable:
    """Reads a ``.samples`` sidecar; a trailing partial row (a write cut by a kill) is ignored, and
    a file holding only its header has no rows. The declared layout is checked against bounds
    (and the rows against the file's real size and MAX_SAMPLE_ROWS) before anything is allocated
    for it; the rows are then read a chunk at a time into their columns. ``within``: the run
    directory (see ``safe_read.open_regular``)."""
    name = os.path.basename(os.fspath(path))
    try:
        with open_regular(path, MAX_SAMPLES_BYTES, within) as (fd, size):
            head = read_range(fd, 0, HEADER_BYTES)
            if len(head) < HEADER_BYTES or head[:8] != MAGIC:
                raise SamplesError(f"{name}: not a samples file")
            version, hb, words, n_gpu = (
                int.from_bytes(head[o : o + 4], "little") for o in (8, 12, 16, 20)
            )
            if (
                version != VERSION
                or not HEADER_BYTES <= hb <= size
                or n_gpu > MAX_GPUS
                or words != BASE_WORDS + 2 * n_gpu
            ):
                raise SamplesError(f"{name}: unsupported samples layout (version {version})")
            interval_ns, pid, start = (
                int.from_bytes(head[o : o + 8], "little") for o in (24, 32, 40)
            )
            row = 8 * words
            rows = (size - hb) // row
            if rows > MAX_SAMPLE_ROWS:
                raise SamplesError(
                    f"{name}: {rows:,} rows, more than the {MAX_SAMPLE_ROWS:,} a sidecar may hold"
                )
            cols = [array("q") for _ in range(words)]
            done = 0
            while done < rows:
                data = read_range(fd, hb + done * row, min(_CHUNK_ROWS, rows - done) * row)
                n = len(data) // row  # fewer when the file shrank under us: whole rows only
                if n == 0:
                    break
                chunk = array("q")
                chunk.frombytes(memoryview(data)[: n * row])
                if sys.byteorder == "big":
                    chunk.byteswap()
                for k in range(words):
                    cols[k].extend(chunk[k::words])
                done += n
    except UnsafeFile as exc:
        raise SamplesError(f"{name}: {exc}") from None
    return SampleTable(pid, interval_ns, n_gpu, start, done, cols)


def read_tags(path: Path, within: Path | str | None = None) -> dict[int, tuple[str, ...]]:
    """Tag id -> phase path, from a ``.tags`` file (lines ``[id, [names...]]``)."""
    tags: dict[int, tuple[str, ...]] = {0: NO_PHASE}
    try:
        text = read_sidecar(path, MAX_TAGS_BYTES, within).decode("utf-8", errors="replace")
    except SamplesError:
        return tags  # the rows stay, tagged "(unknown phase)"
    for line in text.splitlines():
        try:
            tid, names = json.loads(line)
            if isinstance(names, list) and all(isinstance(n, str) for n in names):
                tags[int(tid)] = tuple(names)
        except (ValueError, TypeError, RecursionError):
            continue  # a line cut by a kill, or not one the sampler wrote
    return tags
