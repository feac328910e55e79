"""The row model (report/view.py) is the one place derived figures are computed: the view modules
never divide a phase's numbers themselves, nor re-decide the async rule; and the same recorded
phases show the same wait% in text, JSON, HTML, ``top`` (whole run and last interval) and
Prometheus, against the wait this test measured around each entry itself."""

from __future__ import annotations

import ast
import asyncio
import json
import re
import time
from pathlib import Path

import pytest

from lineprofiler.accounting import Profiler
from lineprofiler.report.html import render_html
from lineprofiler.report.json import render_json
from lineprofiler.report.live import frame, snapshot
from lineprofiler.report.merge import merge_run
from lineprofiler.report.text import render_text

REPORT = Path(__file__).resolve().parents[2] / "src" / "lineprofiler" / "report"
VIEWS = (
    "text",
    "json",
    "html",
    "html_charts",
    "html_lines",
    "live",
    "prometheus",
    "perfetto",
    "compare",
    "gate",
)
# A phase's own numbers: dividing one of them (by anything but a unit constant) is a derived
# figure (share, rate, mean, wait), which only the row model computes.
RAW = {
    "time_ns", "wall_ns", "self_ns", "cpu_ns", "wait_ns", "open_ns", "calls", "count",
    "counters", "async_calls", "async_wall_ns", "top_level_ns", "lifetime_ns",
}  # fmt: skip
# What the wait rule is made of: a view reads them only to print them as they are (a dict value).
WAIT_PARTS = {"cpu_ns", "wait_ns", "async_calls", "async_wall_ns"}


def _mentions(node: ast.AST, names: set[str]) -> bool:
    return any(
        (isinstance(n, ast.Attribute) and n.attr in names)
        or (isinstance(n, ast.Name) and n.id in names)
        for n in ast.walk(node)
    )


def derived_figures_computed_in(source: str) -> list[str]:
    """Where a view module computes a derived figure itself (empty: it reads rows)."""
    tree = ast.parse(source)
    found = []
    dict_values = {id(v) for n in ast.walk(tree) if isinstance(n, ast.Dict) for v in n.values}
    from_stats = {  # names bound to a row's raw stats (s = r.stats)
        t.id
        for n in ast.walk(tree)
        if isinstance(n, ast.Assign) and isinstance(n.value, ast.Attribute)
        and n.value.attr == "stats"
        for t in n.targets
        if isinstance(t, ast.Name)
    }  # fmt: skip
    for n in ast.walk(tree):
        if isinstance(n, ast.BinOp) and isinstance(n.op, (ast.Div, ast.FloorDiv)):
            if not isinstance(n.right, ast.Constant) and _mentions(n, RAW):
                found.append(f"line {n.lineno}: divides {ast.unparse(n)}")
        elif isinstance(n, ast.Attribute) and n.attr in WAIT_PARTS and id(n) not in dict_values:
            found.append(f"line {n.lineno}: reads {ast.unparse(n)} (the wait rule's parts)")
        elif isinstance(n, ast.Attribute) and n.attr in ("wait_fraction", "wait_text"):
            base = n.value
            if (isinstance(base, ast.Attribute) and base.attr == "stats") or (
                isinstance(base, ast.Name) and base.id in from_stats
            ):
                found.append(f"line {n.lineno}: {ast.unparse(n)} is not read from the row")
    return found


def test_no_view_computes_a_derived_figure_itself():
    found = {m: derived_figures_computed_in((REPORT / f"{m}.py").read_text()) for m in VIEWS}
    assert {m: f for m, f in found.items() if f} == {}


@pytest.mark.parametrize(
    "snippet",
    [
        "share = r.stats.time_ns / total",  # a share
        "rate = c.count / seconds",  # a rate
        "mean = s.wall_ns / s.calls",  # a mean
        "w = None if s.cpu_ns is None else 1 - s.cpu_ns / s.wall_ns",  # a wait
        "text = 'async' if s.async_calls else 'n/a'",  # the async rule again
        "s = r.stats\nw = s.wait_fraction",  # past the row
    ],
)
def test_the_check_catches_each_way_of_computing_one(snippet):
    assert derived_figures_computed_in(snippet)
    assert not derived_figures_computed_in("seconds = r.time_ns / 1e9\nw = r.wait_fraction")


# -- the same figures in every view, against the test's own truth --

ENTRY_S = 0.04


def _spin(seconds: float) -> None:
    c0 = time.thread_time_ns()
    while time.thread_time_ns() - c0 < seconds * 1e9:
        pass


