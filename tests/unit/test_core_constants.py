"""The reading side's constants (runfile/core_constants.py, generated) are the C++ core's own.

The generated module is what a pure install reads runs with; these tests hold it equal to the
built ``_core`` (the single source), value by value, and the pure-Python ``bucket_of`` equal to
lp_core's ``hist_bucket`` at every bucket edge.
"""

from __future__ import annotations

import ast
import random
import subprocess
import sys
from pathlib import Path

from lineprofiler import _core
from lineprofiler.runfile import core_constants
from lineprofiler.runfile.stats import HIST_BUCKETS, bucket_of, bucket_value

ROOT = Path(__file__).resolve().parents[2]
NAMES = [n for n in vars(core_constants) if n.isupper()]


def test_every_generated_constant_is_cores():
    assert "HIST_BUCKET_VALUES" in NAMES and "SAMPLE_WORDS" in NAMES
    for name in NAMES:
        if name == "HIST_BUCKET_VALUES":
            want = tuple(_core.hist_bucket_value(b) for b in range(_core.HIST_BUCKETS))
        else:
            want = getattr(_core, name)
        got = getattr(core_constants, name)
        assert got == want and type(got) is type(want), name


def test_bucket_values_are_bit_identical():
    # A report prints quantiles read from these: a value one ulp off changes printed digits.
    for b in range(HIST_BUCKETS):
        assert bucket_value(b).hex() == _core.hist_bucket_value(b).hex()


def test_bucket_of_is_lp_cores_hist_bucket():
    values = set(range(0, 200))
    for b in range(HIST_BUCKETS):  # both sides of every bucket's lower bound
        lo = int(_core.hist_bucket_lower(b))
        values.update(v for v in range(lo - 2, lo + 3) if v >= 0)
    for e in range(64):
        values.update({(1 << e) - 1, 1 << e, (1 << e) + 1})
    values.add((1 << 64) - 1)
    rng = random.Random(34)
    values.update(int(2 ** rng.uniform(0, 64)) for _ in range(20_000))
    values = {v for v in values if v < 1 << 64}
    wrong = [(v, bucket_of(v), _core.hist_bucket(v)) for v in sorted(values)]
    wrong = [w for w in wrong if w[1] != w[2]]
    assert wrong == []
    # and the values span every bucket, so no edge went unchecked
    assert {_core.hist_bucket(v) for v in values} == set(range(HIST_BUCKETS))


def test_generated_module_is_current():
    """scripts/gen-core-constants --check: the committed module is what the core generates now."""
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gen-core-constants"), "--check"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def _is_core_import(node: ast.AST) -> bool:
    """``import lineprofiler._core``, ``from lineprofiler[._core] import ...``, the same relative
    (``from .. import _core``, ``from .._core import x``), or ``import_module("..._core")``."""
    if isinstance(node, ast.Import):
        return any(a.name == "lineprofiler._core" for a in node.names)
    if isinstance(node, ast.ImportFrom):
        module = node.module or ""
        if module.split(".")[-1] == "_core" and (node.level or module.startswith("lineprofiler")):
            return True
        if module == "lineprofiler" or (node.level and module in ("", "lineprofiler")):
            return any(a.name == "_core" for a in node.names)
        return False
    if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
        return isinstance(node.args[0].value, str) and node.args[0].value.endswith("._core")
    return False


def _optional(tree: ast.AST) -> set[int]:
    """ids of the import nodes in a ``try`` whose handler catches ImportError: an accelerator the
    module does without (export --perfetto's tracks in C++)."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Try) and any(
            isinstance(h.type, ast.Name)
            and h.type.id in ("ImportError", "ModuleNotFoundError")
            and not any(isinstance(n, ast.Raise) for n in ast.walk(h))  # (not re-raised)
            for h in node.handlers
        ):
            out |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
    return out


def _core_imports(path: Path) -> tuple[int, int]:
    """(imports of _core the module needs, optional ones)."""
    tree = ast.parse(path.read_text())
    optional = _optional(tree)
    found = [n for n in ast.walk(tree) if _is_core_import(n)]
    return sum(id(n) not in optional for n in found), sum(id(n) in optional for n in found)


def test_reading_side_never_imports_core():
    """runfile/ and report/ take the constants from the generated module, never from _core
    (tests/report/test_without_core.py runs them with _core unimportable); the one optional
    import (``try``/``except ImportError``) is report/perfetto.py's C++ tracks, whose Python path
    writes the same bytes (tests/report/test_perfetto_native.py)."""
    needs, optional = {}, {}
    for pkg in ("runfile", "report"):
        for path in (ROOT / "src" / "lineprofiler" / pkg).rglob("*.py"):
            n, o = _core_imports(path)
            if n:
                needs[str(path.relative_to(ROOT))] = n
            if o:
                optional[str(path.relative_to(ROOT))] = o
    assert needs == {}
    assert optional == {"src/lineprofiler/report/perfetto.py": 1}
