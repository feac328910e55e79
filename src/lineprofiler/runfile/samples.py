"""The sampler's sidecars: ``w_<...>.samples`` (fixed-width binary rows) and ``w_<...>.tags``.

The row layout is lp_core's (``src/cpp/lp_core/sampler.h``), taken from ``_core`` (through the
generated ``core_constants``) rather than copied; the format is described in docs/worker-file.md.
"""

from __future__ import annotations

import json
import sys
from array import array
from dataclasses import dataclass
from pathlib import Path

from lineprofiler.runfile import core_constants as _cc
from lineprofiler.runfile.safe_read import UnsafeFile, read_regular

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


# What one sidecar may cost the reader. A 12-hour worker's .samples is ~28 MB (8 GPUs: ~60 MB);
# its .tags a few KB. Anything far beyond is not a sidecar this recorder wrote.
MAX_SAMPLES_BYTES = 1 << 30
MAX_TAGS_BYTES = 64 << 20
MAX_GPUS = 1024


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


def read_sidecar(path: Path, limit: int) -> bytes:
    """A sidecar's bytes (see ``read_regular``); SamplesError when it is not one."""
    try:
        return read_regular(path, limit)
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


def read_samples(path: Path) -> SampleTable:
    """Reads a ``.samples`` sidecar; a trailing partial row (a write cut by a kill) is ignored, and
    a file holding only its header has no rows. The declared layout is checked against bounds
    (and the rows against the file's real size) before anything is allocated for it."""
    data = read_sidecar(path, MAX_SAMPLES_BYTES)
    if len(data) < HEADER_BYTES or data[:8] != MAGIC:
        raise SamplesError(f"{Path(path).name}: not a samples file")
    version, hb, words, n_gpu = (int.from_bytes(data[o : o + 4], "little") for o in (8, 12, 16, 20))
    if (
        version != VERSION
        or not HEADER_BYTES <= hb <= len(data)
        or n_gpu > MAX_GPUS
        or words != BASE_WORDS + 2 * n_gpu
    ):
        raise SamplesError(f"{Path(path).name}: unsupported samples layout (version {version})")
    interval_ns, pid, start = (int.from_bytes(data[o : o + 8], "little") for o in (24, 32, 40))
    rows = (len(data) - hb) // (8 * words)
    body = array("q")
    body.frombytes(memoryview(data)[hb : hb + rows * 8 * words])
    del data
    if sys.byteorder == "big":
        body.byteswap()
    cols = [body[k::words] for k in range(words)]
    return SampleTable(pid, interval_ns, n_gpu, start, rows, cols)


def read_tags(path: Path) -> dict[int, tuple[str, ...]]:
    """Tag id -> phase path, from a ``.tags`` file (lines ``[id, [names...]]``)."""
    tags: dict[int, tuple[str, ...]] = {0: NO_PHASE}
    try:
        text = read_sidecar(path, MAX_TAGS_BYTES).decode("utf-8", errors="replace")
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
