"""Output files and summaries when another local user (``nobody``, through ``runuser``) shares the
directories: root's ``report --html``, ``export --perfetto`` and ``reduce`` never write through
what that user planted (a link, a FIFO, a directory of theirs, a ``summaries`` swapped for a link
while ``reduce`` runs), and the directories the profiler creates are never group- or
world-writable, even under umask 000."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import time
from pathlib import Path

import pytest

from lineprofiler.accounting import _identity
from tests.helpers import read_worker, run_python, worker_files
from tests.integration import test_hostile_shared_dir as hostile

shared = hostile.shared  # the fixture: a sticky world-writable directory and root's victim file
as_nobody = hostile.as_nobody
needs_second_user = hostile.needs_second_user
VICTIM_TEXT = hostile.VICTIM_TEXT

CLI = "from lineprofiler.cli import main; raise SystemExit(main())"

RECORD = """
    import os, sys
    from lineprofiler.accounting import Profiler

    os.umask(int(sys.argv[2], 8))
    p = Profiler(run_dir=sys.argv[1], enabled=True, snapshot_interval_s=None,
                 sample_interval_s=0.05)
    with p.phase("step"):
        p._rec.sample_now()
        p._rec.sample_now()
    p.close()
"""


def record(run_dir: Path, cwd: Path, umask: str = "022") -> None:
    run_python(RECORD, cwd=cwd, args=[str(run_dir), umask])


def cli(cwd: Path, *args: object) -> subprocess.CompletedProcess[str]:
    proc = run_python(CLI, cwd=cwd, args=[str(a) for a in args], check=False, timeout=60)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


@needs_second_user
def test_report_html_and_export_never_write_through_a_planted_link(shared, tmp_path):
    d, victim = shared
    run = tmp_path / "run"
    record(run, tmp_path)
    for cmd, name in (
        (["report", run, "--html"], "r.html"),
        (["export", run, "--perfetto"], "t.json"),
    ):
        as_nobody("ln", "-s", str(victim), str(d / name))
        proc = cli(tmp_path, *cmd, d / name)
        assert proc.returncode == 2, proc.stderr
        assert "symbolic link of uid 65534" in proc.stderr
        assert victim.read_text() == VICTIM_TEXT
        assert os.readlink(d / name) == str(victim)  # left as it was
    # the same commands to a name nobody took: written, root's, mode from the umask (022)
    for cmd, name in (
        (["report", run, "--html"], "mine.html"),
        (["export", run, "--perfetto"], "mine.json"),
    ):
        proc = cli(tmp_path, *cmd, d / name)
        assert proc.returncode == 0, proc.stderr
        st = os.lstat(d / name)
        assert stat.S_ISREG(st.st_mode) and st.st_uid == 0
        assert stat.S_IMODE(st.st_mode) == 0o644
    assert (d / "mine.html").read_text().lstrip().lower().startswith("<!doctype html")
    assert json.loads((d / "mine.json").read_text())["traceEvents"]
    assert sorted(p.name for p in d.iterdir()) == ["mine.html", "mine.json", "r.html", "t.json"]


@needs_second_user
def test_a_fifo_planted_at_the_html_path_is_refused_at_once(shared, tmp_path):
    d, _ = shared
    run = tmp_path / "run"
    record(run, tmp_path)
    as_nobody("mkfifo", "-m", "0666", str(d / "r.html"))
    t0 = time.monotonic()
    proc = cli(tmp_path, "report", run, "--html", d / "r.html")
    assert proc.returncode == 2, proc.stderr
    assert "named pipe nobody reads" in proc.stderr
    assert time.monotonic() - t0 < 50  # the run_python timeout is 60 s: it did not hang
    assert stat.S_ISFIFO(os.lstat(d / "r.html").st_mode)


@pytest.fixture
def nobodys_run(shared, tmp_path):
    """A run directory made by nobody (0777, no sticky bit: nobody may rename anything in it),
    recorded into by root, and a root-only directory nobody wants root's summary written into."""
    d, _ = shared
    run = d / "run"
    as_nobody("mkdir", "-m", "0777", str(run))
    record(run, tmp_path)
    target = tmp_path / "root_only"
    target.mkdir(mode=0o700)
    return run, target


@needs_second_user
def test_reduce_refuses_a_summaries_link_or_another_users_summaries(nobodys_run, tmp_path):
    run, target = nobodys_run
    as_nobody("ln", "-s", str(target), str(run / "summaries"))
    proc = cli(tmp_path, "reduce", run)
    assert proc.returncode == 2, proc.stderr
    assert "symbolic link" in proc.stderr
    assert list(target.iterdir()) == []

    as_nobody("rm", str(run / "summaries"))
    as_nobody("mkdir", "-m", "0777", str(run / "summaries"))
    proc = cli(tmp_path, "reduce", run)
    assert proc.returncode == 2, proc.stderr
    assert "belongs to uid 65534" in proc.stderr
    assert list((run / "summaries").iterdir()) == []

    as_nobody("rmdir", str(run / "summaries"))
    proc = cli(tmp_path, "reduce", run)
    assert proc.returncode == 0, proc.stderr
    st = (run / "summaries").lstat()
    assert stat.S_ISDIR(st.st_mode) and st.st_uid == 0 and stat.S_IMODE(st.st_mode) == 0o750
    (summary,) = (run / "summaries").iterdir()
    assert stat.S_IMODE(summary.stat().st_mode) == 0o640


