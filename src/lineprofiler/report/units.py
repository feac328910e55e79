"""Human-readable numbers for the text report: durations, counts, rates, shares, bytes."""

from __future__ import annotations

import json
import math
import time
import unicodedata

NA = "n/a"
RULE = "─" * 62  # under a block's title

_NAMED_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\\": "\\\\"}


def terminal_safe(text: str) -> str:
    """``text`` with every character that is not printable shown as a visible escape (``\\n``,
    ``\\x1b``, ``\\u202e``) and a backslash doubled, so that what a worker file names can
    neither drive the terminal (escape sequences), nor reorder what is shown (bidi overrides and
    other invisible format characters), nor pass for the report's own lines (line breaks).
    Spaces of any width stay as they are."""
    if text.isprintable() and "\\" not in text:
        return text
    out = []
    for ch in text:
        if ch in _NAMED_ESCAPES:
            out.append(_NAMED_ESCAPES[ch])
        elif ch.isprintable() or unicodedata.category(ch) == "Zs":
            out.append(ch)
        elif ord(ch) < 0x100:
            out.append(f"\\x{ord(ch):02x}")
        elif ord(ch) < 0x10000:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(f"\\U{ord(ch):08x}")
    return "".join(out)


ROOT_LABEL = "(no phase open)"  # the root node: counters and samples with no phase open


def _needs_quotes(name: str) -> bool:
    return not name or name.startswith(("(", '"')) or "/" in name


def path_label(path: tuple[str, ...], synthetic: bool = False) -> str:
    """A phase path as shown: names joined with ``/``. A name that could be mistaken for a
    synthetic node (``(folded)``, ``(no phase open)``), for a nesting (``a/b``) or for a quoted
    name is shown JSON-quoted (``"a/b"``), so every path has one reading; ``synthetic`` leaves the
    last name (the recorder's own node) bare. The root is ``(no phase open)``."""
    if not path:
        return ROOT_LABEL
    shown = [json.dumps(n, ensure_ascii=False) if _needs_quotes(n) else n for n in path]
    if synthetic:
        shown[-1] = path[-1]
    return "/".join(shown)


def fmt_duration(ns: float | None) -> str:
    """``850ns``, ``156.8us``, ``9.4ms``, ``12.3s``, ``3m 05s``, ``27m``, ``2h 31m``; None: n/a."""
    if ns is None or (isinstance(ns, float) and math.isnan(ns)):
        return NA
    ns = max(0.0, float(ns))
    if ns < 999.5:
        return f"{ns:.0f}ns"
    for unit, scale in (("us", 1e3), ("ms", 1e6), ("s", 1e9)):
        value = round(ns / scale, 1)
        if value < 1000.0 and (unit != "s" or value < 60.0):
            return f"{value:.1f}{unit}"
    seconds = round(ns / 1e9)
    if seconds < 600:
        return f"{seconds // 60}m {seconds % 60:02d}s"
    minutes = round(ns / 60e9)
    if minutes < 60:
        return f"{minutes}m"
    return f"{minutes // 60}h {minutes % 60:02d}m"


def fmt_axis_duration(ns: float) -> str:
    """A duration on a chart's axis: ``fmt_duration``, but a plain ``0`` at the origin."""
    return "0" if ns == 0 else fmt_duration(ns)


def fmt_plural(n: int, word: str, plural: str | None = None) -> str:
    """``1 entry``, ``2,048 entries``: the count with the word in its number."""
    return f"{n:,} {word if n == 1 else (plural or word + 's')}"


def fmt_count(n: int | None) -> str:
    return NA if n is None else f"{n:,}"


def fmt_rate(per_s: float | None) -> str:
    return NA if per_s is None else f"{per_s:,.1f}/s"


def fmt_share(fraction: float | None, decimals: int = 1) -> str:
    """A fraction as a percentage: ``82.9%``; None: n/a."""
    if fraction is None or math.isnan(fraction):
        return NA
    return f"{fraction * 100:.{decimals}f}%"


def fmt_ratio(ratio: float | None) -> str:
    if ratio is None or math.isnan(ratio) or math.isinf(ratio):
        return NA
    return f"{ratio:.2f}x"


def bytes_per_s(n: int | float | None, ns: int | None) -> float | None:
    """A byte count over a duration in ns, in bytes per second; None without either."""
    if n is None or not ns:
        return None
    return n / (ns / 1e9)


def fmt_bytes(n: int | None) -> str:
    """Decimal units, as the spec's I/O block: ``408.7 MB``, ``0 B``."""
    if n is None:
        return NA
    if abs(n) < 1000:
        return f"{n} B"
    value = float(n)
    for unit in ("kB", "MB", "GB", "TB", "PB"):
        value /= 1000.0
        if abs(value) < 999.95 or unit == "PB":
            return f"{value:.1f} {unit}"
    return f"{n} B"  # unreachable


def fmt_utc(unix_s: float | None) -> str:
    if unix_s is None:
        return NA
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(unix_s))


def json_ns(value: float | None) -> int | None:
    """A time for JSON: integer ns, or None when missing (None or NaN)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return int(round(value))


def json_frac(value: float | None) -> float | None:
    """A fraction or ratio for JSON: six decimals, or None when missing."""
    return None if value is None else round(value, 6)
