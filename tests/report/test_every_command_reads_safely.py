"""Every command that reads a run (report, --json, --html, top, attempts, reduce, compare, export,
serve) survives the same hostile files: values whose sums pass int64, sidecar bombs, names that
would drive a terminal, files beyond the per-file limits. One bad file costs that file only: the
other worker's numbers, which this test recorded itself, are still reported.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest

from lineprofiler.runfile import samples as samples_mod
from lineprofiler.runfile.worker_doc import MAX_RECORDS_PER_FILE
from tests.helpers import run_python
from tests.report.every_command import COMMANDS, EVERY_COMMAND

STEPS = 3  # the learner's "step" entries and its "steps" count
ITEMS = 5  # the worker's "items" count

# A real run of two processes (a learner and a forked worker that joins its run), each with the
# sampler's sidecars.
TWO_PROCESS_RUN = f"""
    import multiprocessing as mp
    from lineprofiler.accounting import Profiler

    def child():
        p = Profiler(run_dir="run", role="worker", enabled=True, snapshot_interval_s=None,
                     sample_interval_s=1000.0)
        with p.phase("load"):
            p.count("items", {ITEMS})
            p._rec.sample_now()
        p.close()

    if __name__ == "__main__":
        p = Profiler(run_dir="run", role="learner", enabled=True, snapshot_interval_s=None,
                     sample_interval_s=1000.0)
        for _ in range({STEPS}):
            with p.phase("step"):
                p.count("steps")
                p._rec.sample_now()
        pr = mp.get_context("fork").Process(target=child)
        pr.start()
        pr.join()
        p.close()
"""

# Runs every command over argv[1] (compare: against argv[2]) under an address-space ceiling of
# argv[3] MB and argv[4] seconds each; prints {command: [rc, stdout, stderr, problem]}.
CHILD = (
    """
import json, resource, sys
memory_mb = int(sys.argv[3])
resource.setrlimit(resource.RLIMIT_AS, (memory_mb << 20, memory_mb << 20))
"""
    + EVERY_COMMAND
    + """
got = every_command(sys.argv[1], sys.argv[2], sys.argv[5], float(sys.argv[4]))
print(json.dumps(got))
"""
)


@pytest.fixture(scope="module")
def real_two(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("two")
    run_python(TWO_PROCESS_RUN, cwd=d)
    return d / "run"


def worker_of(run: Path, role: str) -> Path:
    for f in sorted(run.glob("workers/*/w_*.json")):
        if json.loads(f.read_text())["meta"]["role"] == role:
            return f
    raise AssertionError(f"no {role} worker in {run}")


def every_command(tmp_path: Path, run: Path, other: Path, memory_mb: int = 1024) -> dict:
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    proc = run_python(
        CHILD,
        cwd=tmp_path,
        args=[str(run), str(other), str(memory_mb), "60", str(out)],
        timeout=600,
    )
    return json.loads(proc.stdout.strip().splitlines()[-1])


def assert_all_fine(got: dict) -> None:
    assert set(got) == set(COMMANDS)
    bad = {c: (r[0], r[3], r[2][-300:]) for c, r in got.items() if r[3] is not None}
    assert not bad, json.dumps(bad, indent=1)


def assert_learner_still_reported(got: dict) -> None:
    """The learner's numbers, as this test recorded them, are in the JSON report."""
    rc, stdout, _, _ = got["report --json"]
    assert rc == 0
    doc = json.loads(stdout)
    learner = next(r for r in doc["roles"] if r["role"] == "learner")
    step = next(p for p in learner["phases"] if p["path"] == ["step"])
    assert step["calls"] == STEPS
    assert [(c["name"], c["count"]) for c in step["counters"]] == [("steps", STEPS)]


def _record(doc: dict, name: str) -> dict:
    return next(r for t in doc["threads"] for r in t["phases"] if r["path"] == [name])


def _sample_every_2(doc: dict) -> None:
    rec = _record(doc, "load")
    rec.update(sample_every=2, wall_ns=2**63 - 1, open_ns=1)


def _async_wall(doc: dict) -> None:
    rec = _record(doc, "load")
    rec.update(wall_ns=2**63 - 1, async_wall_ns=2**63 - 1, async_calls=1, open_ns=1)


def _tasks(doc: dict) -> None:
    doc["threads"][0]["tasks"] = 1
    rec = _record(doc, "load")
    rec.update(open_ns=2**63 - 1, open=1)


