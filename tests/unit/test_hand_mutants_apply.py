"""Every hand-planted mutant (tests/mutants/*.patch) still applies to the code as it is, exactly
(no fuzz), and names test files that exist: a patch left behind by a change to its line would
otherwise only show up as an error of ``scripts/mutation --hand``. Nothing is modified (a dry
run); whether each mutant is caught is that script's job (docs/internals/mutation.md)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PATCHES = sorted((ROOT / "tests" / "mutants").glob("*.patch"))


def test_there_are_twenty():
    assert len(PATCHES) >= 20


@pytest.mark.parametrize("patch", PATCHES, ids=[p.stem for p in PATCHES])
def test_patch_applies_and_names_its_tests(patch: Path):
    if shutil.which("patch") is None:
        pytest.skip("no patch(1)")
    header = patch.read_text().split("\ndiff ", 1)[0].splitlines()
    assert header[0].startswith("# ") and len(header[0]) > 20  # what the bug does
    tests = [t for line in header if line.startswith("# tests:") for t in line[8:].split()]
    files = [t.split("::")[0] for t in tests if not t.startswith("-")]
    assert files, f"{patch.name}: no '# tests:' line"
    for f in files:
        assert (ROOT / f).exists(), f"{patch.name} names {f}, which does not exist"
    proc = subprocess.run(
        ["patch", "-p1", "--dry-run", "--batch", "--forward", "--fuzz=0", "-d", str(ROOT)],
        input=patch.read_text(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, f"{patch.name} no longer applies: re-plant it\n{proc.stdout}"
