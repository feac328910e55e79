"""``lineprofiler report`` through a real subprocess: golden output, JSON, and bad input.

Set LP_UPDATE_GOLDEN=1 to rewrite tests/report/golden/ after a deliberate change of format.
"""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path

import pytest

from lineprofiler.report.units import fmt_count, fmt_duration, fmt_rate, fmt_share
from tests.helpers import run_python
from tests.report.synth import (
    MS,
    RUN_ID,
    T0,
    Ph,
    golden_run,
    worker_doc,
    write_worker,
)

GOLDEN = Path(__file__).parent / "golden"
CLI = "from lineprofiler.cli import main; raise SystemExit(main())"


def cli(tmp_path: Path, *args: str):
    proc = run_python(CLI, cwd=tmp_path, args=[str(a) for a in args], check=False, timeout=60)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("LP_UPDATE_GOLDEN"):
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)
    assert text == path.read_text()


def test_golden_text_report(tmp_path):
    run_dir = golden_run(tmp_path / "run")
    proc = cli(tmp_path, "report", run_dir)
    assert proc.returncode == 0, proc.stderr
    check_golden("report.txt", proc.stdout)


def caveats_run(d: Path) -> Path:
    """The golden run plus a stale, a silent, an unreadable, a sampled, a superseded worker and one
    without CPU time: every caveat path."""
    golden_run(d)
    write_worker(
        d,
        worker_doc(role="actor", pid=1100, host="node09", rank=5, final=False, written_at=T0 + 1),
    )
    write_worker(
        d, '{"format": "lineprofiler-worker", "schema_ver', name=f"w_{RUN_ID}_7_0000000a.json"
    )
    write_worker(
        d,
        worker_doc(
            role="evaluator",
            pid=3000,
            rank=9,
            measure_cpu=False,
            written_at=T0 + 2.0,
            flush_errors=2,
            last_flush_error="No space left on device",
            folded_entries=12,
            threads=[
                Ph(("evaluate",), dist=[(3 * MS, 40)], sample_every=100, counters={"games": 400}),
                Ph(("(folded)",), dist=[(1 * MS, 12)]),
            ],
        ),
    )
    write_worker(
        d,
        worker_doc(
            role="actor",
            pid=77,
            run_id="20261201T0900-000000",
            start_time=T0 - 86400,
            written_at=T0 - 80000,
            threads=[Ph(("iteration",), [MS])],
        ),
    )
    return d


def test_golden_text_report_with_caveats(tmp_path):
    d = caveats_run(tmp_path / "run")
    proc = cli(tmp_path, "report", d)
    assert proc.returncode == 0, proc.stderr
    check_golden("report_caveats.txt", proc.stdout)
    text = " ".join(proc.stdout.split())
    assert "~evaluate" in text and "1 entry in 100" in text
    assert f"w_{RUN_ID}_7_0000000a.json: truncated" in text
    assert "started, recorded nothing: actor rank 5 (node09)" in text
    assert "superseded attempt 20261201T0900-000000" in text
    assert '"(folded)"' in text


def _phase_by_name(role: dict, name: str) -> dict:
    return next(p for p in role["phases"] if p["name"] == name)


