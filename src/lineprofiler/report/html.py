"""The HTML report of one merged run (``lineprofiler report DIR --html FILE``).

One self-contained file: inline CSS, inline SVG charts generated here (``report.html_charts``), a
little inline script for sorting tables, hover tips and collapsing; the report's JSON document
embedded as data. Nothing is fetched when it is viewed (no CDN, fonts or external scripts), so it
reads offline after ``scp`` from a cluster. Built from the same view as the text and JSON reports
(``report.view``); every name from the run is HTML-escaped.
"""

from __future__ import annotations

import statistics

from lineprofiler.report.html_charts import (
    Palette,
    bars,
    esc,
    heatmap,
    histogram,
    sparkline,
    stacked_bar,
    timeline,
)
from lineprofiler.report.html_lines import lines_section
from lineprofiler.report.json import render_json
from lineprofiler.report.model import MergedRun
from lineprofiler.report.text import header_block, legend_block
from lineprofiler.report.timeline import Timeline, build_timeline
from lineprofiler.report.units import (
    NA,
    fmt_axis_duration,
    fmt_bytes,
    fmt_count,
    fmt_duration,
    fmt_plural,
    fmt_rate,
    fmt_ratio,
    fmt_share,
)
from lineprofiler.report.view import (
    ASYNC,
    DEFAULT_TOP,
    RoleView,
    RunView,
    run_view,
    sample_note,
)
from lineprofiler.report.view_summary import RunSummary, run_summary

HEATMAP_PHASES = 6  # dominant phases shown as heatmap columns
HIST_PHASES = 6  # latency histograms per role
HEATMAP_ROWS = 64  # more processes than this: a row per node, then the slowest processes
SLOWEST_ROWS = 16

CSS = """
body{font-family:system-ui,sans-serif;margin:24px;color:#1d1d1f;background:#fafafa;max-width:1000px}
h1{font-size:20px;margin:0 0 8px}h2{font-size:17px;margin:0}h3{font-size:14px;margin:18px 0 6px}
pre.head{background:#fff;border:1px solid #ddd;padding:8px;font-size:12px;white-space:pre-wrap}
.caveats{background:#fff4e5;border:1px solid #f0a040;padding:8px 12px;margin:12px 0}
.caveats li{margin:3px 0}
details.role{background:#fff;border:1px solid #ddd;border-radius:6px;padding:10px 14px;margin:14px 0}
summary{cursor:pointer}
table{border-collapse:collapse;font-size:12px;margin:4px 0}
th,td{padding:3px 8px;border-bottom:1px solid #eee;text-align:right}
th:first-child,td:first-child{text-align:left}
th{cursor:pointer;user-select:none;background:#f2f2f2}
th.sorted-asc::after{content:" \\25B2"}th.sorted-desc::after{content:" \\25BC"}
.hists{display:flex;flex-wrap:wrap;gap:10px 24px}
.hists figure{margin:0}figcaption{font-size:12px;margin-bottom:2px}
.swatch{display:inline-block;width:10px;height:10px;margin-right:4px}
.note{font-size:12px;color:#555}
#lp-tip{position:fixed;pointer-events:none;background:#222;color:#fff;font-size:12px;
padding:3px 6px;border-radius:3px;display:none;z-index:9;max-width:480px}
svg.chart{display:block;max-width:100%;height:auto;margin:4px 0}
section.summary{background:#fff;border:1px solid #ddd;border-radius:6px;padding:10px 14px;margin:14px 0}
.role-sum h3{margin:12px 0 4px}.legend{margin:2px 0 8px}
"""

JS = """
(function(){
  var tip=document.getElementById('lp-tip');
  document.addEventListener('mousemove',function(e){
    var t=e.target.closest?e.target.closest('[data-tip]'):null;
    if(!t){tip.style.display='none';return;}
    tip.textContent=t.getAttribute('data-tip');
    tip.style.left=(e.clientX+12)+'px';tip.style.top=(e.clientY+12)+'px';
    tip.style.display='block';
  });
  function key(td){var v=td.getAttribute('data-v');return v===null?td.textContent:parseFloat(v);}
  document.querySelectorAll('table.sortable th').forEach(function(th,i){
    th.addEventListener('click',function(){
      var table=th.closest('table'),body=table.tBodies[0];
      var asc=!th.classList.contains('sorted-asc');
      table.querySelectorAll('th').forEach(function(h){h.classList.remove('sorted-asc','sorted-desc');});
      th.classList.add(asc?'sorted-asc':'sorted-desc');
      var rows=Array.prototype.slice.call(body.rows);
      rows.sort(function(a,b){
        var x=key(a.cells[i]),y=key(b.cells[i]);
        if(typeof x==='number'&&typeof y==='number'){
          if(isNaN(x))return 1;if(isNaN(y))return -1;return asc?x-y:y-x;}
        return asc?String(x).localeCompare(String(y)):String(y).localeCompare(String(x));
      });
      rows.forEach(function(r){body.appendChild(r);});
    });
  });
})();
"""

