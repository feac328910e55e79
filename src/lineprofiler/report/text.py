"""The text report of one merged run: a sequence of blocks, each a function of the run's view.

``BLOCKS`` lists every block in the order printed (the resource blocks come from
``report.text_resources``); a block returns its lines, or an empty list to be left out. Blocks are
separated by one blank line.
"""

from __future__ import annotations

import statistics
import textwrap
from collections.abc import Callable

from lineprofiler.report import text_resources
from lineprofiler.report.model import MergedRun
from lineprofiler.report.units import (
    NA,
    RULE,
    fmt_bytes,
    fmt_count,
    fmt_duration,
    fmt_rate,
    fmt_ratio,
    fmt_share,
    path_label,
    terminal_safe,
)
from lineprofiler.report.view import (
    DEFAULT_LINES_TOP,
    DEFAULT_TOP,
    PhaseLinesView,
    PhaseRow,
    RoleView,
    RunView,
    any_async,
    any_on_threads,
    clock_summary,
    run_view,
    sample_note,
)

NAME_W = 30
WRAP = 100
MAX_HOSTS = 8

Block = Callable[[RunView], list[str]]


def _name_width(names: list[str]) -> int:
    return max([NAME_W] + [len(n) + 2 for n in names])


def _plural(n: int, word: str, plural: str | None = None) -> str:
    return f"{n:,} {word if n == 1 else (plural or word + 's')}"


# -- blocks --


def header_block(view: RunView) -> list[str]:
    run = view.run
    roles = ", ".join(f"{name} x{role.processes}" for name, role in run.roles.items())
    hosts = run.hosts
    shown = ", ".join(hosts if len(hosts) <= MAX_HOSTS else hosts[: MAX_HOSTS - 2] + ["..."])
    if len(hosts) > MAX_HOSTS:
        shown += ", " + hosts[-1]
    lines = []
    if run.live_s is not None:
        lines.append(
            f"LIVE: the run is still going (newest write {fmt_duration(int(run.live_s * 1e9))} "
            "ago); every number stops at its worker's last write"
        )
    lines += [
        f"Runtime {fmt_duration(run.runtime_ns)}   Processes {run.processes:,}   Roles {roles}",
        f"Hosts {shown} ({_plural(len(hosts), 'node')})   Run {run.run_id}",
    ]
    wall, cpu = clock_summary(run)
    walls = ", ".join(_tally(wall, len(run.workers)))
    cpus = _tally(
        {("not measured" if k is None else k): v for k, v in cpu.items()}, len(run.workers)
    )
    clock = f"Clocks wall {walls or NA}, cpu {', '.join(cpus)}"
    if None in cpu:
        clock += " (wait n/a where not measured)"
    own = [w.own_write_bytes for w in run.workers if w.own_write_bytes is not None]
    if own:
        clock += f"   Own writes {fmt_bytes(sum(own))}"
    lines.append(clock)
    return lines


def _tally(counts: dict, total: int) -> list[str]:
    if len(counts) == 1 and sum(counts.values()) == total:
        return [str(next(iter(counts)))]
    return [f"{k} x{v}" for k, v in sorted(counts.items(), key=lambda kv: (-kv[1], str(kv[0])))]


def roles_block(view: RunView) -> list[str]:
    lines: list[str] = []
    for i, rv in enumerate(view.roles):
        if i:
            lines.append("")
        lines += role_lines(rv)
    return lines


