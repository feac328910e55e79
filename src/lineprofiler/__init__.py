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
    "get_library_dir",
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


def get_library_dir() -> str:
    """The directory of ``liblineprofiler.a``, the static library a C++ program without Python links
    to be a worker of a run (``lineprofiler::Profiler``, <lineprofiler/standalone.hpp>): pass it as
    ``-L`` with ``-llineprofiler -pthread -ldl``, or use the CMake target ``lineprofiler::standalone``
    (see docs/guide/cpp-standalone.md)."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib")


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext lineprofiler``: the ``%lineprofile`` / ``%%lineprofile`` magics."""
    from lineprofiler.line.ipython import load_ipython_extension as load

    load(ipython)


def __getattr__(name: str) -> Any:
    if name == "LineProfiler":
        from lineprofiler.line import LineProfiler

        return LineProfiler
    raise AttributeError(f"module 'lineprofiler' has no attribute {name!r}")