DEFS = (
    '<svg width="0" height="0" style="position:absolute" aria-hidden="true"><defs>'
    '<pattern id="lp-hatch" width="5" height="5" patternUnits="userSpaceOnUse" '
    'patternTransform="rotate(45)"><rect width="5" height="5" fill="rgba(0,0,0,0.22)"/>'
    '<line x1="0" y1="0" x2="0" y2="5" stroke="rgba(255,255,255,0.55)" stroke-width="1.5"/>'
    "</pattern></defs></svg>"
)


def _num(v: float | None) -> str:
    return "NaN" if v is None else repr(float(v))


def _td(text: str, value: float | None = None) -> str:
    attr = "" if value is None and text not in (NA, ASYNC) else f' data-v="{_num(value)}"'
    return f"<td{attr}>{esc(text)}</td>"


def _table(head: list[str], rows: list[str], cls: str = "sortable") -> str:
    ths = "".join(f"<th>{esc(h)}</th>" for h in head)
    return (
        f'<table class="{cls}"><thead><tr>{ths}</tr></thead><tbody>{"".join(rows)}</tbody></table>'
    )


# -- per role --


def role_section(rv: RoleView, color: Palette) -> str:
    role = rv.role
    imb = NA if role.imbalance is None else f"{role.imbalance:.2f}"
    out = [
        '<details class="role" open>',
        f'<summary><h2 style="display:inline">{esc(role.name)}</h2> '
        f'<span class="note">{role.processes:,} process{"es" if role.processes != 1 else ""}, '
        f"imbalance {esc(imb)}</span></summary>",
    ]
    phases = [r for r in rv.dominant if r.path]
    color.assign([r.label for r in phases])
    if not rv.top_level:
        out.append("<p>(no phases recorded)</p>")
    if phases:
        segs = [
            (
                r.label,
                float(r.stats.self_ns),
                r.wait_fraction,
                f"{r.label}: self {fmt_duration(r.stats.self_ns)} "
                f"({fmt_share(rv.dominant_share(r))} of the dominant phases' self "
                f"time), wait {r.wait_text}",
            )
            for r in phases
        ]
        out.append("<h3>Self time by dominant phase (shaded: wait, off the CPU)</h3>")
        out.append(stacked_bar(segs, f"{role.name}: self time by phase", colors=color))
        out.append(
            bars(
                [
                    (
                        r.label,
                        float(r.stats.self_ns),
                        r.wait_fraction,
                        f"{fmt_duration(r.stats.self_ns)}  wait {r.wait_text}",
                    )
                    for r in phases
                ],
                f"{role.name}: dominant phases",
                colors=color,
            )
        )
    out.append(_phase_table(rv, color))
    if rv.stragglers:
        out.append(_heatmap(rv))
    hists = [r for r in phases if r.stats.calls > 0 and not r.stats.thread_node][:HIST_PHASES]
    if hists:
        out.append("<h3>Latency per entry (dashed: p50, p95, p99)</h3><div class=hists>")
        for r in hists:
            marks = [("p50", r.q(0.5)), ("p95", r.q(0.95)), ("p99", r.q(0.99))]
            cap = (
                f"{r.label} — {fmt_plural(r.stats.calls, 'entry', 'entries')}, p50 {fmt_duration(marks[0][1])}, "
                f"p95 {fmt_duration(marks[1][1])}, p99 {fmt_duration(marks[2][1])}"
            )
            svg = histogram(
                r.stats.hist.buckets, marks, fmt_axis_duration, f"{role.name}: {r.label}"
            )
            out.append(f"<figure><figcaption>{esc(cap)}</figcaption>{svg}</figure>")
        out.append("</div>")
    out.append(_counters(rv))
    shown = [r for r in rv.sampled if r in rv.dominant or r in rv.top_level]
    if shown:
        notes = "".join(f"<li>{esc(r.name)}: {esc(sample_note(r.stats))}</li>" for r in shown)
        out.append(
            "<p class=note>~ = estimated from a sample, not measured. Totals are scaled by the "
            f"rate:</p><ul class=note>{notes}</ul>"
        )
    out.append("</details>")
    return "".join(out)


