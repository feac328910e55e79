"""Quantiles never outside what was seen: the recorder's exact per-path min and max entry times.

Real processes time their own entries (perf_counter_ns inside and around each ``with``): a phase
entered once reports that entry's duration as p50 and p99, not the value of its histogram bucket;
the worker file's min_wall_ns/max_wall_ns hold the shortest and longest entry; the merge takes the
min of the minima and the max of the maxima over processes, and files written without the fields
(earlier versions) still read, their extremes unknown.
"""

from __future__ import annotations

import json
import re
from concurrent.futures import ThreadPoolExecutor

from lineprofiler.accounting import merge_run
from lineprofiler.report.json import to_document
from lineprofiler.report.reduce import reduce_host
from lineprofiler.report.text import render_text
from tests.helpers import run_python, worker_files
from tests.report.synth import MS, Ph, worker_doc, write_worker
from tests.truth.buckets import bucket_of, bucket_value

# perf_counter_ns and the recorder's wall clock (TSC or CLOCK_MONOTONIC) read the same time up to
# their calibration: a few microseconds over these durations.
CLOCK_SLACK_NS = 20_000
UNIT_NS = {"ns": 1, "us": 1e3, "ms": 1e6, "s": 1e9}

TIMED = """
    import json, sys, time
    from lineprofiler.accounting import Profiler
    p = Profiler(run_dir="run", role=sys.argv[1], enabled=True, snapshot_interval_s=None,
                 sample_interval_s=None)
    bounds = []
    for ms in json.loads(sys.argv[2]):
        t0 = time.perf_counter_ns()
        with p.phase("timed"):
            t1 = time.perf_counter_ns()
            time.sleep(ms / 1000)
            t2 = time.perf_counter_ns()
        t3 = time.perf_counter_ns()
        bounds.append([t2 - t1, t3 - t0])  # inside the entry / around it
    p.close()
    print(json.dumps(bounds))
"""


def timed_process(
    tmp_path, role: str, sleeps_ms: list[float], env: dict[str, str] | None = None
) -> list[tuple[int, int]]:
    out = run_python(TIMED, cwd=tmp_path, args=[role, json.dumps(sleeps_ms)], env=env)
    return [(lo, hi) for lo, hi in json.loads(out.stdout.strip().splitlines()[-1])]


def within(value: float, lo: int, hi: int) -> bool:
    return lo - CLOCK_SLACK_NS <= value <= hi + CLOCK_SLACK_NS


def printed_ns(text: str) -> tuple[float, float]:
    """``50.1ms`` -> (ns, half its last printed digit in ns)."""
    m = re.fullmatch(r"([0-9]+)(\.[0-9])?(ns|us|ms|s)", text)
    assert m, text
    unit = UNIT_NS[m.group(3)]
    return float(m.group(1) + (m.group(2) or "")) * unit, (0.1 if m.group(2) else 1.0) * unit / 2


def timed_phase(doc: dict, path: tuple[str, ...] = ("timed",)) -> dict:
    (role,) = doc["roles"]
    (phase,) = [p for p in role["phases"] if p["path"] == list(path)]
    return phase


def test_a_phase_entered_once_reports_its_own_duration_not_a_bucket_edge(tmp_path):
    ((lo, hi),) = timed_process(tmp_path, "once", [50.0])
    merged = merge_run(tmp_path / "run")
    phase = timed_phase(json.loads(json.dumps(to_document(merged))))
    assert phase["calls"] == 1
    for key in ("p50_ns", "p95_ns", "p99_ns"):
        assert within(phase[key], lo, hi), (key, phase[key], lo, hi)
    assert phase["p50_ns"] == phase["p99_ns"] == phase["mean_ns"]
    # The bucket's own value is not what is reported (that was the bug: 48.8 ms for 50 ms).
    assert phase["p50_ns"] != round(bucket_value(bucket_of(phase["p50_ns"])))
    text = render_text(merged)
    m = re.search(r"^timed +\S+ +\S+ +(\S+) +(\S+)$", text, re.M)  # DOMINANT PHASES: p50, p99
    assert m, text
    for printed in m.groups():
        value, half_step = printed_ns(printed)
        assert lo - CLOCK_SLACK_NS - half_step <= value <= hi + CLOCK_SLACK_NS + half_step, printed


