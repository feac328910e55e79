"""The package's layers import only what sits upstream of them, with no cycles.

runfile (the on-disk format) imports neither side; accounting (recording) never imports report
(reading) at run time; report never imports accounting; and a profiled process does not load the
merge or the renderers.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

from tests.helpers import run_python

SRC = Path(__file__).resolve().parents[2] / "src" / "lineprofiler"


def _module_name(path: Path) -> str:
    rel = path.relative_to(SRC.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> set[str]:
    """lineprofiler modules imported at run time (TYPE_CHECKING blocks left out)."""
    tree = ast.parse(path.read_text())
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip.update(id(n) for n in ast.walk(node))
    out: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.startswith("lineprofiler"))
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module.startswith("lineprofiler"):
                out.add(node.module)
                # "from lineprofiler.report import text" imports lineprofiler.report.text
                for a in node.names:
                    if (
                        (SRC.parent / (node.module + "." + a.name).replace(".", "/"))
                        .with_suffix(".py")
                        .exists()
                    ):
                        out.add(f"{node.module}.{a.name}")
    return out


def _graph() -> dict[str, set[str]]:
    return {_module_name(p): _imports(p) for p in SRC.rglob("*.py")}


_LINES_USES = {
    "lineprofiler.line",
    "lineprofiler.line._scope",
    "lineprofiler.line._calibrate",
    "lineprofiler.line.stats",
}


def test_layers_import_only_upstream():
    bad = []
    for mod, deps in _graph().items():
        for dep in deps:
            if mod.startswith("lineprofiler.runfile") and dep.startswith(
                ("lineprofiler.accounting", "lineprofiler.report", "lineprofiler.line")
            ):
                bad.append((mod, dep))
            if mod.startswith("lineprofiler.report") and dep.startswith(
                ("lineprofiler.accounting", "lineprofiler.line")
            ):
                bad.append((mod, dep))
            if mod.startswith("lineprofiler.accounting") and dep.startswith(
                ("lineprofiler.report", "lineprofiler.line")
            ):
                # accounting/_lines (lines=, issue 32) traces a phase's lines with the line
                # profiler's own scope, calibration and statistics (line imports no accounting)
                if not (mod == "lineprofiler.accounting._lines" and dep in _LINES_USES):
                    bad.append((mod, dep))
            if mod.startswith("lineprofiler.line") and dep.startswith(
                ("lineprofiler.accounting", "lineprofiler.report", "lineprofiler.runfile")
            ):
                bad.append((mod, dep))
    assert bad == []


def test_no_import_cycles():
    graph = _graph()
    # a package's __init__ importing its own submodules is not a cycle through the package
    edges = {
        m: {d for d in ds if d in graph and not m.startswith(d + ".")} for m, ds in graph.items()
    }
    seen: dict[str, int] = {}  # 1: on the stack, 2: done
    cycles: list[list[str]] = []

    def visit(node: str, stack: list[str]) -> None:
        seen[node] = 1
        stack.append(node)
        for dep in sorted(edges[node]):
            if seen.get(dep) == 1:
                cycles.append(stack[stack.index(dep) :] + [dep])
            elif dep not in seen:
                visit(dep, stack)
        stack.pop()
        seen[node] = 2

    for m in sorted(edges):
        if m not in seen:
            visit(m, [])
    assert cycles == []


def test_a_profiled_process_does_not_load_the_reading_side(tmp_path):
    code = f"""
import json, sys
from lineprofiler.accounting import Profiler
p = Profiler(run_dir={str(tmp_path / "run")!r}, enabled=True, snapshot_interval_s=None,
             sample_interval_s=None)
with p.phase("x"):
    p.count("n", 1)
p.merged_tree()
p.close()
print(json.dumps(sorted(m for m in sys.modules if m.startswith("lineprofiler"))))
"""
    proc = run_python(code, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    loaded = json.loads(proc.stdout.strip().splitlines()[-1])
    assert not [m for m in loaded if m.startswith(("lineprofiler.report", "lineprofiler.line"))]
    # the spec's spelling still works, loading the merge only then
    code2 = "from lineprofiler.accounting import merge_run, RunError; print(merge_run)"
    proc = run_python(code2, cwd=tmp_path)
    assert proc.returncode == 0 and "merge_run" in proc.stdout, proc.stderr
