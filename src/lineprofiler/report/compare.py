"""``compare``: two merged runs, per role and phase by phase, as data, text and JSON.

A phase's *change* is the ratio B/A of its time per process (time summed over the role's
processes, divided by their number), so runs with different process counts compare fairly; a
counter's change is the ratio of its rates. A phase or role present on one side only is shown as
such (``only in A``), never as zero on the other.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from lineprofiler.report.gate import (
    GateResult,
    GateSpec,
    check,
    gate_document,
    render_gate_text,
)
from lineprofiler.report.model import MergedRun, Path_
from lineprofiler.report.units import (
    NA,
    RULE,
    fmt_duration,
    fmt_rate,
    fmt_ratio,
    fmt_share,
    json_frac,
    json_ns,
    path_label,
    terminal_safe,
)
from lineprofiler.report.view import PhaseRow, RoleView, any_raised, role_view

DEFAULT_COMPARE_TOP = 20


def _ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or a <= 0:
        return None
    return b / a


@dataclass
class CounterDiff:
    name: str
    rate_a: float | None
    rate_b: float | None
    side: str  # "both", "a", "b"

    @property
    def ratio(self) -> float | None:
        return _ratio(self.rate_a, self.rate_b) if self.side == "both" else None


@dataclass
class PhaseDiff:
    path: Path_
    a: PhaseRow | None
    b: PhaseRow | None
    procs_a: int
    procs_b: int
    counters: list[CounterDiff] = field(default_factory=list)

    @property
    def name(self) -> str:
        return path_label(self.path)

    @property
    def side(self) -> str:
        return "both" if self.a and self.b else ("a" if self.a else "b")

    def per_process_ns(self, which: str) -> float | None:
        row, n = (self.a, self.procs_a) if which == "a" else (self.b, self.procs_b)
        return row.per_process_ns(n) if row is not None else None

    @property
    def change(self) -> float | None:
        return _ratio(self.per_process_ns("a"), self.per_process_ns("b"))

    def q_ratio(self, q: float) -> float | None:
        if self.a is None or self.b is None:
            return None
        return _ratio(self.a.q(q), self.b.q(q))


@dataclass
class RoleDiff:
    name: str
    a: RoleView | None
    b: RoleView | None
    phases: list[PhaseDiff]
    hidden: int  # phases present on both sides left out by --top

    @property
    def side(self) -> str:
        return "both" if self.a and self.b else ("a" if self.a else "b")


@dataclass
class Comparison:
    a: MergedRun
    b: MergedRun
    roles: list[RoleDiff]
    gate: GateResult | None = None  # with --fail-over


def _counter_diffs(a: PhaseRow | None, b: PhaseRow | None) -> list[CounterDiff]:
    ca = {c.name: c for c in (a.counters if a else [])}
    cb = {c.name: c for c in (b.counters if b else [])}
    out = []
    for name in sorted(set(ca) | set(cb)):
        side = "both" if name in ca and name in cb else ("a" if name in ca else "b")
        out.append(
            CounterDiff(
                name,
                ca[name].rate_per_s if name in ca else None,
                cb[name].rate_per_s if name in cb else None,
                side,
            )
        )
    return out


def _role_diff(name: str, a: RoleView | None, b: RoleView | None, top: int) -> RoleDiff:
    pa = a.phases if a else {}
    pb = b.phases if b else {}
    na = a.role.processes if a else 0
    nb = b.role.processes if b else 0
    diffs = []
    for path in sorted((set(pa) | set(pb)) - {()}):
        ra, rb = pa.get(path), pb.get(path)
        if (ra is None or ra.stats.thread_node) and (rb is None or rb.stats.thread_node):
            if ra is not None and rb is not None:  # a thread's node: keep it as a heading
                diffs.append(PhaseDiff(path, ra, rb, na, nb))
                continue
        diffs.append(PhaseDiff(path, ra, rb, na, nb, _counter_diffs(ra, rb)))
    hidden = 0
    both = [d for d in diffs if d.side == "both" and len(d.path) > 1]
    if top > 0 and len(both) > top:
        keep = sorted(
            both,
            key=lambda d: -max(d.a.stats.self_ns if d.a else 0, d.b.stats.self_ns if d.b else 0),
        )[:top]
        drop = {d.path for d in both} - {d.path for d in keep}
        hidden = len(drop)
        diffs = [d for d in diffs if d.path not in drop]
    return RoleDiff(name, a, b, diffs, hidden)


def compare_runs(
    a: MergedRun, b: MergedRun, top: int = DEFAULT_COMPARE_TOP, gate: GateSpec | None = None
) -> Comparison:
    """The comparison; with ``gate``, also the regressions over every phase in both runs."""
    roles = []
    for name in sorted(set(a.roles) | set(b.roles)):
        va = role_view(a.roles[name]) if name in a.roles else None
        vb = role_view(b.roles[name]) if name in b.roles else None
        roles.append(_role_diff(name, va, vb, top))
    result = None
    if gate is not None:
        pairs = [(rd.name, rd.a, rd.b) for rd in roles if rd.a is not None and rd.b is not None]
        result = check(pairs, gate)  # type: ignore[arg-type]
        if not pairs:
            result.why_none = (
                f"the runs have no role in common (A: {', '.join(sorted(a.roles)) or 'none'}; "
                f"B: {', '.join(sorted(b.roles)) or 'none'})"
            )
    return Comparison(a, b, roles, result)


# -- text --


def _shift(x: float | None, y: float | None) -> str:
    return f"{fmt_duration(x)} -> {fmt_duration(y)}"


def _procs(n: int) -> str:
    return f"{n} process{'' if n == 1 else 'es'}"


def render_compare_text(c: Comparison) -> str:
    out = render_gate_text(c.gate) if c.gate is not None else []
    out.append("COMPARE")
    for tag, run in (("A", c.a), ("B", c.b)):
        out.append(
            f"{tag}  {run.run_dir}   Run {run.run_id or ''}   Runtime {fmt_duration(run.runtime_ns)}"
            f"   Processes {run.processes:,}"
        )
    for rd in c.roles:
        out.append("")
        na = rd.a.role.processes if rd.a else 0
        nb = rd.b.role.processes if rd.b else 0
        if rd.side != "both":
            only = "A" if rd.side == "a" else "B"
            n = max(na, nb)
            out.append(f"{rd.name.upper()}  only in {only} ({n} process{'' if n == 1 else 'es'})")
            out.append(RULE)
            continue
        out.append(f"{rd.name.upper()}  (A {_procs(na)}, B {_procs(nb)})")
        out.append(RULE)
        w = max([30] + [len(d.name) + 2 for d in rd.phases])
        raised = any_raised(c.a) or any_raised(c.b)
        out.append(
            f"{'':<{w}}{'time A':>10}{'share A':>9}{'time B':>10}{'share B':>9}{'change':>9}"
            f"   p50 A -> B           p99 A -> B" + ("           raised A -> B" if raised else "")
        )
        for d in rd.phases:
            if d.side != "both":
                row = d.a or d.b
                assert row is not None
                only = "only in A" if d.side == "a" else "only in B"
                time_cols = (
                    f"{fmt_duration(row.stats.time_ns):>10}{fmt_share(row.share):>9}{'':>19}"
                    if d.side == "a"
                    else f"{'':>19}{fmt_duration(row.stats.time_ns):>10}{fmt_share(row.share):>9}"
                )
                out.append(f"{d.name:<{w}}{time_cols}   {only}")
                continue
            assert d.a is not None and d.b is not None
            quant = ""
            if not (d.a.stats.thread_node or d.b.stats.thread_node):
                quant = f"   {_shift(d.a.q(0.5), d.b.q(0.5)):<21}{_shift(d.a.q(0.99), d.b.q(0.99))}"
            out.append(
                f"{d.name:<{w}}{fmt_duration(d.a.stats.time_ns):>10}{fmt_share(d.a.share):>9}"
                f"{fmt_duration(d.b.stats.time_ns):>10}{fmt_share(d.b.share):>9}"
                f"{fmt_ratio(d.change):>9}{quant}"
                + (f"   raised {d.a.stats.raised:,}->{d.b.stats.raised:,}" if raised else "")
            )
            for cd in d.counters:
                if cd.side == "both":
                    text = f"{fmt_rate(cd.rate_a)} -> {fmt_rate(cd.rate_b)}   {fmt_ratio(cd.ratio)}"
                elif cd.side == "a":
                    text = f"{fmt_rate(cd.rate_a)}   only in A"
                else:
                    text = f"{fmt_rate(cd.rate_b)}   only in B"
                out.append(f"    + {cd.name:<{w - 6}}{text}")
        if rd.hidden:
            out.append(f"({rd.hidden} smaller phases present in both not shown; --top 0 shows all)")
    out += [
        "",
        "change = B/A of a phase's time per process; a counter's change is B/A of its rate.",
    ]
    for tag, run in (("A", c.a), ("B", c.b)):
        if run.caveats:
            out += ["", f"CAVEATS ({tag})", RULE]
            out += [f"- {cv.message}" for cv in run.caveats]
    return "\n".join(terminal_safe(line.rstrip()) for line in out) + "\n"


# -- JSON --


def _side_doc(row: PhaseRow | None) -> dict[str, Any] | None:
    if row is None:
        return None
    s = row.stats
    return {
        "processes": s.processes,
        "calls": s.calls,
        "time_ns": row.time_ns,
        "self_ns": s.self_ns,
        "share": json_frac(row.share),
        "wait_fraction": json_frac(row.wait_fraction),
        "raised": s.raised,
        "on_threads": row.on_threads,
        "threads": s.threads,
        "p50_ns": json_ns(row.q(0.5)),
        "p99_ns": json_ns(row.q(0.99)),
        "estimated": s.estimated,
    }


def compare_document(c: Comparison) -> dict[str, Any]:
    def run_doc(run: MergedRun) -> dict[str, Any]:
        return {
            "dir": run.run_dir,
            "run_id": run.run_id,
            "runtime_ns": run.runtime_ns,
            "processes": run.processes,
            "roles": {n: r.processes for n, r in run.roles.items()},
            "caveats": [{"kind": cv.kind, "message": cv.message} for cv in run.caveats],
        }

    roles = []
    for rd in c.roles:
        roles.append(
            {
                "role": rd.name,
                "in": rd.side,
                "processes": {
                    "a": rd.a.role.processes if rd.a else None,
                    "b": rd.b.role.processes if rd.b else None,
                },
                "phases": [
                    {
                        "path": list(d.path),
                        "name": d.name,
                        "in": d.side,
                        "a": _side_doc(d.a),
                        "b": _side_doc(d.b),
                        "time_per_process_ratio": json_frac(d.change),
                        "p50_ratio": json_frac(d.q_ratio(0.5)),
                        "p99_ratio": json_frac(d.q_ratio(0.99)),
                        "counters": [
                            {
                                "name": cd.name,
                                "in": cd.side,
                                "rate_per_s_a": json_frac(cd.rate_a),
                                "rate_per_s_b": json_frac(cd.rate_b),
                                "rate_ratio": json_frac(cd.ratio),
                            }
                            for cd in d.counters
                        ],
                    }
                    for d in rd.phases
                ],
                "phases_not_shown": rd.hidden,
            }
        )
    doc = {
        "format": "lineprofiler-compare",
        "schema_version": 1,
        "a": run_doc(c.a),
        "b": run_doc(c.b),
        "roles": roles,
    }
    if c.gate is not None:
        doc.update(gate_document(c.gate))
    return doc


def render_compare_json(c: Comparison) -> str:
    return json.dumps(compare_document(c), indent=2, allow_nan=False) + "\n"


__all__ = ["NA", "compare_runs", "render_compare_json", "render_compare_text"]
