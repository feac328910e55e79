"""torch integration of the phase hot path: ``sync=True`` and ``annotate=True``.

torch is never imported here for ``sync=True``: a synchronize only makes sense when the user's
own code already imported torch and a CUDA device is visible. ``annotate=True`` asks for torch
annotations explicitly, so it imports torch when it is installed.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Callable
from typing import Any

_resolver_installed = False


def cuda_sync_resolver() -> Callable[[], Any] | bool | None:
    """What ``phase(sync=True)`` calls at both ends, asked lazily by the C hot path.

    Returns ``torch.cuda.synchronize`` when torch is imported and CUDA is available; ``False``
    (never ask again: sync is a no-op) when torch is imported without a usable CUDA device;
    ``None`` (ask again at the next sync phase) while torch has not been imported.
    """
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    try:
        cuda = torch.cuda
        if not cuda.is_available():
            return False
        return cuda.synchronize
    except Exception:
        return False


def install_sync_resolver() -> None:
    """Points the C hot path at :func:`cuda_sync_resolver` (once per process)."""
    global _resolver_installed
    if _resolver_installed:
        return
    from lineprofiler import _core

    _core.set_sync_resolver(cuda_sync_resolver)
    _resolver_installed = True


def import_torch() -> Any | None:
    """torch when it is installed (imported now if it was not), else None."""
    torch = sys.modules.get("torch")
    if torch is not None:
        return torch
    if importlib.util.find_spec("torch") is None:
        return None
    try:
        return importlib.import_module("torch")
    except Exception:
        return None


class Annotator:
    """Opens an NVTX range and a ``torch.profiler.record_function`` per phase entry.

    NVTX comes from ``torch.cuda.nvtx`` on a CUDA build with a visible device, else from the
    standalone ``nvtx`` package, else is absent; ``record_function`` needs torch. ``nvtx_source``
    and ``record_function`` say what was found (recorded in the worker file's meta).
    """

    def __init__(self, nvtx: bool = True, record_function: bool = True) -> None:
        self._push: Callable[[str], Any] | None = None
        self._pop: Callable[[], Any] | None = None
        self._record_function: Callable[[str], Any] | None = None
        self.nvtx_source: str | None = None
        torch = import_torch()
        if nvtx:
            self._find_nvtx(torch)
        if record_function and torch is not None:
            try:
                self._record_function = torch.profiler.record_function
            except Exception:
                self._record_function = None

    @property
    def record_function(self) -> bool:
        return self._record_function is not None

    def _find_nvtx(self, torch: Any | None) -> None:
        if torch is not None:
            try:
                if torch.cuda.is_available():
                    nv = torch.cuda.nvtx
                    self._push, self._pop = nv.range_push, nv.range_pop
                    self.nvtx_source = "torch.cuda.nvtx"
                    return
            except Exception:
                pass
        if importlib.util.find_spec("nvtx") is None:
            return
        try:
            nvtx = importlib.import_module("nvtx")
            self._push, self._pop = nvtx.push_range, nvtx.pop_range
            self.nvtx_source = "nvtx"
        except Exception:
            self._push = self._pop = None

    def enter(self, name: str, with_record_function: bool = True) -> Any:
        """Opens the annotations of one entry; returns what :meth:`exit` needs."""
        if self._push is not None:
            try:
                self._push(name)
            except Exception:
                pass
        if with_record_function and self._record_function is not None:
            try:
                rf = self._record_function(name)
                rf.__enter__()
                return rf
            except Exception:
                return None
        return None

    def exit(self, token: Any) -> None:
        """Closes what :meth:`enter` opened (innermost first)."""
        if token is not None:
            try:
                token.__exit__(None, None, None)
            except Exception:
                pass
        if self._pop is not None:
            try:
                self._pop()
            except Exception:
                pass
