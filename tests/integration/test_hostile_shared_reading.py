"""A run directory whose ``workers/<host>/`` its owner (root) made world-writable: another local
user (a real one, ``nobody``, through ``runuser``) replaces a sidecar with a FIFO, a symbolic link
to a FIFO of its own or a sparse 1 GiB file, or plants a worker file of its own. Every command
that reads the run, running as root, must finish within its time and memory ceilings, name what
it refused, print no terminal control character, and still report the real workers' numbers
(which this test recorded itself).
"""

from __future__ import annotations

import json
import os
import shutil

import pytest

from tests.helpers import run_python
from tests.integration.test_hostile_shared_dir import (  # noqa: F401 (shared: the fixture)
    as_nobody,
    needs_second_user,
    shared,
)
from tests.report.test_every_command_reads_safely import (
    HOSTILE,
    TWO_PROCESS_RUN,
    assert_all_fine,
    assert_learner_still_reported,
    every_command,
    worker_of,
)


def _run_open_to_nobody(d):
    """The two-process run recorded by root in ``d``, its host directory made 0777 by root."""
    run_python(TWO_PROCESS_RUN, cwd=d)
    run = d / "run"
    (host_dir,) = (run / "workers").iterdir()
    for p in (run, run / "workers"):
        p.chmod(0o755)
    host_dir.chmod(0o777)
    for f in host_dir.iterdir():
        f.chmod(0o644)
    return run, host_dir


@needs_second_user
@pytest.mark.parametrize("attack", ["fifo", "symlink_to_fifo", "sparse"])
def test_a_sidecar_replaced_by_another_user_costs_that_sidecar_only(request, tmp_path, attack):
    d, _victim = request.getfixturevalue("shared")
    run, _host_dir = _run_open_to_nobody(d)
    side = worker_of(run, "worker").with_suffix(".samples")
    as_nobody("rm", "-f", str(side))
    if attack == "fifo":
        as_nobody("mkfifo", str(side))
    elif attack == "symlink_to_fifo":
        trap = d / "trap"
        as_nobody("mkfifo", str(trap))
        as_nobody("ln", "-s", str(trap), str(side))
    else:
        as_nobody("truncate", "-s", "1G", str(side))
    assert os.lstat(side).st_uid != 0  # nobody's, not root's
    other = tmp_path / "other"
    shutil.copytree(run, other, ignore=shutil.ignore_patterns("*.samples", "*.tags"))
    got = every_command(tmp_path, run, other, memory_mb=1024)
    assert_all_fine(got)
    assert_learner_still_reported(got)
    assert side.name in " ".join(got["report"][1].split())  # the caveat names the sidecar


@needs_second_user
@pytest.mark.parametrize("planted", ["hostile_names", "sums_beyond_int64"])
def test_a_worker_file_planted_by_another_user(request, tmp_path, planted):
    d, _victim = request.getfixturevalue("shared")
    run, host_dir = _run_open_to_nobody(d)
    real = worker_of(run, "worker")
    doc = json.loads(real.read_text())
    meta = doc["meta"]
    meta["pid"] += 100_000
    rec = next(r for t in doc["threads"] for r in t["phases"] if r["path"] == ["load"])
    if planted == "hostile_names":
        meta["role"] = "attacker" + HOSTILE
        rec["path"] = ["load" + HOSTILE]
    else:
        rec.update(sample_every=2, wall_ns=2**63 - 1, open_ns=1)
    name = f"w_{meta['run_id']}_{meta['pid']}_0badf00d.json"
    staged = d / "staged.json"  # written by root, readable by nobody, copied in by nobody
    staged.write_text(json.dumps(doc))
    staged.chmod(0o644)
    as_nobody("cp", str(staged), str(host_dir / name))
    assert (host_dir / name).stat().st_uid != 0
    got = every_command(tmp_path, run, run, memory_mb=1024)
    assert_all_fine(got)  # no raw control character reached a terminal
    assert_learner_still_reported(got)
    report = got["report --json"][1]
    if planted == "hostile_names":
        roles = [r["role"] for r in json.loads(report)["roles"]]
        assert "attacker" + HOSTILE in roles  # read (it is a valid file), and shown escaped:
        for command in ("report", "top -n 1", "attempts"):
            shown = got[command][1].lower()  # top shows a role in capitals
            assert "attacker\\x1b]0;pwned\\x07" in shown, command
    else:
        unreadable = json.loads(report)["unreadable"]
        assert [u["path"] for u in unreadable] == [f"workers/{host_dir.name}/{name}"]
        assert "lineprofiler_unreadable_files 1.0" in got["serve"][1]
    # the two real processes this test ran, and the planted one where it is a valid file
    assert json.loads(report)["run"]["processes"] == (3 if planted == "hostile_names" else 2)


@needs_second_user
def test_a_host_link_planted_by_another_user_never_leaks_a_private_file(request, tmp_path):
    """nobody links ``workers/<x>`` to root's private directory holding a worker file of
    another run: root's report must not show its phases."""
    d, _victim = request.getfixturevalue("shared")
    run, _host_dir = _run_open_to_nobody(d)
    (run / "workers").chmod(0o777)
    private = tmp_path / "private"  # root's, 0700: nobody cannot read it, root can
    private.mkdir(mode=0o700)
    doc = json.loads(worker_of(run, "worker").read_text())
    doc["meta"]["pid"] += 100_000
    next(r for t in doc["threads"] for r in t["phases"])["path"] = ["root_private_phase"]
    name = f"w_{doc['meta']['run_id']}_{doc['meta']['pid']}_5ec12e70.json"
    (private / name).write_text(json.dumps(doc))
    (private / name).chmod(0o600)
    as_nobody("ln", "-s", str(private), str(run / "workers" / "elsewhere"))
    assert os.lstat(run / "workers" / "elsewhere").st_uid != 0
    got = every_command(tmp_path, run, run, memory_mb=1024)
    assert_all_fine(got)
    assert_learner_still_reported(got)
    for command, (_rc, stdout, stderr, _problem) in got.items():
        assert "root_private_phase" not in stdout + stderr, command
    unreadable = json.loads(got["report --json"][1])["unreadable"]
    assert [u["path"] for u in unreadable] == [f"workers/elsewhere/{name}"]
