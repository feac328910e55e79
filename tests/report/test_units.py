"""Human-readable numbers: the forms the spec prints (``2h 31m``, ``9.4ms``, ``156.8us``)."""

from __future__ import annotations

import pytest

from lineprofiler.report.units import (
    bytes_per_s,
    fmt_bytes,
    fmt_count,
    fmt_duration,
    fmt_rate,
    fmt_ratio,
    fmt_share,
    fmt_utc,
    json_frac,
    json_ns,
)

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


def test_ratios_rates_times_and_json_values_at_their_edges():
    assert fmt_count(None) == "n/a" and fmt_count(0) == "0"
    assert fmt_share(float("nan")) == "n/a" and fmt_share(0.12345, decimals=2) == "12.35%"
    assert fmt_share(1.0) == "100.0%" and fmt_share(0.0) == "0.0%"
    assert fmt_ratio(3.3333) == "3.33x" and fmt_ratio(1.0) == "1.00x"
    for missing in (None, float("nan"), float("inf")):
        assert fmt_ratio(missing) == "n/a"
    assert bytes_per_s(3_000, 2 * S) == 1_500.0 and bytes_per_s(1, 1) == pytest.approx(1e9)
    assert (
        bytes_per_s(None, S) is None and bytes_per_s(5, 0) is None and bytes_per_s(5, None) is None
    )
    assert bytes_per_s(0, S) == 0.0
    assert fmt_bytes(999) == "999 B" and fmt_bytes(1000) == "1.0 kB" and fmt_bytes(-999) == "-999 B"
    assert fmt_bytes(-2500) == "-2.5 kB" and fmt_bytes(999_949) == "999.9 kB"
    assert fmt_bytes(1_500_000_000) == "1.5 GB" and fmt_bytes(2_000_000_000_000) == "2.0 TB"
    assert fmt_bytes(3 * 10**15) == "3.0 PB" and fmt_bytes(5 * 10**18) == "5000.0 PB"
    assert fmt_utc(None) == "n/a" and fmt_utc(0.0) == "1970-01-01 00:00:00 UTC"
    assert fmt_utc(1_796_226_000.0) == "2026-12-02 15:40:00 UTC"
    assert json_ns(None) is None and json_ns(float("nan")) is None
    assert json_ns(2.5) == 2 and json_ns(3.5) == 4 and json_ns(7) == 7 and json_ns(0.0) == 0
    assert json_frac(None) is None and json_frac(1 / 3) == 0.333333 and json_frac(0.0) == 0.0
    assert fmt_duration(-5) == "0ns" and fmt_duration(999.4) == "999ns"
    assert fmt_duration(999_949) == "999.9us" and fmt_duration(59_949_999_999) == "59.9s"
    assert fmt_duration(599.4 * S) == "9m 59s" and fmt_duration(3569 * S) == "59m"
