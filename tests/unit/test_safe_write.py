"""The one writer of output files (``lineprofiler.safe_write``): what it replaces, what it writes
in place, what it refuses, and the modes of what it creates (checked with os.stat / os.lstat)."""

from __future__ import annotations

import json
import os
import stat
import threading

import pytest

from lineprofiler.safe_write import (
    RefusedOutput,
    make_dirs,
    open_own_dir,
    output_file,
    write_output,
)
from tests.helpers import run_python

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give a file away")
NOBODY = 65534


def _entries(d):
    return sorted(p.name for p in d.iterdir())


def test_a_new_file_is_written_whole_and_no_temporary_is_left(tmp_path):
    target = tmp_path / "out.html"
    write_output(target, "<p>é</p>")
    assert target.read_bytes() == "<p>é</p>".encode()
    write_output(target, b"\x00\x01")  # bytes: written as they are, replacing the old file
    assert target.read_bytes() == b"\x00\x01"
    assert _entries(tmp_path) == ["out.html"]


def test_a_relative_name_is_written_in_the_current_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_output("plain.json", "{}")
    assert (tmp_path / "plain.json").read_text() == "{}"


def test_an_exception_in_the_block_leaves_the_target_untouched(tmp_path):
    target = tmp_path / "trace.json"
    target.write_text("old")
    with pytest.raises(ValueError), output_file(target) as f:
        f.write("half a trace")
        raise ValueError("the export failed")
    assert target.read_text() == "old"
    assert _entries(tmp_path) == ["trace.json"]


def test_a_planted_link_at_the_temporary_name_is_never_followed(tmp_path, monkeypatch):
    import lineprofiler.safe_write as sw

    victim = tmp_path / "victim"
    victim.write_text("keep")
    out = tmp_path / "out"
    out.mkdir()
    os.symlink(victim, out / f".lp-out-{'0' * 16}.tmp")
    picks = iter(["0" * 16, "1" * 16])  # the writer's first pick is the planted name
    monkeypatch.setattr(sw.secrets, "token_hex", lambda n: next(picks))
    write_output(out / "x.json", "new")
    assert victim.read_text() == "keep"
    assert (out / "x.json").read_text() == "new"
    assert os.path.islink(out / f".lp-out-{'0' * 16}.tmp")  # left as it was, not opened