def role_lines(rv: RoleView) -> list[str]:
    role = rv.role
    imbalance = NA if role.imbalance is None else f"{role.imbalance:.2f}"
    busiest = role.busiest
    if busiest is not None and role.processes > 1:
        imbalance += f", busiest {busiest.label}"
    if role.left_out:
        imbalance += f"; {role.left_out} left out: no final write"
    out = [
        f"{role.name.upper()}  ({_plural(role.processes, 'process', 'processes')}, "
        f"imbalance {imbalance})",
        RULE,
    ]
    if rv.overlap is not None:
        whose = "process's" if role.processes == 1 else "processes'"
        out += textwrap.wrap(
            f"phase time {fmt_duration(rv.phase_time_ns)} is {fmt_ratio(rv.overlap)} the "
            f"{whose} wall time {fmt_duration(rv.lifetime_ns)}: it sums concurrent asyncio tasks, each "
            "counting its own wall time",
            WRAP,
            break_on_hyphens=False,
        )
    idle = [w for w in role.workers if w.idle]
    if idle:
        out.append(
            f"idle: {_plural(len(idle), 'process', 'processes')} closed without recording a "
            "phase: " + ", ".join(w.label for w in idle[:10]) + (" ..." if len(idle) > 10 else "")
        )
    if not rv.top_level:
        out.append("(no phases recorded)")
    w = _name_width([r.label for r in rv.top_level])
    for r in rv.top_level:
        out.append(f"{r.label:<{w}}{fmt_share(r.share):>6}{fmt_duration(r.time_ns):>13}")
    if rv.dominant or rv.lines:
        out += [""] + dominant_lines(rv)
    if rv.iterations is not None:
        out += [""] + iteration_lines(rv.iterations)
    if rv.stragglers:
        out += [""] + straggler_lines(rv)
    shown = [r for r in rv.sampled if r in rv.dominant or r in rv.top_level]
    if shown:
        out += ["", "  ~ = estimated from a sample, not measured. Totals are scaled by the rate:"]
        nw = max([23] + [len(r.name) + 1 for r in shown])
        out += [f"      {r.name:<{nw}} {sample_note(r.stats)}" for r in shown]
    return out


def dominant_lines(rv: RoleView) -> list[str]:
    w = _name_width([r.label for r in rv.dominant])
    out = [f"{'DOMINANT PHASES':<{w}}{'self':>10}{'wait%':>8}{'p50':>10}{'p99':>10}"]
    if rv.raised_shown:
        out[0] += f"{'raised':>8}"
    if rv.role.processes > 1:
        out[0] += f"   (summed over {rv.role.processes:,} processes)"
    for r in rv.dominant:
        s = r.stats
        if r.path:
            p50, p99 = r.q(0.5), r.q(0.99)
            out.append(
                f"{r.label:<{w}}{fmt_duration(s.self_ns):>10}{r.wait_text:>8}"
                f"{fmt_duration(p50):>10}{fmt_duration(p99):>10}"
                + (f"{fmt_count(s.raised):>8}" if rv.raised_shown else "")
            )
        else:
            out.append(r.name)
        if r.counters:
            out += _counter_lines(r, w)
        if r.path in rv.lines:
            out += lines_block(rv.lines[r.path], r.name)
    shown = {r.path for r in rv.dominant}
    for path, lv in rv.lines.items():  # a traced phase that is not a dominant one: after them
        if path not in shown:
            out += lines_block(lv, path_label(path))
    return out


def lines_block(lv: PhaseLinesView, name: str) -> list[str]:
    """``LINES IN <phase>``: the phase's top lines by self time, summed over the role's
    processes that traced it (issue 32)."""
    out = [f"  LINES IN {name}"]
    out += textwrap.wrap(
        lv.note(), WRAP, initial_indent="    ", subsequent_indent="    ", break_on_hyphens=False
    )
    if not lv.rows:
        return out + ["    (no line of the project ran inside its traced entries)"]
    out.append(f"    {'self':>9}{'time':>10}{'hits':>12}{'per hit':>10}{'share':>8}  line / source")
    for row in lv.shown:
        ml = row.line
        out.append(
            f"    {fmt_duration(ml.self_ns):>9}{fmt_duration(ml.time_ns):>10}{ml.hits:>12,}"
            f"{fmt_duration(row.per_hit_ns):>10}{fmt_share(row.share):>8}  {row.where}"
            + (f"  {row.seen_in_text}" if row.seen_in_text else "")
        )
        out.append(f"{'':>56}{ml.source.strip()}")
    hidden = len(lv.rows) - len(lv.shown)
    if hidden > 0:
        out.append(f"    ({hidden:,} more line{'' if hidden == 1 else 's'}: --lines-top N)")
    return out


