"""Issue 31 item 6: the HTML report's summary ("where did the time go"), and its chart fixes
(percentile marks inside the bar of a single entry, legends inside their chart, distinct colours
side by side, "1 entry"), each against what the test itself wrote or measured. Also: the
timeline ``report --html`` bins during the merge's one read of the sidecars is the one a
second read of them gives (issue 35)."""

from __future__ import annotations

import itertools
import json
import math
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from lineprofiler.report.html import render_html
from lineprofiler.report.html_charts import PALETTE, Palette, histogram
from lineprofiler.report.merge import merge_run
from lineprofiler.report.timeline import DEFAULT_BINS, build_timeline
from lineprofiler.report.units import fmt_duration, fmt_share
from lineprofiler.report.view import run_view
from lineprofiler.report.view_summary import run_summary
from tests.helpers import child_env
from tests.report.synth import MS, Ph, big_run, golden_run, worker_doc, write_worker
from tests.report.test_html import chromium, needs_chromium, uncaught_errors
from tests.truth.buckets import bucket_bounds
from tests.truth.buckets import bucket_of as true_bucket

MIN_DELTA_E = 20.0  # CIE76: two colours this far apart do not read as "the same purple"


def lab(hex_color: str) -> tuple[float, float, float]:
    """sRGB ``#rrggbb`` -> CIE L*a*b* (D65), the test's own conversion."""
    rgb = [int(hex_color[i : i + 2], 16) / 255 for i in (1, 3, 5)]
    r, g, b = (c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in rgb)
    x = (0.4124 * r + 0.3576 * g + 0.1805 * b) / 0.95047
    y = 0.2126 * r + 0.7152 * g + 0.0722 * b
    z = (0.0193 * r + 0.1192 * g + 0.9505 * b) / 1.08883

    def f(t: float) -> float:
        return t ** (1 / 3) if t > 0.008856 else 7.787 * t + 16 / 116

    return 116 * f(y) - 16, 500 * (f(x) - f(y)), 200 * (f(y) - f(z))


def delta_e(a: str, b: str) -> float:
    return math.dist(lab(a), lab(b))


def lp(cwd: Path, *args: object) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [sys.executable, "-m", "lineprofiler", *(str(a) for a in args)],
        cwd=cwd, env=child_env(), capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


# -- the summary --


def _golden_truth() -> dict:
    """What golden_run wrote (its docstring's figures), in ns, worked out here again."""
    actors = {}
    for k in range(4):
        mcts = 9 * MS + (1 * MS if k == 3 else 0)
        iteration = (mcts + 2_150_000) * 95 + (2 * mcts + 2_150_000) * 5
        actors[k] = {
            "host": "node07" if k < 2 else "node08",
            "iteration": iteration,
            "mcts": mcts * 95 + 2 * mcts * 5,
            "env_step": 2 * MS * 100,
            "self_play_self": 50_000 * 100,
        }
    return {
        "actors": actors,
        "train_step": 40 * MS * 30 + 55 * MS * 2,
        "drain_queue": 2 * MS * 300 + 200 * MS,
    }


