"""The ``.lines`` sidecar reader (runfile/lines.py): every malformed or hostile sidecar is refused
with its reason, never a traceback; in a run, a refused sidecar costs only its own process's
lines, and a caveat names the file."""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path

import pytest

from lineprofiler.report.json import to_document
from lineprofiler.report.merge import merge_run
from lineprofiler.report.text import render_text
from lineprofiler.runfile.layout import LINES_MAX_BYTES
from lineprofiler.runfile.lines import LinesFileError, parse_lines, read_lines
from tests.helpers import quiet_profiler, run_python
from tests.report.lines_runs import minimal_doc, sidecar_of, traced_run

CLI = "from lineprofiler.cli import main; raise SystemExit(main())"


def _bad(mutate) -> dict:
    doc = copy.deepcopy(minimal_doc(1))
    mutate(doc)
    return doc


def _line(doc: dict) -> dict:
    return doc["phases"][0]["functions"][0]["lines"][0]


BAD_DOCS = {
    "wrong version": _bad(lambda d: d.update(version=2)),
    "version as a string": _bad(lambda d: d.update(version="1")),
    "wrong format": _bad(lambda d: d.update(format="lineprofiler-worker")),
    "phases not a list": _bad(lambda d: d.update(phases={"a": 1})),
    "hits a string": _bad(lambda d: _line(d).update(hits="5")),
    "hits a float": _bad(lambda d: _line(d).update(hits=5.0)),
    "hits a bool": _bad(lambda d: _line(d).update(hits=True)),
    "negative time": _bad(lambda d: _line(d).update(time_ns=-1)),
    "time beyond int64": _bad(lambda d: _line(d).update(time_ns=1 << 63)),
    "source not a string": _bad(lambda d: _line(d).update(source=["x"])),
    "no lines": _bad(lambda d: d["phases"][0]["functions"][0].pop("lines")),
    "traced more than entries": _bad(lambda d: d["phases"][0].update(traced_entries=3)),
    "empty path part": _bad(lambda d: d["phases"][0].update(path="iteration//x")),
    "pid negative": _bad(lambda d: d.update(pid=-4)),
    "overhead negative": _bad(lambda d: d.update(overhead_ns_per_event={"line": -1.0})),
    "overhead beyond any float": _bad(lambda d: d.update(overhead_ns_per_event={"line": 10**400})),
    "overhead a string": _bad(lambda d: d.update(overhead_ns_per_event={"line": "1"})),
}


@pytest.mark.parametrize("name", sorted(BAD_DOCS))
def test_a_malformed_document_is_refused_with_its_reason(name):
    with pytest.raises(LinesFileError) as got:
        parse_lines(json.dumps(BAD_DOCS[name]).encode())
    assert str(got.value)  # a reason, in words


@pytest.mark.parametrize(
    "data",
    [
        json.dumps(minimal_doc(1)).encode()[:-7],  # truncated
        b"",
        b"\xff\xfe{}",  # not UTF-8
        b"[" * 100_000,  # nested beyond the parser's recursion
        b'{"format": "lineprofiler-lines", "version": 1, "pid": NaN, "phases": []}',
        b"null",
    ],
    ids=["truncated", "empty", "not-utf8", "deep", "nan", "null"],
)
def test_bytes_that_are_not_a_document_are_refused(data):
    with pytest.raises(LinesFileError):
        parse_lines(data)


def test_a_valid_document_reads_and_unknown_keys_are_ignored():
    doc = minimal_doc(7, newer_key={"x": 1})
    doc["phases"][0]["functions"][0]["lines"][0]["newer"] = 3
    got = parse_lines(json.dumps(doc).encode())
    assert got.pid == 7 and got.phases[0].path == ("iteration", "train_step")
    line = got.phases[0].functions[0].lines[0]
    assert (line.line, line.hits, line.time_ns, line.raw_time_ns, line.self_ns) == (
        2,
        5,
        100,
        100,
        90,
    )


