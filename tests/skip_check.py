"""Fails a pytest run whose skips are not all expected (``LINEPROFILER_EXPECTED_SKIPS`` names the
list, tests/expected_skips.txt; scripts/test sets it). A test that skips did not run: in CI that
must be something the machine lacks by design, never an install that quietly failed."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest

ENV = "LINEPROFILER_EXPECTED_SKIPS"


def expected_patterns(path: Path, where: str) -> list[re.Pattern[str]]:
    """The regexes of ``path`` that apply to ``where`` (``3.11``, ``ctest``, ...)."""
    out = []
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        scope, _, regex = line.partition(" ")
        if scope == where or (scope == "py" and where != "ctest"):
            out.append(re.compile(regex.strip()))
    return out


def skip_key(report: pytest.TestReport, root: Path) -> str:
    """``<test file>: <reason>`` of a skipped test's report."""
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        file, _, reason = longrepr
    else:
        file, reason = report.location[0], str(longrepr)
    reason = str(reason).removeprefix("Skipped: ")
    try:
        file = Path(file).resolve().relative_to(root).as_posix()
    except ValueError:
        file = str(file)
    return f"{file}: {reason}"


class SkipCheck:
    def __init__(self, expected: Path, root: Path) -> None:
        where = f"{sys.version_info.major}.{sys.version_info.minor}"
        self.patterns = expected_patterns(expected, where)
        self.root = root
        self.unexpected: list[tuple[str, str]] = []

    @pytest.hookimpl
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if not report.skipped or hasattr(report, "wasxfail"):
            return
        key = skip_key(report, self.root)
        if not any(p.fullmatch(key) for p in self.patterns):
            self.unexpected.append((report.nodeid, key))

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if self.unexpected and session.exitstatus == 0:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    @pytest.hookimpl
    def pytest_terminal_summary(self, terminalreporter) -> None:  # type: ignore[no-untyped-def]
        if not self.unexpected:
            return
        terminalreporter.section("unexpected skips", sep="=", red=True, bold=True)
        for nodeid, key in self.unexpected:
            terminalreporter.line(f"UNEXPECTED SKIP {nodeid}: {key}")
        terminalreporter.line(
            f"{len(self.unexpected)} unexpected skip(s): not in {os.environ[ENV]}; a test that "
            "skips in CI must be listed there with the reason the machine lacks what it needs"
        )


def register(config: pytest.Config) -> None:
    listed = os.environ.get(ENV)
    if listed:
        config.pluginmanager.register(
            SkipCheck(Path(listed).resolve(), Path(config.rootpath).resolve()), "skip_check"
        )
