"""The example extension, built once per session in each variant the tests load."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.native.build import build_extension


@pytest.fixture(scope="session")
def ext_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """mcts_native as a user builds it: import_api() in its module init."""
    return build_extension(tmp_path_factory.mktemp("ext"))


@pytest.fixture(scope="session")
def deferred_ext_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """mcts_native whose init does not call import_api() (its import_api() function does)."""
    return build_extension(tmp_path_factory.mktemp("ext_deferred"), ["LP_EXAMPLE_DEFER_IMPORT"])


@pytest.fixture(scope="session")
def level1_ext_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """mcts_native built against the first (smaller) function table: LINEPROFILER_API_LEVEL=1."""
    return build_extension(tmp_path_factory.mktemp("ext_level1"), ["LINEPROFILER_API_LEVEL=1"])
