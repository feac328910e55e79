"""lineprofiler reduce: host summaries give the same report, and are ignored when stale or bad."""

from __future__ import annotations

import json
import os

from lineprofiler.accounting import merge_run
from lineprofiler.report.json import to_document
from tests.report.synth import MS, Ph, golden_run, worker_doc, write_worker
from tests.report.test_cli_report import cli


def _doc(run_dir) -> dict:
    return to_document(merge_run(run_dir, with_samples=False))


def test_reduce_writes_summaries_that_report_uses(tmp_path):
    d = golden_run(tmp_path / "run")
    before = _doc(d)
    proc = cli(tmp_path, "reduce", d)
    assert proc.returncode == 0, proc.stderr
    summaries = sorted(p.name for p in (d / "summaries").iterdir())
    assert summaries == sorted(f"{h.name}.json" for h in (d / "workers").iterdir())
    assert all(oct(p.stat().st_mode & 0o777) == "0o640" for p in (d / "summaries").iterdir())
    assert _doc(d) == before  # the same report from the summaries

    # proof that the summary is what was read: change its numbers (keeping its sources)
    # and the report follows; touch a worker file and the report goes back to the files
    s = d / "summaries" / "node08.json"
    doc = json.loads(s.read_text())
    for phases in doc["partials"][next(iter(doc["partials"]))]["roles"].values():
        for ph in phases:
            ph[1] += 1000  # calls
    s.write_text(json.dumps(doc))
    changed = _doc(d)
    assert changed != before
    f = next((d / "workers" / "node08").glob("w_*.json"))
    os.utime(f, ns=(f.stat().st_atime_ns, f.stat().st_mtime_ns + 1_000_000_000))
    assert _doc(d) == before


def test_a_new_worker_file_on_a_host_makes_its_summary_stale(tmp_path):
    d = tmp_path / "run"
    write_worker(d, worker_doc(role="a", pid=1, threads=[Ph(("x",), [MS])]))
    assert cli(tmp_path, "reduce", d, "--host", "node01").returncode == 0
    write_worker(d, worker_doc(role="a", pid=2, threads=[Ph(("x",), [MS, MS])]))
    run = merge_run(d)
    assert run.processes == 2 and run.tree[("x",)].calls == 3


def test_a_broken_or_hostile_summary_is_ignored(tmp_path):
    d = tmp_path / "run"
    write_worker(d, worker_doc(role="a", pid=1, threads=[Ph(("x",), [MS])]))
    assert cli(tmp_path, "reduce", d).returncode == 0
    s = d / "summaries" / "node01.json"
    good = json.loads(s.read_text())
    bad_docs = [
        "{",
        "[]",
        json.dumps({**good, "format": "something else"}),
        # a worker path outside the run: never read through
        json.dumps(
            {
                **good,
                "partials": {
                    k: {**v, "workers": [{**v["workers"][0], "path": "../../etc/passwd"}]}
                    for k, v in good["partials"].items()
                },
            }
        ),
    ]
    for text in bad_docs:
        s.write_text(text)
        run = merge_run(d)
        assert run.processes == 1 and run.tree[("x",)].calls == 1
        assert run.workers[0].file == str(d / run.workers[0].path)
    s.unlink()
    os.symlink("/dev/zero", s)  # never followed
    assert merge_run(d).tree[("x",)].calls == 1


def test_reduce_says_what_is_wrong(tmp_path):
    d = tmp_path / "run"
    write_worker(d, worker_doc(role="a", pid=1, threads=[Ph(("x",), [MS])]))
    proc = cli(tmp_path, "reduce", d, "--host", "nope")
    assert proc.returncode == 2 and "no host 'nope'" in proc.stderr
    proc = cli(tmp_path, "reduce", tmp_path / "missing")
    assert proc.returncode == 2 and "no such directory" in proc.stderr