def _phase_table(rv: RoleView, color: Palette) -> str:
    rows = []
    shown = list({r.path: r for r in rv.top_level + [r for r in rv.dominant if r.path]}.values())
    for r in shown:
        s = r.stats
        sw = f'<span class="swatch" style="background:{color(r.label)}"></span>'
        rows.append(
            f"<tr><td>{sw}{esc(r.label)}</td>"
            + _td(fmt_duration(r.time_ns), r.time_ns)
            + _td(fmt_share(r.share), r.share)
            + _td(fmt_duration(s.self_ns), s.self_ns)
            + _td(r.wait_text, r.wait_fraction)
            + _td(fmt_count(s.calls), s.calls)
            + _td(fmt_duration(r.q(0.5)), r.q(0.5))
            + _td(fmt_duration(r.q(0.95)), r.q(0.95))
            + _td(fmt_duration(r.q(0.99)), r.q(0.99))
            + (_td(fmt_count(s.raised), s.raised) if rv.raised_shown else "")
            + "</tr>"
        )
    head = ["phase", "time", "share", "self", "wait%", "entries", "p50", "p95", "p99"]
    if rv.raised_shown:
        head.append("raised")
    return "<h3>Phases (click a column to sort)</h3>" + _table(head, rows)


def _heatmap(rv: RoleView) -> str:
    role = rv.role
    cols = [r for r in rv.dominant if r.path and not r.stats.thread_node][:HEATMAP_PHASES]
    names = [r.label for r in cols]
    groups = role.process_groups()  # a row per process, however many files it wrote
    firsts = [role.workers[g[0]] for g in groups]
    labels = [w.label for w in firsts]
    values = [[float(role.process_time_ns(g, r.path)) for r in cols] for g in groups]
    medians = [statistics.median(v[j] for v in values) for j in range(len(cols))]
    out = [
        "<h3>Stragglers: each process's time per phase over the phase's median "
        "(red slower, blue faster)</h3>"
    ]
    if len(labels) > HEATMAP_ROWS:
        # too many processes for one row each: the nodes (mean of their processes), then the
        # slowest processes (by their worst ratio to the median)
        by_host: dict[str, list[int]] = {}
        for i, w in enumerate(firsts):
            by_host.setdefault(w.host, []).append(i)
        hosts = sorted(by_host)[:HEATMAP_ROWS]
        host_vals = [
            [statistics.fmean(values[i][j] for i in by_host[h]) for j in range(len(cols))]
            for h in hosts
        ]
        host_labels = [f"node {h} ({len(by_host[h])})" for h in hosts]
        out.append(f"<p class=note>{len(by_host):,} nodes (mean of each node's processes):</p>")
        out.append(_heat(host_labels, names, host_vals, medians, role.name + ": node x phase"))

        def worst(i: int) -> float:
            return max(
                (values[i][j] / medians[j] for j in range(len(cols)) if medians[j] > 0),
                default=0.0,
            )

        slow = sorted(range(len(labels)), key=lambda i: (-worst(i), i))[:SLOWEST_ROWS]
        out.append(f"<p class=note>the {len(slow)} slowest of {len(labels):,} processes:</p>")
        out.append(
            _heat(
                [labels[i] for i in slow],
                names,
                [values[i] for i in slow],
                medians,
                role.name + ": slowest process x phase",
            )
        )
    else:
        out.append(_heat(labels, names, values, medians, role.name + ": process x phase"))
    rows = []
    for s in rv.stragglers:
        name = "/".join(s.path)
        rows.append(
            f"<tr><td>{esc(name)}</td><td>{esc(s.slowest.worker.label)}</td>"
            + _td(fmt_duration(s.slowest.time_ns), s.slowest.time_ns)
            + _td(fmt_duration(s.median_ns), s.median_ns)
            + _td(fmt_ratio(s.ratio), s.ratio)
            + "</tr>"
        )
    out.append(_table(["phase", "slowest process", "time", "median", "ratio"], rows))
    return "".join(out)


def _heat(
    labels: list[str], names: list[str], values: list[list[float]], medians: list[float], title: str
) -> str:
    tips = [
        [
            f"{labels[i]} · {names[j]}: {fmt_duration(values[i][j])} "
            f"({fmt_ratio(values[i][j] / medians[j] if medians[j] > 0 else None)} the median)"
            for j in range(len(names))
        ]
        for i in range(len(labels))
    ]
    return heatmap(labels, names, values, tips, title, medians=medians)


