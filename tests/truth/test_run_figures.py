"""Run-level figures of the report (process counts, stragglers, counter rates, own writes, I/O by
phase, attempts) from synthetic runs whose ground truth is arithmetic on what the test wrote.

Each test checks the JSON document and the text report against numbers the test computes itself,
never against another path of the report's own code.
"""

from __future__ import annotations

import json
import re
import statistics

from lineprofiler.accounting import merge_run
from lineprofiler.report.json import to_document
from lineprofiler.report.text import render_text
from tests.report.synth import RUN_ID, T0, Ph, worker_doc, write_worker

S = 1_000_000_000


def report(run_dir):
    merged = merge_run(run_dir)
    doc = json.loads(json.dumps(to_document(merged), allow_nan=False))
    return merged, doc, render_text(merged)


def phase_of(doc, role: str, path: list[str]) -> dict:
    (r,) = [r for r in doc["roles"] if r["role"] == role]
    (p,) = [p for p in r["phases"] if p["path"] == path]
    return p


def test_processes_are_counted_by_file_when_pids_collide_across_hosts_and_threads(tmp_path):
    run = tmp_path / "run"
    # pid 100 on two hosts (two processes), one of them with two threads in the same phase
    two_threads = [("MainThread", [Ph(("x",), [S])]), ("loader", [Ph(("x",), [2 * S])])]
    write_worker(run, worker_doc(role="actor", pid=100, host="node01", threads=two_threads))
    write_worker(run, worker_doc(role="actor", pid=100, host="node02", threads=[Ph(("x",), [S])]))
    write_worker(run, worker_doc(role="learner", pid=200, host="node01", threads=[Ph(("y",), [S])]))
    merged, doc, text = report(run)
    assert doc["run"]["processes"] == 3 and merged.processes == 3
    assert doc["run"]["roles"] == {"actor": 2, "learner": 1}
    assert doc["run"]["hosts"] == ["node01", "node02"] and doc["run"]["nodes"] == 2
    x = phase_of(doc, "actor", ["x"])
    assert x["processes"] == 2  # two workers hold the path; three threads do
    assert x["calls"] == 3 and x["wall_ns"] == 4 * S
    assert phase_of(doc, "learner", ["y"])["processes"] == 1
    assert "Processes 3 " in text
    assert "ACTOR  (2 processes," in text and "LEARNER  (1 process," in text
    assert "Hosts node01, node02 (2 nodes)" in text


def test_straggler_ratio_median_and_node_means(tmp_path):
    run = tmp_path / "run"
    seconds = [10, 20, 30, 40, 100]  # per process in "step"; host a: 10, 20; host b: 30, 40, 100
    hosts = ["nodea", "nodea", "nodeb", "nodeb", "nodeb"]
    for k, (sec, host) in enumerate(zip(seconds, hosts, strict=True)):
        write_worker(
            run,
            worker_doc(
                role="actor",
                pid=300 + k,
                host=host,
                rank=k,
                threads=[Ph(("loop",), [sec * S]), Ph(("loop", "step"), [sec * S])],
            ),
        )
    merged, doc, text = report(run)
    (role,) = doc["roles"]
    median = statistics.median(seconds) * S
    assert role["imbalance"] == round(100 / statistics.fmean(seconds), 6)
    assert role["busy_ns"] == {"max": 100 * S, "mean": 40 * S, "min": 10 * S}
    st = next(s for s in role["stragglers"] if s["path"] == ["loop", "step"])
    assert st["name"] == "loop/step"
    slowest = {"path": "workers/nodeb/" + st["slowest"]["path"].split("/")[-1], "rank": 4}
    assert st["slowest"] == {
        **slowest,
        "host": "nodeb",
        "pid": 304,
        "time_ns": 100 * S,
    }
    assert st["slowest"]["path"].endswith("_304_00000130.json")
    assert st["median_ns"] == median
    assert st["ratio"] == round(100 * S / median, 6)
    assert [p["time_ns"] for p in st["processes"]] == sorted((s * S for s in seconds), reverse=True)
    mean_b, mean_a = (30 + 40 + 100) / 3 * S, (10 + 20) / 2 * S
    assert st["hosts"] == [
        {"host": "nodeb", "processes": 3, "mean_ns": round(mean_b)},
        {"host": "nodea", "processes": 2, "mean_ns": round(mean_a)},
    ]
    # text: the slowest process against the median, then the slowest node against the median node
    row = re.search(r"^loop/step +rank 4 \(nodeb\) +1m 40s +30\.0s +3\.33x$", text, re.M)
    assert row, text
    node_ratio = mean_b / statistics.median([mean_a, mean_b])
    assert re.search(
        rf"node nodeb \(mean of 3\) +56\.7s +35\.8s +{node_ratio:.2f}x$", text, re.M
    ), text
    assert "imbalance 2.50, busiest rank 4 (nodeb))" in text


