"""Optional dependencies: lazy, never raising, and torch never imported by the profiler."""

from __future__ import annotations

import importlib.util
import json

import pytest

from lineprofiler.accounting import capabilities
from tests.helpers import run_python


def test_profiler_never_imports_torch_or_the_optional_packages(tmp_path):
    out = run_python(
        f"""
        import json, sys, time
        from lineprofiler.accounting import Profiler, merge_run
        from lineprofiler.report.text import render_text
        p = Profiler(run_dir={str(tmp_path / "run")!r}, enabled=True, snapshot_interval_s=0.05,
                     sample_interval_s=0.02)
        with p.phase("x", io=True):
            time.sleep(0.1)
        p.close()
        render_text(merge_run({str(tmp_path / "run")!r}))
        print(json.dumps(sorted(m for m in ("torch", "psutil", "pynvml", "numpy")
                                if m in sys.modules)))
        """,
        cwd=tmp_path,
    )
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch not installed")
def test_cuda_probe_reads_nothing_until_cuda_is_initialised(tmp_path):
    out = run_python(
        """
        import json, torch
        from lineprofiler.accounting import capabilities
        value = capabilities.cuda_memory_now()
        print(json.dumps([value, torch.cuda.is_initialized()]))
        """,
        cwd=tmp_path,
    )
    value, initialised = json.loads(out.stdout.strip().splitlines()[-1])
    assert initialised is False  # the probe did not initialise CUDA
    assert value is None


def test_capability_checks_never_raise():
    assert capabilities.torch_if_imported() is None or hasattr(
        capabilities.torch_if_imported(), "__version__"
    )
    assert isinstance(capabilities.proc_io_available(), bool)
    desc = capabilities.describe()
    assert set(desc) >= {"proc_io", "psutil", "pynvml", "torch_imported"}