def _two_threads_halves(doc: dict) -> None:
    """Each record within int64 (and estimated), the path's sum over two threads beyond it."""
    thread = doc["threads"][0]
    rec = _record(doc, "load")
    rec.update(sample_every=2, wall_ns=2**62 + 1)
    doc["threads"].append(dict(thread, tid=thread["tid"] + 1, name="other"))


@pytest.mark.parametrize(
    "overflow",
    [_sample_every_2, _async_wall, _tasks, _two_threads_halves],
    ids=lambda f: f.__name__,
)
def test_a_file_whose_sums_pass_int64_costs_that_file_only(tmp_path, real_two, overflow):
    run = tmp_path / "run"
    shutil.copytree(real_two, run)
    bad = worker_of(run, "worker")
    doc = json.loads(bad.read_text())
    overflow(doc)
    bad.write_text(json.dumps(doc))
    got = every_command(tmp_path, run, real_two)
    assert_all_fine(got)
    assert_learner_still_reported(got)
    rel = bad.relative_to(run).as_posix()
    unreadable = json.loads(got["report --json"][1])["unreadable"]
    assert [u["path"] for u in unreadable] == [rel]
    assert "int64" in unreadable[0]["reason"]
    assert rel in got["report"][1]  # named under CAVEATS
    assert "lineprofiler_unreadable_files 1.0" in got["serve"][1]


def test_serve_shows_a_file_that_became_unreadable_while_it_runs(tmp_path, real_two):
    pytest.importorskip("prometheus_client")
    from prometheus_client import CollectorRegistry, generate_latest

    from lineprofiler.report.prometheus import RunCollector

    run = tmp_path / "run"
    shutil.copytree(real_two, run)
    collector = RunCollector(str(run), 0.0, False)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)

    def scrape() -> str:
        return generate_latest(registry).decode()

    first = scrape()
    assert "lineprofiler_unreadable_files 0.0" in first
    assert "lineprofiler_merge_ok 1.0" in first
    bad = worker_of(run, "worker")
    doc = json.loads(bad.read_text())
    _sample_every_2(doc)
    bad.write_text(json.dumps(doc))
    second = scrape()
    assert "lineprofiler_unreadable_files 1.0" in second
    assert 'phase="step",role="learner"' in second  # the learner still served
    shutil.rmtree(run / "workers")  # nothing left to merge: the last merge is served, marked
    third = scrape()
    assert "lineprofiler_merge_ok 0.0" in third
    assert 'phase="step",role="learner"' in third


HOSTILE = (
    "\x1b]0;pwned\x07\x1b[2J\r\nCAVEATS\n  none: all workers healthy\u202e\x9b31m\u2028\u2029\x85"
)


def test_names_from_a_worker_file_never_reach_the_terminal_raw(tmp_path, real_two):
    run = tmp_path / "run"
    shutil.copytree(real_two, run)
    f = worker_of(run, "worker")
    doc = json.loads(f.read_text())
    doc["meta"]["role"] = "role" + HOSTILE
    doc["meta"]["run_id"] = doc["meta"]["run_id"] + HOSTILE
    doc["meta"]["host"] = "host" + HOSTILE
    rec = _record(doc, "load")
    rec["path"] = ["load" + HOSTILE]
    rec["counters"] = {"items" + HOSTILE: ITEMS}
    f.write_text(json.dumps(doc))
    # and a host directory whose name is the attacker's (reduce names each host it folds)
    host_dir = run / "workers" / ("node" + HOSTILE)
    host_dir.mkdir()
    doc["meta"]["pid"] += 100_000
    (host_dir / f"w_{doc['meta']['run_id']}_{doc['meta']['pid']}_0badf00d.json").write_text(
        json.dumps(doc)
    )
    got = every_command(tmp_path, run, real_two)
    assert_all_fine(got)  # no raw control character in any text command's output
    assert "node\\x1b]0;pwned\\x07" in got["reduce"][2]
    for command in ("report", "top -n 1", "attempts", "compare"):
        text = got[command][1]
        assert "\\x1b]0;pwned\\x07" in text, command  # shown, escaped once
        assert "\\u202e" in text, command
        assert not any(line.startswith("  none: all workers") for line in text.splitlines())