def test_nodes_with_equal_means_are_listed_by_name(tmp_path):
    run = tmp_path / "run"
    for k, host in enumerate(("nodeb", "nodea", "nodea")):
        write_worker(run, worker_doc(role="a", pid=10 + k, host=host, threads=[Ph(("x",), [S])]))
    merged, doc, text = report(run)
    (st,) = doc["roles"][0]["stragglers"]
    assert st["ratio"] == 1.0
    assert st["hosts"] == [
        {"host": "nodea", "processes": 2, "mean_ns": S},
        {"host": "nodeb", "processes": 1, "mean_ns": S},
    ]


def test_counter_rates_over_phase_time_and_root_counters_over_lifetime(tmp_path):
    run = tmp_path / "run"
    # mcts: 4 s in one process and 6 s in the other, 200 + 300 simulations: 50/s, 20 ms each.
    # root counters (count() with no phase open): 90 + 30 over lifetimes of 100 s + 20 s: 1/s.
    for k, (sec, sims, root, life) in enumerate(((4, 200, 90, 100.0), (6, 300, 30, 20.0))):
        write_worker(
            run,
            worker_doc(
                role="actor",
                pid=400 + k,
                start_time=T0,
                written_at=T0 + life,
                threads=[
                    Ph((), counters={"events": root}),
                    Ph(("mcts",), [sec * S], counters={"sims": sims}),
                ],
            ),
        )
    merged, doc, text = report(run)
    (sims,) = phase_of(doc, "actor", ["mcts"])["counters"]
    assert sims == {
        "name": "sims",
        "count": 500,
        "rate_per_s": 50.0,
        "time_per_each_ns": 20_000_000,
        "saturated": False,
    }
    (events,) = phase_of(doc, "actor", [])["counters"]
    assert events["count"] == 120
    assert events["rate_per_s"] == 1.0 and events["time_per_each_ns"] == S
    assert re.search(r"^    \+ sims +500 +50\.0/s +20\.0ms/ea$", text, re.M), text
    assert re.search(r"^    \+ events +120 +1\.0/s +1\.0s/ea$", text, re.M), text


def test_own_writes_are_summed_over_the_workers_that_report_them(tmp_path):
    run = tmp_path / "run"
    for k, own in enumerate((4096, 123_456, None, 1_000_000)):
        ph = [Ph(("x",), [S])]
        write_worker(run, worker_doc(role="a", pid=500 + k, threads=ph, own_write_bytes=own))
    merged, doc, text = report(run)
    assert doc["run"]["own_write_bytes"] == 4096 + 123_456 + 1_000_000
    assert sorted(w["own_write_bytes"] or 0 for w in doc["workers"]) == [0, 4096, 123456, 1000000]
    assert "Own writes 1.1 MB" in text


def test_io_by_phase_sums_processes_and_derives_page_cache(tmp_path):
    run = tmp_path / "run"
    ios = [
        {"calls": 2, "failed": 0, "read_bytes": 1000, "write_bytes": 4096, "read_chars": 3000,
         "write_chars": 500},
        {"calls": 1, "failed": 1, "read_bytes": 0, "write_bytes": 8192, "read_chars": 2000,
         "write_chars": 1500},
    ]  # fmt: skip
    for k, io in enumerate(ios):
        doc = worker_doc(role="loader", pid=600 + k, threads=[Ph(("load",), [2 * S])])
        doc["threads"][0]["phases"][0]["io"] = io
        write_worker(run, doc)
    # a record holding one field: the others are 0, not missing (unknown keys are ignored)
    doc = worker_doc(role="other", pid=700, threads=[Ph(("log",), [S])])
    doc["threads"][0]["phases"][0]["io"] = {"write_chars": 10, "future_field": "x"}
    write_worker(run, doc)
    merged, doc, text = report(run)
    row, log = doc["resources"]["io_by_phase"]
    assert log == {
        "path": ["log"], "calls": 0, "failed": 0, "read_bytes": 0, "write_bytes": 0,
        "read_chars": 0, "write_chars": 10, "page_cache_bytes": 0, "bytes_per_s": 0.0,
    }  # fmt: skip
    want = {k: sum(io[k] for io in ios) for k in ios[0]}
    assert {k: row[k] for k in want} == want  # 3 calls, 1 failed, 1000/12288/5000/2000 bytes
    assert row["page_cache_bytes"] == want["read_chars"] - want["read_bytes"] == 4000
    assert row["bytes_per_s"] == (1000 + 12288) / 4.0  # over the phase's summed wall time
    assert phase_of(doc, "loader", ["load"])["io"] == want
    assert re.search(r"^  load +r +1\.0 kB +w +12\.3 kB +3\.3 kB/s$", text, re.M), text
    assert "+ 4.0 kB read from page cache" in text
    assert "1 io=True entry recorded no bytes" in text


