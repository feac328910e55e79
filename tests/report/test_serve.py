"""``lineprofiler serve``: scraped over loopback, parsed with prometheus_client's own parser."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import urllib.request

import pytest

from tests.helpers import child_env, run_python

prometheus_client = pytest.importorskip("prometheus_client")
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

CLI = "from lineprofiler.cli import main; raise SystemExit(main())"

# Two roles; the child times each "step" entry itself and writes the durations.
WORKLOAD = """
    import json, time
    from lineprofiler.accounting import Profiler
    truth = {}
    # two actor workers (one after the other in this process: same host, no rank), one learner
    for role, n, s in (("actor", 6, 0.004), ("actor", 6, 0.004), ("learner", 6, 0.012)):
        p = Profiler(run_dir="run", role=role, enabled=True, snapshot_interval_s=None,
                     sample_interval_s=None)
        for i in range(n):
            t0 = time.perf_counter()
            with p.phase("step"):
                time.sleep(s * (1 + i % 3))
                p.count("items", 5)
            truth.setdefault(role, []).append(time.perf_counter() - t0)
        p.close()
    json.dump(truth, open("truth.json", "w"))
"""

LIVE = """
    import time
    from lineprofiler.accounting import Profiler
    p = Profiler(run_dir="live", role="trainer", enabled=True, snapshot_interval_s=0.1,
                 sample_interval_s=None)
    end = time.time() + 60
    while time.time() < end:
        with p.phase("step"):
            time.sleep(0.01)