def test_json_agrees_with_text(tmp_path):
    d = golden_run(tmp_path / "run")
    text = cli(tmp_path, "report", d).stdout
    doc = json.loads(cli(tmp_path, "report", d, "--json").stdout)
    assert doc["run"]["processes"] == 5 and doc["run"]["roles"] == {"actor": 4, "learner": 1}
    assert f"Processes {doc['run']['processes']}" in text
    assert f"Run {doc['run']['run_id']}" in text
    assert f"Runtime {fmt_duration(doc['run']['runtime_ns'])}" in text
    for role in doc["roles"]:
        head = f"{role['role'].upper()}  ({role['processes']} process"
        assert head in text
        section = text.split(head, 1)[1].split("\n\n\n", 1)[0]
        assert f"imbalance {role['imbalance']:.2f}" in section
        top, rest = section.split("DOMINANT PHASES", 1)
        dominant = rest.split("\n\n", 1)[0]
        lines = dominant.splitlines()
        for name in role["dominant"]:
            p = _phase_by_name(role, name)
            wait = f"{p['wait_fraction'] * 100:.0f}%"
            cols = [fmt_duration(p["self_ns"]), wait, fmt_duration(p["p50_ns"])]
            cols.append(fmt_duration(p["p99_ns"]))
            row = next(line for line in lines if line.startswith(name + " "))
            assert row.split()[1:] == " ".join(cols).split(), row
            for c in p["counters"]:
                assert any(
                    line.split()[1:4]
                    == [c["name"], fmt_count(c["count"]), fmt_rate(c["rate_per_s"])]
                    for line in lines
                )
        for p in role["phases"]:
            if p["depth"] == 1:
                row = next(line for line in top.splitlines() if line.startswith(p["name"] + " "))
                assert fmt_share(p["share"]) in row and fmt_duration(p["time_ns"]) in row
    actor = doc["roles"][0]
    assert actor["stragglers"][0]["slowest"]["rank"] == 4
    assert actor["stragglers"][0]["slowest"]["host"] == "node08"
    # node08 holds ranks 3 and 4 (9 ms and 10 ms actors): its mean is the slowest node's
    hosts = actor["stragglers"][0]["hosts"]
    assert [h["host"] for h in hosts] == ["node08", "node07"]
    assert hosts[0]["mean_ns"] == ((95 * 9 + 5 * 18) * MS + (95 * 10 + 5 * 20) * MS) // 2
    keys = [(w["role"], w["host"], w["rank"]) for w in doc["workers"]]
    assert keys == sorted(keys) and len(keys) == 5
    assert doc["caveats"] == []


def test_json_ground_truth(tmp_path):
    """Derived numbers against the durations the synthetic run was built from."""
    d = golden_run(tmp_path / "run")
    doc = json.loads(cli(tmp_path, "report", d, "--json", "--no-samples").stdout)
    actor = doc["roles"][0]
    mcts = _phase_by_name(actor, "iteration/self_play/mcts")
    wall = 3 * (95 * 9 + 5 * 18) * MS + (95 * 10 + 5 * 20) * MS
    assert mcts["wall_ns"] == wall and mcts["calls"] == 400
    assert mcts["mean_ns"] == round(wall / 400)
    assert mcts["share"] == pytest.approx(wall / actor["top_level_ns"], abs=1e-6)
    assert mcts["wait_fraction"] == pytest.approx(0.2, abs=1e-6)
    sims = mcts["counters"][0]
    assert sims["count"] == 25_600
    assert sims["rate_per_s"] == pytest.approx(25_600 / (wall / 1e9), rel=1e-6)
    assert sims["time_per_each_ns"] == round(wall / 25_600)
    # p50 of entries {9 ms x 285, 10 ms x 95, 18 ms x 15, 20 ms x 5} is 9 ms; p99 is 20 ms
    assert mcts["p50_ns"] == pytest.approx(9 * MS, rel=0.0289)
    assert mcts["p99_ns"] == pytest.approx(20 * MS, rel=0.0289)
    assert doc["run"]["with_samples"] is False


# -- bad input: exit 2 with a clear message, or a report whose caveats name the worker --


@pytest.mark.parametrize(
    "setup, message",
    [
        ("missing", "no such directory"),
        ("empty", "the directory is empty"),
        ("not_a_run", "not a lineprofiler run"),
        ("workers_dir", "pass the run directory"),
        ("only_truncated", "no readable worker file"),
        ("a_file", "not a directory"),
    ],
)
def test_unreportable_directory_exits_2(tmp_path, setup, message):
    d = tmp_path / "run"
    target = d
    if setup in ("empty", "not_a_run", "workers_dir", "only_truncated"):
        d.mkdir()
    if setup == "not_a_run":
        (d / "results.csv").write_text("a,b\n")
    if setup == "workers_dir":
        write_worker(d, worker_doc(role="a", pid=1))
        target = d / "workers"
        (target / "stray.txt").write_text("")
        target = target / "node01"
    if setup == "only_truncated":
        write_worker(d, json.dumps(worker_doc(role="a", pid=1))[:100], name="w_x_1_00000001.json")
    if setup == "a_file":
        d.write_text("")
    proc = cli(tmp_path, "report", target)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.startswith("lineprofiler report: error: ")
    assert message in proc.stderr


