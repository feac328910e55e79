"""Derived numbers of a merged run, computed once for every renderer (text and JSON agree).

Definitions (documented for users in docs/report-json.md):

- a phase's ``time_ns`` = completed entries' wall + entries still open at the last write, summed
  over the role's processes (process-time, not elapsed time);
- ``share`` = its time over the role's top-level time (the sum of the top-level phases);
- ``wait_fraction`` = (wall - cpu) / wall over completed entries; None when CPU was not measured;
- a counter's ``rate_per_s`` = count / the phase's time in seconds, and ``time_per_each_ns`` its
  inverse (time / count) — per process, since both are summed over the same processes;
- ``imbalance`` = max over mean of the role's processes' busy time (sum of each process's
  top-level phases); 1.00 is perfectly even; a process that ended without a final write is left
  out of it, of ``busiest`` and of the straggler view (its file misses an unknown part);
- dominant phases = the ``top`` phases with the most self time, plus phases carrying counters;
- the straggler view: for the role's first ``STRAGGLER_PHASES`` dominant phases, each process's
  time in that phase, the slowest against the median.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field

from lineprofiler.report.model import MergedPhase, MergedRun, Path_, Role, Worker
from lineprofiler.report.units import path_label

DEFAULT_TOP = 10
STRAGGLER_PHASES = 3
ITERATION = "iteration"


@dataclass
class CounterRow:
    name: str
    count: int
    rate_per_s: float | None
    time_per_each_ns: float | None
    saturated: bool = False  # the sum reached the int64 range: count is a bound, not a total


@dataclass
class PhaseRow:
    path: Path_
    stats: MergedPhase
    share: float | None
    counters: list[CounterRow]

    @property
    def name(self) -> str:
        return path_label(self.path, self.stats.synthetic)

    def q(self, quantile: float) -> float | None:
        if self.stats.thread_node or self.stats.calls == 0:
            return None
        v = self.stats.quantile(quantile)
        return None if math.isnan(v) else v

    @property
    def mean_ns(self) -> float | None:
        s = self.stats
        return s.wall_ns / s.calls if s.calls else None


@dataclass
class WorkerTime:
    worker: Worker
    time_ns: int


@dataclass
class Straggler:
    path: Path_
    times: list[WorkerTime]  # slowest first

    @property
    def slowest(self) -> WorkerTime:
        return self.times[0]

    @property
    def median_ns(self) -> float:
        return statistics.median(t.time_ns for t in self.times)

    @property
    def ratio(self) -> float | None:
        m = self.median_ns
        return self.slowest.time_ns / m if m > 0 else None

    def by_host(self) -> list[tuple[str, int, float]]:
        """(host, processes, mean time per process) per node, slowest first."""
        acc: dict[str, list[int]] = {}
        for t in self.times:
            acc.setdefault(t.worker.host, []).append(t.time_ns)
        rows = [(h, len(v), sum(v) / len(v)) for h, v in acc.items()]
        rows.sort(key=lambda r: (-r[2], r[0]))
        return rows


@dataclass
class RoleView:
    role: Role
    phases: dict[Path_, PhaseRow]  # every phase of the role, tree order
    top_level: list[PhaseRow]  # by time, largest first
    dominant: list[PhaseRow]
    iterations: PhaseRow | None
    stragglers: list[Straggler]
    lifetime_ns: int  # sum of the role's processes' lifetimes (rate base of root counters)
    sampled: list[PhaseRow] = field(default_factory=list)  # estimated rows shown


@dataclass
class RunView:
    run: MergedRun
    roles: list[RoleView]
    top: int


def _counters(stats: MergedPhase, time_ns: int) -> list[CounterRow]:
    rows = []
    for name in sorted(stats.counters):
        n = stats.counters[name]
        rate = n / (time_ns / 1e9) if time_ns > 0 else None
        each = time_ns / n if n > 0 and time_ns > 0 else None
        rows.append(CounterRow(name, n, rate, each, name in stats.saturated))
    return rows


def role_view(role: Role, top: int = DEFAULT_TOP, iteration: str | None = None) -> RoleView:
    """The role's derived rows. ``iteration``: the phase whose entries the ITERATIONS block
    describes, by name (``step``) or path (``train/step``); None: a phase named ``iteration``,
    else the role's most-entered top-level phase."""
    total = role.top_level_ns
    lifetime = sum(w.lifetime_ns for w in role.workers)
    rows: dict[Path_, PhaseRow] = {}
    for path in sorted(role.tree):
        s = role.tree[path]
        basis = s.time_ns if path else lifetime
        share = s.time_ns / total if path and total > 0 else None
        rows[path] = PhaseRow(path, s, share, _counters(s, basis))
    top_level = sorted(
        (r for p, r in rows.items() if len(p) == 1), key=lambda r: (-r.stats.time_ns, r.path)
    )
    ranked = sorted(
        (r for p, r in rows.items() if p and not r.stats.thread_node),
        key=lambda r: (-r.stats.self_ns, r.path),
    )
    dominant = [r for r in ranked[:top] if r.stats.self_ns > 0] if top > 0 else list(ranked)
    chosen = {r.path for r in dominant}
    dominant += [r for r in ranked if r.path not in chosen and r.stats.counters][:top]
    if () in rows:
        dominant.append(rows[()])
    iterations = _iteration_row(rows, iteration)
    stragglers = []
    complete = role.complete_groups()  # a process that ended without a final write: left out
    if len(complete) > 1:
        for r in dominant[:STRAGGLER_PHASES]:
            if not r.path:
                continue
            times = [
                WorkerTime(role.workers[g[0]], role.process_time_ns(g, r.path)) for g in complete
            ]
            times.sort(key=lambda t: (-t.time_ns, t.worker.path))
            stragglers.append(Straggler(r.path, times))
    sampled = [r for r in rows.values() if r.stats.estimated]
    return RoleView(role, rows, top_level, dominant, iterations, stragglers, lifetime, sampled)


