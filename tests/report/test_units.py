"""Human-readable numbers: the forms the spec prints (``2h 31m``, ``9.4ms``, ``156.8us``)."""

from __future__ import annotations

import pytest

from lineprofiler.report.units import fmt_bytes, fmt_count, fmt_duration, fmt_rate, fmt_share

S = 1_000_000_000


@pytest.mark.parametrize(
    "ns, text",
    [
        (0, "0ns"),
        (850, "850ns"),
        (999, "999ns"),
        (999.6, "1.0us"),
        (156_800, "156.8us"),
        (999_960, "1.0ms"),
        (9_400_000, "9.4ms"),
        (18_500_000, "18.5ms"),
        (999_960_000, "1.0s"),
        (12.3 * S, "12.3s"),
        (59.96 * S, "1m 00s"),
        (185 * S, "3m 05s"),
        (599.6 * S, "10m"),
        (27 * 60 * S, "27m"),
        ((59 * 60 + 40) * S, "1h 00m"),
        ((2 * 3600 + 31 * 60) * S, "2h 31m"),
        ((4 * 3600 + 12 * 60 + 10) * S, "4h 12m"),
        ((1 * 3600 + 9 * 60) * S, "1h 09m"),
        (None, "n/a"),
        (float("nan"), "n/a"),
    ],
)
def test_fmt_duration(ns, text):
    assert fmt_duration(ns) == text


def test_counts_rates_shares_bytes():
    assert fmt_count(4800) == "4,800" and fmt_count(1234567) == "1,234,567"
    assert fmt_rate(6377.0) == "6,377.0/s" and fmt_rate(None) == "n/a"
    assert fmt_share(0.829) == "82.9%" and fmt_share(None) == "n/a"
    assert fmt_bytes(0) == "0 B" and fmt_bytes(408_700_000) == "408.7 MB"
    assert fmt_bytes(999_960) == "1.0 MB" and fmt_bytes(None) == "n/a"
