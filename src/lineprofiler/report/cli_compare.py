"""``lineprofiler compare A B [--json] [--fail-over PCT ...]``: two runs, phase by phase.

Reads phases only (never resource samples). Exit status 2 when either directory cannot be
reported (or an option is bad); a run with unreadable workers still compares, and its caveats are
printed. With ``--fail-over`` it is a CI gate (report/gate.py): exit 1 when a phase regressed
(the regressions printed first) or when no phase could be compared (and why); 0 otherwise.
"""

from __future__ import annotations

import argparse
import difflib

from lineprofiler.report.cli_report import emit, fail, internal_error
from lineprofiler.report.compare import DEFAULT_COMPARE_TOP
from lineprofiler.report.gate import DEFAULT_METRIC, DEFAULT_MIN_SHARE_PCT, METRICS, GateSpec
from lineprofiler.report.merge import RunError, merge_run

_LISTED = 30  # phases named when --phase matches none

EXAMPLES = """\
examples:
  lineprofiler compare base/ new/                     phase by phase, side by side
  lineprofiler compare base/ new/ --fail-over 20      exit 1 if a phase's time per call grew >20%
  lineprofiler compare base/ new/ --fail-over 10 --metric p99 --phase step
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_a", metavar="A", help="the baseline run directory")
    parser.add_argument("run_b", metavar="B", help="the run directory compared against it")
    parser.add_argument("--json", action="store_true", help="print the comparison as JSON")
    parser.add_argument(
        "--top",
        type=int,
        default=DEFAULT_COMPARE_TOP,
        metavar="N",
        help=f"nested phases shown per role, by self time (default {DEFAULT_COMPARE_TOP}; 0: all)"
        "; top-level and one-sided phases are always shown",
    )
    gate = parser.add_argument_group("regression gate (CI)")
    gate.add_argument(
        "--fail-over",
        type=percent,
        metavar="PCT",
        help="exit 1 when a phase present in both runs got slower by more than PCT percent "
        "(20 or 20%%; regressions printed first), or when no phase could be compared; "
        "exit 0 otherwise",
    )
    gate.add_argument(
        "--metric",
        choices=METRICS,
        default=DEFAULT_METRIC,
        help="what --fail-over compares: mean time per call (default), p50, p99, or share of "
        "the role's time",
    )
    gate.add_argument(
        "--min-share",
        type=float,
        default=DEFAULT_MIN_SHARE_PCT,
        metavar="PCT",
        help=f"only phases with at least PCT percent of their role's time in A "
        f"(default {DEFAULT_MIN_SHARE_PCT:g})",
    )
    gate.add_argument(
        "--phase",
        action="append",
        default=[],
        metavar="NAME",
        help="gate only this phase (its full name a/b or its last part); repeatable",
    )


def percent(text: str) -> float:
    """--fail-over's value in percent: ``20`` or ``20%``. A bare value between 0 and 1 is
    refused: ``0.2`` is far more often a fraction meant as 20% than a 0.2% gate."""
    value = text.strip()
    explicit = value.endswith("%")
    try:
        pct = float(value[:-1] if explicit else value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a percentage: {text!r} (e.g. 20 or 20%)") from None
    if not explicit and 0 < pct < 1:
        raise argparse.ArgumentTypeError(
            f"{text} looks like a fraction, but PCT is in percent: write {pct * 100:g} "
            f"(or {pct * 100:g}%) for {pct * 100:g}%, or {text}% for {text} percent"
        )
    return pct


def _gate_spec(args: argparse.Namespace) -> GateSpec | str:
    """The gate asked for, or what is wrong with the options."""
    pct, share = args.fail_over, args.min_share
    if pct is None:
        if args.phase or args.metric != DEFAULT_METRIC or share != DEFAULT_MIN_SHARE_PCT:
            return "--metric, --min-share and --phase need --fail-over PCT"
        return ""
    if not (pct >= 0 and pct < float("inf")):
        return f"--fail-over must be a percentage of 0 or more, not {pct:g}"
    if not (0 <= share <= 100):
        return f"--min-share must be a percentage from 0 to 100, not {share:g}"
    return GateSpec(pct / 100, args.metric, share / 100, list(args.phase))


def main(args: argparse.Namespace) -> int:
    if args.top < 0:
        return fail("compare", f"--top must be 0 or more, not {args.top}")
    spec = _gate_spec(args)
    if isinstance(spec, str) and spec:
        return fail("compare", spec)
    try:
        from lineprofiler.report.compare import (
            compare_runs,
            render_compare_json,
            render_compare_text,
        )

        a = merge_run(args.run_a, with_samples=False)
        b = merge_run(args.run_b, with_samples=False)
        c = compare_runs(a, b, args.top, spec or None)
        if c.gate is not None and c.gate.unmatched:
            return fail("compare", _unmatched_message(c.gate.unmatched, c.gate.available))
        out = render_compare_json(c) if args.json else render_compare_text(c)
    except RunError as exc:
        return fail("compare", str(exc))
    except Exception as exc:  # never a traceback on a user's terminal
        return internal_error("compare", exc)
    emit(out)
    return 1 if c.gate is not None and not c.gate.passed else 0


def _unmatched_message(unmatched: list[str], available: list[str]) -> str:
    """--phase names that match nothing, with the nearest phase and the phases there are."""
    names = ", ".join(repr(n) for n in unmatched)
    choices = set(available) | {a.rsplit("/", 1)[-1] for a in available}
    near = [m for n in unmatched for m in difflib.get_close_matches(n, sorted(choices), n=1)]
    hint = f" (did you mean {', '.join(near)}?)" if near else ""
    if not available:
        return f"--phase {names}: no such phase in both runs{hint}; the runs share no phase"
    shown = ", ".join(available[:_LISTED])
    more = f" and {len(available) - _LISTED} more" if len(available) > _LISTED else ""
    return f"--phase {names}: no such phase in both runs{hint}; phases in both: {shown}{more}"
