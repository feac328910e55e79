"""SVG charts for the HTML report, generated as strings (no plotting library, nothing fetched).

Every text that comes from a run (role, phase, host, counter names) goes through ``esc``; a chart
element's hover text is a ``<title>`` child (the browser's own tooltip, no script needed) and a
``data-tip`` attribute the page's small script shows beside the pointer.
"""

from __future__ import annotations

import html
import math
import zlib
from collections.abc import Callable, Sequence

from lineprofiler.runfile.stats import _BUCKET_VALUE, HIST_BUCKETS

FONT = 'font-family="system-ui, sans-serif" font-size="11"'


def esc(s: object) -> str:
    """Text and attribute-safe HTML escaping (``<script>`` becomes text)."""
    return html.escape(str(s), quote=True)


def color(name: str) -> str:
    """A stable colour per name, so a phase has the same colour in every chart."""
    h = zlib.crc32(name.encode("utf-8", "surrogatepass")) % 360
    return f"hsl({h},55%,55%)"


def _tip(text: str) -> str:
    return f' data-tip="{esc(text)}"><title>{esc(text)}</title'


def _svg(width: int, height: int, body: list[str], label: str) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}" role="img" aria-label="{esc(label)}" '
        f"{FONT}>" + "".join(body) + "</svg>"
    )


def stacked_bar(
    segments: Sequence[tuple[str, float, float | None, str]], label: str, width: int = 900
) -> str:
    """One horizontal bar split into ``(name, value, wait_fraction, tip)`` segments; the wait
    part of each segment is drawn shaded (darker, hatched)."""
    total = sum(max(0.0, v) for _, v, _, _ in segments)
    h, body = 26, []
    x = 0.0
    for name, v, wait, tip in segments:
        if total <= 0 or v <= 0:
            continue
        w = v / total * width
        body.append(
            f'<g class="seg"{_tip(tip)}><rect x="{x:.1f}" y="0" width="{w:.1f}" height="{h}" '
            f'fill="{color(name)}" stroke="#fff" stroke-width="0.5"/>'
        )
        if wait:
            ww = w * min(1.0, wait)
            body.append(
                f'<rect x="{x + w - ww:.1f}" y="0" width="{ww:.1f}" height="{h}" '
                f'fill="url(#lp-hatch)"/>'
            )
        if w > 60:
            text = name if len(name) * 6.5 < w - 6 else name[: max(1, int((w - 6) / 6.5) - 1)] + "…"
            body.append(f'<text x="{x + 4:.1f}" y="17" fill="#111">{esc(text)}</text>')
        body.append("</g>")
        x += w
    return _svg(width, h, body, label)


def bars(rows: Sequence[tuple[str, float, float | None, str]], label: str, width: int = 900) -> str:
    """Horizontal bars ``(name, value, wait_fraction, text shown right of the bar)``, wait shaded."""
    name_w = min(360, max([80] + [int(len(n) * 6.6) + 12 for n, *_ in rows]))
    bar_w = width - name_w - 170
    top = max([v for _, v, _, _ in rows] + [1e-9])
    rh = 18
    body = []
    for i, (name, v, wait, shown) in enumerate(rows):
        y = i * rh
        w = max(0.5, v / top * bar_w) if v > 0 else 0
        body.append(
            f'<g class="bar"{_tip(f"{name}: {shown}")}>'
            f'<text x="{name_w - 6}" y="{y + 13}" text-anchor="end">{esc(name)}</text>'
            f'<rect x="{name_w}" y="{y + 3}" width="{w:.1f}" height="{rh - 5}" '
            f'fill="{color(name)}"/>'
        )
        if wait and w:
            ww = w * min(1.0, wait)
            body.append(
                f'<rect x="{name_w + w - ww:.1f}" y="{y + 3}" width="{ww:.1f}" '
                f'height="{rh - 5}" fill="url(#lp-hatch)"/>'
            )
        body.append(f'<text x="{name_w + w + 6:.1f}" y="{y + 13}">{esc(shown)}</text></g>')
    return _svg(width, max(rh, len(rows) * rh), body, label)


