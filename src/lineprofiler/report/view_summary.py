"""The run summary of the HTML report ("Where the time went"): per role its top-level shares and
busiest node, and the run's top phases by self time, derived from the row model (report/view.py)
as every view's figures are."""

from __future__ import annotations

from dataclasses import dataclass

from lineprofiler.report.model import Role
from lineprofiler.report.view import PhaseRow, RoleView, RunView, share_of

SUMMARY_TOP = 5  # the run's top phases in the HTML summary


@dataclass
class NodeLoad:
    """One node's part of a role: its complete processes' busy time, summed."""

    host: str
    processes: int
    busy_ns: int
    share: float | None  # of the role's busy time (all its complete processes)


@dataclass
class RoleSummary:
    """One role in the run summary: its top-level phases (``top_level``, each with its share of
    the role's top-level time) and its busiest node."""

    view: RoleView
    busiest_node: NodeLoad | None
    nodes: int  # nodes the role's complete processes ran on

    @property
    def name(self) -> str:
        return self.view.role.name


@dataclass
class RunPhase:
    """A phase among the whole run's top phases: its self time over every role's top-level time."""

    role: str
    row: PhaseRow
    share: float | None


@dataclass
class RunSummary:
    """Where the time went, across roles and nodes (the HTML report's summary):

    - per role, its top-level phases' shares (``PhaseRow.share``) and the node whose complete
      processes have the most busy time (summed; its ``share`` of the role's busy time);
    - the run's top phases: the ``top`` phases of any role with the most self time (time in the
      phase and not in a child), each as a share of all roles' top-level time summed (self times
      of one role add up to its top-level time, so these shares add up to at most 100%).
    """

    roles: list[RoleSummary]
    top: list[RunPhase]
    total_ns: int  # every role's top-level time, summed


def node_loads(role: Role) -> list[NodeLoad]:
    """The role's nodes, busiest first: the busy time of each node's complete processes."""
    acc: dict[str, list[int]] = {}
    for w, busy in role.process_busy_ns():
        acc.setdefault(w.host, []).append(busy)
    total = sum(sum(v) for v in acc.values())
    rows = [NodeLoad(h, len(v), sum(v), share_of(sum(v), total)) for h, v in acc.items()]
    rows.sort(key=lambda n: (-n.busy_ns, n.host))
    return rows


def run_summary(view: RunView, top: int = SUMMARY_TOP) -> RunSummary:
    """The run's summary (see :class:`RunSummary`)."""
    roles = []
    for rv in view.roles:
        nodes = node_loads(rv.role)
        busiest = nodes[0] if nodes and nodes[0].busy_ns > 0 else None
        roles.append(RoleSummary(rv, busiest, len(nodes)))
    total = sum(rv.phase_time_ns for rv in view.roles)
    ranked = sorted(
        (
            (rv.role.name, r)
            for rv in view.roles
            for p, r in rv.phases.items()
            if p and not r.stats.thread_node and not r.on_threads and r.stats.self_ns > 0
        ),
        key=lambda x: (-x[1].stats.self_ns, x[0], x[1].path),
    )
    best = [RunPhase(name, r, share_of(r.stats.self_ns, total)) for name, r in ranked[:top]]
    return RunSummary(roles, best, total)
