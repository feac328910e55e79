"""Which worker files ran together: a run directory's attempts, by time and by id.

An *attempt* is the set of processes that ran together, however they were started. The rules:

- **Time.** Workers whose lifetimes overlap, transitively, run together. A worker's lifetime is
  its start to its end: the final write of one that closed; the last write plus one snapshot
  interval of one that did not (live, or killed). A worker whose recorded parent pid is an
  earlier worker on the same host, alive at its start, runs with that parent; workers of one
  claimed id (below) with one parent process on one host (the ranks a torchrun agent, srun step
  or mpirun started) run together even when their lifetimes do not overlap, and so do the
  profilers one process built one after the other under one id.
- **Ids.** Every worker carries a run id. One that lineprofiler generated for a process with
  nothing to inherit (``20261203T1731-a1b2c3``) claims nothing: processes started independently
  (a shell script's ``&``, torchrun without ``--rdzv-id``) never split a run by it. Any other
  id (an explicit ``LINEPROFILER_RUN_ID``, a Slurm job, a torchrun rendezvous, an MPI job) is a
  claim: workers of concurrent but different claimed ids are separate attempts that
  *overlapped* (named as such); the unclaimed workers among them go with the claim they share
  the most time with.
- **Reruns.** A launch that starts after every process of the previous one ended is a new
  attempt even under the same id: its attempts are told apart as ``ID``, ``ID~2``, ``ID~3``
  (oldest first) and never summed.
- **Duplicates.** A file whose (host, pid, uuid) was already read (a copied worker file) is
  skipped and named.

Unreadable files have no lifetime: one goes with the attempt its file name's run id and its
modification time fit, else it stands alone.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field

from lineprofiler.report.model import Unreadable
from lineprofiler.runfile.worker_doc import Worker

# The shape of an id new_run_id() generates (accounting._identity): UTC minute and 6 hex digits.
_GENERATED_ID = re.compile(r"^\d{8}T\d{4}-[0-9a-f]{6}$")
_SLACK_S = 1.0  # clock resolution between a file's mtime and the times written inside it


def is_claim(run_id: str) -> bool:
    """Whether a run id says which launch a worker belongs to (not one generated per process)."""
    return bool(run_id) and not _GENERATED_ID.match(run_id)


def worker_end(w: Worker) -> float:
    """The end of a worker's lifetime (Unix s): final write, else last write + one interval."""
    if w.final:
        return w.written_at
    return w.written_at + (w.snapshot_interval_s or 0.0)


@dataclass
class UnreadableFile:
    """An unreadable worker file with what its name and the file system say about it."""

    entry: Unreadable
    run_id: str  # from the file name ("" when the name has none)
    mtime: float | None


@dataclass
class AttemptGroup:
    """One attempt: its workers (and unreadable files), before merging."""

    id: str
    workers: list[Worker] = field(default_factory=list)
    unreadable: list[Unreadable] = field(default_factory=list)
    concurrent: list[AttemptGroup] = field(default_factory=list, repr=False)  # other ids
    _start: float | None = None
    _end: float | None = None

    @property
    def start_time(self) -> float | None:
        return min((w.start_time for w in self.workers), default=self._start)

    @property
    def end_time(self) -> float | None:
        return max((worker_end(w) for w in self.workers), default=self._end)

    @property
    def overlapped(self) -> list[str]:
        """The ids of concurrent attempts under other ids (empty for most)."""
        return sorted(g.id for g in self.concurrent)

    @property
    def run_ids(self) -> list[str]:
        return sorted({w.run_id for w in self.workers})

    def roles(self) -> dict[str, int]:
        out: dict[str, int] = defaultdict(int)
        for w in self.workers:
            out[w.role] += 1
        return dict(sorted(out.items()))


@dataclass
class Grouping:
    """A run directory's attempts, oldest first, and the duplicate files skipped."""

    attempts: list[AttemptGroup]
    duplicates: list[tuple[str, str]]  # (skipped file, the file it duplicates)

    def newest(self) -> AttemptGroup | None:
        """The attempt that started last and has a readable worker."""
        readable = [a for a in self.attempts if a.workers]
        return readable[-1] if readable else None

    def find(self, attempt_id: str) -> AttemptGroup | None:
        """The attempt of that id; else the newest holding a worker of that run id."""
        found = next((a for a in self.attempts if a.id == attempt_id), None)
        holding = [a for a in self.attempts if attempt_id in a.run_ids]
        return found or (holding[-1] if holding else None)


def group_attempts(workers: list[Worker], unreadable: list[UnreadableFile]) -> Grouping:
    """Splits a run directory's workers into attempts (see the module's rules)."""
    kept, duplicates = _drop_duplicates(workers)
    clusters = _clusters(kept)
    groups: list[AttemptGroup] = []
    for cluster in clusters:
        groups.extend(_split_by_claims(cluster))
    spans = [(g, g.start_time, g.end_time, set(g.run_ids)) for g in groups]
    for u in unreadable:
        home = _home_of(u, spans)
        if home is None:
            home = AttemptGroup(u.run_id or "(unnamed)", _start=u.mtime, _end=u.mtime)
            groups.append(home)
            spans.append((home, u.mtime, u.mtime, set()))
        home.unreadable.append(u.entry)
    groups.sort(key=lambda g: (g.start_time or 0.0, g.id))
    _name(groups)
    return Grouping(groups, duplicates)


def _drop_duplicates(workers: list[Worker]) -> tuple[list[Worker], list[tuple[str, str]]]:
    seen: dict[tuple[str, int, str], Worker] = {}
    kept: list[Worker] = []
    duplicates: list[tuple[str, str]] = []
    for w in sorted(workers, key=lambda w: (w.written_at, w.path)):
        key = (w.host, w.pid, w.uuid)
        first = seen.get(key) if w.uuid else None
        if first is not None:
            duplicates.append((w.path, first.path))
            continue
        seen[key] = w
        kept.append(w)
    return kept, duplicates