def test_a_superseded_attempt_counts_its_unreadable_files(tmp_path):
    run = tmp_path / "run"
    old = "20261201T0900-aaaaaa"
    for k in range(2):
        write_worker(
            run,
            worker_doc(
                role="a",
                pid=700 + k,
                run_id=old,
                start_time=T0 - 3600,
                written_at=T0 - 1800,  # ended before the newer launch started
                threads=[Ph(("x",), [S])],
            ),
        )
    write_worker(run, "{not json", name=f"w_{old}_702_deadbeef.json")
    write_worker(run, worker_doc(role="a", pid=800, threads=[Ph(("x",), [S])]))
    merged, doc, text = report(run)
    assert doc["run"]["run_id"] == RUN_ID and doc["run"]["processes"] == 1
    (sup,) = doc["run"]["superseded"]
    assert sup["run_id"] == old and sup["workers"] == 3  # two readable files and one unreadable
    assert doc["unreadable"] == []  # the unreadable file is the old attempt's, not this one's
    assert f"superseded attempt {old} (3 worker file(s)" in text


def test_counter_rates_are_rounded_to_three_decimals_and_null_without_time(tmp_path):
    run = tmp_path / "run"
    phases = [
        Ph(("step",), [3 * S], counters={"items": 1}),  # 1 in 3 s: 0.333/s, 3 s each
        Ph(("instant",), [0], counters={"items": 4}),  # no time: no rate, no time per item
    ]
    write_worker(run, worker_doc(role="a", pid=1, threads=phases))
    merged, doc, text = report(run)
    (step,) = phase_of(doc, "a", ["step"])["counters"]
    assert step["rate_per_s"] == 0.333 and step["time_per_each_ns"] == 3 * S
    (instant,) = phase_of(doc, "a", ["instant"])["counters"]
    assert instant == {
        "name": "items",
        "count": 4,
        "rate_per_s": None,
        "time_per_each_ns": None,
        "saturated": False,
    }
    assert re.search(r"^    \+ items +4 +n/a +n/a$", text, re.M), text


def test_render_json_is_the_document_as_strict_json(tmp_path):
    from lineprofiler.report.json import render_json

    run = tmp_path / "run"
    write_worker(run, worker_doc(role="a", pid=1, threads=[Ph(("x",), [S], cpu=None)]))
    merged = merge_run(run)
    out = render_json(merged)
    assert out.endswith("}\n") and out.startswith('{\n  "format": "lineprofiler-report",\n')
    assert json.loads(out) == json.loads(json.dumps(to_document(merged)))
    write_worker(run, worker_doc(role="a", pid=2, threads=[Ph(("y",), [2 * S], cpu=None)]))
    merged = merge_run(run)
    assert json.loads(render_json(merged, top=1))["roles"][0]["dominant"] == ["y"]
    assert json.loads(render_json(merged))["roles"][0]["dominant"] == ["y", "x"]
    assert phase_of(json.loads(out), "a", ["x"])["wait_ns"] is None  # not measured: null, not 0


def test_a_sampled_phase_is_marked_estimated_with_its_rates(tmp_path):
    run = tmp_path / "run"
    # one process measured 1 entry in 100 and 1 in 10 of "search", another measured all of it
    write_worker(run, worker_doc(role="a", pid=1, threads=[Ph(("search",), [S], sample_every=100)]))
    write_worker(run, worker_doc(role="a", pid=2, threads=[Ph(("search",), [S], sample_every=10)]))
    write_worker(run, worker_doc(role="a", pid=3, threads=[Ph(("search",), [S])]))
    merged, doc, text = report(run)
    search = phase_of(doc, "a", ["search"])
    assert search["estimated"] is True and search["sample_every"] == [10, 100]
    note = "1 entry in 10, 1 entry in 100 (merged with fully measured entries)"
    assert re.search(rf"^      search +{re.escape(note)}$", text, re.M), text
    assert re.search(r"^~search ", text, re.M)


def test_histogram_difference_is_the_histogram_of_the_later_entries():
    from lineprofiler.runfile.stats import Histogram
    from tests.truth.buckets import histogram

    first = [5, 900, 40_000, 40_000, 3 * S]
    later = [900, 41_000, 7 * S, 12]
    before = Histogram.from_pairs(histogram(first))
    now = Histogram.from_pairs(histogram(first + later))
    assert now.minus(before) == Histogram.from_pairs(histogram(later))
    assert now.minus(now) == Histogram() and before.minus(Histogram()) == before
