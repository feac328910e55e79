"""docs/internals/layout.md names every source file under src/ (the rule is written at its top).

A file is named when its file name or its stem appears as a whole word, or when a glob written
in the page (a word with ``*``, e.g. ``line_tracer*.cpp``) matches its file name. Packages'
``__init__.py`` and ``__main__.py`` go with their directory. The files are found on disk, so a
new file fails this test until the page says what it is.
"""

from __future__ import annotations

import fnmatch
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LAYOUT = ROOT / "docs" / "internals" / "layout.md"
SOURCE_SUFFIXES = {".py", ".pyi", ".cpp", ".h", ".hpp"}
IMPLIED = {"__init__.py", "__main__.py"}


def _named(name: str, text: str, globs: list[str]) -> bool:
    stem = name.split(".", 1)[0]
    for word in (name, stem):
        if re.search(r"(?<![\w.])" + re.escape(word) + r"(?![\w])", text):
            return True
    return any(fnmatch.fnmatchcase(name, g) for g in globs)


def _globs(text: str) -> list[str]:
    return [w.rsplit("/", 1)[-1] for w in re.findall(r"[\w./*+-]*\*[\w./*+-]*", text)]


def source_files() -> list[Path]:
    return sorted(
        p
        for p in (ROOT / "src").rglob("*")
        if p.suffix in SOURCE_SUFFIXES and p.is_file() and "__pycache__" not in p.parts
    )


def test_every_source_file_is_named_in_the_layout_page():
    text = LAYOUT.read_text(encoding="utf-8")
    files = source_files()
    assert len(files) > 100  # the tree was found (145 files when this test was written)
    missing = [
        str(p.relative_to(ROOT))
        for p in files
        if p.name not in IMPLIED and not _named(p.name, text, _globs(text))
    ]
    assert missing == [], f"docs/internals/layout.md does not name: {missing}"


def test_the_rule_finds_a_file_left_out():
    text = "src/cpp/module/  recorder_methods.cpp, line_tracer*.cpp; report/ cli_*, view"
    globs = _globs(text)
    assert globs == ["line_tracer*.cpp", "cli_*"]
    assert _named("recorder_methods.cpp", text, globs)
    assert _named("line_tracer_hooks.cpp", text, globs)
    assert _named("cli_report.py", text, globs)
    assert _named("view.py", text, globs)
    assert not _named("recorder_type.h", text, globs)
    assert not _named("methods.cpp", text, globs)  # a part of another name is not a mention
    assert not _named("line_tracer_state.h", text, globs)
    assert not _named("iew.py", text, globs)