def test_summary_says_where_the_time_went(tmp_path):
    """golden_run: 4 actors on node07 (ranks 1, 2) and node08 (3, 4, the straggler) and a
    learner. The summary's bar per role, busiest node and the run's top phases are the figures
    the test works out from what it wrote; the summary comes before the per-role sections."""
    truth = _golden_truth()
    run = merge_run(golden_run(tmp_path / "run"), with_samples=False)
    summary = run_summary(run_view(run))

    by_role = {rs.name: rs for rs in summary.roles}
    assert set(by_role) == {"actor", "learner"}
    actor = by_role["actor"]
    busy: dict[str, int] = {}
    for a in truth["actors"].values():
        busy[a["host"]] = busy.get(a["host"], 0) + a["iteration"]
    assert actor.busiest_node is not None
    assert actor.busiest_node.host == "node08" == max(busy, key=busy.__getitem__)
    assert actor.busiest_node.busy_ns == busy["node08"]
    assert actor.busiest_node.processes == 2 and actor.nodes == 2
    assert actor.busiest_node.share == pytest.approx(busy["node08"] / sum(busy.values()))
    learner = by_role["learner"]
    assert learner.busiest_node is not None and learner.busiest_node.host == "node07"
    assert learner.busiest_node.share == 1.0 and learner.nodes == 1

    # the bar: each top-level phase's share of the role's top-level time (the learner names its
    # threads: each thread is a top-level node over its phases)
    learner_total = truth["train_step"] + truth["drain_queue"]
    shares = {r.label: r.share for r in learner.view.top_level}
    assert shares == pytest.approx(
        {
            "learner": truth["train_step"] / learner_total,
            "collector": truth["drain_queue"] / learner_total,
        }
    )
    assert [r.label for r in actor.view.top_level] == ["iteration"]

    # the run's top phases: most self time first, over every role's top-level time
    total = sum(a["iteration"] for a in truth["actors"].values()) + learner_total
    assert summary.total_ns == total
    mcts = sum(a["mcts"] for a in truth["actors"].values())
    want = [
        ("actor", "iteration/self_play/mcts", mcts),
        ("learner", "learner/train_step", truth["train_step"]),
    ]
    got = [(p.role, p.row.label, p.row.stats.self_ns) for p in summary.top]
    assert got[:2] == want
    env_step = sum(a["env_step"] for a in truth["actors"].values())
    assert set(got[2:4]) == {
        ("actor", "iteration/env_step", env_step),
        ("learner", "collector/drain_queue", truth["drain_queue"]),
    }
    assert [p.share for p in summary.top[:2]] == pytest.approx(
        [mcts / total, truth["train_step"] / total]
    )

    page = render_html(run)
    body = page.split("<body>", 1)[1]
    start = body.index("Where the time went")
    assert start < body.index('<details class="role"')
    section = body[start : body.index("</section>")]
    assert "busiest node node08" in section
    assert fmt_share(busy["node08"] / sum(busy.values())) in section
    assert f"learner {fmt_share(truth['train_step'] / learner_total)}" in section
    assert fmt_duration(mcts) in section and fmt_share(mcts / total) in section
    assert len(re.findall(r'aria-label="[^"]*: time by top-level phase"', section)) == 2


# -- percentile marks --


@pytest.mark.parametrize(
    "ns",
    [289_500_000, 17, 1_000, 123_456_789, 5 * 10**9]
    # a bucket's first and last whole ns: where a mark drifts to the neighbouring bar
    + [int(math.ceil(bucket_bounds(b)[0])) for b in (100, 200, 300)]
    + [int(math.ceil(bucket_bounds(b)[1])) - 1 for b in (100, 200, 300)],
)
def test_a_single_entry_is_marked_inside_its_own_bar(ns):
    """One entry of ``ns``: every quantile is ``ns``; its marks sit inside the one bar drawn (the
    bucket the entry is counted in, by the test's own bucket rule), within a pixel."""
    b = true_bucket(ns)
    svg = histogram({b: 1}, [("p50", ns), ("p95", ns), ("p99", ns)], fmt_duration, "one")
    (bar,) = re.findall(r'<rect x="([0-9.]+)" y="[0-9.]+" width="([0-9.]+)"', svg)
    x0, w = float(bar[0]), float(bar[1])
    marks = [float(x) for x in re.findall(r'<line class="mark" x1="([0-9.]+)"', svg)]
    assert len(marks) == 3
    for x in marks:
        assert x0 - 1 <= x <= x0 + w + 1, (ns, x0, w, x)
    assert "1 entry" in svg and "1 entries" not in svg


SOLO = """
    import time
    from lineprofiler.accounting import Profiler

    p = Profiler(run_dir="run", role="solo", enabled=True, sample_interval_s=None)
    with p.phase("many"):
        for _ in range(20):
            with p.phase("tick"):
                time.sleep(0.002)
    t0 = time.perf_counter_ns()
    with p.phase("once"):
        t1 = time.perf_counter_ns()
        time.sleep(0.0295)
        t2 = time.perf_counter_ns()
    t3 = time.perf_counter_ns()
    p.close()
    open("bounds", "w").write(f"{t2 - t1} {t3 - t0}")
"""


