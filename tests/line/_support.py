"""Helpers of the line profiler tests: a project folder under tmp_path, ground-truth counters."""

from __future__ import annotations

import importlib.util
import itertools
import sys
import textwrap
from collections import Counter
from pathlib import Path
from types import ModuleType

_counter = itertools.count()


def make_project(tmp_path: Path, name: str = "proj") -> Path:
    root = tmp_path / name
    (root / ".git").mkdir(parents=True)
    return root


def load_module(path: Path, source: str) -> ModuleType:
    """Writes dedented source to path and imports it under a unique name."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(source))
    name = f"_lp_test_{path.stem}_{next(_counter)}"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def settrace_hits(fn, filenames: set[str]) -> Counter:
    """Line events per (filename, line) of code in filenames, counted with sys.settrace."""
    counts: Counter = Counter()

    def local(frame, event, arg):
        if event == "line":
            counts[(frame.f_code.co_filename, frame.f_lineno)] += 1
        return local

    def global_(frame, event, arg):
        if frame.f_code.co_filename in filenames:
            return local
        return None

    sys.settrace(global_)
    try:
        fn()
    finally:
        sys.settrace(None)
    return counts


def our_hits(stats) -> Counter:
    counts: Counter = Counter()
    for fs in stats.values():
        for s in fs.lines.values():
            if s.hits:
                counts[(fs.filename, s.lineno)] += s.hits
    return counts