def _stage(p: Profiler, truth: dict[str, list[tuple[int, int]]]) -> None:
    """One entry of each phase; ``truth`` gets each sync entry's (wall, thread cpu) as measured
    around it here."""

    def measured(name: str, work) -> None:
        with p.phase(name):
            w0, c0 = time.perf_counter_ns(), time.thread_time_ns()
            work()
            truth.setdefault(name, []).append(
                (time.perf_counter_ns() - w0, time.thread_time_ns() - c0)
            )

    measured("sleep", lambda: time.sleep(ENTRY_S))
    measured("spin", lambda: _spin(ENTRY_S))

    async def asleep() -> None:
        with p.phase("asleep"):  # suspends the task: an async entry
            await asyncio.sleep(ENTRY_S)

    async def aspin() -> None:
        measured("aspin", lambda: _spin(ENTRY_S))  # in a task, but never suspended: sync

    async def both() -> None:
        await asyncio.gather(asleep(), aspin())

    asyncio.run(both())


def _truth_wait(entries: list[tuple[int, int]]) -> float:
    wall = sum(w for w, _ in entries)
    return max(0.0, wall - sum(c for _, c in entries)) / wall


def _text_waits(text: str) -> dict[str, str]:
    block = text.split("DOMINANT PHASES", 1)[1].split("\n\n", 1)[0]
    return {ln.split()[0]: ln.split()[2] for ln in block.splitlines()[1:] if ln.strip()}


def _html_waits(page: str) -> dict[str, str]:
    out = {}
    for name, cells in re.findall(
        r'<tr><td><span class="swatch"[^>]*></span>([^<]*)</td>(.*?)</tr>', page
    ):
        out[name] = re.findall(r"<td[^>]*>([^<]*)</td>", cells)[3]
    return out


def _top_waits(lines: list[str]) -> dict[str, tuple[str, str]]:
    """(last, total) wait% per phase of a ``top`` frame."""
    out = {}
    for ln in lines:
        parts = ln.split()
        if len(parts) == 7 and parts[0] in ("sleep", "spin", "asleep", "aspin"):
            out[parts[0]] = (parts[3], parts[6])
    return out


def _pct(fraction: float | None) -> str:
    return "async" if fraction is None else f"{fraction * 100:.0f}%"


def test_every_view_shows_the_same_wait_as_the_truth(tmp_path):
    run_dir = tmp_path / "run"
    first: dict[str, list[tuple[int, int]]] = {}
    second: dict[str, list[tuple[int, int]]] = {}
    p = Profiler(run_dir=run_dir, role="r", enabled=True, snapshot_interval_s=0.05,
                 sample_interval_s=None)  # fmt: skip
    try:
        _stage(p, first)
        writes = p.flush_stats()["writes"]
        deadline = time.monotonic() + 30
        while p.flush_stats()["writes"] < writes + 2 and time.monotonic() < deadline:
            time.sleep(0.02)  # a periodic write after the first stage: what top reads live
        assert p.flush_stats()["writes"] >= writes + 2
        run1 = merge_run(run_dir, with_samples=False)
        _stage(p, second)
    finally:
        p.close()
    run = merge_run(run_dir, with_samples=False)

    doc = json.loads(render_json(run, top=0))
    phases = {ph["name"]: ph for role in doc["roles"] for ph in role["phases"]}
    both = {k: first[k] + second[k] for k in first}
    for name in ("sleep", "spin", "aspin"):
        got = phases[name]["wait_fraction"]
        assert got == pytest.approx(_truth_wait(both[name]), abs=0.05), name
    assert phases["sleep"]["wait_fraction"] > 0.9  # sleeping: off the CPU
    assert phases["asleep"]["wait_fraction"] is None and phases["asleep"]["async_calls"] == 2
    want = {n: _pct(phases[n]["wait_fraction"]) for n in ("sleep", "spin", "asleep", "aspin")}

    assert {n: _text_waits(render_text(run, top=0))[n] for n in want} == want
    assert {n: _html_waits(render_html(run, top=0))[n] for n in want} == want

    lines = frame(run, snapshot(run1), 1.0, time.time(), 1.0, top=10, width=200)
    top = _top_waits(lines)
    assert {n: top[n][1] for n in want} == want
    # the last interval: the second stage's entries only, by the same rule
    for name in ("sleep", "spin", "aspin"):
        shown = float(top[name][0].rstrip("%")) / 100
        assert shown == pytest.approx(_truth_wait(second[name]), abs=0.055), name
    assert top["asleep"][0] == "async"

    pytest.importorskip("prometheus_client")
    from lineprofiler.report.prometheus import families

    gauge = next(f for f in families(run) if f.name == "lineprofiler_phase_wait_ratio")
    prom = {s.labels["phase"]: s.value for s in gauge.samples}
    assert "asleep" not in prom
    for name in ("sleep", "spin", "aspin"):
        assert prom[name] == pytest.approx(phases[name]["wait_fraction"], abs=1e-3), name