def test_a_recorded_single_entry_reads_its_own_value(tmp_path):
    """A real phase entered once: the HTML's p50/p95/p99 are its duration (between the test's
    inner and outer timers), and the marks are inside its bar."""
    (tmp_path / "s.py").write_text(textwrap.dedent(SOLO))
    subprocess.run([sys.executable, "s.py"], cwd=tmp_path, env=child_env(), check=True, timeout=120)
    inner, outer = map(int, (tmp_path / "bounds").read_text().split())
    out = tmp_path / "r.html"
    assert lp(tmp_path, "report", "run", "--html", out).returncode == 0
    page = out.read_text()
    fig = re.search(r"<figure><figcaption>once — 1 entry, (.*?)</figcaption>(<svg.*?</svg>)", page)
    assert fig, page
    cap, svg = fig.groups()
    m = re.fullmatch(r"p50 (\S+), p95 (\S+), p99 (\S+)", cap)
    assert m and len(set(m.groups())) == 1, cap
    num, unit = re.fullmatch(r"([0-9.]+)(ns|us|ms|s)", m.group(1)).groups()
    value = float(num) * {"ns": 1, "us": 1e3, "ms": 1e6, "s": 1e9}[unit]
    half = 0.05 * {"ns": 1, "us": 1e3, "ms": 1e6, "s": 1e9}[unit]
    assert inner - half <= value <= outer + half
    (bar,) = re.findall(r'<rect x="([0-9.]+)" y="[0-9.]+" width="([0-9.]+)"', svg)
    x0, w = map(float, bar)
    for x in map(float, re.findall(r'<line class="mark" x1="([0-9.]+)"', svg)):
        assert x0 - 1 <= x <= x0 + w + 1


# -- colours --


def test_the_palette_colours_are_far_apart():
    assert min(delta_e(a, b) for a, b in itertools.combinations(PALETTE, 2)) >= MIN_DELTA_E


def _bar_fills(page: str) -> list[list[str]]:
    """Each stacked bar's segment colours, left to right."""
    bars = re.findall(r'<svg [^>]*aria-label="[^"]*(?:by top-level phase|by phase)".*?</svg>', page)
    return [re.findall(r'<g class="seg"[^>]*>.*?fill="(#[0-9a-f]{6})"', b) for b in bars]


def test_phases_side_by_side_get_distinct_colours(tmp_path):
    """A role of 12 top-level phases (and a second role sharing some of them): in every stacked
    bar, neighbouring segments differ by at least MIN_DELTA_E; a phase keeps one colour in every
    chart of the page."""
    run_dir = tmp_path / "run"
    names = [f"stage{i:02d}" for i in range(12)]
    write_worker(run_dir, worker_doc(role="a", pid=1, threads=[
        Ph((n,), dist=[((20 - i) * MS, 10)]) for i, n in enumerate(names)
    ]))  # fmt: skip
    write_worker(run_dir, worker_doc(role="b", pid=2, threads=[
        Ph((n,), dist=[((i + 1) * MS, 10)]) for i, n in enumerate(names[::3])
    ]))  # fmt: skip
    page = render_html(merge_run(run_dir, with_samples=False))
    fills = _bar_fills(page)
    assert [len(f) for f in fills] == [12, 4, 10, 4]  # a role section: its top 10
    for bar in fills:
        for a, b in itertools.pairwise(bar):
            assert delta_e(a, b) >= MIN_DELTA_E, bar
    seen: dict[str, set[str]] = {}
    for m in re.finditer(
        r'<g class="seg" data-tip="(?:[ab] · )?([a-z0-9]+)[: ].*?fill="(#\w+)"', page
    ):
        seen.setdefault(m.group(1), set()).add(m.group(2))
    assert set(seen) == set(names) and all(len(c) == 1 for c in seen.values()), seen


