"""The row model: the derived numbers of a merged run, computed here once for every view (text,
JSON, HTML, ``top``, compare and its gate, Prometheus); a view formats rows, it never divides
(tests/report/test_row_model.py checks the view modules).

Definitions (documented for users in docs/report-json.md):

- a phase's ``time_ns`` = completed entries' wall + entries still open at the last write, summed
  over the role's processes (process-time, not elapsed time);
- ``share`` = its time over the role's top-level time (the sum of the top-level phases); None
  for work on other threads (a path through ``[threads]``: handed to a pool inside its parent
  phase, so its time runs beside the parent's, is in no share and not out of the parent's self
  time); such a row is ``on_threads`` and its ``label`` says on how many threads it ran;
- ``wait_fraction`` = (wall - cpu) / wall over completed entries; None when CPU was not measured,
  and None for a phase with async entries (``PhaseStats.wait_ns``: their CPU is not the task's),
  shown as ``async`` by every view (``wait_text``), whether over the run or over an interval;
- a counter's ``rate_per_s`` = count / the phase's time in seconds, and ``time_per_each_ns`` its
  inverse (time / count) — per process, since both are summed over the same processes;
- ``mean_ns`` = wall / calls of completed entries; a row of sampled entries is ``estimated`` and
  its ``label`` starts with ``~``;
- ``imbalance`` = max over mean of the role's processes' busy time (sum of each process's
  top-level phases); 1.00 is perfectly even; a process that ended without a final write is left
  out of it, of ``busiest`` and of the straggler view (its file misses an unknown part);
- dominant phases = the ``top`` phases with the most self time, plus phases carrying counters;
- the straggler view: for the role's first ``STRAGGLER_PHASES`` dominant phases, each process's
  time in that phase, the slowest against the median;
- the lines of a traced phase (``.lines`` sidecars, report.lines_merge): hits and times summed
  over the role's processes; a line's ``share`` = its self time over the traced entries' wall
  time (summed over the same processes); ``per_hit_ns`` = time / hits; ``heat`` = its self time
  over the phase's largest line self time; ``slowdown`` = mean traced entry wall over mean
  untraced entry wall (None when every entry was traced); a line ranks by self time.
"""

from __future__ import annotations

import math
import os
import statistics
from collections.abc import Mapping
from dataclasses import dataclass, field

from lineprofiler.report.lines_model import MergedLine, MergedPhaseLines
from lineprofiler.report.model import MergedPhase, MergedRun, Path_, Role, Worker
from lineprofiler.report.units import NA, path_label
from lineprofiler.runfile.layout import THREADS_MARK
from lineprofiler.runfile.stats import PhaseStats

DEFAULT_TOP = 10
DEFAULT_LINES_TOP = 10  # lines per traced phase in the text report (--lines-top)
STRAGGLER_PHASES = 3
ITERATION = "iteration"


ASYNC = "async"  # what a view shows for the wait of a phase with async entries


def share_of(part: float, whole: float) -> float | None:
    """``part`` as a fraction of ``whole``; None when there is no whole."""
    return part / whole if whole > 0 else None


def rate_per_s(count: float, time_ns: float) -> float | None:
    """``count`` per second of ``time_ns``; None without time."""
    return count / (time_ns / 1e9) if time_ns > 0 else None


