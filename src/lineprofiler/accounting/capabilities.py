"""Lazy capability checks for the optional sources of the resource blocks.

Nothing here imports an optional package at module import time, and nothing here ever imports
torch: torch is read only when the user's process already imported it. Each check returns a value
or None and never raises.

Where the sampler gets each number on Linux (the C++ sampler, ``lp_core/sampler.cpp``):

=================  =====================================  ==============================
block              source                                 absent when
=================  =====================================  ==============================
I/O, I/O BY PHASE  /proc/self/io, /proc/thread-self/io    /proc is not mounted
MEMORY             /proc/self/statm                       /proc is not mounted
GPU                libnvidia-ml via dlopen (no pynvml)    no driver, no device
VRAM               torch.cuda allocator (this module)     torch not imported / no CUDA
=================  =====================================  ==============================
"""

from __future__ import annotations

import functools
import os
import sys
from types import ModuleType
from typing import Any


@functools.cache
def psutil() -> ModuleType | None:
    """The psutil module if it is installed (the ``resources`` extra), else None."""
    try:
        import psutil as mod
    except Exception:
        return None
    return mod


@functools.cache
def pynvml() -> ModuleType | None:
    """The pynvml module (nvidia-ml-py, the ``gpu`` extra) if importable, else None.

    The sampler does not need it (it loads libnvidia-ml itself); this is for callers that want it.
    """
    try:
        import pynvml as mod
    except Exception:
        return None
    return mod


def torch_if_imported() -> ModuleType | None:
    """torch if the process already imported it, else None. Never imports it."""
    return sys.modules.get("torch")


def proc_io_available() -> bool:
    """Whether this process's /proc I/O counters can be read (Linux with /proc mounted)."""
    try:
        with open("/proc/self/io", "rb") as f:
            return b"read_bytes" in f.read()
    except OSError:
        return False


def cuda_memory_now() -> tuple[int, int] | None:
    """(allocated, reserved) CUDA allocator bytes summed over this process's devices, or None.

    Called by the sampler thread (with the GIL) only once libc10_cuda is loaded. It reads nothing
    unless the user imported torch and CUDA is already initialised, so it never initialises CUDA
    in the user's process (``torch.cuda.current_device()`` would).
    """
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    try:
        cuda = torch.cuda
        if not cuda.is_initialized():
            return None
        n = cuda.device_count()
        allocated = sum(int(cuda.memory_allocated(i)) for i in range(n))
        reserved = sum(int(cuda.memory_reserved(i)) for i in range(n))
    except Exception:
        return None
    return allocated, reserved


def describe() -> dict[str, Any]:
    """What is available now, for diagnostics (imports psutil/pynvml if installed)."""
    torch = torch_if_imported()
    return {
        "proc_io": proc_io_available(),
        "psutil": psutil() is not None,
        "pynvml": pynvml() is not None,
        "torch_imported": torch is not None,
        "nvml_library": os.environ.get("LINEPROFILER_NVML_LIBRARY") or "libnvidia-ml.so.1",
    }
