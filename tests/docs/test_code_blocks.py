"""Every ```python and ```sh block of README.md and docs/**/*.md runs, in order, per page.

Each page runs in its own temporary directory, so a later block sees the files an earlier one made
(the quick start's `train.py`, then `lineprofiler report profile`). HTML comments right before a
block steer it:

- `<!-- file: NAME -->`: a python block is saved as NAME (and run as `python NAME`); a sh block is
  saved and not run (a helper file for later blocks).
- `<!-- not run: REASON -->`: the block is not run (a GPU, Slurm, Ray, torchrun, a fragment).
- `<!-- needs: MODULE -->`: skipped when MODULE cannot be imported (torch is only in 3.11's venv).
- `<!-- phases: A B -->`: the phases the report must show, where the block's `phase("...")`
  literals are not all meant to be recorded (a name the block shows being refused).

Python blocks run with this interpreter; sh blocks with `bash -e`, the venv's bin first on PATH
(so `python` and `lineprofiler` are this checkout's). Each must exit 0. Ground truth for "the
report shows the phases": the `phase("NAME")` literals written in the block itself: after a python
block that names phases, `lineprofiler report DIR --json` of each run directory it wrote must
contain every one of them; a sh block that runs `lineprofiler report`/`record` (text) must print every
phase named by the latest block before it that named any.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from importlib.util import find_spec
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
PHASE_RE = re.compile(r"phase\(\s*[\"']([A-Za-z0-9_.\-]+)[\"']")
COMMENT_RE = re.compile(r"<!--\s*(file|not run|needs|phases)\s*:\s*(.*?)\s*-->")
BLOCK_TIMEOUT_S = 60


@dataclass
class Block:
    lang: str
    line: int
    text: str
    file: str | None = None
    not_run: str | None = None
    needs: list[str] = field(default_factory=list)
    expected: list[str] | None = None

    @property
    def phases(self) -> list[str]:
        return PHASE_RE.findall(self.text) if self.expected is None else self.expected


def doc_pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def parse_blocks(path: Path) -> list[Block]:
    """The python and sh blocks of one page, with the comments right above each."""
    blocks: list[Block] = []
    lines = path.read_text(encoding="utf-8").splitlines()
    marks: list[tuple[str, str]] = []
    i = 0
    while i < len(lines):
        stripped = lines[i].strip()
        m = COMMENT_RE.fullmatch(stripped)
        if m:
            marks.append((m.group(1), m.group(2)))
            i += 1
            continue
        if stripped.startswith("```"):
            lang = stripped[3:].strip()
            start = i
            i += 1
            body = []
            while i < len(lines) and lines[i].strip() != "```":
                body.append(lines[i])
                i += 1
            if lang in ("python", "sh"):
                block = Block(lang, start + 1, "\n".join(body) + "\n")
                for kind, value in marks:
                    if kind == "file":
                        block.file = value
                    elif kind == "not run":
                        block.not_run = value
                    elif kind == "phases":
                        block.expected = value.split()
                    else:
                        block.needs.append(value)
                blocks.append(block)
            marks = []
        elif stripped:
            marks = []
        i += 1
    return blocks


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LINEPROFILER_")}
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env.pop("PYTHONPATH", None)
    # The Ray recipe's local instance: no token written to ~/.ray, no usage report, and its
    # session files under RAY_TMPDIR (set per page, removed after it) instead of /tmp/ray.
    env.update(RAY_AUTH_MODE="disabled", RAY_USAGE_STATS_ENABLED="0")
    return env


@pytest.fixture
def ray_tmpdir(monkeypatch):
    """A short folder for Ray's session files (their Unix socket paths may not exceed 107 bytes:
    tmp_path is too deep), removed after the page."""
    folder = tempfile.mkdtemp(prefix="lpray")
    monkeypatch.setenv("RAY_TMPDIR", folder)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def _run_dirs(where: Path) -> list[Path]:
    return sorted(p.parent for p in where.rglob("workers") if p.is_dir())


def _reported_phases(run_dir: Path) -> set[str]:
    out = subprocess.run(
        [str(BIN / "lineprofiler"), "report", str(run_dir), "--json", "--no-samples"],
        capture_output=True,
        text=True,
        timeout=BLOCK_TIMEOUT_S,
        env=_env(),
    )
    assert out.returncode == 0, f"report of {run_dir} failed:\n{out.stderr}"
    doc = json.loads(out.stdout)
    return {name for role in doc["roles"] for p in role["phases"] for name in p["path"]}


PAGES = [p for p in doc_pages() if any(not b.not_run for b in parse_blocks(p))]


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_page_blocks_run(page: Path, tmp_path: Path, ray_tmpdir: str) -> None:
    named: list[str] = []  # phases named by the page's latest block that named any
    ran = 0
    for block in parse_blocks(page):
        where = f"{page.relative_to(ROOT)}:{block.line}"
        if block.not_run:
            continue
        if any(find_spec(m) is None for m in block.needs):
            continue
        if block.lang == "sh" and block.file:
            (tmp_path / block.file).write_text(block.text)
            named = block.phases or named
            continue
        if block.lang == "python":
            name = block.file or f"block_{block.line}.py"
            (tmp_path / name).write_text(block.text)
            cmd = [sys.executable, name]
        else:
            (tmp_path / f"block_{block.line}.sh").write_text(block.text)
            cmd = ["bash", "-e", f"block_{block.line}.sh"]
        proc = subprocess.run(
            cmd,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=BLOCK_TIMEOUT_S,
            env=_env(),
        )
        ran += 1
        assert proc.returncode == 0, (
            f"{where} exited {proc.returncode}\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}"
        )
        named = block.phases or named
        if block.lang == "python" and block.phases:
            written = _run_dirs(tmp_path)
            assert written, f"{where} names phases {block.phases} but wrote no run directory"
            found: set[str] = set()
            for d in written:
                found |= _reported_phases(d)
            missing = [p for p in block.phases if p not in found]
            assert not missing, f"{where}: the report lacks phases {missing} (has {sorted(found)})"
        if block.lang == "sh" and re.search(r"lineprofiler (report|record)\b", block.text):
            if "--json" not in block.text:
                missing = [p for p in named if p not in proc.stdout]
                assert not missing, f"{where}: the printed report lacks phases {missing}"
    if not ran:
        pytest.skip("every runnable block needs a module this interpreter lacks")


LINK_RE = re.compile(r"\]\(([^)\s]+)\)")


def test_relative_links_resolve() -> None:
    """Every relative link of the README, CONTRIBUTING.md and docs/ names a file that exists."""
    broken = []
    for page in [*doc_pages(), ROOT / "CONTRIBUTING.md"]:
        for target in LINK_RE.findall(page.read_text(encoding="utf-8")):
            if re.match(r"[a-z]+:", target) or target.startswith("#"):
                continue
            path = target.split("#", 1)[0]
            if not (page.parent / path).exists():
                broken.append(f"{page.relative_to(ROOT)}: {target}")
    assert not broken, "broken links:\n" + "\n".join(broken)


def test_no_block_that_runs_installs_packages() -> None:
    # A `pip install` run by this test would replace the checkout under test with whatever the
    # index holds (PyPI has an unrelated with-line-profiler): such blocks must be marked not run.
    bad = [
        f"{page.relative_to(ROOT)}:{b.line}"
        for page in doc_pages()
        for b in parse_blocks(page)
        if not b.not_run and re.search(r"\bpip\b.*\binstall\b", b.text)
    ]
    assert bad == []
