"""Identity, env names and worker paths have one definition (issue 30): lp_core/identity.h, used by
liblineprofiler.a directly and by the Python profiler through _core; the names the reading side
needs without _core are generated into runfile/core_constants (test_core_constants keeps that copy
equal to _core's). tests/native/test_standalone_identity.py runs both profilers on one
environment and compares what they chose."""

from __future__ import annotations

import os
import re
from pathlib import Path

from lineprofiler.runfile import core_constants, layout

ROOT = Path(__file__).resolve().parents[2]
NAMES = ("ENV_PROFILE", "ENV_RUN_DIR", "ENV_RUN_ID", "ENV_ROLE", "ENV_PARENT_ROLE")


def test_layout_takes_the_names_from_the_generated_copy():
    for name in (*NAMES, "WORKER_FORMAT", "WORKERS_DIR"):
        assert getattr(layout, name) is getattr(core_constants, name), name


def test_no_python_or_cpp_source_spells_them_again():
    """The literals appear once in C++ (identity.h) and once in the generated copy."""
    values = [getattr(core_constants, n) for n in (*NAMES, "WORKER_FORMAT")]
    pattern = re.compile("|".join(rf'(?<![\w-])"{re.escape(v)}"' for v in values))
    hits = []
    for path in sorted((ROOT / "src").rglob("*")):
        if path.suffix not in (".py", ".cpp", ".h", ".hpp") or path.name == "core_constants.py":
            continue
        if path.as_posix().endswith("lp_core/identity.h"):
            continue
        for i, line in enumerate(path.read_text().splitlines(), 1):
            # (a caveat may name a variable in a message; a definition is an assignment)
            if pattern.search(line) and re.search(r"=\s*\"|constexpr", line):
                hits.append(f"{path.relative_to(ROOT)}:{i}: {line.strip()}")
    assert hits == []


def test_the_python_profiler_uses_the_cores_rules(tmp_path, monkeypatch):
    from lineprofiler import _core
    from lineprofiler.accounting import _identity

    monkeypatch.setenv(layout.ENV_RUN_ID, " my_run id/x ")
    monkeypatch.delenv(layout.ENV_RUN_DIR, raising=False)
    for var in ("SLURM_JOB_ID", "PBS_JOBID", "LSB_JOBID", "JOB_ID"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("SLURM_JOB_ID", "42_7[1]")
    monkeypatch.setenv("RANK", " 5")
    # the run id of the environment, made safe by lp_core's rule ("_", " ", "/" -> "-")
    assert _identity.resolve_run_id(tmp_path) == "my-run-id-x"
    assert _identity.launcher_run_id() == "slurm-42-7-1-"
    who = _identity.launcher_identity()
    assert (who["rank"], who["rank_source"], who["job_id"]) == (5, "RANK", "42_7[1]")
    assert _identity.host_name() == _core.host_name()
    assert _identity.real_host_name() == (os.uname().nodename or "localhost")