def wait_text(stats: PhaseStats) -> str:
    """The wait% as every view shows it: ``37%``; ``async`` for a phase with async entries;
    n/a when CPU time was not measured."""
    wait = stats.wait_fraction
    if wait is not None:
        return f"{wait * 100:.0f}%"
    return ASYNC if stats.async_calls else NA


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
    stats: PhaseStats  # a MergedPhase, or a ``top`` interval's PhaseStats
    share: float | None
    counters: list[CounterRow]
    # Time over the role's processes: ``stats.time_ns``, or over a ``top`` interval the growth
    # of that (entries open across the interval's end count what they grew by).
    time_ns: int = -1

    def __post_init__(self) -> None:
        if self.time_ns < 0:
            self.time_ns = self.stats.time_ns

    @property
    def name(self) -> str:
        return path_label(self.path, self.stats.synthetic)

    @property
    def on_threads(self) -> bool:
        """Whether this is work handed to other threads inside its parent phase."""
        return THREADS_MARK in self.path

    @property
    def label(self) -> str:
        """The name as shown: ``~`` first when the numbers are estimated from a sample; work on
        other threads ends with ``(on N threads)``."""
        text = ("~" if self.stats.estimated else "") + self.name
        if self.on_threads:
            n = self.stats.threads
            text += f" (on {n} thread{'' if n == 1 else 's'})" if n else " (on other threads)"
        return text

    @property
    def wait_fraction(self) -> float | None:
        return self.stats.wait_fraction

    @property
    def wait_text(self) -> str:
        return wait_text(self.stats)

    def q(self, quantile: float) -> float | None:
        if self.stats.thread_node or self.stats.calls == 0:
            return None
        v = self.stats.quantile(quantile)
        return None if math.isnan(v) else v

    @property
    def mean_ns(self) -> float | None:
        s = self.stats
        return s.wall_ns / s.calls if s.calls else None

    def per_process_ns(self, processes: int) -> float | None:
        """The row's time per process of ``processes`` (its role's); None without any."""
        return self.time_ns / processes if processes else None

    @property
    def measured_entries(self) -> float:
        """How many entries were actually timed (a sampled phase's calls are scaled by its
        stride; at least 1)."""
        s = self.stats
        every = max(getattr(s, "sample_rates", None) or {max(1, s.sample_every)})
        return max(1.0, s.calls / max(1, every))

    def rate(self, counter: str, time_ns: float) -> float | None:
        """A counter's count per second of ``time_ns`` (0 when it did not move)."""
        return rate_per_s(self.stats.counters.get(counter, 0), time_ns)


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
class LineRow:
    """One line of a traced phase, summed over the role's processes that traced it."""

    line: MergedLine
    where: str  # file:line, the file relative to the tracer's project folder when under it
    share: float | None  # self time over the traced entries' wall time
    heat: float  # self time over the phase's largest line self time (0 to 1)
    of_processes: int  # processes that traced the phase

    @property
    def per_hit_ns(self) -> float | None:
        return self.line.time_ns / self.line.hits if self.line.hits else None

    @property
    def processes(self) -> int:
        return self.line.processes

    @property
    def seen_in_text(self) -> str:
        """``(in k of n)`` for a line seen in only some of the processes that traced its phase."""
        k, n = self.line.processes, self.of_processes
        return f"(in {k} of {n})" if k < n else ""


@dataclass
class PhaseLinesView:
    """A traced phase's lines, ranked by self time, and how much tracing slowed its entries."""

    merged: MergedPhaseLines
    rows: list[LineRow]  # every line, by self time (largest first)
    top: int  # how many the text report lists
    # The phase row it belongs to: the sidecar's path, or with thread_names=True the one
    # thread-named path ending in it (``MainThread/iteration/train_step``)
    at: Path_ | None = None

    @property
    def path(self) -> Path_:
        return self.merged.path if self.at is None else self.at

    @property
    def shown(self) -> list[LineRow]:
        return self.rows[: self.top] if self.top > 0 else list(self.rows)

    @property
    def traced_mean_ns(self) -> float | None:
        m = self.merged
        return m.traced_wall_ns / m.traced_entries if m.traced_entries else None

    @property
    def untraced_mean_ns(self) -> float | None:
        m = self.merged
        untraced = m.entries - m.traced_entries
        return m.untraced_wall_ns / untraced if untraced > 0 else None

    @property
    def slowdown(self) -> float | None:
        traced, untraced = self.traced_mean_ns, self.untraced_mean_ns
        if traced is None or untraced is None or untraced <= 0:
            return None
        return traced / untraced

    def note(self) -> str:
        """What the text and HTML reports say under the block's title."""
        m = self.merged
        n = m.processes
        text = (
            f"traced {m.traced_entries:,} of {m.entries:,} entries in {n:,} "
            f"process{'' if n == 1 else 'es'}"
        )
        slow = self.slowdown
        if slow is not None:
            text += (
                f"; traced entries took {slow:.2f}x the untraced ones' mean (the phase's own "
                "figures are as recorded, traced entries included)"
            )
        return text


