"""Fixtures of the launcher tests."""

from __future__ import annotations

import pytest

from tests.integration.slurm_cluster import SlurmCluster, SlurmUnavailable


@pytest.fixture
def slurm(tmp_path):
    cluster = SlurmCluster(tmp_path / "slurm")
    (tmp_path / "slurm").mkdir()
    try:
        cluster.start()
    except SlurmUnavailable as exc:
        cluster.stop()
        pytest.skip(f"cannot start a one-machine Slurm: {exc}")
    yield cluster
    cluster.stop()
