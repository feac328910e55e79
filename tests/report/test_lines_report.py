"""The lines of a traced phase in the report (issue 32, the reading half), from real runs: spawn
processes recording phases with a real Profiler and tracing ``train_step`` with a real
LineProfiler (tests/report/lines_runs.py writes their sidecars as the contract says).

Ground truth is what the children did: how many entries they traced and the loop's iterations
(so the exact hits), the wall times they measured around traced and untraced entries, the
sidecars they wrote (the per-process calibrated times the report must sum)."""

from __future__ import annotations

import json
import os
import re

import pytest

from lineprofiler.report.html import render_html
from lineprofiler.report.json import to_document
from lineprofiler.report.merge import merge_run
from lineprofiler.report.text import render_text
from lineprofiler.report.units import fmt_duration, fmt_share
from tests.helpers import quiet_profiler, run_python
from tests.report.lines_runs import minimal_doc, sidecar_of, traced_run

CLI = "from lineprofiler.cli import main; raise SystemExit(main())"
PROCS, ENTRIES, TRACED, ITERS = 3, 6, 2, 200


@pytest.fixture(scope="module")
def run3(tmp_path_factory):
    return traced_run(
        tmp_path_factory.mktemp("lines3"), procs=PROCS, entries=ENTRIES, traced=TRACED, iters=ITERS
    )


def _phase(doc: dict, name: str = "iteration/train_step") -> dict:
    (role,) = doc["roles"]
    return next(p for p in role["phases"] if p["name"] == name)


def _sidecars(truth: dict) -> list[dict]:
    return [json.loads(sidecar_of(w["worker"]).read_text()) for w in truth["workers"]]


def test_hits_are_exact_sums_and_times_the_sum_of_each_process(run3):
    run, truth = run3
    doc = to_document(merge_run(run))
    phase = _phase(doc)
    by_line = {(ln["file"], ln["line"]): ln for ln in phase["lines"]}
    loop = by_line[(truth["file"], truth["lines"]["LOOP"])]
    assert loop["hits"] == PROCS * TRACED * ITERS
    assert loop["processes"] == PROCS
    first = by_line[(truth["file"], truth["lines"]["ONLY_FIRST"])]
    assert first["hits"] == TRACED and first["processes"] == 1
    # a line outside the traced phase is absent, from this phase and every other
    assert (truth["file"], truth["lines"]["OUTSIDE"]) not in by_line
    assert all("lines" not in p for p in doc["roles"][0]["phases"] if p is not phase)
    # times: each process's calibrated time_ns (as its sidecar says), summed
    want: dict[tuple[str, int], list[int]] = {}
    for sc in _sidecars(truth):
        for f in sc["phases"][0]["functions"]:
            for ln in f["lines"]:
                w = want.setdefault((f["file"], ln["line"]), [0, 0, 0])
                w[0] += ln["hits"]
                w[1] += ln["time_ns"]
                w[2] += ln["self_time_ns"]
    assert {k: [v["hits"], v["time_ns"], v["self_ns"]] for k, v in by_line.items()} == want
    # ranked by self time
    selfs = [ln["self_ns"] for ln in phase["lines"]]
    assert selfs == sorted(selfs, reverse=True)
    traced = phase["lines_traced"]
    assert traced["entries"] == PROCS * ENTRIES and traced["traced_entries"] == PROCS * TRACED
    assert traced["processes"] == PROCS
    tw = sum(sc["phases"][0]["traced_wall_ns"] for sc in _sidecars(truth))
    uw = sum(sc["phases"][0]["untraced_wall_ns"] for sc in _sidecars(truth))
    slow = (tw / (PROCS * TRACED)) / (uw / (PROCS * (ENTRIES - TRACED)))
    assert traced["slowdown"] == pytest.approx(slow, rel=1e-3)
    assert loop["share"] == pytest.approx(loop["self_ns"] / tw, abs=1e-6)
    # the phase's own figures are the recorder's, unchanged: every entry counted
    assert phase["calls"] == PROCS * ENTRIES


def _either_side(fmt, value: float | None, half_step: float) -> set[str]:
    """How a figure the JSON rounded to ``value`` (to within ``half_step``) can be printed."""
    if value is None:
        return {fmt(None)}
    return {fmt(value - half_step), fmt(value), fmt(value + half_step)}


def test_text_json_and_html_show_the_same_figures(run3):
    run, truth = run3
    merged = merge_run(run)
    doc = to_document(merged)
    phase = _phase(doc)
    text = render_text(merged, lines_top=0)  # every line (the ranking of the small ones varies)
    page = render_html(merged)
    block = text.split("  LINES IN iteration/train_step", 1)[1]
    slow = phase["lines_traced"]["slowdown"]
    assert f"traced {PROCS * TRACED:,} of {PROCS * ENTRIES:,} entries in {PROCS} processes" in block
    assert f"{slow:.2f}x" in block
    shown = phase["lines"][:10]
    for ln in shown:
        where = f"{os.path.basename(ln['file'])}:{ln['line']}"
        row = next(r for r in block.splitlines() if r.rstrip().split("  (in")[0].endswith(where))
        for figure in (fmt_duration(ln["self_ns"]), fmt_duration(ln["time_ns"]), f"{ln['hits']:,}"):
            assert figure in row, (figure, row)  # sums of integers: exactly the same figure
        # per hit and share are quotients: the JSON holds them rounded (to 1 ns, to 6 decimals)
        # and the text prints the unrounded figure, which at a display boundary (6.55us) can
        # round the other way: either neighbour of the JSON's value is the same figure
        for figures in (
            _either_side(fmt_duration, ln["per_hit_ns"], 0.5),
            _either_side(fmt_share, ln["share"], 5e-7),
        ):
            assert any(f in row for f in figures), (figures, row)
        assert f"<td>{where}</td>" in page
        assert f'<td data-v="{ln["self_ns"]}">{fmt_duration(ln["self_ns"])}</td>' in page
        assert f'<td data-v="{ln["hits"]}">{ln["hits"]:,}</td>' in page
    # the line seen in only one process says so, everywhere
    only = f"{os.path.basename(truth['file'])}:{truth['lines']['ONLY_FIRST']}"
    assert any(only in r and f"(in 1 of {PROCS})" in r for r in block.splitlines())
    assert f"(in 1 of {PROCS})" in page  # the annotated listing's tip
    # the HTML panel annotates the source: the loop line's text with its hits
    assert "x += i  # LOOP" in page and "LINES IN iteration/train_step" in page
    # the same block sits under the phase in DOMINANT PHASES, before ITERATIONS
    assert text.index("DOMINANT PHASES") < text.index("LINES IN") < text.index("ITERATIONS")


