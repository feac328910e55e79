"""The HTML report's panels of traced phases (issue 32): per role, per traced phase, its top lines
as a sortable table, then the source of the functions that ran in it, annotated line by line with
hits, time and self time and a heat column (self time against the phase's hottest line).

Figures come from the row model (``report.view``: ``RoleView.lines``); source text is hostile
input: every character the page shows goes through ``esc``, and invisible format characters
(bidi overrides, line separators) are shown as escapes.
"""

from __future__ import annotations

import unicodedata

from lineprofiler.report.html_charts import esc
from lineprofiler.report.lines_model import MergedFunction
from lineprofiler.report.units import fmt_duration, fmt_share, path_label
from lineprofiler.report.view import LineRow, PhaseLinesView, RoleView, RunView

FUNCTIONS_SHOWN = 8  # annotated functions per traced phase, the most self time first
BODY_LINES = 400  # source lines listed per function at most

CSS = (
    "table.lp-src{font-family:ui-monospace,monospace;font-size:12px}"
    "table.lp-src td{border-bottom:none;padding:0 6px;white-space:pre}"
    "table.lp-src td.src,table.lp-src th:last-child{text-align:left}td.heat{width:14px;padding:0}"
)


def visible(text: str) -> str:
    """``text`` with characters that are not printable (control, bidi and other format
    characters, line and paragraph separators) shown as ``\\uXXXX``; spaces kept. Not yet
    HTML-escaped."""
    if text.isprintable():
        return text
    out = []
    for ch in text:
        if ch.isprintable() or unicodedata.category(ch) == "Zs":
            out.append(ch)
        elif ch == "\t":
            out.append("    ")
        else:
            out.append(f"\\u{ord(ch):04x}" if ord(ch) < 0x10000 else f"\\U{ord(ch):08x}")
    return "".join(out)


def _heat(fraction: float) -> str:
    alpha = max(0.0, min(1.0, fraction))
    return f' style="background:rgba(214,39,40,{alpha:.3f})"'


def _top_table(lv: PhaseLinesView) -> str:
    head = ["line", "self", "time", "hits", "per hit", "share", "processes", "source"]
    rows = []
    for row in lv.shown:
        ml = row.line
        procs = f"{ml.processes} of {row.of_processes}"
        rows.append(
            "<tr>"
            f"<td>{esc(visible(row.where))}</td>"
            f'<td data-v="{ml.self_ns}">{esc(fmt_duration(ml.self_ns))}</td>'
            f'<td data-v="{ml.time_ns}">{esc(fmt_duration(ml.time_ns))}</td>'
            f'<td data-v="{ml.hits}">{ml.hits:,}</td>'
            f"<td>{esc(fmt_duration(row.per_hit_ns))}</td>"
            f"<td>{esc(fmt_share(row.share))}</td>"
            f"<td>{esc(procs)}</td>"
            f'<td class="src" style="text-align:left"><code>{esc(visible(ml.source.strip()))}'
            "</code></td></tr>"
        )
    ths = "".join(f"<th>{esc(h)}</th>" for h in head)
    return (
        f'<table class="sortable"><thead><tr>{ths}</tr></thead><tbody>{"".join(rows)}'
        "</tbody></table>"
    )


def _function_listing(fn: MergedFunction, by_line: dict[int, LineRow]) -> str:
    mine = sorted(n for n in by_line)
    if fn.body:
        numbers = list(range(fn.first_line, fn.first_line + min(len(fn.body), BODY_LINES)))
        numbers += [n for n in mine if n not in numbers]
    else:
        numbers = mine
    out = [
        f"<h4>{esc(visible(fn.function))} <span class=note>{esc(visible(fn.file))}:"
        f"{fn.first_line}</span></h4>",
        '<table class="lp-src"><thead><tr><th></th><th>line</th><th>hits</th><th>time</th>'
        "<th>self</th><th>source</th></tr></thead><tbody>",
    ]
    for n in sorted(set(numbers)):
        i = n - fn.first_line
        row = by_line.get(n)
        text = fn.body[i] if 0 <= i < len(fn.body) else (row.line.source if row else "")
        if row is None:
            out.append(
                f"<tr><td class=heat></td><td>{n}</td><td></td><td></td><td></td>"
                f'<td class="src">{esc(visible(text))}</td></tr>'
            )
            continue
        ml = row.line
        tip = f"{ml.hits:,} hits, self {fmt_duration(ml.self_ns)}, share {fmt_share(row.share)}"
        if row.seen_in_text:
            tip += " " + row.seen_in_text
        out.append(
            f'<tr data-tip="{esc(tip)}"><td class=heat{_heat(row.heat)}></td><td>{n}</td>'
            f"<td>{ml.hits:,}</td><td>{esc(fmt_duration(ml.time_ns))}</td>"
            f"<td>{esc(fmt_duration(ml.self_ns))}</td>"
            f'<td class="src">{esc(visible(text))}</td></tr>'
        )
    out.append("</tbody></table>")
    return "".join(out)


def phase_panel(rv: RoleView, lv: PhaseLinesView) -> str:
    """One traced phase of one role: the note, the top lines, the annotated functions."""
    name = path_label(lv.path)
    out = [
        f"<h3>{esc(rv.role.name)}: LINES IN {esc(name)}</h3>",
        f"<p class=note>{esc(lv.note())}</p>",
    ]
    if not lv.rows:
        out.append("<p class=note>(no line of the project ran inside its traced entries)</p>")
        return "".join(out)
    out.append(_top_table(lv))
    by_fn: dict[tuple[str, int, str], dict[int, LineRow]] = {}
    self_by_fn: dict[tuple[str, int, str], int] = {}
    for row in lv.rows:
        ml = row.line
        key = (ml.file, ml.first_line, ml.function)
        by_fn.setdefault(key, {})[ml.line] = row
        self_by_fn[key] = self_by_fn.get(key, 0) + ml.self_ns
    ranked = sorted(by_fn, key=lambda k: (-self_by_fn[k], k))
    for key in ranked[:FUNCTIONS_SHOWN]:
        fn = lv.merged.functions.get(key) or MergedFunction(key[0], key[2], key[1], key[1])
        out.append(_function_listing(fn, by_fn[key]))
    if len(ranked) > FUNCTIONS_SHOWN:
        out.append(f"<p class=note>({len(ranked) - FUNCTIONS_SHOWN:,} more functions)</p>")
    return "".join(out)


def lines_section(view: RunView) -> str:
    """Every role's traced phases, one panel each; empty when nothing was traced."""
    panels = [phase_panel(rv, lv) for rv in view.roles for lv in rv.lines.values()]
    if not panels:
        return ""
    return (
        f"<style>{CSS}</style>"
        '<details class="role" open><summary><h2 style="display:inline">Lines of traced '
        "phases</h2> <span class=note>summed over each role's processes that traced them; "
        "heat: self time against the phase's hottest line</span></summary>"
        + "".join(panels)
        + "</details>"
    )