def _counter_lines(r: PhaseRow, w: int) -> list[str]:
    """A phase's counters under a sub-header of their own; columns never run together."""
    rows = [
        (
            c.name,
            fmt_count(c.count),
            fmt_rate(c.rate_per_s),
            NA if c.time_per_each_ns is None else fmt_duration(c.time_per_each_ns) + "/ea",
        )
        for c in r.counters
    ]
    head = ("+ counter", "count", "per second", "time each")
    nw = max([w - 4] + [len(x[0]) + 4 for x in rows])
    widths = [max(len(head[i]), *(len(x[i]) for x in rows)) + 2 for i in (1, 2, 3)]
    fmt = lambda a, b, c, d: (  # noqa: E731
        f"    {a:<{nw - 2}}{b:>{widths[0]}}{c:>{widths[1]}}{d:>{widths[2]}}"
    )
    out = [fmt(*head)]
    for (n, cnt, rate, each), c in zip(rows, r.counters, strict=True):
        out.append(
            fmt("+ " + n, cnt, rate, each)
            + ("  SATURATED (int64 bound; the true sum is beyond)" if c.saturated else "")
        )
    return out


def iteration_lines(r: PhaseRow) -> list[str]:
    s = r.stats
    where = "" if r.path == ("iteration",) else f"  {r.name}"
    title = f"ITERATIONS  ({_plural(s.calls, 'entry', 'entries')}){where}"
    if s.estimated:
        title = "~" + title + f"  (estimated: {sample_note(s)})"
    return [
        title,
        f"  mean{fmt_duration(r.mean_ns):>11}   p50{fmt_duration(r.q(0.5)):>11}"
        f"   p95{fmt_duration(r.q(0.95)):>11}   p99{fmt_duration(r.q(0.99)):>11}",
    ]


def straggler_lines(rv: RoleView) -> list[str]:
    labels = [s.slowest.worker.label for s in rv.stragglers]
    labels += [f"node {h} (mean of {n})" for s in rv.stragglers for h, n, _ in s.by_host()[:1]]
    w = _name_width([path_label(s.path) for s in rv.stragglers])
    lw = max([22] + [len(x) + 2 for x in labels])
    out = [f"{'SLOWEST PROCESS, NODE':<{w}}{'':>{lw}}{'time':>10}{'median':>10}{'ratio':>8}"]
    for s, label in zip(rv.stragglers, labels, strict=False):
        out.append(
            f"{path_label(s.path):<{w}}{label:>{lw}}{fmt_duration(s.slowest.time_ns):>10}"
            f"{fmt_duration(s.median_ns):>10}{fmt_ratio(s.ratio):>8}"
        )
        hosts = s.by_host()
        if len(hosts) > 1:
            host, n, mean = hosts[0]
            median = statistics.median(m for _, _, m in hosts)
            ratio = fmt_ratio(mean / median if median > 0 else None)
            who = f"node {host} (mean of {n})"
            out.append(
                f"{'':<{w}}{who:>{lw}}{fmt_duration(mean):>10}{fmt_duration(median):>10}{ratio:>8}"
            )
    return out


# What the header's clock words mean (docs/cpu-clock.md has the CPU clock tiers' details).
CLOCK_WORDS = {
    "tsc": "wall tsc: phases timed with the CPU's time-stamp counter",
    "monotonic": "wall monotonic: phases timed with the kernel's monotonic clock",
    "exact": "cpu exact: thread CPU time (for wait%) read from the kernel's perf page, exactly",
    "anchored": (
        "cpu anchored: thread CPU time (for wait%) from a user-space clock anchored to the "
        "system call, within 260us of it per phase (used on virtual machines)"
    ),
    "syscall": "cpu syscall: thread CPU time (for wait%) read by a system call per phase boundary",
}