def test_a_caveat_escapes_a_backslash_once(tmp_path, real_two):
    run = tmp_path / "run"
    shutil.copytree(real_two, run)
    f = worker_of(run, "worker")
    run_id = json.loads(f.read_text())["meta"]["run_id"]
    planted = f.with_name(f"w_{run_id}_1_de\x1b[31mad.json")  # of the reported attempt
    planted.write_text("{not json")
    got = every_command(tmp_path, run, real_two)
    assert_all_fine(got)
    text = " ".join(got["report"][1].split())  # caveats are wrapped
    assert f"w_{run_id}_1_de\\x1b[31mad.json" in text
    assert "\\\\x1b" not in text


@pytest.mark.parametrize("bomb", ["sparse", "fifo", "symlink_to_fifo", "dev_zero"])
def test_sidecar_bombs_cost_every_command_that_sidecar_only(tmp_path, real_two, bomb):
    run = tmp_path / "run"
    shutil.copytree(real_two, run)
    side = worker_of(run, "worker").with_suffix(".samples")
    side.unlink()
    if bomb == "sparse":
        with open(side, "wb") as out:
            out.write(samples_mod.MAGIC)
            out.truncate(1 << 30)  # 1 GiB that the disk does not hold
        assert os.stat(side).st_blocks * 512 < 1 << 20
    elif bomb == "fifo":
        os.mkfifo(side)
    elif bomb == "symlink_to_fifo":
        os.mkfifo(tmp_path / "fifo")
        side.symlink_to(tmp_path / "fifo")
    else:
        side.symlink_to("/dev/zero")
    t0 = time.monotonic()
    got = every_command(tmp_path, run, real_two, memory_mb=1024)
    took = time.monotonic() - t0
    assert_all_fine(got)
    assert_learner_still_reported(got)
    assert side.name in got["report"][1]  # the caveat names the sidecar
    print(f"{bomb}: every command in {took:.1f}s")


def test_a_worker_file_beyond_the_record_limit_is_refused_with_a_caveat(tmp_path, real_two):
    run = tmp_path / "run"
    shutil.copytree(real_two, run)
    f = worker_of(run, "worker")
    doc = json.loads(f.read_text())
    n = MAX_RECORDS_PER_FILE + 1
    doc["threads"][0]["phases"] = [{"path": [f"p{i}"], "calls": 1, "wall_ns": 1} for i in range(n)]
    f.write_text(json.dumps(doc))
    got = every_command(tmp_path, run, real_two, memory_mb=1536)
    assert_all_fine(got)
    assert_learner_still_reported(got)
    unreadable = json.loads(got["report --json"][1])["unreadable"]
    assert [u["path"] for u in unreadable] == [f.relative_to(run).as_posix()]
    assert f"{n:,} phase records" in unreadable[0]["reason"]


def test_a_sidecar_beyond_the_row_limit_is_refused(tmp_path, real_two, monkeypatch):
    side = worker_of(real_two, "learner").with_suffix(".samples")
    data = side.read_bytes()
    header, words = (int.from_bytes(data[o : o + 4], "little") for o in (12, 16))
    rows = (len(data) - header) // (8 * words)  # counted from the file's bytes
    assert rows >= STEPS  # at least one sample_now() per step
    assert samples_mod.read_samples(side).rows == rows
    monkeypatch.setattr(samples_mod, "MAX_SAMPLE_ROWS", rows - 1)
    with pytest.raises(samples_mod.SamplesError, match=f"{side.name}: {rows} rows, more than"):
        samples_mod.read_samples(side)


def test_a_host_directory_that_is_a_link_out_of_the_run_is_never_read_through(tmp_path, real_two):
    """``workers/<host>`` swapped for a link to a private directory holding a worker file: its
    phases never reach any output; the file is named as refused."""
    run = tmp_path / "run"
    shutil.copytree(real_two, run)
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    f = worker_of(run, "worker")
    doc = json.loads(f.read_text())
    doc["meta"]["pid"] += 100_000
    _record(doc, "load")["path"] = ["secret_phase"]
    name = f"w_{doc['meta']['run_id']}_{doc['meta']['pid']}_5ec12e70.json"
    (private / name).write_text(json.dumps(doc))
    (run / "workers" / "elsewhere").symlink_to(private)
    got = every_command(tmp_path, run, real_two)
    assert_all_fine(got)
    assert_learner_still_reported(got)
    for command, (_rc, stdout, stderr, _problem) in got.items():
        assert "secret_phase" not in stdout + stderr, command
    unreadable = json.loads(got["report --json"][1])["unreadable"]
    assert [u["path"] for u in unreadable] == [f"workers/elsewhere/{name}"]
    assert "elsewhere/ is a symbolic link" in unreadable[0]["reason"]
