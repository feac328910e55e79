"""with-line-profiler: phase accounting for multi-process runs, and a line tracer.

``lineprofiler.accounting`` is the always-on phase accountant; ``lineprofiler.LineProfiler`` is
the line-by-line tracer for a bounded ``with`` block. They share only the distribution: importing
one never imports the other's machinery.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False  # (typing is not imported: a followed child process starts fast)
if TYPE_CHECKING:
    from typing import Any

__version__ = "0.1.0"
__all__ = [
    "LineProfiler",
    "__version__",
    "get_cmake_dir",
    "get_include",
    "load_ipython_extension",
]

if TYPE_CHECKING:
    from lineprofiler.line import LineProfiler


def get_include() -> str:
    """The directory of the C++ API's headers, ``<lineprofiler/accounting.hpp>`` and
    ``<lineprofiler/python.hpp>``: pass it to the compiler as ``-I`` (see docs/guide/cpp.md)."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "include")


def get_cmake_dir() -> str:
    """The directory of ``lineprofilerConfig.cmake``: set ``lineprofiler_DIR`` to it, then
    ``find_package(lineprofiler CONFIG)`` gives the target ``lineprofiler::headers``."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "cmake")


# (get_library_dir(), the directory of liblineprofiler.a for C++ programs without Python, sits
# beside these two.)


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext lineprofiler``: the ``%lineprofile`` / ``%%lineprofile`` magics."""
    from lineprofiler.line.ipython import load_ipython_extension as load

    load(ipython)


def __getattr__(name: str) -> Any:
    if name == "LineProfiler":
        from lineprofiler.line import LineProfiler

        return LineProfiler
    raise AttributeError(f"module 'lineprofiler' has no attribute {name!r}")