def _where(file: str, line: int, root: str | None) -> str:
    if root:
        try:
            rel = os.path.relpath(file, root)
        except ValueError:
            rel = ".."
        if not rel.startswith(".."):
            file = rel
    return f"{file}:{line}"


def phase_lines_view(
    merged: MergedPhaseLines, top: int = DEFAULT_LINES_TOP, at: Path_ | None = None
) -> PhaseLinesView:
    """A traced phase's rows: each line's share, heat and place, ranked by self time."""
    lines = sorted(
        merged.lines.values(), key=lambda ml: (-ml.self_ns, -ml.time_ns, ml.file, ml.line)
    )
    peak = max((ml.self_ns for ml in lines), default=0)
    root = merged.project_folder
    rows = [
        LineRow(
            ml,
            _where(ml.file, ml.line, root),
            share_of(ml.self_ns, merged.traced_wall_ns),
            ml.self_ns / peak if peak > 0 else 0.0,
            merged.processes,
        )
        for ml in lines
    ]
    return PhaseLinesView(merged, rows, top, at)


def lines_row_path(path: Path_, rows: Mapping[Path_, PhaseRow]) -> Path_ | None:
    """The phase row a traced path's lines go under: the path itself; or, in a tree whose
    first level is thread names (``thread_names=True``), the thread-named path ending in it (the
    first in tree order when several threads ran it); None when the tree holds neither (a sidecar
    of another snapshot: not shown)."""
    if path in rows:
        return path
    for p in rows:
        thread = rows.get(p[:1])
        if len(p) == len(path) + 1 and p[1:] == path and thread is not None:
            if thread.stats.thread_node:
                return p
    return None


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
    # Whether the views show a ``raised`` column: some phase of the run exited by an exception.
    raised_shown: bool = False
    # The traced phases' lines (``Profiler(lines=...)``), by path, in path order.
    lines: dict[Path_, PhaseLinesView] = field(default_factory=dict)

    @property
    def phase_time_ns(self) -> int:
        """The role's top-level phase time (summed over processes, and over concurrent asyncio
        tasks within one)."""
        return sum(r.time_ns for r in self.top_level)

    @property
    def overlap(self) -> float | None:
        """For a role with asyncio entries: its phase time over the processes' wall time
        (``lifetime_ns``) when it exceeds it (concurrent tasks each count their own wall time);
        None when it does not, and for a role without asyncio entries (threads' phases add up
        beside each other too, which the legend already says: times are summed)."""
        if not self.has_async or self.lifetime_ns <= 0:
            return None
        if self.phase_time_ns <= self.lifetime_ns:
            return None
        return self.phase_time_ns / self.lifetime_ns

    def dominant_share(self, row: PhaseRow) -> float | None:
        """A dominant phase's self time over all dominant phases' self time (the HTML report's
        stacked bar of them)."""
        return share_of(row.stats.self_ns, sum(r.stats.self_ns for r in self.dominant if r.path))

    @property
    def has_async(self) -> bool:
        """Whether some phase of the role has entries inside asyncio tasks."""
        return any(r.stats.async_calls for r in self.phases.values())


@dataclass
class RunView:
    run: MergedRun
    roles: list[RoleView]
    top: int


def _counters(stats: PhaseStats, time_ns: int) -> list[CounterRow]:
    rows = []
    for name in sorted(stats.counters):
        n = stats.counters[name]
        each = time_ns / n if n > 0 and time_ns > 0 else None
        rows.append(CounterRow(name, n, rate_per_s(n, time_ns), each, name in stats.saturated))
    return rows


