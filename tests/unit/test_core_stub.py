"""src/lineprofiler/_core.pyi declares exactly what the built _core module exports."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import lineprofiler
from lineprofiler import _core

STUB = Path(__file__).resolve().parents[2] / "src" / "lineprofiler" / "_core.pyi"


def _stub_names() -> tuple[set[str], dict[str, set[str]]]:
    tree = ast.parse(STUB.read_text())
    top: set[str] = set()
    classes: dict[str, set[str]] = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            top.add(node.name)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            top.add(node.target.id)
        elif isinstance(node, ast.ClassDef):
            top.add(node.name)
            classes[node.name] = {
                n.name
                for n in node.body
                if isinstance(n, ast.FunctionDef) and not n.name.startswith("_")
            }
    return top, classes


def test_stub_matches_the_module():
    top, classes = _stub_names()
    public = {n for n in dir(_core) if not n.startswith("_")}
    assert public == top, f"missing in stub: {public - top}; stale in stub: {top - public}"
    for cls_name, methods in classes.items():
        cls = getattr(_core, cls_name)
        actual = {n for n, _ in inspect.getmembers(cls) if not n.startswith("_")}
        assert actual == methods, (
            f"{cls_name}: missing in stub {actual - methods}; stale {methods - actual}"
        )


def test_the_stub_ships_beside_the_package():
    assert (Path(lineprofiler.__file__).parent / "py.typed").exists()