class _Sets:
    """Union-find over indices."""

    def __init__(self, n: int) -> None:
        self.parent = list(range(n))

    def find(self, i: int) -> int:
        while self.parent[i] != i:
            self.parent[i] = self.parent[self.parent[i]]
            i = self.parent[i]
        return i

    def union(self, a: int, b: int) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)


def _clusters(workers: list[Worker]) -> list[list[Worker]]:
    """Workers joined by transitive lifetime overlap and by parent links."""
    ws = sorted(workers, key=lambda w: (w.start_time, w.path))
    sets = _Sets(len(ws))
    reach = -1.0
    for i, w in enumerate(ws):
        if i and w.start_time <= reach:
            sets.union(i - 1, i)
        reach = max(reach, worker_end(w))
    by_pid: dict[tuple[str, int], list[int]] = defaultdict(list)
    for i, w in enumerate(ws):
        by_pid[(w.host, w.pid)].append(i)
    for i, w in enumerate(ws):
        for j in by_pid.get((w.host, w.ppid), []) if w.ppid else []:
            parent = ws[j]
            alive = not parent.final or parent.written_at + _SLACK_S >= w.start_time
            if j != i and parent.start_time <= w.start_time + _SLACK_S and alive:
                sets.union(i, j)
    siblings: dict[tuple[str, str, int], int] = {}
    same_process: dict[tuple[str, str, int], int] = {}
    for i, w in enumerate(ws):
        # profilers one after the other in one process, into one directory, under one id
        sets.union(i, same_process.setdefault((w.run_id, w.host, w.pid), i))
        # ranks a launcher started: one claimed id, one parent process
        if w.ppid and is_claim(w.run_id):
            sets.union(i, siblings.setdefault((w.run_id, w.host, w.ppid), i))
    out: dict[int, list[Worker]] = defaultdict(list)
    for i, w in enumerate(ws):
        out[sets.find(i)].append(w)
    return list(out.values())


def _split_by_claims(cluster: list[Worker]) -> list[AttemptGroup]:
    """One concurrent cluster: one attempt, or one per claimed id when ids disagree."""
    claims = sorted({w.run_id for w in cluster if is_claim(w.run_id)})
    if len(claims) <= 1:
        return [AttemptGroup(claims[0] if claims else _common_id(cluster), list(cluster))]
    groups: list[AttemptGroup] = []
    for claim in claims:  # a claim's own workers, split again by their own overlap
        for part in _clusters([w for w in cluster if w.run_id == claim]):
            groups.append(AttemptGroup(claim, part))
    for w in cluster:
        if not is_claim(w.run_id):
            max(groups, key=lambda g: (_shared_s(w, g), g.start_time or 0.0)).workers.append(w)
    for g in groups:
        g.concurrent = [o for o in groups if o is not g and o.id != g.id]
    return groups


def _shared_s(w: Worker, g: AttemptGroup) -> float:
    start, end = g.start_time, g.end_time
    if start is None or end is None:
        return 0.0
    return min(end, worker_end(w)) - max(start, w.start_time)


def _common_id(ws: list[Worker]) -> str:
    """An unclaimed attempt's name: the run id most of its workers carry (earliest on a tie)."""
    counts: dict[str, int] = defaultdict(int)
    for w in ws:
        counts[w.run_id] += 1
    first = {w.run_id: i for i, w in reversed(list(enumerate(ws)))}
    return max(counts, key=lambda rid: (counts[rid], -first[rid])) or "(unnamed)"


_Span = tuple[AttemptGroup, "float | None", "float | None", set[str]]


def _home_of(u: UnreadableFile, spans: list[_Span]) -> AttemptGroup | None:
    """The attempt an unreadable file belongs to: one its mtime falls in (one of its name's run
    id first), else the newest of its name's run id, else none."""
    named = [s for s in spans if u.run_id and u.run_id in s[3]]
    if u.mtime is not None:
        for g, start, end, _ in named + [s for s in spans if s not in named]:
            if start is not None and end is not None:
                if start - _SLACK_S <= u.mtime <= end + _SLACK_S:
                    return g
    if named:
        return max(named, key=lambda s: s[1] or 0.0)[0]
    return None


def _name(groups: list[AttemptGroup]) -> None:
    """Reruns under one id become ``ID``, ``ID~2``, ... (oldest first)."""
    seen: dict[str, int] = defaultdict(int)
    for g in groups:
        seen[g.id] += 1
        if seen[g.id] > 1:
            g.id = f"{g.id}~{seen[g.id]}"


def duplicate_ranks(workers: list[Worker]) -> list[tuple[Worker, Worker]]:
    """Pairs of live-at-once processes of one role claiming one rank. A child of another worker
    (a DataLoader or Pool worker inherits its parent's RANK) and a second profiler of one process
    claim nothing."""
    processes = {(w.host, w.pid) for w in workers}
    by_rank: dict[tuple[str, int], list[Worker]] = defaultdict(list)
    for w in workers:
        if w.rank is not None and (w.host, w.ppid) not in processes:
            by_rank[(w.role, w.rank)].append(w)
    pairs = []
    for ws in by_rank.values():
        ws.sort(key=lambda w: w.start_time)
        for i, a in enumerate(ws):
            for b in ws[i + 1 :]:
                same = a.host == b.host and a.pid == b.pid
                if b.start_time < worker_end(a) and not same:
                    pairs.append((a, b))
    return pairs