def phase_rows(
    tree: Mapping[Path_, PhaseStats], lifetime_ns: int = 0, times: Mapping[Path_, int] | None = None
) -> dict[Path_, PhaseRow]:
    """A tree's rows in tree order: each phase's share of the top-level time, and its counters'
    rates over its time (the root's over ``lifetime_ns``). ``times``: each path's time when it is
    not ``stats.time_ns`` (a ``top`` interval's)."""
    time = {p: s.time_ns for p, s in tree.items()} if times is None else times
    total = sum(t for p, t in time.items() if len(p) == 1)
    rows: dict[Path_, PhaseRow] = {}
    for path in sorted(tree):
        s = tree[path]
        basis = time[path] if path else lifetime_ns
        share = share_of(time[path], total) if path and THREADS_MARK not in path else None
        rows[path] = PhaseRow(path, s, share, _counters(s, basis), time[path])
    return rows


def interval_rows(
    tree: Mapping[Path_, PhaseStats], before: Mapping[Path_, PhaseStats]
) -> dict[Path_, PhaseRow]:
    """The rows of what was recorded between ``before`` (an earlier cumulative tree of the same
    processes) and ``tree``: ``PhaseStats.since`` per path, so async entries, missing CPU and the
    wait rule are those of the whole run's rows."""
    empty = PhaseStats()
    stats = {p: s.since(before.get(p, empty)) for p, s in tree.items()}
    times = {p: max(0, s.time_ns - before.get(p, empty).time_ns) for p, s in tree.items()}
    return phase_rows(stats, 0, times)


def role_view(
    role: Role,
    top: int = DEFAULT_TOP,
    iteration: str | None = None,
    lines_top: int = DEFAULT_LINES_TOP,
) -> RoleView:
    """The role's derived rows. ``iteration``: the phase whose entries the ITERATIONS block
    describes, by name (``step``) or path (``train/step``); None: a phase named ``iteration``,
    else the role's most-entered top-level phase. ``lines_top``: lines listed per traced phase
    (0: all)."""
    lifetime = sum(w.lifetime_ns for w in role.workers)
    rows = phase_rows(role.tree, lifetime)
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
    lines: dict[Path_, PhaseLinesView] = {}
    for path, merged in sorted(role.lines.items()):
        at = lines_row_path(path, rows)
        if at is not None and at not in lines:
            lines[at] = phase_lines_view(merged, lines_top, at)
    return RoleView(
        role, rows, top_level, dominant, iterations, stragglers, lifetime, sampled, lines=lines
    )


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


def run_view(
    run: MergedRun,
    top: int = DEFAULT_TOP,
    iteration: str | None = None,
    lines_top: int = DEFAULT_LINES_TOP,
) -> RunView:
    """Every role's view; ``iteration`` and ``lines_top`` as in :func:`role_view`."""
    roles = [role_view(r, top, iteration, lines_top) for r in run.roles.values()]
    shown = any_raised(run)
    for rv in roles:
        rv.raised_shown = shown
    return RunView(run, roles, top)


def any_raised(run: MergedRun) -> bool:
    """Whether any phase of the run has an entry that exited by an exception (the views show a
    ``raised`` column only then)."""
    return any(s.raised for role in run.roles.values() for s in role.tree.values())


def any_async(run: MergedRun) -> bool:
    """Whether any phase of the run has entries inside asyncio tasks (the text legend then says
    what ``async`` means)."""
    return any(s.async_calls for role in run.roles.values() for s in role.tree.values())


def any_on_threads(run: MergedRun) -> bool:
    """Whether any phase of the run is work handed to other threads (a path through
    ``[threads]``): the text legend then says what such a row means."""
    return any(THREADS_MARK in p for role in run.roles.values() for p in role.tree)


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
