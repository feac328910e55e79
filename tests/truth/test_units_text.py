"""report/units.py's text forms against strings written out by hand from their documented rules.

Durations: whole ns below 999.5 ns, then one decimal in us/ms/s (the next unit once the rounded
value reaches 1000, or 60 s), then ``3m 05s`` below 10 minutes, ``27m`` below an hour, ``2h 31m``.
Bytes: decimal units, one decimal, the next unit once the rounded value reaches 1000. Names:
every non-printable character escaped visibly, backslashes doubled, spaces kept; a path name that
could pass for a synthetic node, a nesting or a quoted name is JSON-quoted.
"""

from __future__ import annotations

import pytest

from lineprofiler.report.units import fmt_bytes, fmt_duration, path_label, terminal_safe


@pytest.mark.parametrize(
    "ns, text",
    [
        (999.4, "999ns"),
        (999.5, "1.0us"),  # rounds to 1000 ns: shown in the next unit
        (999_950_000, "1.0s"),  # 999.95 ms rounds to 1000.0 ms
        (999_940_000, "999.9ms"),
        (59_940_000_000, "59.9s"),
        (59_950_000_000, "1m 00s"),
        (599_500_000_100, "10m"),  # 599.5000001 s rounds to 600 s: minutes from here
        (599_400_000_000, "9m 59s"),
        (3_570_000_000_010, "1h 00m"),  # 59.5 minutes and 10 ns: rounds up
        (3_569_999_999_990, "59m"),
        (9_060_000_000_000, "2h 31m"),
    ],
)
def test_durations_at_their_rounding_edges(ns, text):
    assert fmt_duration(ns) == text


@pytest.mark.parametrize(
    "n, text",
    [
        (999, "999 B"),
        (1000, "1.0 kB"),
        (999_940, "999.9 kB"),
        (999_950, "1.0 MB"),  # 999.95 kB rounds to 1000.0 kB
        (408_700_000, "408.7 MB"),
        (3 * 10**18, "3000.0 PB"),
    ],
)
def test_bytes_at_their_rounding_edges(n, text):
    assert fmt_bytes(n) == text


@pytest.mark.parametrize(
    "raw, shown",
    [
        ("step", "step"),
        ("a b", "a b"),
        ("a\\b", "a\\\\b"),
        ("x\ny\rz\tw", "x\\ny\\rz\\tw"),
        ("\x1b[31mred", "\\x1b[31mred"),
        ("ok\x00", "ok\\x00"),
        ("\x85next", "\\x85next"),  # C1 control
        ("\u202eevil", "\\u202eevil"),  # right-to-left override
        ("\uffff", "\\uffff"),
        ("tag\U000e0001", "tag\\U000e0001"),
        ("wide\u3000space\u00a0nbsp\n", "wide\u3000space\u00a0nbsp\\n"),  # spaces stay
        ("café ß 数据", "café ß 数据"),
    ],
)
def test_terminal_safe_escapes_exactly_the_unprintable(raw, shown):
    assert terminal_safe(raw) == shown


@pytest.mark.parametrize(
    "path, synthetic, label",
    [
        ((), False, "(no phase open)"),
        (("a", "b"), False, "a/b"),
        (("a/b",), False, '"a/b"'),
        (("(folded)",), False, '"(folded)"'),
        (("x", "(folded)"), True, "x/(folded)"),
        (('"q"',), False, '"\\"q\\""'),
        (("",), False, '""'),
        (("é/x",), False, '"é/x"'),
        (("x(", "y)"), False, "x(/y)"),
        (("a", "(b"), False, 'a/"(b"'),
    ],
)
def test_path_labels_have_one_reading(path, synthetic, label):
    assert path_label(path, synthetic) == label
    if not synthetic:
        assert path_label(path) == label  # not synthetic unless said