def test_min_and_max_are_exact_in_the_file_and_merge_over_processes(tmp_path):
    # Two processes of one launch (running together, one run id), each timing its own entries.
    env = {"LINEPROFILER_RUN_ID": "clamp"}
    with ThreadPoolExecutor(2) as pool:
        fa = pool.submit(timed_process, tmp_path, "actor", [7.0, 3.0, 12.0, 5.0, 30.0], env)
        fb = pool.submit(timed_process, tmp_path, "actor", [9.0, 21.0, 4.0, 30.0], env)
        a, b = fa.result(), fb.result()
    files = worker_files(tmp_path / "run")
    assert len(files) == 2
    per_file = []
    for f in files:
        (rec,) = [
            r
            for t in json.loads(f.read_text())["threads"]
            for r in t["phases"]
            if r["path"] == ["timed"]
        ]
        per_file.append(rec)
    by_calls = {r["calls"]: r for r in per_file}
    for bounds, rec in ((a, by_calls[5]), (b, by_calls[4])):
        shortest = min(bounds, key=lambda x: x[0])
        longest = max(bounds, key=lambda x: x[0])
        assert within(rec["min_wall_ns"], *shortest), (rec, bounds)
        assert within(rec["max_wall_ns"], *longest), (rec, bounds)
    merged = merge_run(tmp_path / "run")
    stats = merged.roles["actor"].tree[("timed",)]
    assert stats.calls == 9
    assert stats.min_wall_ns == min(r["min_wall_ns"] for r in per_file)
    assert stats.max_wall_ns == max(r["max_wall_ns"] for r in per_file)
    everything = a + b
    assert within(stats.min_wall_ns, *min(everything, key=lambda x: x[0]))
    assert within(stats.max_wall_ns, *max(everything, key=lambda x: x[0]))
    phase = timed_phase(to_document(merged))
    for key in ("p50_ns", "p95_ns", "p99_ns"):
        assert stats.min_wall_ns <= phase[key] <= stats.max_wall_ns
    # p99 of 9 entries is the longest (the top rank): exactly the max, not its bucket's value.
    assert phase["p99_ns"] == stats.max_wall_ns
    # A host summary keeps them: the report through it says the same.
    summary, folded = reduce_host(tmp_path / "run", files[0].parent.name)
    assert folded == 2
    assert str(stats.min_wall_ns) in summary.read_text()
    again = merge_run(tmp_path / "run").roles["actor"].tree[("timed",)]
    assert (again.min_wall_ns, again.max_wall_ns) == (stats.min_wall_ns, stats.max_wall_ns)


def test_files_without_extremes_still_read_and_leave_them_unknown(tmp_path):
    durations = [3 * MS, 5 * MS, 40 * MS]
    old = worker_doc(role="actor", pid=100, threads=[Ph(("step",), durations=durations)])
    rec = old["threads"][0]["phases"][0]
    assert "min_wall_ns" not in rec  # as an earlier version wrote it
    write_worker(tmp_path / "run", old)
    stats = merge_run(tmp_path / "run").roles["actor"].tree[("step",)]
    assert stats.calls == 3 and stats.min_wall_ns is None and stats.max_wall_ns is None
    p99 = timed_phase(to_document(merge_run(tmp_path / "run")), ("step",))["p99_ns"]
    assert p99 == round(bucket_value(bucket_of(40 * MS)))  # the histogram's value, unclamped
    # One new file beside it: the extremes of the merge are unknown, not the new file's alone.
    new = worker_doc(role="actor", pid=101, threads=[Ph(("step",), durations=[2 * MS])])
    new["threads"][0]["phases"][0].update(min_wall_ns=2 * MS, max_wall_ns=2 * MS)
    write_worker(tmp_path / "run", new)
    stats = merge_run(tmp_path / "run").roles["actor"].tree[("step",)]
    assert stats.calls == 4 and stats.min_wall_ns is None and stats.max_wall_ns is None
