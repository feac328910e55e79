"""``raised``: how many entries of a phase exited by an exception, against the count this test
raised itself: Python ``with profiler.phase(...)``, ``accounting.phase()`` and ``async with``
scopes, through the worker file, the merge, a host summary and every view (a phase that raised 3
of 10 times shows 3; a phase that never raised shows no column)."""

from __future__ import annotations

import asyncio
import json
import time

from lineprofiler import accounting
from lineprofiler.accounting import Profiler
from lineprofiler.report.compare import compare_runs, render_compare_json, render_compare_text
from lineprofiler.report.html import render_html
from lineprofiler.report.json import render_json
from lineprofiler.report.live import frame
from lineprofiler.report.merge import merge_run
from lineprofiler.report.reduce import reduce_host
from lineprofiler.report.text import render_text


def _record(run_dir, raise_every: int | None) -> dict[str, int]:
    """Ten entries of each phase; with raise_every, entries i % 10 < 3 raise. Returns how many
    exceptions left each phase, counted here."""
    left: dict[str, int] = {"with": 0, "module": 0, "async": 0, "inner": 0}

    def fails(i: int) -> bool:
        return raise_every is not None and i % 10 < 3

    p = Profiler(run_dir=run_dir, role="r", enabled=True, install=True,
                 snapshot_interval_s=None, sample_interval_s=None)  # fmt: skip
    with p:
        for i in range(10):
            try:
                with p.phase("with"):
                    time.sleep(0.0005)
                    if fails(i):
                        raise ValueError(i)
            except ValueError:
                left["with"] += 1
            try:
                with accounting.phase("module"):
                    if fails(i):
                        raise KeyError(i)
            except KeyError:
                left["module"] += 1
        with p.phase("outer"):  # an exception caught inside leaves the outer phase normally
            try:
                with p.phase("inner"):
                    if raise_every is not None:
                        raise RuntimeError
            except RuntimeError:
                left["inner"] += 1

        async def task(i: int) -> None:
            async with p.phase("async"):
                await asyncio.sleep(0)
                if fails(i):
                    raise OSError(i)

        async def main() -> None:
            for i in range(10):
                try:
                    await task(i)
                except OSError:
                    left["async"] += 1

        asyncio.run(main())
        tree = p.merged_tree()
    assert {n: tree[(n,)].raised for n in ("with", "module", "async")} == {
        n: left[n] for n in ("with", "module", "async")
    }
    assert tree[("outer", "inner")].raised == left["inner"]
    assert tree[("outer",)].raised == 0
    assert all(tree[(n,)].calls == 10 for n in ("with", "module", "async"))
    return left


def _json_raised(run) -> dict[str, int]:
    doc = json.loads(render_json(run, top=0))
    return {ph["name"]: ph["raised"] for role in doc["roles"] for ph in role["phases"]}


def test_a_phase_that_raised_3_of_10_times_shows_3_everywhere(tmp_path):
    left = _record(tmp_path / "run", raise_every=10)
    assert left == {"with": 3, "module": 3, "async": 3, "inner": 1}
    run = merge_run(tmp_path / "run")
    assert {n: run.tree[(n,)].raised for n in ("with", "module", "async")} == {
        "with": 3,
        "module": 3,
        "async": 3,
    }
    assert _json_raised(run)["with"] == 3 and _json_raised(run)["outer/inner"] == 1

    # a host summary keeps it
    for host in run.hosts:
        reduce_host(tmp_path / "run", host)
    assert _json_raised(merge_run(tmp_path / "run"))["with"] == 3

    text = render_text(run, top=0)
    block = text.split("DOMINANT PHASES", 1)[1].split("\n\n", 1)[0]
    header, *rows = block.splitlines()
    assert "raised" in header
    col = {ln.split()[0]: ln.split()[-1] for ln in rows if ln.split()}
    assert col["with"] == "3" and col["module"] == "3" and col["async"] == "3"
    assert col["outer"] == "0"

    page = render_html(run, top=0)
    assert "<th>raised</th>" in page

    lines = frame(run, None, 1.0, time.time(), 1.0, top=10, width=200)
    head = next(ln for ln in lines if "wait%" in ln)
    assert head.split()[-1] == "raised"
    top = {ln.split()[0]: ln.split()[-1] for ln in lines if ln.split()[:1] == ["with"]}
    assert top == {"with": "3"}


def test_no_raised_column_without_an_exception_and_compare_shows_the_change(tmp_path):
    _record(tmp_path / "clean", raise_every=None)
    clean = merge_run(tmp_path / "clean")
    assert _json_raised(clean)["with"] == 0
    assert "raised" not in render_text(clean, top=0)
    assert "<th>raised</th>" not in render_html(clean, top=0)
    lines = frame(clean, None, 1.0, time.time(), 1.0, top=10)
    assert "raised" not in next(ln for ln in lines if "wait%" in ln)

    _record(tmp_path / "failing", raise_every=10)
    c = compare_runs(clean, merge_run(tmp_path / "failing"), top=0)
    doc = json.loads(render_compare_json(c))
    rows = {ph["name"]: ph for role in doc["roles"] for ph in role["phases"]}
    assert rows["with"]["a"]["raised"] == 0 and rows["with"]["b"]["raised"] == 3
    text = render_compare_text(c)
    assert any(ln.split()[:1] == ["with"] and ln.split()[-1] == "0->3" for ln in text.splitlines())
