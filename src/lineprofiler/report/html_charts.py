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

from lineprofiler.runfile.stats import _BUCKET_VALUE, HIST_BUCKETS, bucket_of

FONT = 'font-family="system-ui, sans-serif" font-size="11"'


def esc(s: object) -> str:
    """Text and attribute-safe HTML escaping (``<script>`` becomes text)."""
    return html.escape(str(s), quote=True)


# Phase colours: twelve hues far apart (each pair at least 22 CIE76 units apart, in lightness or
# hue; tests/report/test_html_summary.py measures it), so phases side by side never look alike.
PALETTE = (
    "#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#b07aa1", "#edc948",
    "#76b7b2", "#9c755f", "#ff9da7", "#1b9e77", "#a0cbe8", "#6b6ecf",
)  # fmt: skip


def color(name: str) -> str:
    """A stable colour per name (from the palette, by a hash of the name), for a chart drawn
    without a :class:`Palette`."""
    return PALETTE[zlib.crc32(name.encode("utf-8", "surrogatepass")) % len(PALETTE)]


class Palette:
    """The colours of one report: each name keeps the colour it was first given, in every chart.

    ``assign(names)`` colours a sequence drawn side by side (a stacked bar's segments, a table's
    rows): a name not yet coloured gets the least-used palette colour that differs from its
    neighbours' in that sequence, so adjacent phases differ whenever the palette allows it.
    """

    def __init__(self, colors: Sequence[str] = PALETTE) -> None:
        self.colors = tuple(colors)
        self.of: dict[str, str] = {}
        self.used = [0] * len(self.colors)

    def assign(self, names: Sequence[str]) -> None:
        for i, name in enumerate(names):
            if name in self.of:
                continue
            near = {self.of.get(n) for n in names[max(0, i - 1) : i + 2] if n != name}
            ok = [k for k, c in enumerate(self.colors) if c not in near] or list(
                range(len(self.colors))
            )
            k = min(ok, key=lambda k: (self.used[k], k))
            self.used[k] += 1
            self.of[name] = self.colors[k]

    def __call__(self, name: str) -> str:
        if name not in self.of:
            self.assign([name])
        return self.of[name]


def _tip(text: str) -> str:
    return f' data-tip="{esc(text)}"><title>{esc(text)}</title'


def _svg(width: int, height: int, body: list[str], label: str) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}" role="img" aria-label="{esc(label)}" '
        f"{FONT}>" + "".join(body) + "</svg>"
    )


def stacked_bar(
    segments: Sequence[tuple[str, float, float | None, str]],
    label: str,
    width: int = 900,
    colors: Callable[[str], str] = color,
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
            f'fill="{colors(name)}" stroke="#fff" stroke-width="0.5"/>'
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


def bars(
    rows: Sequence[tuple[str, float, float | None, str]],
    label: str,
    width: int = 900,
    colors: Callable[[str], str] = color,
) -> str:
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
            f'fill="{colors(name)}"/>'
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
    h, pad_b, pad_t = 152, 18, 36
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
        tip = f"~{fmt(v)}: {c:,} {'entry' if c == 1 else 'entries'}"
        body.append(
            f'<rect x="{(b - lo) * bw:.1f}" y="{pad_t + plot_h - bh:.1f}" width="{max(1.0, bw - 0.5):.1f}" '
            f'height="{bh:.1f}" fill="#5b8bd0"{_tip(tip)}></rect>'
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
        x = marker_x(v, lo, hi, bw)
        end = x > width * 0.8
        body.append(
            f'<line class="mark" x1="{x:.1f}" x2="{x:.1f}" y1="{pad_t - 2}" y2="{pad_t + plot_h}" '
            f'stroke="#c0392b" stroke-dasharray="3,2"/>'
            f'<text x="{x - 2 if end else x + 2:.1f}" y="{11 + 10 * i}" fill="#c0392b" '
            f'text-anchor="{"end" if end else "start"}">{esc(name)}</text>'
        )
    return _svg(width, h, body, label)


def _bucket_floor(b: int) -> int:
    """The smallest whole ns counted in bucket ``b`` (or a later one)."""
    lo, hi = 0, 1 << 63
    while lo < hi:
        mid = (lo + hi) // 2
        if bucket_of(mid) >= b:
            hi = mid
        else:
            lo = mid + 1
    return lo


def marker_x(v: float, lo: int, hi: int, bw: float) -> float:
    """Where a value ``v`` (ns) sits on a histogram whose bucket ``b`` is drawn over
    ``[(b - lo) * bw, (b - lo + 1) * bw)``: inside the bar of the bucket an entry of ``v`` is
    counted in, at its place within the bucket (the buckets are geometric: log scale), so a
    quantile of one entry marks that entry's own bar."""
    b = bucket_of(int(v))
    if b < lo:
        return 0.0
    if b > hi:
        return (hi - lo + 1) * bw
    a, z = _bucket_floor(b), _bucket_floor(b + 1)
    frac = 0.5
    if z > a + 1 and v > 0:
        frac = (math.log(max(v, a)) - math.log(max(a, 1))) / (math.log(z) - math.log(max(a, 1)))
    return (b - lo + min(max(frac, 0.0), 1.0)) * bw


def timeline(
    series: Sequence[tuple[str, Sequence[float | None], str]],
    band: Sequence[str | None],
    fmt: Callable[[float], str],
    axis: Callable[[int], str],
    label: str,
    width: int = 900,
    colors: Callable[[str], str] = color,
) -> str:
    """Line charts over time bins, with a band under them coloured by the phase open in each
    bin (``band``: the phase's name or None). ``axis(bin)`` labels the time axis."""
    n = max([len(v) for _, v, _ in series] + [len(band), 1])
    # the legend's row on top (y 0-14), then the plot (its top value at y 22, 0 at y h)
    h, band_h, left, plot_top = 134, 12, 64, 22
    plot_w = width - left - 4
    bw = plot_w / n
    top = max([x for _, vals, _ in series for x in vals if x is not None] + [1e-9])
    body = [
        f'<text x="{left - 4}" y="{plot_top + 4}" text-anchor="end" fill="#555">'
        f"{esc(fmt(top))}</text>",
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
            pts.append(f"{left + (i + 0.5) * bw:.1f},{h - v / top * (h - plot_top):.1f}")
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
                f'height="{band_h}" fill="{colors(band[i])}"{_tip(tip)}></rect>'
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
            f'<g class="legend"><rect x="{legend_x}" y="5" width="10" height="3" fill="{col}"/>'
            f'<text x="{legend_x + 14}" y="11" font-size="10">{esc(name)}</text></g>'
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