"""


class Served:
    def __init__(self, tmp_path, *args):
        self.proc = subprocess.Popen(
            [sys.executable, "-c", CLI, "serve", *map(str, args), "--port", "0"],
            cwd=tmp_path,
            env=child_env(),
            stderr=subprocess.PIPE,
            text=True,
        )
        line = self.proc.stderr.readline()
        m = re.search(r"http://127\.0\.0\.1:(\d+)/metrics", line)  # localhost by default
        if m is None:
            self.close()
            raise AssertionError(f"serve did not start: {line}")
        self.url = f"http://127.0.0.1:{m.group(1)}/metrics"

    def scrape(self) -> dict:
        with urllib.request.urlopen(self.url, timeout=30) as r:
            text = r.read().decode()
        return {f.name: f for f in text_string_to_metric_families(text)}

    def close(self):
        self.proc.terminate()
        self.proc.wait(timeout=30)
        self.proc.stderr.close()


def _samples(fam, suffix=""):
    return [s for s in fam.samples if s.name == fam.name + suffix]


def test_scrape_matches_the_report(tmp_path):
    run_python(WORKLOAD, cwd=tmp_path)
    truth = json.loads((tmp_path / "truth.json").read_text())
    report = json.loads(run_python(CLI, cwd=tmp_path, args=["report", "run", "--json"]).stdout)
    phases = {(r["role"], p["name"]): p for r in report["roles"] for p in r["phases"]}
    served = Served(tmp_path, "run", "--interval", "0")
    try:
        fams = served.scrape()
    finally:
        served.close()
    for name in (
        "lineprofiler_phase_calls",
        "lineprofiler_phase_seconds",
        "lineprofiler_phase_wait_ratio",
        "lineprofiler_phase_duration_seconds",
        "lineprofiler_phase_counter",
        "lineprofiler_phase_counter_rate",
        "lineprofiler_processes",
    ):
        assert name in fams, sorted(fams)
    calls = {
        (s.labels["role"], s.labels["phase"]): s.value
        for s in _samples(fams["lineprofiler_phase_calls"], "_total")
    }
    assert calls == {("actor", "step"): 12, ("learner", "step"): 6}
    for s in _samples(fams["lineprofiler_phase_seconds"], "_total"):
        assert set(s.labels) == {"role", "phase", "on_threads"}  # host/rank only behind the flag
        assert s.labels["on_threads"] == "false"
        p = phases[(s.labels["role"], s.labels["phase"])]
        assert s.value == pytest.approx(p["time_ns"] / 1e9)
        assert s.value == pytest.approx(sum(truth[s.labels["role"]]), rel=0.05)
    for s in _samples(fams["lineprofiler_phase_wait_ratio"]):
        p = phases[(s.labels["role"], s.labels["phase"])]
        assert s.value == pytest.approx(p["wait_fraction"], abs=1e-6) and s.value > 0.5

    hist = fams["lineprofiler_phase_duration_seconds"]
    for role, durations in truth.items():
        buckets = [
            (float(s.labels["le"]), s.value)
            for s in _samples(hist, "_bucket")
            if s.labels["role"] == role
        ]
        assert 20 <= len(buckets) <= 40 and buckets[-1] == (float("inf"), len(durations))
        assert [c for _, c in buckets] == sorted(c for _, c in buckets)
        for le, count in buckets[:-1]:  # the child's own timings agree, up to 3% around le
            below = sum(d <= le * 0.97 for d in durations)
            within = sum(d <= le * 1.03 for d in durations)
            assert below <= count <= within, (role, le, count, durations)
        (total,) = [s.value for s in _samples(hist, "_sum") if s.labels["role"] == role]
        assert total == pytest.approx(phases[(role, "step")]["wall_ns"] / 1e9)

    (items,) = [
        s
        for s in _samples(fams["lineprofiler_phase_counter"], "_total")
        if s.labels["role"] == "learner"
    ]
    assert items.labels["counter"] == "items" and items.value == 30
    procs = {
        (s.labels["role"], s.labels["state"]): s.value
        for s in _samples(fams["lineprofiler_processes"])
    }
    assert procs == {("actor", "closed"): 2, ("learner", "closed"): 1}

    # per-process labels: the two rankless actors of one host are one series, no duplicates
    from lineprofiler.report.merge import merge_run
    from lineprofiler.report.prometheus import families

    fam = {f.name: f for f in families(merge_run(tmp_path / "run"), per_process=True)}
    per = [s for s in fam["lineprofiler_phase_seconds"].samples if s.labels["role"] == "actor"]
    assert len(per) == 1 and per[0].labels["rank"] == ""
    assert per[0].value == pytest.approx(phases[("actor", "step")]["time_ns"] / 1e9)


def test_live_run_counters_grow_and_per_process_labels(tmp_path):
    live = subprocess.Popen(
        [sys.executable, "-c", __import__("textwrap").dedent(LIVE)], cwd=tmp_path, env=child_env()
    )
    served = None
    try:
        deadline = time.time() + 60
        # until a snapshot holds completed steps (files are replaced atomically)
        while not any(
            '"step"' in f.read_text() for f in (tmp_path / "live").glob("workers/*/w_*.json")
        ):
            assert time.time() < deadline and live.poll() is None
            time.sleep(0.1)
        served = Served(tmp_path, "live", "--interval", "0", "--per-process-labels")
        cached = Served(tmp_path, "live", "--interval", "3600")
        try:
            first, held = served.scrape(), cached.scrape()
            time.sleep(1.0)
            second, held2 = served.scrape(), cached.scrape()
        finally:
            cached.close()
    finally:
        if served is not None:
            served.close()
        live.terminate()
        live.wait(timeout=30)

    def value(fams, name):
        (s,) = _samples(fams[name], "_total")
        return s

    c1 = value(first, "lineprofiler_phase_calls").value
    c2 = value(second, "lineprofiler_phase_calls").value
    assert c2 > c1 > 0
    s1, s2 = value(first, "lineprofiler_phase_seconds"), value(second, "lineprofiler_phase_seconds")
    assert s2.value > s1.value and s2.labels["host"] and s2.labels["rank"] == ""
    (running,) = _samples(second["lineprofiler_processes"])
    assert running.labels["state"] == "running" and running.labels["host"]
    # --interval 3600: the second scrape is served from the first merge
    assert (
        value(held2, "lineprofiler_phase_calls").value
        == value(held, "lineprofiler_phase_calls").value
    )