def _counters(rv: RoleView) -> str:
    rows = []
    for r in rv.dominant:
        for c in r.counters:
            each = NA if c.time_per_each_ns is None else fmt_duration(c.time_per_each_ns) + "/ea"
            rows.append(
                f"<tr><td>{esc(r.label)}</td><td>{esc(c.name)}</td>"
                + _td(fmt_count(c.count), c.count)
                + _td(fmt_rate(c.rate_per_s), c.rate_per_s)
                + _td(each, c.time_per_each_ns)
                + "</tr>"
            )
    if not rows:
        return ""
    return "<h3>Counters and rates (per second of the phase's time)</h3>" + _table(
        ["phase", "counter", "count", "rate", "time each"], rows
    )


# -- the run --


def timelines_section(view: RunView, tl: Timeline | None, color: Palette) -> str:
    if tl is None:
        return ""
    bin_s = tl.bin_ns / 1e9

    def axis(b: int) -> str:
        return fmt_axis_duration(b * tl.bin_ns)

    band = [None if p is None else "/".join(p) for p in tl.phase]
    color.assign([b for i, b in enumerate(band) if b is not None and (i == 0 or band[i - 1] != b)])
    out = [
        '<details class="role" open><summary><h2 style="display:inline">Resources over time</h2> '
        f'<span class="note">{tl.workers:,} process(es) sampled; band: the phase open for the '
        "most process-time in each interval</span></summary>"
    ]
    if tl.has_rss:
        out.append("<h3>Resident memory (sum over processes)</h3>")
        out.append(
            timeline(
                [("RSS", tl.rss, "#2c6fbb")],
                band,
                lambda v: fmt_bytes(int(v)),
                axis,
                "RSS",
                colors=color,
            )
        )
    if tl.has_io:
        out.append("<h3>Disk I/O (bytes per second)</h3>")
        out.append(
            timeline(
                [
                    ("read", [b / bin_s for b in tl.read], "#27ae60"),
                    ("write", [b / bin_s for b in tl.write], "#c0392b"),
                ],
                band,
                lambda v: fmt_bytes(int(v)) + "/s",
                axis,
                "I/O",
                colors=color,
            )
        )
    for key in sorted(tl.gpu_busy):
        host, k = key
        series = [(f"GPU {k} busy", tl.gpu_busy[key], "#8e44ad")]
        if key in tl.gpu_mine:
            series.append((f"GPU {k} this run", tl.gpu_mine[key], "#e67e22"))
        dev = view.run.samples.gpus.get(key) if view.run.samples else None
        means = ""
        if dev is not None:
            means = f": busy {fmt_share(dev.busy)}, this run {fmt_share(dev.this_run)} over the run"
        out.append(f"<h3>GPU {k} on {esc(host)} (%){esc(means)}</h3>")
        out.append(timeline(series, band, lambda v: f"{v:.0f}%", axis, f"GPU {k}", colors=color))
    legend = sorted({b for b in band if b is not None})
    if legend:
        out.append(
            "<p class=note>"
            + " ".join(
                f'<span class="swatch" style="background:{color(p)}"></span>{esc(p)}'
                for p in legend
            )
            + "</p>"
        )
    res = view.run.samples
    if res is not None and (res.read_per_s or res.write_per_s):
        rows = [
            "<tr><td>disk read</td>"
            + _td(fmt_bytes(res.io.read_bytes), res.io.read_bytes)
            + f"<td>{sparkline([float(b) for b in tl.read])}</td></tr>",
            "<tr><td>disk write</td>"
            + _td(fmt_bytes(res.io.write_bytes), res.io.write_bytes)
            + f"<td>{sparkline([float(b) for b in tl.write])}</td></tr>",
        ]
        out.append(_table(["I/O", "total", "over time"], rows, cls=""))
    out.append("</details>")
    return "".join(out)


