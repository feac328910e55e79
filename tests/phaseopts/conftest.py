"""Fixtures of the phase-option tests."""

from __future__ import annotations

import pytest

from lineprofiler.accounting import Profiler


@pytest.fixture
def profiler(tmp_path):
    """An enabled profiler writing under tmp_path, with no snapshot or sampler thread."""
    p = Profiler(run_dir=tmp_path, enabled=True, snapshot_interval_s=None, sample_interval_s=None)
    try:
        yield p
    finally:
        p.close()
