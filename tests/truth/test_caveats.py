"""Each caveat from a run that really has the condition, and none from one that does not.

depth_overflow comes from a real process nesting phases past the recorder's limit; stale from
workers whose last writes lie behind the newest by known amounts, with long and short snapshot
intervals; rss_failed from a sampler sidecar whose status counts failed RSS reads.
"""

from __future__ import annotations

import json

import pytest

from lineprofiler.accounting import merge_run
from lineprofiler.report.json import to_document
from lineprofiler.report.text import render_text
from lineprofiler.runfile.layout import MAX_DEPTH
from lineprofiler.runfile.samples import F_IO, F_RSS, W_DT, W_FLAGS, W_RSS, W_T
from tests.helpers import run_python, worker_files
from tests.report.synth import T0, Ph, worker_doc, write_worker
from tests.resources.synth_samples import S, attach_samples


def caveats(run_dir) -> tuple[dict[str, dict], str]:
    merged = merge_run(run_dir)
    doc = json.loads(json.dumps(to_document(merged), allow_nan=False))
    return {c["kind"]: c for c in doc["caveats"]}, render_text(merged)


def test_depth_overflow_from_a_real_process_nesting_past_the_limit(tmp_path):
    extra = 7
    code = f"""
        from lineprofiler.accounting import Profiler
        p = Profiler(run_dir="run", role="deep", enabled=True, snapshot_interval_s=None,
                     sample_interval_s=None)
        def nest(k):
            if k:
                with p.phase("d"):
                    nest(k - 1)
        nest({MAX_DEPTH + extra})
        nest(3)
        p.close()
    """
    run_python(code, cwd=tmp_path)
    (path,) = worker_files(tmp_path / "run")
    raw = json.loads(path.read_text())
    assert sum(t["depth_overflow"] for t in raw["threads"]) > 0
    found, text = caveats(tmp_path / "run")
    assert set(found) == {"depth_overflow"}
    assert found["depth_overflow"]["workers"] == [path.relative_to(tmp_path / "run").as_posix()]
    assert "1 worker(s) nested phases deeper than the recorder's limit" in text
    doc = to_document(merge_run(tmp_path / "run"))
    assert doc["workers"][0]["depth_overflow"] == sum(t["depth_overflow"] for t in raw["threads"])
    # a run that stays within the limit has no such caveat
    shallow = tmp_path / "shallow"
    shallow.mkdir()
    run_python(code.replace(f"nest({MAX_DEPTH + extra})", f"nest({MAX_DEPTH})"), cwd=shallow)
    assert caveats(shallow / "run")[0] == {}


def test_stale_is_judged_against_each_workers_snapshot_interval(tmp_path):
    run = tmp_path / "run"
    newest = T0 + 5000.0
    # (pid, snapshot interval, seconds behind the newest file, final): the limit is
    # max(60 s, 3 intervals) for a worker that has not closed.
    workers = [
        (1, 30.0, 0.0, True),  # the newest file
        (2, 300.0, 800.0, False),  # 800 s < 3 x 300 s: a long interval, not stale
        (3, 300.0, 950.0, False),  # 950 s > 900 s: stale
        (4, 10.0, 100.0, False),  # 100 s > 60 s (3 intervals would be only 30 s): stale
        (5, None, 50.0, False),  # 50 s < 60 s: not stale
        (6, 10.0, 4000.0, True),  # closed: never stale, however old
    ]
    for pid, interval, behind, final in workers:
        write_worker(
            run,
            worker_doc(
                role="actor",
                pid=pid,
                snapshot_interval_s=interval,
                written_at=newest - behind,
                final=final,
                threads=[Ph(("x",), [S])],
            ),
        )
    merged = merge_run(run)
    doc = to_document(merged)
    stale = {w["pid"]: w["stale_s"] for w in doc["workers"] if w["stale_s"] is not None}
    assert stale == {3: 950.0, 4: 100.0}
    found, text = caveats(run)
    assert sorted(found["stale"]["workers"]) == sorted(
        w["path"] for w in doc["workers"] if w["pid"] in (3, 4)
    )
    assert "2 worker(s) stopped writing before the run's newest file" in text
    assert "actor pid 3 (node01) 16m behind, actor pid 4 (node01) 1m 40s behind" in text.replace(
        "\n  ", " "
    )


def _sampled_worker(run, pid, rows, rss_failed):
    doc = worker_doc(role="actor", pid=pid, threads=[Ph(("x",), [S])])
    path = write_worker(run, doc)
    t0 = int(T0 * 1e9)
    flags = [F_IO | F_RSS] * rows
    for i in range(rss_failed):
        flags[i] = F_IO  # RSS unread in these intervals
    rss = [-1 if i < rss_failed else 100_000_000 + i * 1_000_000 for i in range(rows)]
    attach_samples(
        doc,
        path,
        {
            W_T: [t0 + (i + 1) * S for i in range(rows)],
            W_DT: [S] * rows,
            W_FLAGS: flags,
            W_RSS: rss,
        },
        rows,
        rss_failed=rss_failed,
    )
    return max(rss)


def test_rss_failed_names_the_worker_and_the_peak_covers_the_rest(tmp_path):
    run = tmp_path / "run"
    peak = _sampled_worker(run, 11, rows=10, rss_failed=3)
    _sampled_worker(run, 12, rows=10, rss_failed=0)
    found, text = caveats(run)
    assert "rss_failed" in found
    (failed,) = found["rss_failed"]["workers"]
    assert "_11_" in failed
    assert "RSS could not be read in 3 interval(s) of actor pid 11 (node01)" in text.replace(
        "\n  ", " "
    )
    doc = to_document(merge_run(run))
    mem = {m["worker"]: m["rss_peak_bytes"] for m in doc["resources"]["memory"]["processes"]}
    assert mem == {"pid 11 (node01)": peak, "pid 12 (node01)": peak}


def test_a_complete_run_has_no_caveat(tmp_path):
    run = tmp_path / "run"
    _sampled_worker(run, 21, rows=5, rss_failed=0)
    found, text = caveats(run)
    assert found == {}
    assert "none: every worker file was read, and none is stale" in text


@pytest.mark.parametrize("n", [10, 11, 12])
def test_a_long_caveat_names_ten_workers_then_counts_the_rest(tmp_path, n):
    run = tmp_path / "run"
    newest = worker_doc(role="actor", pid=1, written_at=T0 + 5000.0, threads=[Ph(("x",), [S])])
    write_worker(run, newest)
    for k in range(n):  # n workers 1000 s behind, not closed: all stale
        doc = worker_doc(
            role="actor",
            pid=100 + k,
            written_at=T0 + 4000.0,
            final=False,
            threads=[Ph(("x",), [S])],
        )
        write_worker(run, doc)
    found, text = caveats(run)
    assert len(found["stale"]["workers"]) == n  # the caveat's list has them all
    message = found["stale"]["message"]
    assert message.startswith(f"{n} worker(s) stopped writing")
    assert message.count(" behind") == 10
    if n > 10:
        assert message.endswith(f" behind, and {n - 10} more")
    else:
        assert message.endswith(" 17m behind") and "more" not in message