def test_a_hard_link_at_the_target_is_replaced_never_written_into(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("keep")
    os.link(victim, tmp_path / "report.html")
    write_output(tmp_path / "report.html", "new")
    assert victim.read_text() == "keep"
    assert (tmp_path / "report.html").read_text() == "new"
    assert victim.stat().st_nlink == 1


@needs_root
def test_another_users_link_at_the_target_is_refused(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("keep")
    link = tmp_path / "report.html"
    os.symlink(victim, link)
    os.lchown(link, NOBODY, NOBODY)
    with pytest.raises(RefusedOutput, match="symbolic link of uid 65534"):
        write_output(link, "evil")
    assert victim.read_text() == "keep"
    assert os.path.islink(link)


def test_this_users_own_link_is_followed_and_kept(tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    (real / "r.html").write_text("old")
    link = tmp_path / "r.html"
    os.symlink(real / "r.html", link)
    write_output(link, "new")
    assert os.path.islink(link)
    assert (real / "r.html").read_text() == "new"
    dangling = tmp_path / "dangling"
    os.symlink(tmp_path / "nowhere", dangling)
    with pytest.raises(RefusedOutput, match="to nothing"):
        write_output(dangling, "x")


def test_a_directory_target_is_refused(tmp_path):
    (tmp_path / "d").mkdir()
    with pytest.raises(RefusedOutput, match="is a directory"):
        write_output(tmp_path / "d", "x")
    with pytest.raises(RefusedOutput, match="not a file name"):
        write_output(f"{tmp_path}/", "x")


def test_a_fifo_with_a_reader_is_written_in_place_and_one_without_never_blocks(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(RefusedOutput, match="nobody reads"):
        write_output(fifo, "x")  # no reader: refused at once, never a hang
    got = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    # the reader has the FIFO open once the writer's non-blocking open succeeds; retry until then
    for _ in range(500):
        try:
            write_output(fifo, "through the pipe")
            break
        except RefusedOutput:
            threading.Event().wait(0.01)
    reader.join(10)
    assert got == [b"through the pipe"]
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)  # still the FIFO, not replaced by a file


@needs_root
def test_a_device_is_written_in_place_never_replaced(tmp_path):
    null = tmp_path / "null"
    os.mknod(null, stat.S_IFCHR | 0o666, os.makedev(1, 3))  # /dev/null's device, here
    write_output(null, "discarded")
    assert stat.S_ISCHR(os.lstat(null).st_mode)
    assert _entries(tmp_path) == ["null"]


UMASK_CHILD = """
    import json, os, stat, sys
    from lineprofiler.safe_write import make_dirs, open_own_dir, write_output

    os.umask(int(sys.argv[1], 8))
    make_dirs("a/b/run")
    fd = open_own_dir("a/b/run", "summaries")
    os.close(fd)
    write_output("out.html", "x")
    write_output("private.json", "x", mode=0o640)
    modes = {p: stat.S_IMODE(os.stat(p).st_mode)
             for p in ["a", "a/b", "a/b/run", "a/b/run/summaries", "out.html", "private.json"]}
    print(json.dumps(modes))
"""


@pytest.mark.parametrize(
    "umask, want",
    [
        ("000", [0o755, 0o755, 0o755, 0o750, 0o666, 0o640]),
        ("022", [0o755, 0o755, 0o755, 0o750, 0o644, 0o640]),
        ("077", [0o700, 0o700, 0o700, 0o700, 0o600, 0o600]),
    ],
)
def test_directories_are_never_group_or_world_writable_and_outputs_follow_the_umask(
    tmp_path, umask, want
):
    proc = run_python(UMASK_CHILD, cwd=tmp_path, args=[umask])
    modes = json.loads(proc.stdout.strip().splitlines()[-1])
    assert list(modes.values()) == want


def test_make_dirs_leaves_an_existing_directory_as_it_is(tmp_path):
    d = tmp_path / "shared"
    d.mkdir()
    d.chmod(0o1777)
    make_dirs(d / "run")
    assert stat.S_IMODE(d.stat().st_mode) == 0o1777
    assert (d / "run").is_dir()
    (tmp_path / "file").write_text("")
    with pytest.raises(OSError):
        make_dirs(tmp_path / "file" / "run")


def test_open_own_dir_refuses_a_link(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    run = tmp_path / "run"
    run.mkdir()
    os.symlink(elsewhere, run / "summaries")
    with pytest.raises(RefusedOutput, match="symbolic link"):
        open_own_dir(run, "summaries")
    (run / "plain").write_text("")
    with pytest.raises(RefusedOutput, match="not a directory"):
        open_own_dir(run, "plain")


@needs_root
def test_open_own_dir_refuses_another_users_directory(tmp_path):
    (tmp_path / "summaries").mkdir()
    os.chown(tmp_path / "summaries", NOBODY, NOBODY)
    with pytest.raises(RefusedOutput, match="belongs to uid 65534"):
        open_own_dir(tmp_path, "summaries")


def test_a_name_inside_an_open_directory(tmp_path):
    fd = open_own_dir(tmp_path, "summaries")
    try:
        write_output("h.json", b"{}", mode=0o640, dir_fd=fd)
        with pytest.raises(RefusedOutput, match="not a file name"):
            write_output("../escape.json", b"{}", dir_fd=fd)
    finally:
        os.close(fd)
    assert (tmp_path / "summaries" / "h.json").read_bytes() == b"{}"
    assert not (tmp_path / "escape.json").exists()


def test_a_library_writes_by_path_through_the_open_directory(tmp_path):
    from lineprofiler.safe_write import written_by_a_library

    fd = open_own_dir(tmp_path, "backend")
    try:
        with written_by_a_library(fd, "trace.json.gz") as path:
            assert path.startswith(f"/proc/self/fd/{fd}/.") and path.endswith("trace.json.gz")
            with open(path, "w") as f:  # what torch's export_chrome_trace does with it
                f.write("{}")
        with pytest.raises(RuntimeError), written_by_a_library(fd, "t.json") as path:
            with open(path, "w") as f:
                f.write("half")
            raise RuntimeError("the library failed")
    finally:
        os.close(fd)
    assert _entries(tmp_path / "backend") == ["trace.json.gz"]
    assert (tmp_path / "backend" / "trace.json.gz").read_text() == "{}"