def summary_section(summary: RunSummary, color: Palette) -> str:
    """Where the time went: a bar per role (its top-level phases' shares) with its busiest node,
    then the run's top phases by self time; every figure from the row model."""
    out = [
        '<section class="summary"><h2>Where the time went</h2>',
        '<p class="note">Per role: its top-level phases\' share of its time (summed over its '
        "processes; shaded: wait, off the CPU), and the node whose processes were busiest.</p>",
    ]
    for rs in summary.roles:
        rv = rs.view
        rows = [r for r in rv.top_level if r.time_ns > 0]
        color.assign([r.label for r in rows])
        node = ""
        if rs.busiest_node is not None:
            n = rs.busiest_node
            node = (
                f"busiest node {esc(n.host)}: {esc(fmt_duration(n.busy_ns))} busy over "
                f"{esc(fmt_plural(n.processes, 'process', 'processes'))} "
                f"({esc(fmt_share(n.share))} of the role's busy time"
                + (f", {rs.nodes:,} nodes" if rs.nodes > 1 else ", its only node")
                + ")"
            )
        out.append(
            f'<div class="role-sum"><h3>{esc(rv.role.name)} '
            f'<span class="note">{esc(fmt_duration(rv.phase_time_ns))} in phases over '
            f"{esc(fmt_plural(rv.role.processes, 'process', 'processes'))}"
            f"{'; ' + node if node else ''}</span></h3>"
        )
        if rows:
            segs = [
                (
                    r.label,
                    float(r.time_ns),
                    r.wait_fraction,
                    f"{rv.role.name} · {r.label}: {fmt_duration(r.time_ns)} "
                    f"({fmt_share(r.share)} of the role's phase time), wait {r.wait_text}",
                )
                for r in rows
            ]
            out.append(stacked_bar(segs, f"{rv.role.name}: time by top-level phase", colors=color))
            out.append(
                '<p class="note legend">'
                + " ".join(
                    f'<span class="swatch" style="background:{color(r.label)}"></span>'
                    f"{esc(r.label)} {esc(fmt_share(r.share))}"
                    for r in rows
                )
                + "</p>"
            )
        else:
            out.append("<p class=note>(no phases recorded)</p>")
        out.append("</div>")
    if summary.top:
        rows = [
            f'<tr><td><span class="swatch" style="background:{color(p.row.label)}"></span>'
            f"{esc(p.row.label)}</td><td>{esc(p.role)}</td>"
            + _td(fmt_duration(p.row.stats.self_ns), p.row.stats.self_ns)
            + _td(fmt_share(p.share), p.share)
            + _td(p.row.wait_text, p.row.wait_fraction)
            + "</tr>"
            for p in summary.top
        ]
        out.append(
            f"<h3>Top {len(rows)} phases of the run (self time: in the phase, not in a child)</h3>"
        )
        out.append(_table(["phase", "role", "self", "of all phase time", "wait%"], rows))
    out.append("</section>")
    return "".join(out)


def caveats_section(view: RunView) -> str:
    if not view.run.caveats:
        return '<p class="note">Caveats: none (every worker file was read, and none is stale).</p>'
    items = "".join(f"<li>{esc(c.message)}</li>" for c in view.run.caveats)
    return f'<div class="caveats"><b>CAVEATS</b><ul>{items}</ul></div>'


def render_html(
    run: MergedRun,
    top: int = DEFAULT_TOP,
    timeline_bins: int | None = None,
    iteration: str | None = None,
) -> str:
    """The HTML report of a merged run, as one self-contained document."""
    view = run_view(run, top, iteration)
    tl = None
    if run.with_samples and timeline_bins != 0:
        # binned by the merge as it read the sidecars (report --html), else read here
        tl = run.timeline if run.timeline_binned else build_timeline(run)
    data = (
        render_json(run, top, iteration, indent=None, view=view)
        .replace("<", "\\u003c")
        .replace(">", "\\u003e")
    )
    data = data.replace("&", "\\u0026")
    title = f"lineprofiler report: {run.run_id or run.run_dir}"
    parts = [
        "<!DOCTYPE html><html lang=en><head><meta charset=utf-8>",
        f"<title>{esc(title)}</title><style>{CSS}</style></head><body>",
        DEFS,
        f"<h1>{esc(title)}</h1>",
        caveats_section(view),
        f'<pre class="head">{esc(chr(10).join(header_block(view)))}</pre>',
    ]
    color = Palette()
    parts.append(summary_section(run_summary(view), color))
    parts += [role_section(rv, color) for rv in view.roles]
    parts.append(lines_section(view))  # the traced phases' lines (report.html_lines)
    parts.append(timelines_section(view, tl, color))
    parts.append(f'<p class="note">{esc(" ".join(legend_block(view)))}</p>')
    parts.append(
        '<div id="lp-tip"></div>'
        f'<script type="application/json" id="lp-data">{data}</script>'
        f"<script>{JS}</script></body></html>\n"
    )
    return "".join(parts)
