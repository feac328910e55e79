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
    private = {n for n in top if n.startswith("_")}  # declared when a caller uses them (_C_API)
    top -= private
    assert public == top, f"missing in stub: {public - top}; stale in stub: {top - public}"
    assert all(hasattr(_core, n) for n in private), f"stale in stub: {private - set(dir(_core))}"
    for cls_name, methods in classes.items():
        cls = getattr(_core, cls_name)
        actual = {n for n, _ in inspect.getmembers(cls) if not n.startswith("_")}
        assert actual == methods, (
            f"{cls_name}: missing in stub {actual - methods}; stale {methods - actual}"
        )


def test_the_stub_ships_beside_the_package():
    assert (Path(lineprofiler.__file__).parent / "py.typed").exists()


def _doc_params(fn: object, name: str) -> list[str] | None:
    """Parameter names from a ``name(a: int, b) -> ...`` first doc line, or None if it has none."""
    first = (getattr(fn, "__doc__", None) or "").splitlines()[:1]
    if not first or not first[0].startswith(name + "("):
        return None
    inner = first[0][len(name) + 1 :]
    depth, cut = 1, None
    for i, ch in enumerate(inner):
        depth += {"(": 1, "[": 1, ")": -1, "]": -1}.get(ch, 0)
        if depth == 0:
            cut = i
            break
    if cut is None:
        return None
    params, depth, cur = [], 0, ""
    for ch in inner[:cut] + ",":
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        if ch == "," and depth == 0:
            params.append(cur.strip())
            cur = ""
        else:
            cur += ch
    names = [p.split(":")[0].split("=")[0].strip() for p in params if p.strip()]
    if any(not n.isidentifier() and n not in ("/", "*") for n in names):
        return None  # prose ("fn or None"), not a signature
    return [n for n in names if n not in ("/", "*")]


def test_stub_functions_take_the_modules_parameters():
    # Member by member, not by name only: where the module documents a signature (nanobind
    # functions, and C functions whose doc starts with one), the stub's parameter names match.
    tree = ast.parse(STUB.read_text())
    checked = 0
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef):
            continue
        want = _doc_params(getattr(_core, node.name), node.name)
        if want is None:
            continue
        a = node.args
        got = [x.arg for x in a.posonlyargs + a.args + a.kwonlyargs]
        assert got == want, f"{node.name}: stub takes {got}, the module {want}"
        checked += 1
    assert checked >= 10
