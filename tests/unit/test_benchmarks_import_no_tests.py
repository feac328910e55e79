"""No benchmark imports ``tests``: the synthetic runs both use live in benchmarks/synth/ (issue 30).
A benchmark that needed the test suite could not run from a source tree without it, and a change
to a test helper would silently change what a benchmark measures."""

from __future__ import annotations

import ast
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def _imported_modules(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(), filename=str(path))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.append((node.lineno, node.module))
    return out


def _imports_tests(source: str) -> bool:
    """Also a ``tests.x`` import written inside a child process's code string."""
    return "from tests." in source or "import tests" in source


def test_no_benchmark_imports_tests() -> None:
    files = sorted(BENCHMARKS.rglob("*.py"))
    assert len(files) > 10 and any(f.parent.name == "synth" for f in files)
    bad = [
        f"{f.relative_to(BENCHMARKS)}:{line}: {mod}"
        for f in files
        for line, mod in _imported_modules(f)
        if mod == "tests" or mod.startswith("tests.")
    ]
    bad += [str(f.relative_to(BENCHMARKS)) for f in files if _imports_tests(f.read_text())]
    assert bad == [], "benchmarks import tests (use benchmarks/synth/):\n" + "\n".join(bad)


def test_the_check_sees_an_import_of_tests(tmp_path: Path) -> None:
    f = tmp_path / "bench_x.py"
    f.write_text("def f():\n    from tests.report.synth import Ph\n")
    assert _imported_modules(f) == [(2, "tests.report.synth")]
    assert _imports_tests('CHILD = "import tests.helpers"')