def test_palette_gives_neighbours_distinct_colours_past_its_size():
    """More names than colours: a name's neighbours in the sequence it was coloured in still
    never share its colour."""
    pal = Palette()
    names = [f"p{i}" for i in range(40)]
    pal.assign(names)
    for a, b in itertools.pairwise(names):
        assert pal(a) != pal(b)
    assert pal("p3") == pal.of["p3"]  # kept


# -- legends and labels inside their chart, in a browser --

MEASURE = """<script>
(function(){
  var bad=[];
  document.querySelectorAll('svg.chart').forEach(function(svg){
    var vb=svg.viewBox.baseVal;
    svg.querySelectorAll('text').forEach(function(t){
      var b=t.getBBox();
      if(b.width===0)return;
      if(b.y<vb.y-0.5||b.y+b.height>vb.y+vb.height+0.5||b.x<vb.x-0.5||b.x+b.width>vb.x+vb.width+0.5)
        bad.push(svg.getAttribute('aria-label')+': '+t.textContent+' '+[b.x,b.y,b.width,b.height].join(','));
    });
  });
  var out=document.createElement('pre');out.id='lp-bbox';
  out.textContent=JSON.stringify({charts:document.querySelectorAll('svg.chart').length,bad:bad});
  document.body.appendChild(out);
})();
</script>"""


@needs_chromium
def test_every_chart_label_is_inside_its_chart(tmp_path):
    """Chromium lays the page out; every text of every chart (legends, axis labels, percentile
    names) has its bounding box inside its svg's viewBox."""
    run_dir = big_run(tmp_path / "run", 4)
    out = tmp_path / "r.html"
    assert lp(tmp_path, "report", run_dir, "--html", out).returncode == 0
    page = out.read_text()
    assert "Resident memory" in page and "Disk I/O" in page  # charts with legends
    measured = tmp_path / "m.html"
    measured.write_text(page.replace("</body>", MEASURE + "</body>"))
    dom = chromium(
        "--enable-logging=stderr", "--v=0", "--dump-dom", measured.as_uri(), cwd=tmp_path
    )
    assert uncaught_errors(dom.stderr) == []
    m = re.search(r'<pre id="lp-bbox">(.*?)</pre>', dom.stdout)
    assert m, dom.stdout[-2000:]
    got = json.loads(m.group(1).replace("&quot;", '"').replace("&amp;", "&"))
    assert got["charts"] >= 5 and got["bad"] == []


def test_time_axes_start_at_zero(tmp_path):
    """The timelines' time axis starts at a plain 0 (not "0ns"), at the run's start."""
    run_dir = big_run(tmp_path / "run", 2)
    page = render_html(merge_run(run_dir, timeline_bins=DEFAULT_BINS))
    charts = re.findall(r'<svg [^>]*aria-label="(?:RSS|I/O)".*?</svg>', page)
    assert len(charts) == 2
    for svg in charts:
        first = re.search(r'text-anchor="start" fill="#555">([^<]*)</text>', svg)
        assert first and first.group(1) == "0"
    assert ">0ns<" not in page


# -- the timeline, binned during the merge --


def test_the_merge_bins_the_timeline_as_a_second_read_would(tmp_path):
    run_dir = big_run(tmp_path / "run", 20)
    once = merge_run(run_dir, timeline_bins=DEFAULT_BINS, jobs=1)
    assert once.timeline_binned and once.timeline is not None
    again = build_timeline(merge_run(run_dir, jobs=1))
    assert once.timeline == again
    assert once.timeline.workers == 20 and once.timeline.has_rss and once.timeline.has_io
    # and the page drawn from either is the same
    assert render_html(once) == render_html(merge_run(run_dir, jobs=1))


def test_a_run_merged_without_bins_still_gets_its_timeline(tmp_path):
    run_dir = big_run(tmp_path / "run", 3)
    run = merge_run(run_dir, jobs=1)
    assert not run.timeline_binned and run.timeline is None
    assert "Resident memory" in render_html(run)
