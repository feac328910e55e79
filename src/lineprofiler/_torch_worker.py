"""torch DataLoader workers: torch's SIGTERM handler goes under ours, not over it.

Each DataLoader worker starts its loop with ``signal_handling._set_worker_signal_handlers()``,
which installs C handlers for SIGBUS/SIGSEGV/SIGFPE/SIGTERM; the SIGTERM one ends the worker at
once (``_exit(0)``) when its parent sent the signal, as multiprocessing's exit handler does to a
persistent worker whose loader is still alive at interpreter exit. A forked worker inherited the
parent's profiler and flush handlers before that call, so torch's handler replaced ours and the
worker ended with nothing written. :func:`cooperate` wraps that torch function so that, right
after it, the given callback puts our handlers back in front, keeping torch's to chain to. Only a
DataLoader worker calls it, so from then on :data:`in_loader_worker` says what this process is
(torch's own worker info is set a little later in the loop).

torch is never imported here: only a torch the process already loaded is wrapped.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

_MODULE = "torch.utils.data._utils.signal_handling"
_FUNCTION = "_set_worker_signal_handlers"
_WRAPPED_MARK = "__lineprofiler_wraps__"

# Whether torch's worker set-up ran in this process: it is a DataLoader worker.
in_loader_worker = False


def cooperate(after: Callable[[], None]) -> None:
    """Wraps torch's worker signal set-up (once per process image) so that ``after()`` runs right
    after it; nothing when torch's data loading is not loaded. Never raises."""
    module = sys.modules.get(_MODULE)
    if module is None:
        return
    try:
        original = getattr(module, _FUNCTION)
        if getattr(original, _WRAPPED_MARK, None) is not None:
            return

        def set_worker_signal_handlers(*args: Any, **kwargs: Any) -> Any:
            global in_loader_worker
            result = original(*args, **kwargs)
            in_loader_worker = True
            try:
                after()
            except Exception:
                pass
            return result

        setattr(set_worker_signal_handlers, _WRAPPED_MARK, original)
        set_worker_signal_handlers.__doc__ = getattr(original, "__doc__", None)
        setattr(module, _FUNCTION, set_worker_signal_handlers)
    except Exception:
        pass