def test_no_sidecar_is_none_and_hostile_files_are_refused(tmp_path):
    worker = tmp_path / "w_r_1_abcdefgh.json"
    assert read_lines(worker) is None
    side = sidecar_of(worker)
    os.mkfifo(side)
    with pytest.raises(LinesFileError, match="regular"):
        read_lines(worker)  # returns at once: never blocks on the FIFO
    side.unlink()
    target = tmp_path / "elsewhere.json"
    target.write_text(json.dumps(minimal_doc(1)))
    side.symlink_to(target)
    with pytest.raises(LinesFileError, match="link"):
        read_lines(worker)
    side.unlink()
    with open(side, "wb") as f:
        f.write(b" " * (LINES_MAX_BYTES + 1))
    with pytest.raises(LinesFileError, match="more than"):
        read_lines(worker)


# -- in a run: each hostile sidecar costs only its own process's lines --


@pytest.fixture(scope="module")
def four_process_run(tmp_path_factory):
    return traced_run(tmp_path_factory.mktemp("lines4"), procs=4, entries=3, traced=2, iters=50)


def _loop(doc: dict, truth: dict) -> dict | None:
    (role,) = doc["roles"]
    phase = next(p for p in role["phases"] if p["name"] == "iteration/train_step")
    return next((ln for ln in phase.get("lines", []) if ln["line"] == truth["lines"]["LOOP"]), None)


def test_hostile_sidecars_each_cost_only_themselves(four_process_run, tmp_path):
    import shutil

    src, truth = four_process_run
    run = tmp_path / "run"
    shutil.copytree(src, run, symlinks=True)
    workers = sorted(truth["workers"], key=lambda w: w["index"])
    sidecars = [run / Path(w["worker"]).relative_to(src) for w in workers]
    sidecars = [sidecar_of(s) for s in sidecars]
    outside = tmp_path / "outside.lines"
    outside.write_bytes(sidecars[1].read_bytes())
    sidecars[0].unlink()
    os.mkfifo(sidecars[0])  # a FIFO
    sidecars[1].unlink()
    sidecars[1].symlink_to(outside)  # a link to a valid document
    data = sidecars[2].read_bytes()
    sidecars[2].write_bytes(data[: len(data) // 2])  # truncated
    merged = merge_run(run)
    doc = to_document(merged)
    loop = _loop(doc, truth)
    assert loop is not None
    assert loop["hits"] == 1 * 2 * 50 and loop["processes"] == 1  # only process 3 counted
    (cav,) = [c for c in doc["caveats"] if c["kind"] == "lines_unreadable"]
    named = {Path(p).name for p in cav["workers"]}
    assert named == {s.name for s in sidecars[:3]}
    for s in sidecars[:3]:
        assert s.name in cav["message"]
    # the rest of the run is reported: every process's phases are counted
    (role,) = doc["roles"]
    phase = next(p for p in role["phases"] if p["name"] == "iteration/train_step")
    assert phase["calls"] == 4 * 3 and phase["processes"] == 4
    text = render_text(merged)
    assert "line-statistics sidecar(s) could not be used" in text
    proc = run_python(CLI, cwd=tmp_path, args=["report", str(run)])
    assert proc.returncode == 0 and "Traceback" not in proc.stderr
    show = run_python(CLI, cwd=tmp_path, args=["show", str(run), "--role", "learner"])
    assert show.returncode == 0 and "Traceback" not in show.stderr
    assert f" {1 * 2 * 50} " in show.stdout and "could not be used" in show.stderr


@pytest.mark.parametrize(
    "extra",
    [
        {"version": 99},
        {"pid": 1},
        {"phases": [{"path": 5}]},
        {"pid": 1 << 64},
        {"padding": " " * LINES_MAX_BYTES},
    ],
    ids=["version", "pid-not-the-worker", "bad-types", "absurd-pid", "huge"],
)
def test_a_refused_sidecar_names_itself_in_the_caveats(tmp_path, extra):
    run = tmp_path / "run"
    p = quiet_profiler(run, role="learner")
    with p.phase("iteration"), p.phase("train_step"):
        pass
    worker = p.worker_path
    p.close()
    doc = minimal_doc(os.getpid())
    doc.update(extra)
    sidecar_of(worker).write_text(json.dumps(doc))
    merged = merge_run(run)
    (cav,) = [c for c in merged.caveats if c.kind == "lines_unreadable"]
    assert sidecar_of(worker).name in cav.message
    assert not merged.roles["learner"].lines
    assert "LINES IN" not in render_text(merged)
