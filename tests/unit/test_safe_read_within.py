"""``open_regular(path, limit, within)``: the run-relative names it walks, whichever way ``path``
is spelled. The plain ``<run>/a/b`` spelling takes a shortcut past relpath; each other spelling
("..", ".", "//", a relative path) must give what relpath(abspath) gives: opened when the file
lies below the run directory, refused when it does not, a link on the way refused either way."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from lineprofiler.runfile.safe_read import UnsafeFile, read_regular


@pytest.fixture
def run(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    (run / "workers" / "h").mkdir(parents=True)
    (run / "workers" / "h" / "w_1.json").write_bytes(b"inside")
    (tmp_path / "outside.json").write_bytes(b"outside")
    os.symlink(run / "workers" / "h", run / "workers" / "link")
    return run


def test_every_spelling_of_a_file_below_the_run_reads_it(run: Path, monkeypatch) -> None:
    monkeypatch.chdir(run.parent)
    for path in (
        f"{run}/workers/h/w_1.json",
        f"{run}/workers/./h/w_1.json",
        f"{run}//workers/h/w_1.json",
        f"{run}/workers/x/../h/w_1.json",
        "run/workers/h/w_1.json",
    ):
        for within in (str(run), f"{run}/", "run", f"{run}/workers/.."):
            assert read_regular(path, 100, within) == b"inside", (path, within)


def test_a_file_outside_the_run_or_through_a_link_is_refused(run: Path) -> None:
    for path in (
        f"{run}/../outside.json",
        f"{run}/workers/../../outside.json",
        str(run.parent / "outside.json"),
        f"{run}",
    ):
        with pytest.raises(UnsafeFile, match="not a file of the run directory"):
            read_regular(path, 100, run)
    for within in (run, f"{run}/"):
        with pytest.raises(UnsafeFile, match="symbolic link"):
            read_regular(f"{run}/workers/link/w_1.json", 100, within)