def test_lines_top_limits_the_text_block(run3):
    run, _truth = run3
    merged = merge_run(run)
    n = len(_phase(to_document(merged))["lines"])
    one = render_text(merged, lines_top=1)
    assert f"({n - 1:,} more lines: --lines-top N)" in one
    proc = run_python(CLI, cwd=run.parent, args=["report", str(run), "--lines-top", "0"])
    assert proc.returncode == 0, proc.stderr
    assert "more line" not in proc.stdout
    bad = run_python(
        CLI, cwd=run.parent, args=["report", str(run), "--lines-top", "-1"], check=False
    )
    assert bad.returncode == 2 and "--lines-top" in bad.stderr


def test_show_prints_a_roles_lines_in_lineprofilers_format(run3):
    run, truth = run3
    proc = run_python(
        CLI, cwd=run.parent, args=["show", str(run), "--role", "learner", "--top", "50"]
    )
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert out.startswith("LINES IN iteration/train_step (role learner)")
    assert f"| {PROCS} processes merged |" in out  # LineProfiler's own header
    assert "% Block" in out and "Per Hit" in out and "Location / Line Contents" in out
    loop = f":{truth['lines']['LOOP']} (train_step)"
    row = next(r for r in out.splitlines() if r.rstrip().endswith(loop))
    assert f" {PROCS * TRACED * ITERS} " in row
    assert "x += i  # LOOP" in out
    per_fn = run_python(
        CLI,
        cwd=run.parent,
        args=["show", str(run), "--role", "learner", "--phase", "train_step", "--per-function"],
    )
    assert per_fn.returncode == 0 and "Line #" in per_fn.stdout, per_fn.stdout
    for args, said in (
        (["--role", "nobody"], "no role 'nobody'"),
        (["--role", "learner", "--phase", "nope"], "no traced phase 'nope'"),
        ([], "name a role with --role"),
    ):
        bad = run_python(CLI, cwd=run.parent, args=["show", str(run), *args], check=False)
        assert bad.returncode == 2 and said in bad.stderr, bad.stderr
        assert "Traceback" not in bad.stderr


HOSTILE = (
    "x = '\x1b[2J\x1b]0;owned\x07' \u2028 \u202egnp.exe </td><script>alert(1)</script> \"q\" 'a'"
)


def test_source_text_is_escaped_in_text_html_and_show(tmp_path):
    run = tmp_path / "run"
    p = quiet_profiler(run, role="learner")
    with p.phase("iteration"), p.phase("train_step"):
        pass
    worker = p.worker_path
    p.close()
    doc = minimal_doc(os.getpid())
    fn = doc["phases"][0]["functions"][0]
    fn["lines"][0]["source"] = HOSTILE
    fn["body"][1] = HOSTILE
    fn["file"] = "/p/<b>evil</b>\u2028.py"
    sidecar_of(worker).write_text(json.dumps(doc))
    merged = merge_run(run)
    text = render_text(merged)
    assert "LINES IN iteration/train_step" in text
    for raw in ("\x1b", "\x07", "\u2028", "\u202e"):
        assert raw not in text
    assert "\\x1b[2J" in text and "\\u2028" in text and "\\u202e" in text
    page = render_html(merged)
    assert "<script>alert(1)</script>" not in page and "<b>evil</b>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "&quot;q&quot;" in page and "&lt;b&gt;evil&lt;/b&gt;" in page
    for raw in ("\x1b", "\u2028", "\u202e"):
        assert raw not in page
    # JSON keeps the text as it is (data, not display)
    assert _phase(to_document(merged))["lines"][0]["source"] == HOSTILE
    proc = run_python(CLI, cwd=tmp_path, args=["show", str(run), "--role", "learner"])
    assert proc.returncode == 0, proc.stderr
    for raw in ("\x1b", "\u2028", "\u202e"):
        assert raw not in proc.stdout
    assert "\\x1b[2J" in proc.stdout


def test_a_run_without_sidecars_reports_as_before(tmp_path):
    run = tmp_path / "run"
    p = quiet_profiler(run, role="learner")
    with p.phase("train_step"):
        pass
    p.close()
    merged = merge_run(run)
    assert "LINES IN" not in render_text(merged)
    assert all("lines" not in ph for ph in to_document(merged)["roles"][0]["phases"])
    assert "Lines of traced phases" not in render_html(merged)
    assert not re.search(r"lines_unreadable", json.dumps(to_document(merged)))
