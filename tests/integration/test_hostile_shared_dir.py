"""A run directory shared with another local user: that user (a real one, ``nobody``, through
``runuser``) plants symbolic links and directories, and the profiler, running as root, must never
write through them; the files it does write are 0640 at most and carry no secrets from argv."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import warnings

import pytest

from lineprofiler.accounting import _identity
from tests.helpers import quiet_profiler, read_worker, run_python, worker_files

NOBODY = 65534

needs_second_user = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("runuser") is None,
    reason="needs root and runuser(1) to act as a second local user",
)

VICTIM_TEXT = "precious: not the profiler's to overwrite\n"


def as_nobody(*argv: str) -> None:
    """Runs argv as the user nobody (the attacker); fails the test if that fails."""
    proc = subprocess.run(
        ["runuser", "-u", "nobody", "--", *argv], capture_output=True, text=True, timeout=30
    )
    assert proc.returncode == 0, proc.stderr


@pytest.fixture
def shared(tmp_path):
    """A world-writable sticky directory under tmp_path (like /tmp) that nobody can reach, and a
    victim file of root's that nobody may not touch. The parents of tmp_path get o+x for the test
    (restored after)."""
    opened = []
    for parent in [tmp_path, *tmp_path.parents]:
        mode = parent.stat().st_mode
        if not mode & stat.S_IXOTH:
            opened.append((parent, mode))
            parent.chmod(mode | stat.S_IXOTH)
    d = tmp_path / "shared"
    d.mkdir()
    d.chmod(0o1777)
    victim = tmp_path / "victim.txt"
    victim.write_text(VICTIM_TEXT)
    victim.chmod(0o600)
    try:
        yield d, victim
    finally:
        for parent, mode in opened:
            parent.chmod(stat.S_IMODE(mode))


@needs_second_user
def test_a_workers_host_symlink_planted_by_another_user_is_refused(shared, tmp_path):
    d, victim = shared
    target = tmp_path / "victim_dir"  # root's directory the attacker wants written into
    target.mkdir()
    run = d / "run"
    as_nobody("mkdir", "-p", "-m", "0777", str(run / "workers"))
    as_nobody("ln", "-s", str(target), str(run / "workers" / _identity.host_name()))
    with pytest.warns(RuntimeWarning, match="symbolic link"):
        p = quiet_profiler(run)
    try:
        with p.phase("x"):
            p.count("n", 3)
        assert p.merged_tree()[("x",)].counters == {"n": 3}  # recording goes on in memory
        assert p.flush_stats()["errors"] >= 1
    finally:
        p.close()
    assert list(target.iterdir()) == []  # nothing written through the link
    assert victim.read_text() == VICTIM_TEXT


@needs_second_user
def test_a_workers_host_directory_of_another_user_is_refused(shared, tmp_path):
    d, victim = shared
    run = d / "run"
    host_dir = run / "workers" / _identity.host_name()
    as_nobody("mkdir", "-p", "-m", "0777", str(host_dir))
    with pytest.warns(RuntimeWarning, match=f"belongs to uid {NOBODY}"):
        p = quiet_profiler(run)
    p.close()
    assert list(host_dir.iterdir()) == []  # not one file in the attacker's directory


@needs_second_user
def test_links_planted_at_temporary_and_sidecar_names_are_never_followed(shared, tmp_path):
    """The host directory is the user's own but world-writable (a lax umask): the attacker sees
    the worker file appear and plants links at the names the writer used to open with O_TRUNC
    (``<file>.tmp``) and at the sidecars' names (``.samples``). Each flush and sample must replace
    or refuse them, never write through them."""
    d, victim = shared
    run = d / "run"
    p = quiet_profiler(run, sample_interval_s=1000.0)  # a sampler whose thread waits
    try:
        assert p.worker_path is not None
        host_dir = p.worker_path.parent
        host_dir.parent.chmod(0o755)  # let nobody reach it
        host_dir.chmod(0o777)
        stem = p.worker_path.with_suffix("")
        for name in (f"{p.worker_path}.tmp", f"{stem}.samples"):
            as_nobody("ln", "-s", str(victim), name)
        with p.phase("x"):
            pass
        p._rec.sample_now()  # the first row creates the .samples sidecar
        assert p._flush(final=False) == 0
    finally:
        p.close()
    assert victim.read_text() == VICTIM_TEXT
    samples = stem.with_suffix(".samples")
    assert samples.is_file() and not samples.is_symlink()
    assert samples.stat().st_uid == os.geteuid()
    assert read_worker(p.worker_path)["final"] is True
    leftovers = [f.name for f in host_dir.iterdir() if f.name.endswith(".tmp")]
    assert leftovers == [f"{p.worker_path.name}.tmp"]  # only the attacker's own link


def test_the_run_directory_itself_may_be_a_symlink(tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        p = quiet_profiler(tmp_path / "link")
        with p.phase("x"):
            pass
        p.close()
    (f,) = worker_files(real)
    assert read_worker(f)["final"] is True


SECRET_CHILD = """
    import os, sys
    from lineprofiler.accounting import Profiler

    os.umask(int(sys.argv[1], 8))
    p = Profiler(run_dir="run", enabled=True, snapshot_interval_s=None, sample_interval_s=0.05)
    with p.phase("x"):
        p._rec.sample_now()
        p._rec.sample_now()
    p.close()
"""


@pytest.mark.parametrize("umask, most", [("022", 0o640), ("077", 0o600)])
def test_files_are_0640_at_most_and_secret_argv_values_are_masked(tmp_path, umask, most):
    args = [umask, "--api-key", "SECRET-ONE", "--token=SECRET-TWO", "--lr", "3", "--WANDB_KEY"]
    run_python(SECRET_CHILD, cwd=tmp_path, args=args)
    (f,) = worker_files(tmp_path / "run")
    made = [f, f.with_suffix(".samples"), f.with_suffix(".tags")]
    for path in made:
        assert stat.S_IMODE(path.stat().st_mode) == most, path
    for path in (f.parent, f.parent.parent):
        assert stat.S_IMODE(path.stat().st_mode) & 0o027 == 0, path  # no group write, no other
    text = f.read_text()
    assert "SECRET" not in text
    argv = json.loads(text)["meta"]["argv"]
    assert argv[1:] == [
        umask,
        "--api-key",
        _identity.MASK,
        f"--token={_identity.MASK}",
        "--lr",
        "3",
        "--WANDB_KEY",
    ]


@needs_second_user
def test_run_metadata_is_never_written_through_planted_links(shared, tmp_path):
    from lineprofiler.accounting.backends import update_run_metadata

    d, victim = shared
    run = d / "run"
    as_nobody("mkdir", "-m", "0777", str(run))
    as_nobody("ln", "-s", str(victim), str(run / f".metadata.{os.getpid()}.tmp"))
    update_run_metadata(run, {"first": 1})  # the old writer's temporary name: not used
    assert json.loads((run / "metadata.json").read_text()) == {"first": 1}
    as_nobody("rm", str(run / ".metadata.lock"))  # (the sticky bit: only its owner may)
    as_nobody("ln", "-s", str(victim), str(run / ".metadata.lock"))
    update_run_metadata(run, {"second": 2})  # refused: no lock through a link
    assert victim.read_text() == VICTIM_TEXT