def legend_block(view: RunView) -> list[str]:
    run = view.run
    out = textwrap.wrap(
        "Times are summed over a role's processes; share is of the role's top-level time; "
        "wait% is the share of a phase's wall time (not of its self time) spent off the CPU, "
        "blocked or waiting to run; imbalance is the max over the mean of the role's per-process "
        "busy time; ratio is the slowest process's time in the phase over the median process's "
        "(for a node, the mean of its processes over the median node's)."
        + (
            " A path through [threads] is work handed to other threads inside its parent phase "
            "(on N threads): its time runs in parallel with the parent's, is in no share and not "
            "out of the parent's self time."
            if any_on_threads(run)
            else ""
        )
        + (
            " async (in the wait% column): the phase has entries inside asyncio tasks; a task's "
            "wall time includes its awaits while other tasks run, so the phase's time sums "
            "concurrent tasks (it can exceed the processes' wall time), and the thread's CPU time "
            "is not the task's, so no wait% is given."
            if any_async(run)
            else ""
        ),
        WRAP,
        break_on_hyphens=False,
    )
    wall, cpu = clock_summary(run)
    named = (*sorted(wall), *sorted(k for k in cpu if k))
    words = [CLOCK_WORDS[k] for k in named if k in CLOCK_WORDS]  # a file may name any word
    notes = ("Clocks: " + "; ".join(words) + ".") if words else ""
    if any(w.own_write_bytes is not None for w in run.workers):
        notes += (
            " Own writes: the bytes the profiler itself wrote (worker files, samples), already "
            "left out of the I/O blocks."
        )
    if notes:
        out += textwrap.wrap(notes.strip(), WRAP, break_on_hyphens=False)
    return out


def caveats_block(view: RunView) -> list[str]:
    out = ["CAVEATS", RULE]
    if not view.run.caveats:
        return out + ["  none: every worker file was read, and none is stale"]
    for c in view.run.caveats:
        out += textwrap.wrap(
            terminal_safe(c.message),  # before wrapping, which would turn a line break to a space
            WRAP,
            initial_indent="- ",
            subsequent_indent="  ",
            break_on_hyphens=False,
            break_long_words=False,
        )
    return out


# Blocks whose lines are already through terminal_safe (a second pass would double backslashes).
_ESCAPED_BY_BLOCK = frozenset({"caveats"})

BLOCKS: tuple[tuple[str, Block], ...] = (
    ("header", header_block),
    ("roles", roles_block),
    ("io_by_phase", text_resources.io_by_phase_block),
    ("io", text_resources.io_block),
    ("memory", text_resources.memory_block),
    ("gpu", text_resources.gpu_block),
    ("legend", legend_block),
    ("caveats", caveats_block),
)


def render_text(
    run: MergedRun,
    top: int = DEFAULT_TOP,
    iteration: str | None = None,
    lines_top: int = DEFAULT_LINES_TOP,
) -> str:
    """The text report of a merged run (with caveats, they come right after the header);
    ``iteration`` names the loop's phase for the ITERATIONS blocks (see ``role_view``);
    ``lines_top``: lines listed per traced phase (0: all)."""
    view = run_view(run, top, iteration, lines_top)
    blocks = list(BLOCKS)
    if run.caveats:
        blocks.sort(key=lambda nb: {"header": 0, "caveats": 1}.get(nb[0], 2))
    parts = []
    for name, block in blocks:
        lines = block(view)
        if lines:
            # every line through terminal_safe (names from worker files are printed in them),
            # once: the caveats block escapes its messages itself, before wrapping
            safe = (lambda line: line) if name in _ESCAPED_BY_BLOCK else terminal_safe
            parts.append("\n".join(safe(line.rstrip()) for line in lines))
    return "\n\n".join(parts) + "\n"