def _bad_docs() -> list[tuple[str, object, str]]:
    good = worker_doc(role="a", pid=2, threads=[Ph(("x",), [MS])])

    def mutate(fn) -> dict:
        doc = copy.deepcopy(good)
        fn(doc)
        return doc

    phase = lambda doc: doc["threads"][0]["phases"][0]  # noqa: E731
    return [
        ("truncated", json.dumps(good)[:-40], "truncated"),
        ("not_json", "this is not json at all\n{", "not JSON"),
        ("binary", b"\x89PNG\r\n\x1a\n\x00\x00", "not JSON"),
        ("bad_utf8", b'{"format": "\xff\xfe"}', "not UTF-8"),
        ("other_schema", mutate(lambda d: d.update(schema_version=2)), "schema_version 2"),
        ("not_an_object", "[1, 2, 3]", "not an object"),
        (
            "string_calls",
            mutate(lambda d: phase(d).update(calls="12")),
            "got `str` - at `$.threads[0].phases[0].calls`",
        ),
        (
            "float_wall",
            mutate(lambda d: phase(d).update(wall_ns=1.5)),
            "got `float` - at `$.threads[0].phases[0].wall_ns`",
        ),
        (
            "negative",
            mutate(lambda d: phase(d).update(calls=-4)),
            "`int` >= 0 - at `$.threads[0].phases[0].calls`",
        ),
        (
            "absurd_wall",
            mutate(lambda d: phase(d).update(wall_ns=10**19)),
            "<= 9223372036854775807 - at",
        ),
        ("huge_wall", mutate(lambda d: phase(d).update(wall_ns=10**30)), "<= 9223372036854775807"),
        ("longer_than_life", mutate(lambda d: phase(d).update(wall_ns=10**15)), "lived"),
        (
            "bad_bucket",
            mutate(lambda d: phase(d).update(hist=[[9000, 1]])),
            "<= 511 - at `$.threads[0].phases[0].hist[0][0]`",
        ),
        (
            "bad_path",
            mutate(lambda d: phase(d).update(path="x")),
            "got `str` - at `$.threads[0].phases[0].path`",
        ),
        ("no_meta", mutate(lambda d: d.pop("meta")), "missing required field `meta`"),
        # NaN is not JSON: the strict parser names it (never read as a time)
        ("nan_time", mutate(lambda d: d.update(written_at=float("nan"))), "not JSON"),
        ("inf_time", mutate(lambda d: d.update(written_at=1e300)), "at `$.written_at`"),
        ("future", mutate(lambda d: d.update(written_at=9e9)), "in the future"),
        ("threads_dict", mutate(lambda d: d.update(threads={})), "got `object` - at `$.threads`"),
        (
            "counter_float",
            mutate(lambda d: phase(d).update(counters={"n": 0.5})),
            "`float` - at `$.threads[0].phases[0].counters",
        ),
    ]


