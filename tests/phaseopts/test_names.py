"""Phase-name hygiene: names per shape, the one warning, strict_names, the fold at 4,096 paths."""

from __future__ import annotations

import json
import warnings

import pytest

from lineprofiler import _core, accounting
from lineprofiler.accounting import PhaseNameError, PhaseNameWarning, Profiler, merge_run

SPEC_MESSAGE = (
    "128 distinct phase names share the shape 'episode_#' (most recently 'episode_127').\n"
    "Names built from data grow the phase tree until it folds at 4096 paths and the report\n"
    "stops being readable \u2014 use a fixed name and count() for the varying part."
)


def _profiler(tmp_path, **kw) -> Profiler:
    return Profiler(
        run_dir=tmp_path, enabled=True, snapshot_interval_s=None, sample_interval_s=None, **kw
    )


def test_name_shapes_fold_data_like_parts():
    assert _core.name_shape("episode_127") == "episode_#"
    assert _core.name_shape("resnet50") == "resnet#"
    assert _core.name_shape("layer.12.attn") == "layer.#.attn"
    assert _core.name_shape("ckpt-3f2a9c1d77") == "ckpt-#"
    assert _core.name_shape("mcts") == "mcts"


def test_a_generated_name_loop_warns_exactly_once_with_the_spec_message(tmp_path):
    p = _profiler(tmp_path)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for i in range(1000):
                with p.phase(f"episode_{i}"):
                    pass
                with p.phase("fixed"):  # fixed names never count
                    pass
        ours = [w for w in caught if issubclass(w.category, PhaseNameWarning)]
        assert len(ours) == 1
        assert str(ours[0].message) == SPEC_MESSAGE
        assert ours[0].filename == __file__  # points at the phase() call, not inside us
    finally:
        p.close()


def test_names_seen_before_do_not_warn_again_and_other_shapes_count_apart(tmp_path):
    p = _profiler(tmp_path)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for _ in range(3):
                for i in range(127):
                    with p.phase(f"a_{i}"), p.phase(f"b{i}x"):
                        pass
        assert [w for w in caught if issubclass(w.category, PhaseNameWarning)] == []
    finally:
        p.close()


def test_strict_names_raises_on_the_second_name_sharing_a_shape(tmp_path):
    p = _profiler(tmp_path, strict_names=True)
    try:
        with p.phase("env_step"), p.phase("worker_0"):
            pass
        with p.phase("worker_0"):  # the same name again is fine
            pass
        with pytest.raises(PhaseNameError, match="worker_1.*'worker_#'"):
            p.phase("worker_1")
        assert isinstance(PhaseNameError("x"), ValueError)
        assert p.current() == ""
        with pytest.raises(PhaseNameError):  # and it stays an error
            p.phase("worker_1")
        p.count("count_names_are_not_phase_names_1")
        p.count("count_names_are_not_phase_names_2")
    finally:
        p.close()
    tree = {tuple(r["path"]) for t in _doc(tmp_path)["threads"] for r in t["phases"]}
    assert ("worker_1",) not in tree


def test_strict_names_covers_the_installed_module_level_phase(tmp_path):
    p = _profiler(tmp_path, strict_names=True, install=True)
    try:
        with accounting.phase("shard_0"):
            pass
        with pytest.raises(PhaseNameError):
            accounting.phase("shard_1")
    finally:
        p.close()


def test_the_tree_folds_at_4096_paths_and_counts_what_folded(tmp_path):
    p = _profiler(tmp_path)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PhaseNameWarning)
            for i in range(5000):
                with p.phase(f"n_{i}"):
                    pass
    finally:
        p.close()
    (thread,) = _doc(tmp_path)["threads"]
    paths = [tuple(r["path"]) for r in thread["phases"]]
    # 4096 nodes per thread, the root included: 4095 named paths, the rest in "(folded)"
    assert len(paths) == 4096
    folded = next(r for r in thread["phases"] if r["path"] == ["(folded)"])
    assert folded["calls"] == 5000 - 4095
    assert thread["folded_entries"] == 5000 - 4095
    # and the report says where the rest went
    caveats = {c.kind: c.message for c in merge_run(tmp_path, with_samples=False).caveats}
    assert "905 phase entries" in caveats["folded"]


def _doc(tmp_path) -> dict:
    (path,) = tmp_path.glob("workers/*/w_*.json")
    return json.loads(path.read_text())
