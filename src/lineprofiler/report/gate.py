"""``compare --fail-over PCT``: the CI regression gate over two merged runs.

A phase regresses when it is present in both runs, took at least ``min_share`` of its role's
top-level time in BASE, and its chosen metric grew by more than ``fail_over`` (a fraction) from
BASE to NEW. Metrics (all per process, so runs of different lengths and sizes compare):

- ``mean``: wall time per completed call (``wall_ns / calls``), the default;
- ``p50`` / ``p99``: the histogram's quantiles (within its 2.89% bucket resolution);
- ``share``: the phase's share of its role's top-level time.

A phase whose numbers are sampled estimates (``phase(..., sample=r)``: one entry in N measured)
is compared through an interval of ``GATE_Z`` standard errors on each side: for ``mean`` and
``share`` the relative error of a mean of n measured entries (``cv / sqrt(n)``, cv read from
its histogram), for a quantile the binomial error of its rank. It regresses only when even
NEW's low end is more than ``fail_over`` above BASE's high end, and is marked ``~``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from lineprofiler.report.units import fmt_duration, fmt_share
from lineprofiler.report.view import PhaseRow, RoleView
from lineprofiler.runfile.stats import bucket_value

METRICS: tuple[str, ...] = ("mean", "p50", "p99", "share")
DEFAULT_METRIC = "mean"
DEFAULT_MIN_SHARE_PCT = 1.0
GATE_Z = 3.0  # standard errors either side of a sampled estimate
_QUANTILE = {"p50": 0.5, "p99": 0.99}


@dataclass
class GateSpec:
    """What the gate checks: ``fail_over`` and ``min_share`` are fractions (0.5 = 50%)."""

    fail_over: float
    metric: str = DEFAULT_METRIC
    min_share: float = DEFAULT_MIN_SHARE_PCT / 100
    phases: list[str] = field(default_factory=list)  # names (a/b) or leaf names; empty: all


@dataclass
class Regression:
    role: str
    phase: str
    metric: str
    base: float  # ns (mean, p50, p99) or a fraction (share)
    new: float
    estimated: bool  # either side is a sampled estimate (then change_low is the bound used)
    change_low: float  # the smallest change the estimates allow (== change when measured)

    @property
    def change(self) -> float:
        """NEW over BASE minus one (0.5: 50% slower)."""
        return self.new / self.base - 1.0


@dataclass
class GateResult:
    spec: GateSpec
    regressions: list[Regression]
    checked: int  # phases compared
    unmatched: list[str]  # --phase names found in no role of both runs
    available: list[str] = field(default_factory=list)  # phases in both runs (--phase's choices)
    why_none: str = ""  # when nothing was compared: why (the gate then fails)

    @property
    def passed(self) -> bool:
        """A gate passes when it compared something and nothing regressed."""
        return self.checked > 0 and not self.regressions


def _cv(row: PhaseRow) -> float:
    """Coefficient of variation of the entries' wall times, read from the histogram."""
    b = row.stats.hist.buckets
    n = sum(b.values())
    if n == 0:
        return 1.0
    mean = sum(bucket_value(k) * c for k, c in b.items()) / n
    if mean <= 0:
        return 1.0
    var = sum(c * (bucket_value(k) - mean) ** 2 for k, c in b.items()) / n
    return math.sqrt(var) / mean


def metric_interval(row: PhaseRow, metric: str) -> tuple[float, float, float] | None:
    """(low, value, high) of a phase's metric; low == value == high when measured."""
    s = row.stats
    if metric == "share":
        v = row.share
    elif metric == "mean":
        v = row.mean_ns
    else:
        v = row.q(_QUANTILE[metric])
    if v is None or v <= 0:
        return None
    if not s.estimated:
        return v, v, v
    n = row.measured_entries
    if metric in ("mean", "share"):
        rel = GATE_Z * _cv(row) / math.sqrt(n)
        return max(0.0, v * (1 - rel)), v, v * (1 + rel)
    q = _QUANTILE[metric]
    d = GATE_Z * math.sqrt(q * (1 - q) / n)
    lo = s.quantile(max(0.0, q - d))
    hi = s.quantile(min(1.0, q + d))
    return min(lo, v), v, max(hi, v)


def _selected(path: tuple[str, ...], wanted: list[str]) -> str | None:
    """The --phase name that selects this path (its full name or its last component)."""
    name = "/".join(path)
    for w in wanted:
        if w == name or w == path[-1]:
            return w
    return None


