"""Heavy-profiler windows (backend="torch"|"viztracer") and annotate=True, in child processes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lineprofiler.accounting import Backend, Profiler
from tests.helpers import run_python

pytestmark = pytest.mark.slow


def _needs(module: str) -> None:
    import importlib.util

    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{module} is not installed")


def _metadata(run_dir: Path) -> dict:
    return json.loads((run_dir / "metadata.json").read_text())


def test_torch_window_starts_and_stops_on_the_right_entries(tmp_path):
    _needs("torch")
    run_dir = tmp_path / "profile"
    run_python(
        f"""
        import torch
        from lineprofiler.accounting import Profiler
        p = Profiler(run_dir={str(run_dir)!r}, enabled=True, snapshot_interval_s=None,
                     sample_interval_s=None, backend="torch", backend_window=(3, 6),
                     window_phase="iteration")
        for i in range(1, 11):
            with p.phase("iteration"):
                with p.phase("forward"):
                    torch.ones(8) @ torch.ones(8)
                if p.backend_state.running:
                    print("running during entry", i)
        p.close()
        """,
        cwd=tmp_path,
    )
    trace = run_dir / "backend" / "torch_trace.json"
    events = json.loads(trace.read_text())["traceEvents"]
    names = [e.get("name") for e in events if e.get("ph") == "X"]
    # entries 3, 4 and 5 are inside the window: the trace holds exactly those, by name
    assert names.count("iteration") == 3
    assert names.count("forward") == 3
    meta = _metadata(run_dir)["backend"]
    assert meta["state"] == "done"
    assert meta["started_at_entry"] == 3 and meta["stopped_at_entry"] == 6
    assert meta["artifact"] == "backend/torch_trace.json"
    (worker,) = run_dir.glob("workers/*/w_*.json")
    doc = json.loads(worker.read_text())
    rec = {tuple(r["path"]): r for t in doc["threads"] for r in t["phases"]}
    assert rec[("iteration",)]["calls"] == 10  # the window does not disturb accounting
    assert doc["meta"]["backend"] == "torch"


def test_a_window_still_open_at_close_is_stopped_and_written(tmp_path):
    _needs("torch")
    run_dir = tmp_path / "profile"
    proc = run_python(
        f"""
        from lineprofiler.accounting import Profiler
        p = Profiler(run_dir={str(run_dir)!r}, enabled=True, snapshot_interval_s=None,
                     sample_interval_s=None, backend="torch", backend_window=(2, 100))
        for i in range(4):
            with p.phase("iteration"):
                pass
        p.close()
        print(p.backend_state.state, p.backend_state.stopped_at)
        """,
        cwd=tmp_path,
    )
    assert proc.stdout.split() == ["done", "4"]
    events = json.loads((run_dir / "backend" / "torch_trace.json").read_text())["traceEvents"]
    assert [e.get("name") for e in events if e.get("ph") == "X"].count("iteration") == 3


def test_viztracer_window_captures_only_the_window(tmp_path):
    _needs("viztracer")
    run_dir = tmp_path / "profile"
    run_python(
        f"""
        from lineprofiler.accounting import Profiler
        funcs = {{}}
        for i in range(1, 7):
            exec(f"def work_{{i}}():\\n    return {{i}}", funcs)
        p = Profiler(run_dir={str(run_dir)!r}, enabled=True, snapshot_interval_s=None,
                     sample_interval_s=None, backend="viztracer", backend_window=(2, 4),
                     window_phase="iteration")
        for i in range(1, 7):
            with p.phase("iteration"):
                funcs[f"work_{{i}}"]()
        p.close()
        """,
        cwd=tmp_path,
    )
    text = (run_dir / "backend" / "viztracer.json").read_text()
    assert "traceEvents" in text
    present = {i for i in range(1, 7) if f"work_{i}" in text}
    assert present == {2, 3}
    assert _metadata(run_dir)["backend"]["state"] == "done"


def test_a_missing_backend_package_degrades_to_a_noop_and_says_why(tmp_path):
    run_dir = tmp_path / "profile"
    run_python(
        f"""
        import sys
        sys.modules["viztracer"] = None  # as if it were not installed
        from lineprofiler.accounting import Profiler
        p = Profiler(run_dir={str(run_dir)!r}, enabled=True, snapshot_interval_s=None,
                     sample_interval_s=None, backend="viztracer", backend_window=(1, 3))
        for i in range(5):
            with p.phase("iteration"):
                pass
        p.close()
        """,
        cwd=tmp_path,
    )
    meta = _metadata(run_dir)
    assert "viztracer is not installed" in meta["unavailable_reason"]
    assert meta["backend"]["state"] == "unavailable"
    assert not (run_dir / "backend").exists()
    (worker,) = run_dir.glob("workers/*/w_*.json")
    phases = json.loads(worker.read_text())["threads"][0]["phases"]
    assert phases[0]["path"] == ["iteration"] and phases[0]["calls"] == 5


def test_annotate_shows_phase_names_in_an_external_capture(tmp_path):
    _needs("torch")
    out = tmp_path / "external.json"
    run_python(
        f"""
        import torch
        from lineprofiler import accounting
        from lineprofiler.accounting import Profiler
        p = Profiler(run_dir={str(tmp_path / "profile")!r}, enabled=True,
                     snapshot_interval_s=None, sample_interval_s=None, annotate=True,
                     install=True)
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
            for _ in range(2):
                with p.phase("train_step"), accounting.phase("loss"):
                    torch.ones(4).sum()
        prof.export_chrome_trace({str(out)!r})
        p.close()
        """,
        cwd=tmp_path,
    )
    names = [e.get("name") for e in json.loads(out.read_text())["traceEvents"]]
    assert names.count("train_step") == 2
    assert names.count("loss") == 2  # the module-level phase is annotated too


def test_backend_options_are_checked_at_construction(tmp_path):
    kw = dict(run_dir=tmp_path, enabled=True, snapshot_interval_s=None, sample_interval_s=None)
    with pytest.raises(ValueError, match="backend must be one of"):
        Profiler(backend="cprofile", backend_window=(1, 2), **kw)
    with pytest.raises(ValueError, match="backend_window"):
        Profiler(backend="torch", **kw)
    with pytest.raises(ValueError, match="start < stop"):
        Profiler(backend=Backend.TORCH, backend_window=(5, 5), **kw)
    assert Backend("viztracer") is Backend.VIZTRACER