# nobody's side of the race: move root's summaries/ away and put a link to the target in its
# place, over and over, as fast as Python can (the reproduction needed about 14 tries).
SWAPPER = """
import os, sys, time
run, target, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
end, i = time.monotonic() + seconds, 0
while time.monotonic() < end:
    i += 1
    try:
        os.rename(f"{run}/summaries", f"{run}/moved.{i}")
    except OSError:
        pass
    try:
        os.symlink(target, f"{run}/summaries")
        time.sleep(0.0002)
        os.unlink(f"{run}/summaries")
    except OSError:
        pass
"""


@needs_second_user
def test_reduce_never_writes_through_summaries_swapped_for_a_link_while_it_runs(
    nobodys_run, tmp_path
):
    from lineprofiler.report.reduce import reduce_host

    run, target = nobodys_run
    target.chmod(0o777)  # a target nobody may swap in (root-only contents would be the same)
    (host,) = [p.name for p in (run / "workers").iterdir()]
    python = shutil.which("python3", path="/usr/bin:/bin")  # one nobody may run
    if python is None:
        pytest.skip("no system python3 for the attacker")
    swapper = subprocess.Popen(
        ["runuser", "-u", "nobody", "--", python, "-c", SWAPPER, str(run), str(target), "3"]
    )
    written = refused = 0
    try:
        deadline = time.monotonic() + 2.5
        while time.monotonic() < deadline:
            try:
                reduce_host(run, host)
                written += 1
            except OSError:
                refused += 1
    finally:
        swapper.wait(timeout=30)
    assert swapper.returncode == 0
    assert written + refused > 20, (written, refused)
    assert list(target.iterdir()) == []  # whatever won each race, nothing was written there


TORCH_WINDOW = """
    import json, sys
    import torch
    from lineprofiler.accounting import Profiler

    p = Profiler(run_dir=sys.argv[1], enabled=True, snapshot_interval_s=None,
                 sample_interval_s=None, backend="torch", backend_window=(1, 2),
                 window_phase="iteration")
    for _ in range(3):
        with p.phase("iteration"):
            torch.ones(8) @ torch.ones(8)
    print(json.dumps([p.backend_state.state, p.backend_state.unavailable_reason]))
    p.close()
"""


@needs_second_user
def test_a_torch_window_never_writes_its_trace_through_a_planted_backend_link(
    nobodys_run, tmp_path
):
    pytest.importorskip("torch")
    run, target = nobodys_run
    target.chmod(0o777)
    as_nobody("ln", "-s", str(target), str(run / "backend"))
    proc = run_python(TORCH_WINDOW, cwd=tmp_path, args=[str(run)])
    state, why = json.loads(proc.stdout.strip().splitlines()[-1])
    assert state == "failed" and "symbolic link" in why
    assert list(target.iterdir()) == []
    as_nobody("rm", str(run / "backend"))
    proc = run_python(TORCH_WINDOW, cwd=tmp_path, args=[str(run)])
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == ["done", None]
    st = (run / "backend").lstat()
    assert stat.S_ISDIR(st.st_mode) and st.st_uid == 0 and stat.S_IMODE(st.st_mode) == 0o750
    assert sorted(p.name for p in (run / "backend").iterdir()) == ["torch_trace.json"]
    assert json.loads((run / "backend" / "torch_trace.json").read_text())["traceEvents"]


UMASK_000 = """
    import os, sys
    from lineprofiler.accounting import Profiler

    os.umask(0)
    p = Profiler(run_dir="a/b/run", enabled=True, snapshot_interval_s=None,
                 sample_interval_s=None)
    with p.phase("x"):
        pass
    p.close()
"""


def test_directories_the_profiler_creates_are_not_group_or_world_writable_under_umask_000(
    tmp_path,
):
    run_python(UMASK_000, cwd=tmp_path)
    (f,) = worker_files(tmp_path / "a/b/run")
    made = [tmp_path / "a", tmp_path / "a/b", tmp_path / "a/b/run", f.parent.parent, f.parent]
    modes = {str(p.relative_to(tmp_path)): stat.S_IMODE(p.stat().st_mode) for p in made}
    assert modes == {
        "a": 0o755,
        "a/b": 0o755,
        "a/b/run": 0o755,
        "a/b/run/workers": 0o750,
        f"a/b/run/workers/{f.parent.name}": 0o750,
    }
    assert stat.S_IMODE(f.stat().st_mode) == 0o640
    assert read_worker(f)["final"] is True
    reduce_umask_000 = "import os\nos.umask(0)\n" + CLI
    run_python(reduce_umask_000, cwd=tmp_path, args=["reduce", str(tmp_path / "a/b/run")])
    assert stat.S_IMODE((tmp_path / "a/b/run/summaries").stat().st_mode) == 0o750
    assert f.parent.name == _identity.host_name()
