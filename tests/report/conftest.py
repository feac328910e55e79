"""Fixtures of the reading tests."""

from __future__ import annotations

import pytest

from lineprofiler.report import perfetto


@pytest.fixture(params=["C++", "Python"])
def perfetto_path(request, monkeypatch):
    """The test runs on both writers of ``export --perfetto``'s tracks: _core's C++ and the Python
    path of the pure install (report/perfetto.py)."""
    if request.param == "Python":
        monkeypatch.setattr(perfetto, "_native_tracks", None)
    else:
        assert perfetto._native_tracks is not None, "the full build has _core.perfetto_tracks"
    return request.param