def _iteration_row(rows: dict[Path_, PhaseRow], iteration: str | None) -> PhaseRow | None:
    """The loop's ITERATIONS row: the phase named ``iteration`` (a name, or a path joined with
    ``/``) when given; else a phase named "iteration", else the role's most-entered top-level
    phase (entered more than once), so every loop gets one. Among several paths of one name,
    the most entered (then the shallowest)."""

    def named(name: str) -> list[PhaseRow]:
        return [
            r
            for p, r in rows.items()
            if p and (p[-1] == name or "/".join(p) == name) and r.stats.calls > 0
        ]

    if iteration is not None:
        loops = named(iteration)
    else:
        loops = named(ITERATION) or [
            r
            for p, r in rows.items()
            if len(p) == 1 and not r.stats.thread_node and r.stats.calls > 1
        ]
    return max(loops, key=lambda r: (r.stats.calls, -len(r.path)), default=None)


def run_view(run: MergedRun, top: int = DEFAULT_TOP, iteration: str | None = None) -> RunView:
    """Every role's view; ``iteration`` as in :func:`role_view`."""
    return RunView(run, [role_view(r, top, iteration) for r in run.roles.values()], top)


def clock_summary(run: MergedRun) -> tuple[dict[str, int], dict[str | None, int]]:
    """How many workers used each wall clock and each CPU clock tier (None: not measured)."""
    wall: dict[str, int] = {}
    cpu: dict[str | None, int] = {}
    for w in run.workers:
        if w.clock_wall is not None:
            wall[w.clock_wall] = wall.get(w.clock_wall, 0) + 1
        cpu[w.clock_cpu] = cpu.get(w.clock_cpu, 0) + 1
    return wall, cpu


def sample_note(stats: MergedPhase) -> str:
    """``1 entry in 100`` (and ``, partly measured`` when merged with measured entries)."""
    rates = sorted(r for r in stats.sample_rates if r > 1)
    text = ", ".join(f"1 entry in {r:,}" for r in rates)
    if 1 in stats.sample_rates:
        text += " (merged with fully measured entries)"
    return text