def check(roles: list[tuple[str, RoleView, RoleView]], spec: GateSpec) -> GateResult:
    """Checks every phase present in both runs' roles (all of them, whatever ``--top`` shows)."""
    out: list[Regression] = []
    checked = in_both = below_share = no_metric = 0
    matched: set[str] = set()
    available: set[str] = set()
    for role, va, vb in roles:
        for path, ra in va.phases.items():
            rb = vb.phases.get(path)
            if not path or rb is None or ra.stats.thread_node or rb.stats.thread_node:
                continue
            available.add("/".join(path))
            if spec.phases:
                w = _selected(path, spec.phases)
                if w is None:
                    continue
                matched.add(w)
            in_both += 1
            if ra.share is None or ra.share < spec.min_share:
                below_share += 1
                continue
            ia, ib = metric_interval(ra, spec.metric), metric_interval(rb, spec.metric)
            if ia is None or ib is None:
                no_metric += 1
                continue
            checked += 1
            low = ib[0] / ia[2] - 1.0 if ia[2] > 0 else 0.0
            if low > spec.fail_over:
                est = ra.stats.estimated or rb.stats.estimated
                out.append(Regression(role, ra.name, spec.metric, ia[1], ib[1], est, low))
    out.sort(key=lambda r: (-r.change, r.role, r.phase))
    unmatched = [w for w in spec.phases if w not in matched]
    why = ""
    if not checked:
        if not roles:
            why = "the runs have no role in common"
        elif not in_both:
            selected = " selected by --phase" if spec.phases else ""
            why = f"no phase{selected} is in both runs"
        elif below_share == in_both:
            why = (
                f"none of the {in_both} phase(s) in both runs took --min-share "
                f"{spec.min_share * 100:g}% of its role's time in the baseline"
            )
        else:
            why = f"{no_metric} phase(s) in both runs have no {spec.metric} to compare"
    return GateResult(spec, out, checked, unmatched, sorted(available), why)


def _fmt(metric: str, v: float) -> str:
    return fmt_share(v) if metric == "share" else fmt_duration(v)


_WHAT = {
    "mean": "mean time per call",
    "p50": "p50 time per call",
    "p99": "p99 time per call",
    "share": "share of the role's time",
}


def render_gate_text(g: GateResult) -> list[str]:
    """The gate's lines, printed before the comparison (regressions first)."""
    pct = f"{g.spec.fail_over * 100:g}%"
    what = _WHAT[g.spec.metric]
    if not g.checked:
        return [f"GATE failed: nothing was compared: {g.why_none}", ""]
    if not g.regressions:
        return [
            f"GATE passed: no phase's {what} grew by more than {pct} "
            f"({g.checked} phase(s) compared)",
            "",
        ]
    n = len(g.regressions)
    out = [f"REGRESSIONS: {n} phase(s) whose {what} grew by more than {pct}"]
    w = max(len(r.role) for r in g.regressions) + 2
    for r in g.regressions:
        mark = "~" if r.estimated else " "
        sampled = f"   (sampled: at least +{r.change_low * 100:.0f}%)" if r.estimated else ""
        out.append(
            f"{r.role:<{w}}{mark}{r.phase}   {_fmt(r.metric, r.base)} -> "
            f"{_fmt(r.metric, r.new)}   +{r.change * 100:.0f}%{sampled}"
        )
    if any(r.estimated for r in g.regressions):
        out.append(
            f"~ sampled estimate: compared at {GATE_Z:g} standard errors, so it regressed "
            "beyond its sampling error"
        )
    out.append("")
    return out


def gate_document(g: GateResult) -> dict:
    """The ``gate`` and ``regressions`` keys of ``compare --json --fail-over``."""
    return {
        "gate": {
            "fail_over": g.spec.fail_over,
            "metric": g.spec.metric,
            "min_share": g.spec.min_share,
            "phases": list(g.spec.phases),
            "checked": g.checked,
            "passed": g.passed,
            "why_none": g.why_none or None,
        },
        "regressions": [
            {
                "role": r.role,
                "phase": r.phase,
                "metric": r.metric,
                "base": r.base,
                "new": r.new,
                "change": r.change,
                "estimated": r.estimated,
                "change_low": r.change_low,
            }
            for r in g.regressions
        ],
    }