@pytest.mark.parametrize("case, content, reason", _bad_docs(), ids=[c[0] for c in _bad_docs()])
def test_bad_worker_file_is_named_under_caveats(tmp_path, case, content, reason):
    d = tmp_path / "run"
    write_worker(d, worker_doc(role="a", pid=1, threads=[Ph(("x",), [MS, 2 * MS])]))
    name = f"w_{RUN_ID}_2_00000002.json"
    if isinstance(content, dict):
        write_worker(d, json.dumps(content), name=name)
    else:
        write_worker(d, content, name=name)  # type: ignore[arg-type]
    proc = cli(tmp_path, "report", d)
    assert proc.returncode == 0, proc.stderr
    caveats = " ".join(proc.stdout.split("CAVEATS", 1)[1].split())
    assert f"workers/node01/{name}" in caveats and reason in caveats, caveats
    assert "Processes 1 " in proc.stdout  # the bad file costs that worker, not the run
    doc = json.loads(cli(tmp_path, "report", d, "--json").stdout)
    assert [u["path"] for u in doc["unreadable"]] == [f"workers/node01/{name}"]
    assert reason in doc["unreadable"][0]["reason"]
    assert doc["caveats"][0]["kind"] == "unreadable"
    assert doc["roles"][0]["phases"][0]["calls"] == 2


def test_bad_arguments_exit_2(tmp_path):
    proc = cli(tmp_path, "report")
    assert proc.returncode == 2 and "DIR" in proc.stderr
    d = golden_run(tmp_path / "run")
    assert cli(tmp_path, "report", d, "--top", "-1").returncode == 2
    proc = cli(tmp_path, "report", d, "--attempt", "nope")
    assert proc.returncode == 2 and "no attempt 'nope'" in proc.stderr


def test_json_keys_are_stable(tmp_path):
    """docs/report-json.md documents these keys: renaming one must fail here first."""
    doc = json.loads(cli(tmp_path, "report", golden_run(tmp_path / "run"), "--json").stdout)
    assert_stable_keys(doc)


def assert_stable_keys(doc: dict) -> None:
    """The keys of the golden run's JSON report, in order (docs/report-json.md)."""
    assert list(doc) == [
        "format", "schema_version", "run", "attempts", "roles", "workers", "unreadable",
        "caveats",
    ]  # fmt: skip
    assert list(doc["run"]) == [
        "dir", "run_id", "start_time", "end_time", "runtime_ns", "live_s", "processes", "roles",
        "hosts", "nodes", "clocks", "own_write_bytes", "with_samples", "superseded",
    ]  # fmt: skip
    role = doc["roles"][0]
    assert list(role) == [
        "role", "processes", "imbalance", "busiest", "idle", "busy_ns", "top_level_ns", "phases",
        "dominant", "iterations", "stragglers",
    ]  # fmt: skip
    assert list(role["phases"][0]) == [
        "path", "name", "depth", "thread", "processes", "calls", "open", "time_ns", "wall_ns",
        "open_ns", "self_ns", "cpu_ns", "wait_ns", "wait_fraction", "async_calls",
        "async_wall_ns", "raised", "on_threads", "threads", "share", "mean_ns", "p50_ns", "p95_ns", "p99_ns", "estimated",
        "sample_every", "counters", "io",
    ]  # fmt: skip
    mcts = _phase_by_name(role, "iteration/self_play/mcts")
    assert list(mcts["counters"][0]) == [
        "name",
        "count",
        "rate_per_s",
        "time_per_each_ns",
        "saturated",
    ]
    assert list(role["stragglers"][0]) == [
        "path", "name", "slowest", "median_ns", "ratio", "processes", "hosts",
    ]  # fmt: skip
    assert list(doc["workers"][0]) == [
        "path", "role", "host", "pid", "rank", "local_rank", "job_id", "run_id", "uuid",
        "start_time", "written_at", "final", "snapshot_seq", "stale_s", "flush_errors",
        "last_flush_error", "recorded_nothing", "idle", "process_name", "ppid", "busy_ns", "threads",
        "thread_names", "clock",
        "own_write_bytes", "folded_entries", "depth_overflow", "next_write_s",
        "ended_without_final_write", "unaccounted_s",
    ]  # fmt: skip
    docs = (Path(__file__).parents[2] / "docs" / "report-json.md").read_text()
    for key in [*doc["run"], *role, *role["phases"][0], *doc["workers"][0]]:
        assert f'"{key}"' in docs, f"{key} is not documented in docs/report-json.md"
