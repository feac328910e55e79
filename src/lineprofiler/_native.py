"""Whether this install can record: the compiled core (``lineprofiler._core``) is a full build's,
on Linux; the pure build (every other platform, or ``LINEPROFILER_PURE_BUILD=1`` at build time:
docs/guide/pure-build.md) has none and reads runs only. Recording asked for there warns once and
records nothing; it never raises."""

from __future__ import annotations

import warnings


class RecordingUnavailableWarning(RuntimeWarning):
    """Recording was asked for on the pure (read-only) install: nothing is recorded."""


_import_error: list[str] = []  # why a _core that is here did not import (a wrong glibc, say)


def has_core() -> bool:
    """Whether ``lineprofiler._core`` imports here (a full build on Linux)."""
    try:
        from lineprofiler import _core  # noqa: F401
    except ModuleNotFoundError:
        return False
    except ImportError as e:  # the file is here but cannot load: say so, not "pure install"
        if not _import_error:
            _import_error.append(str(e))
        return False
    return True


_warned: set[str] = set()


def warn_no_core(what: str) -> None:
    """Warn, once per process for each ``what``, that ``what`` records nothing on this install."""
    if what in _warned:
        return
    _warned.add(what)
    if _import_error:
        why = f"lineprofiler._core is installed but does not load here ({_import_error[0]})"
    else:
        why = (
            "recording needs lineprofiler's compiled core, which is built on Linux only, and "
            "this is the pure (read-only) install"
        )
    warnings.warn(
        f"{what} records nothing: {why}; `lineprofiler report` and the other reading commands "
        "work (see the README's Install section)",
        RecordingUnavailableWarning,
        stacklevel=3,
    )