def heatmap(
    row_labels: Sequence[str],
    col_labels: Sequence[str],
    values: Sequence[Sequence[float]],
    tips: Sequence[Sequence[str]],
    label: str,
    width: int = 900,
    medians: Sequence[float] | None = None,
) -> str:
    """Rows (processes) x columns (phases); each cell's colour is its value over the column's
    median (``medians``, default the rows' own): 1.0 light grey, slower red, faster blue."""
    n = len(row_labels)
    cell_h = max(2, min(16, 640 // max(1, n)))
    lab_w = 170 if cell_h >= 9 else 0
    col_w = (width - lab_w) // max(1, len(col_labels))
    head = 16
    body = []
    if medians is None:
        medians = []
        for j in range(len(col_labels)):
            col = sorted(values[i][j] for i in range(n))
            medians.append(col[len(col) // 2] if col else 0.0)
    for j, c in enumerate(col_labels):
        x = lab_w + j * col_w
        text = c if len(c) * 6.5 < col_w - 4 else c[: max(1, int((col_w - 4) / 6.5) - 1)] + "…"
        body.append(f'<text x="{x + 2}" y="12">{esc(text)}<title>{esc(c)}</title></text>')
    for i, r in enumerate(row_labels):
        y = head + i * cell_h
        if lab_w:
            body.append(
                f'<text x="{lab_w - 6}" y="{y + cell_h - 2}" text-anchor="end" font-size="10">{esc(r)}</text>'
            )
        for j in range(len(col_labels)):
            m = medians[j]
            ratio = values[i][j] / m if m > 0 else (1.0 if values[i][j] == 0 else 2.0)
            body.append(
                f'<rect x="{lab_w + j * col_w}" y="{y}" width="{col_w - 1}" height="{cell_h}" '
                f'fill="{_diverging(ratio)}"{_tip(tips[i][j])}></rect>'
            )
    return _svg(width, head + n * cell_h + 2, body, label)


def _diverging(ratio: float) -> str:
    """Light grey at 1.0; red up to 2x slower, blue down to half."""
    x = max(-1.0, min(1.0, math.log2(ratio) if ratio > 0 else -1.0))
    if abs(x) < 0.02:
        return "#ececec"
    if x >= 0:
        return f"hsl(0,75%,{93 - 40 * x:.0f}%)"
    return f"hsl(215,70%,{93 + 40 * x:.0f}%)"


def histogram(
    buckets: dict[int, int],
    marks: Sequence[tuple[str, float | None]],
    fmt: Callable[[float], str],
    label: str,
    width: int = 430,
) -> str:
    """Counts per latency bucket (log-spaced: 12 per octave) with quantile marks."""
    h, pad_b, pad_t = 150, 18, 34
    used = [b for b, c in buckets.items() if c > 0]
    if not used:
        return _svg(width, 20, ['<text x="0" y="14">no completed entries</text>'], label)
    lo, hi = max(0, min(used) - 2), min(HIST_BUCKETS - 1, max(used) + 2)
    nb = hi - lo + 1
    bw = width / nb
    top = max(buckets.values())
    body = []
    plot_h = h - pad_b - pad_t
    for b in range(lo, hi + 1):
        c = buckets.get(b, 0)
        if not c:
            continue
        bh = max(1.0, c / top * plot_h)
        v = _BUCKET_VALUE[b]
        body.append(
            f'<rect x="{(b - lo) * bw:.1f}" y="{pad_t + plot_h - bh:.1f}" width="{max(1.0, bw - 0.5):.1f}" '
            f'height="{bh:.1f}" fill="#5b8bd0"{_tip(f"~{fmt(v)}: {c:,} entries")}></rect>'
        )
    for k in range(4):  # axis labels
        b = lo + round(k * (nb - 1) / 3)
        anchor = ("start", "middle", "middle", "end")[k]
        body.append(
            f'<text x="{(b - lo + 0.5) * bw:.1f}" y="{h - 4}" text-anchor="{anchor}" '
            f'fill="#555">{esc(fmt(_BUCKET_VALUE[b]))}</text>'
        )
    for i, (name, v) in enumerate(marks):
        if v is None:
            continue
        b = _bucket_of(v)
        x = (min(max(b, lo), hi) - lo + 0.5) * bw
        body.append(
            f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{pad_t - 2}" y2="{pad_t + plot_h}" '
            f'stroke="#c0392b" stroke-dasharray="3,2"/>'
            f'<text x="{x + 2:.1f}" y="{9 + 10 * i}" fill="#c0392b" '
            f'text-anchor="{"end" if x > width * 0.8 else "start"}">{esc(name)}</text>'
        )
    return _svg(width, h, body, label)


def _bucket_of(v: float) -> int:
    lo, hi = 0, HIST_BUCKETS - 1
    while lo < hi:  # the last bucket whose value is <= v
        mid = (lo + hi + 1) // 2
        if _BUCKET_VALUE[mid] <= v:
            lo = mid
        else:
            hi = mid - 1
    return lo


def timeline(
    series: Sequence[tuple[str, Sequence[float | None], str]],
    band: Sequence[str | None],
    fmt: Callable[[float], str],
    axis: Callable[[int], str],
    label: str,
    width: int = 900,
) -> str:
    """Line charts over time bins, with a band under them coloured by the phase open in each
    bin (``band``: the phase's name or None). ``axis(bin)`` labels the time axis."""
    n = max([len(v) for _, v, _ in series] + [len(band), 1])
    h, band_h, left = 120, 12, 64
    plot_w = width - left - 4
    bw = plot_w / n
    top = max([x for _, vals, _ in series for x in vals if x is not None] + [1e-9])
    body = [
        f'<text x="{left - 4}" y="12" text-anchor="end" fill="#555">{esc(fmt(top))}</text>',
        f'<text x="{left - 4}" y="{h}" text-anchor="end" fill="#555">0</text>',
        f'<line x1="{left}" x2="{width}" y1="{h}" y2="{h}" stroke="#bbb"/>',
    ]
    for name, vals, col in series:
        pts, runs = [], []
        for i, v in enumerate(vals):
            if v is None:
                if pts:
                    runs.append(pts)
                pts = []
                continue
            pts.append(f"{left + (i + 0.5) * bw:.1f},{h - v / top * (h - 8):.1f}")
        if pts:
            runs.append(pts)
        for p in runs:
            body.append(
                f'<polyline points="{" ".join(p)}" fill="none" stroke="{col}" '
                f'stroke-width="1.5"><title>{esc(name)}</title></polyline>'
            )
    y = h + 4
    i = 0
    while i < len(band):  # one rect per run of the same phase
        j = i
        while j + 1 < len(band) and band[j + 1] == band[i]:
            j += 1
        if band[i] is not None:
            tip = f"{band[i]} ({axis(i)} - {axis(j + 1)})"
            body.append(
                f'<rect x="{left + i * bw:.1f}" y="{y}" width="{(j - i + 1) * bw:.1f}" '
                f'height="{band_h}" fill="{color(band[i])}"{_tip(tip)}></rect>'
            )
        i = j + 1
    for k in range(5):
        b = round(k * n / 4)
        anchor = ("start", "middle", "middle", "middle", "end")[k]
        body.append(
            f'<text x="{left + b * bw:.1f}" y="{y + band_h + 12}" text-anchor="{anchor}" '
            f'fill="#555">{esc(axis(b))}</text>'
        )
    legend_x = left
    for name, _, col in series:
        body.append(
            f'<rect x="{legend_x}" y="0" width="10" height="3" fill="{col}"/>'
            f'<text x="{legend_x + 14}" y="6" font-size="10">{esc(name)}</text>'
        )
        legend_x += 24 + int(len(name) * 6)
    return _svg(width, y + band_h + 16, body, label)


def sparkline(values: Sequence[float], width: int = 120, height: int = 18) -> str:
    """A tiny inline line chart for a table cell."""
    if not values:
        return ""
    top = max(values) or 1.0
    n = len(values)
    pts = " ".join(
        f"{i * (width - 2) / max(1, n - 1) + 1:.1f},{height - 1 - v / top * (height - 2):.1f}"
        for i, v in enumerate(values)
    )
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="spark" width="{width}" '
        f'height="{height}"><polyline points="{pts}" fill="none" stroke="#2c6fbb"/></svg>'
    )
