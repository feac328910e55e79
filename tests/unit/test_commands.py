"""The command protocol (cli.py): a subcommand's module is imported only when it runs, so the
processes ``run`` and ``record`` profile load nothing of the reading side; every command keeps
its help."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

from lineprofiler.cli import COMMANDS
from tests.helpers import child_env

# What the profiled script prints: the reading side's modules loaded in its process.
PRINT_REPORT_MODULES = """
import json, sys
{setup}
print("MODULES", json.dumps(sorted(m for m in sys.modules if m.startswith("lineprofiler.report"))))
"""


def _lp(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        [sys.executable, "-m", "lineprofiler", *args],
        cwd=cwd,
        env=child_env({"COLUMNS": "200", **(env or {})}),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def _printed_modules(stdout: str) -> list[str]:
    lines = [ln for ln in stdout.splitlines() if ln.startswith("MODULES ")]
    assert len(lines) == 1, stdout
    return json.loads(lines[0][len("MODULES ") :])


def test_run_loads_no_report_module_into_the_profiled_script(tmp_path):
    script = tmp_path / "script.py"
    script.write_text(PRINT_REPORT_MODULES.format(setup="total = sum(range(1000))"))
    proc = _lp("run", "--project-folder", str(tmp_path), str(script), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert _printed_modules(proc.stdout) == []
    assert "script.py" in proc.stdout  # and the line profile of it was printed


def test_record_loads_no_report_module_into_its_command(tmp_path):
    setup = (
        "from lineprofiler import accounting\n"
        "with accounting.phase('work'):\n"
        "    total = sum(range(1000))\n"
    )
    script = tmp_path / "script.py"
    script.write_text(PRINT_REPORT_MODULES.format(setup=setup))
    run_dir = tmp_path / "run"
    proc = _lp(
        "record",
        "--run-dir",
        str(run_dir),
        "--json",
        "--",
        sys.executable,
        str(script),
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    modules_line, _, report = proc.stdout.partition("\n")
    assert _printed_modules(modules_line) == []
    doc = json.loads(report)  # record's own process did load the reading side: the report
    assert "work" in json.dumps(doc)


def test_every_command_follows_the_protocol_and_keeps_its_help(tmp_path):
    top = _lp("--help", cwd=tmp_path)
    assert top.returncode == 0
    for name, command in COMMANDS.items():
        module = importlib.import_module(command.module)
        assert callable(module.add_arguments) and callable(module.main), name
        assert not hasattr(module, "HELP"), f"{name}: its help is said once, in cli.COMMANDS"
        assert command.help in top.stdout, name
        own = _lp(name, "--help", cwd=tmp_path)
        assert own.returncode == 0, own.stderr
        assert command.help in own.stdout, name
        for line in (getattr(module, "EXAMPLES", None) or "").splitlines():
            assert line.strip() in own.stdout, (name, line)


def test_a_mistyped_command_is_still_suggested(tmp_path):
    proc = _lp("reprot", "x", cwd=tmp_path)
    assert proc.returncode == 2
    assert "did you mean report?" in proc.stderr
