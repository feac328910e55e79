"""``safe_read.reuse_dirs()`` (``top``, ``serve``): directories below a run directory opened once
per block, with the same refusals as outside it, and every fd closed at its end."""

from __future__ import annotations

import os

import pytest

from lineprofiler.runfile.safe_read import UnsafeFile, read_regular, reuse_dirs


@pytest.fixture(params=[str, os.fspath, lambda p: p], ids=["str", "fspath", "Path"])
def spell(request):
    """Paths as the run's readers pass them: strings (the per-directory shortcut) or Paths."""
    return request.param


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_same_bytes_inside_the_block_and_every_fd_closed_after(tmp_path, spell):
    run = spell(tmp_path / "run")
    files = []
    for h in range(3):
        d = tmp_path / "run" / "workers" / f"h{h}"
        d.mkdir(parents=True)
        for i in range(4):
            (d / f"w{i}.json").write_bytes(b"x" * (h * 10 + i + 1))
            files.append(spell(d / f"w{i}.json"))
    want = [read_regular(f, 1 << 20, run) for f in files]
    before = _fds()
    with reuse_dirs():
        assert [read_regular(f, 1 << 20, run) for f in files] == want
        assert _fds() == before + 3  # one per host directory, kept for the block
        with reuse_dirs():  # nested: the outer block's
            assert read_regular(files[0], 1 << 20, run) == want[0]
    assert _fds() == before


def test_links_are_refused_inside_the_block_too(tmp_path, spell):
    run = tmp_path / "run"
    (run / "workers" / "h").mkdir(parents=True)
    (run / "workers" / "h" / "w.json").write_text("mine")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "w.json").write_text("theirs")
    (run / "workers" / "link").symlink_to(elsewhere)
    (run / "workers" / "h" / "l.json").symlink_to(elsewhere / "w.json")
    (run / "x.json").write_text("top")
    r = spell(run)

    def read(*names: str) -> bytes:
        return read_regular(spell(run.joinpath(*names)), 100, r)

    with reuse_dirs():
        assert read("workers", "h", "w.json") == b"mine"
        with pytest.raises(UnsafeFile, match="link"):
            read("workers", "link", "w.json")
        with pytest.raises(UnsafeFile, match="link"):
            read("workers", "h", "l.json")  # a link beside a file read through the directory
        assert read("x.json") == b"top"  # a file of the run directory itself
        for bad in ("..", ".", ""):  # names a reused directory's shortcut must not take
            with pytest.raises(UnsafeFile):
                read_regular(f"{run}/workers/h/{bad}", 100, r)
        # the same directory below another run directory is not this one's
        with pytest.raises(UnsafeFile, match="not a file of the run directory"):
            read_regular(spell(run / "workers" / "h" / "w.json"), 100, spell(elsewhere))
        # the host directory swapped for a link mid-block: the block keeps reading the directory
        # it checked, never the link's target
        os.rename(run / "workers" / "h", run / "workers" / "h-old")
        (run / "workers" / "h").symlink_to(elsewhere)
        assert read("workers", "h", "w.json") == b"mine"
    with pytest.raises(UnsafeFile, match="link"):
        read_regular(run / "workers" / "h" / "w.json", 100, run)
