"""Names from worker files, escaped in every context they are printed in, not one each: the
terminal report and compare table with Unicode line and paragraph separators, NEL, form feed
and other "spaces" that break a line on a terminal; and the HTML report, where a name lands in
element text and in quoted attributes (``data-tip``, ``aria-label``, ``<title>``). The names
are the test's; a parsed HTML document must hold them back intact, and only as data."""

from __future__ import annotations

from html.parser import HTMLParser
from pathlib import Path

from lineprofiler.report.compare import compare_runs, render_compare_text
from lineprofiler.report.html import render_html
from lineprofiler.report.merge import merge_run
from lineprofiler.report.text import render_text
from tests.report.synth import MS, Ph, worker_doc, write_worker

# Characters that end or move a terminal line although str.isprintable() says no, and the
# visible escapes the report prints for them.
BREAKERS = {
    "\u2028": "\\u2028",  # LINE SEPARATOR (category Zl)
    "\u2029": "\\u2029",  # PARAGRAPH SEPARATOR (Zp)
    "\x85": "\\x85",  # NEL (Cc, and str.isspace())
    "\x0c": "\\x0c",  # form feed
    "\x0b": "\\x0b",  # vertical tab
    "\x1e": "\\x1e",  # record separator (str.splitlines() breaks on it)
}


def _run(run_dir: Path, names: list[str], scale: int = 1) -> Path:
    phases = [Ph((n,), durations=[(k + 1) * scale * MS] * 5) for k, n in enumerate(names)]
    write_worker(run_dir, worker_doc(role="trainer", pid=7, threads=phases))
    return run_dir


def _one_line_each(text: str) -> None:
    """Every line the report prints is one line on a terminal: no character breaks it."""
    assert text.splitlines() == text.split("\n")[:-1]
    for ch in BREAKERS:
        assert ch not in text, repr(ch)


def test_line_breaking_characters_in_the_terminal_report_and_compare(tmp_path):
    names = [f"load{ch}step" for ch in BREAKERS] + ["wide\u00a0space"]
    a = _run(tmp_path / "a", names)
    b = _run(tmp_path / "b", names, scale=3)
    report = render_text(merge_run(a))
    compare = render_compare_text(compare_runs(merge_run(a), merge_run(b)))
    for text in (report, compare):
        _one_line_each(text)
        for shown in BREAKERS.values():
            assert f"load{shown}step" in text, shown
        assert "wide\u00a0space" in text  # a space of another width stays as it is


class _Collect(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.attrs: list[tuple[str, str, str | None]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.attrs += [(tag, k, v) for k, v in attrs]

    def handle_data(self, data):
        self.text.append(data)


def test_quotes_in_names_stay_inside_html_attributes(tmp_path):
    evil = ['x" onmouseover="alert(1)', "y' onfocus='alert(2)", "<b>&amp;</b>"]
    run = merge_run(_run(tmp_path / "run", ["step", *evil]))
    doc = render_html(run)
    parsed = _Collect()
    parsed.feed(doc)
    names = {k for _, k, _ in parsed.attrs}
    assert not {"onmouseover", "onfocus"} & names, sorted(names)
    assert not [t for t, *_ in parsed.attrs if t == "b"]  # no element made from a name
    values = [v or "" for _, _, v in parsed.attrs]
    text = "".join(parsed.text)
    for name in evil:
        # each name comes back whole from an attribute (a tooltip) and from element text
        assert any(name in v for v in values), name
        assert name in text, name
