"""Which worker files ran together: a run directory's attempts, by time and by id.

An *attempt* is the set of processes that ran together, however they were started. The rule, in
order (``docs/internals/processes.md`` has it for users):

1. **Duplicates.** Files of one (host, pid, uuid) are one process's: the file whose name and
   directory agree with its contents is kept (the earliest written among those), the others are
   skipped and named.
2. **Lifetimes.** A worker's lifetime runs from its profiler's start to: its final write; else,
   when its process is known to have ended (``report.fates``: on the reader's host and boot its
   pid is gone or another process's, or a later file reuses its pid), its last write, as
   nothing says it lived longer; else (alive, or on a host the reader cannot check) its last
   write plus one snapshot interval.
3. **Time.** Workers whose lifetimes overlap, transitively, ran together. So do a child and the
   worker that is its parent (alive at its start), the profilers one process built one after
   the other, and processes one parent launched while another it launched was alive (by their
   own process start, ``meta.process_start``: a rank whose profiler started after a quick
   sibling's ended). Files without a process start (older writers) keep the older rule: one
   claimed id and one parent process are one attempt.
4. **Ids.** A run id lineprofiler generated for a process with nothing to inherit
   (``20261203T1731-a1b2c3``) claims nothing. Any other id (explicit ``LINEPROFILER_RUN_ID``,
   Slurm, torchrun, MPI) is a claim: workers of concurrent but different claims are separate
   attempts that *overlapped* (named as such); the unclaimed workers among them go with the
   claim they share the most time with.
5. **Reruns.** Attempts one after the other under one id are ``ID``, ``ID~2``, ... (oldest
   first), never summed.
6. **Launches merged.** An attempt whose first processes (those no worker started) came from
   different parent processes on one host, share no run id and run one program (``argv[0]``)
   looks like one program launched twice; it stays one attempt and the merge names it
   (``merged_launches``). (Different programs from different parents, such as a Ray driver and
   the actors its raylet started, are one run's parts.)

Unreadable files have no lifetime: one goes with the attempt of its own process (its name's run
id and pid), else the one its modification time falls in, else the newest that started before
it, else its name's run id's newest, else it stands alone.

Each attempt carries ``why``: the evidence that grouped its files, in words.
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
# A process's own start is known to a clock tick (10 ms) and its boot's clock from the files
# (report.fates); a launch this close after a sibling's end is still "while it was alive".
_LAUNCH_SLACK_S = 0.02
_MAX_LAUNCHES_COMPARED = 64  # parents of one program on one host compared pairwise


def is_claim(run_id: str) -> bool:
    """Whether a run id says which launch a worker belongs to (not one generated per process)."""
    return bool(run_id) and not _GENERATED_ID.match(run_id)


def worker_end(w: Worker) -> float:
    """The end of a worker's lifetime (Unix s): its final write; its last write when its process
    is known to have ended without one; else its last write plus one snapshot interval."""
    if w.final or w.ended_unclosed:
        return w.written_at
    return w.written_at + (w.snapshot_interval_s or 0.0)


def name_agrees(w: Worker) -> bool:
    """Whether a file's name and directory are the ones its writer gave it
    (``workers/<host_dir>/w_<run_id>_<pid>_<uuid>.json``)."""
    parts = w.path.replace("\\", "/").split("/")
    if parts[-1] != f"w_{w.run_id}_{w.pid}_{w.uuid}.json":
        return False
    return w.host_dir is None or (len(parts) >= 2 and parts[-2] == w.host_dir)


@dataclass
class UnreadableFile:
    """An unreadable worker file with what its name and the file system say about it."""

    entry: Unreadable
    run_id: str  # from the file name ("" when the name has none)
    mtime: float | None
    pid: int | None = None  # from the file name
    size: int | None = None


@dataclass
class AttemptGroup:
    """One attempt: its workers (and unreadable files), before merging."""

    id: str
    workers: list[Worker] = field(default_factory=list)
    unreadable: list[Unreadable] = field(default_factory=list)
    concurrent: list[AttemptGroup] = field(default_factory=list, repr=False)  # other ids
    why: list[str] = field(default_factory=list)  # the evidence that grouped its files
    # Separate launches merged into it: per (host, parent pid), its first processes
    launches: list[tuple[str, int, list[Worker]]] = field(default_factory=list, repr=False)
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
    misplaced: list[str] = field(default_factory=list)  # skipped: name/directory disagree

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
    """Splits a run directory's workers into attempts (see the module's rules). The workers'
    fates (``report.fates.settle_fates``) are settled first."""
    kept, duplicates, misplaced = _drop_duplicates(workers)
    groups: list[AttemptGroup] = []
    for cluster, reasons in _clusters(kept):
        groups.extend(_split_by_claims(cluster, reasons))
    for g in groups:
        _note_launches(g)
    processes = {(w.run_id, w.pid): g for g in groups for w in g.workers}
    for u in unreadable:
        home = _home_of(u, groups, processes)
        if home is None:
            home = AttemptGroup(u.run_id or "(unnamed)", _start=u.mtime, _end=u.mtime)
            home.why.append("unreadable files only, placed by their names and times")
            groups.append(home)
        elif not any("unreadable" in r for r in home.why):
            home.why.append("unreadable files placed by their names and modification times")
        home.unreadable.append(u.entry)
    groups.sort(key=lambda g: (g.start_time or 0.0, g.id))
    _name(groups)
    _note_reruns(groups)
    return Grouping(groups, duplicates, misplaced)


def _drop_duplicates(
    workers: list[Worker],
) -> tuple[list[Worker], list[tuple[str, str]], list[str]]:
    """One file per (host, pid, uuid): the one whose name and directory agree with its contents
    (the earliest written among them), so a planted copy never replaces the real file."""
    order = sorted(workers, key=lambda w: (not name_agrees(w), w.written_at, w.path))
    seen: dict[tuple[str, int, str], Worker] = {}
    kept: list[Worker] = []
    duplicates: list[tuple[str, str]] = []
    misplaced: list[str] = []
    for w in order:
        key = (w.host, w.pid, w.uuid)
        first = seen.get(key) if w.uuid else None
        if first is not None:
            duplicates.append((w.path, first.path))
            if not name_agrees(w):
                misplaced.append(w.path)
            continue
        seen[key] = w
        kept.append(w)
    kept.sort(key=lambda w: w.path)
    return kept, sorted(duplicates), sorted(misplaced)


class _Sets:
    """Union-find over indices, remembering why each pair was joined."""

    def __init__(self, n: int) -> None:
        self.parent = list(range(n))
        self.edges: list[tuple[int, str]] = []  # (an index, the reason it was joined)

    def find(self, i: int) -> int:
        while self.parent[i] != i:
            self.parent[i] = self.parent[self.parent[i]]
            i = self.parent[i]
        return i

    def union(self, a: int, b: int, reason: str) -> None:
        ra, rb = self.find(a), self.find(b)
        if a != b:  # every piece of evidence is kept, also for files already joined
            self.edges.append((a, reason))
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)


# The reasons files are joined, as ``attempts`` prints them
OVERLAP = "lifetimes overlap"
PARENT = "child of a worker"
SAME_PROCESS = "one process, several profilers"
TOGETHER = "launched together by one parent process"
LAUNCHER = "one claimed id and one parent process (files without a process start)"


def _clusters(workers: list[Worker]) -> list[tuple[list[Worker], dict[str, int]]]:
    """Workers joined by transitive lifetime overlap, parent links and one process; with how
    many joins each reason made."""
    ws = sorted(workers, key=lambda w: (w.start_time, w.path))
    sets = _Sets(len(ws))
    reach = -1.0
    for i, w in enumerate(ws):
        if i and w.start_time <= reach:
            sets.union(i - 1, i, OVERLAP)
        reach = max(reach, worker_end(w))
    by_pid: dict[tuple[str, int], list[int]] = defaultdict(list)
    for i, w in enumerate(ws):
        by_pid[(w.host, w.pid)].append(i)
    for i, w in enumerate(ws):
        for j in by_pid.get((w.host, w.ppid), []) if w.ppid else []:
            parent = ws[j]
            alive = worker_end(parent) + _SLACK_S >= w.start_time
            if j != i and parent.start_time <= w.start_time + _SLACK_S and alive:
                sets.union(i, j, PARENT)
    same_process: dict[tuple[str, int, str], int] = {}
    siblings: dict[tuple[str, int], list[int]] = defaultdict(list)
    old_siblings: dict[tuple[str, str, int], int] = {}
    for i, w in enumerate(ws):
        # profilers one after the other in one process (a pid reused is another process)
        key = (w.host, w.pid, w.process_start or "id:" + w.run_id)
        first = same_process.setdefault(key, i)
        if first != i:  # (a file joined to itself adds nothing)
            sets.union(i, first, SAME_PROCESS)
        if w.ppid and w.launched_at is not None:
            siblings[(w.host, w.ppid)].append(i)
        elif w.ppid and is_claim(w.run_id):  # older files: one claimed id, one parent
            first = old_siblings.setdefault((w.run_id, w.host, w.ppid), i)
            if first != i:
                sets.union(i, first, LAUNCHER)
    for members in siblings.values():
        # processes one parent launched while another it launched was still alive: one launch
        # (a rank whose profiler started after a quick sibling's ended), where a second launch
        # after every process of the first had ended is not
        members.sort(key=lambda i: ws[i].launched_at or 0.0)
        alive_until = -1.0
        for k, i in enumerate(members):
            launched = ws[i].launched_at or 0.0
            if k and launched <= alive_until + _LAUNCH_SLACK_S:
                sets.union(members[k - 1], i, TOGETHER)
            alive_until = max(alive_until, worker_end(ws[i]))
    out: dict[int, list[Worker]] = defaultdict(list)
    for i, w in enumerate(ws):
        out[sets.find(i)].append(w)
    reasons: dict[int, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for i, reason in sets.edges:
        reasons[sets.find(i)][reason] += 1
    return [(members, dict(reasons[root])) for root, members in out.items()]


def _why(workers: list[Worker], reasons: dict[str, int]) -> list[str]:
    out = [f"{len(workers)} file(s)"]
    for reason in (OVERLAP, TOGETHER, PARENT, SAME_PROCESS, LAUNCHER):
        if reasons.get(reason):
            out.append(reason)
    if len(workers) == 1:
        out.append("ran alone")
    return out


def _split_by_claims(cluster: list[Worker], reasons: dict[str, int]) -> list[AttemptGroup]:
    """One concurrent cluster: one attempt, or one per claimed id when ids disagree."""
    claims = sorted({w.run_id for w in cluster if is_claim(w.run_id)})
    if len(claims) <= 1:
        g = AttemptGroup(claims[0] if claims else _common_id(cluster), list(cluster))
        g.why = _why(cluster, reasons)
        g.why.append(f"claimed id {claims[0]}" if claims else "no claimed id (generated ids)")
        return [g]
    groups: list[AttemptGroup] = []
    for claim in claims:  # a claim's own workers, split again by their own overlap
        for part, part_reasons in _clusters([w for w in cluster if w.run_id == claim]):
            g = AttemptGroup(claim, part)
            g.why = _why(part, part_reasons) + [f"claimed id {claim}, apart from other claims"]
            groups.append(g)
    for w in cluster:
        if not is_claim(w.run_id):
            home = max(groups, key=lambda g: (_shared_s(w, g), g.start_time or 0.0))
            home.workers.append(w)
            note = "unclaimed workers joined the claim they shared most time with"
            if note not in home.why:
                home.why.append(note)
    for g in groups:
        g.concurrent = [o for o in groups if o is not g and o.id != g.id]
    return groups


def _note_launches(g: AttemptGroup) -> None:
    """Names the launcher of an attempt's first processes (those no worker of it started), and
    records separate launches merged into it: on one host, first processes of different parent
    processes that share no run id but run one program (``argv[0]``: one script started twice,
    arguments aside)."""
    processes = {(w.host, w.pid) for w in g.workers}
    roots: dict[tuple[str, int], list[Worker]] = defaultdict(list)
    for w in g.workers:
        if w.ppid and (w.host, w.ppid) not in processes:
            roots[(w.host, w.ppid)].append(w)
    if len(roots) == 1:
        [(host, ppid)] = roots
        g.why.append(f"launched by pid {ppid} on {host}")
        return
    if roots:
        g.why.append(f"launched by {len(roots)} parent processes")
    by_host: dict[str, list[tuple[int, list[Worker]]]] = defaultdict(list)
    for (host, ppid), ws in roots.items():
        by_host[host].append((ppid, ws))
    separate: set[tuple[str, int]] = set()
    for host, launches in by_host.items():
        by_program: dict[str, list[tuple[int, set[str]]]] = defaultdict(list)
        for ppid, ws in launches:
            for program in {w.argv[0] for w in ws if w.argv}:
                by_program[program].append((ppid, {w.run_id for w in ws}))
        for same in by_program.values():
            for i, (pa, ids_a) in enumerate(same[:_MAX_LAUNCHES_COMPARED]):
                for pb, ids_b in same[i + 1 : _MAX_LAUNCHES_COMPARED]:
                    if not ids_a & ids_b:
                        separate |= {(host, pa), (host, pb)}
    for host, ppid in sorted(separate):
        g.launches.append((host, ppid, roots[(host, ppid)]))
    if g.launches:
        parents = ", ".join(f"pid {p} on {h}" for h, p, _ in g.launches)
        g.why.append(
            f"separate launches by time only (one program from parents {parents}, no shared id)"
        )


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


def _home_of(
    u: UnreadableFile,
    groups: list[AttemptGroup],
    processes: dict[tuple[str, int], AttemptGroup],
) -> AttemptGroup | None:
    """The attempt an unreadable file belongs to (see the module's rules)."""
    if u.run_id and u.pid is not None:
        own = processes.get((u.run_id, u.pid))
        if own is not None:
            return own
    named = [g for g in groups if u.run_id and u.run_id in g.run_ids]
    if u.mtime is not None:
        for g in named + [g for g in groups if g not in named]:
            start, end = g.start_time, g.end_time
            if start is not None and end is not None:
                if start - _SLACK_S <= u.mtime <= end + _SLACK_S:
                    return g
        for pool in (named, groups):
            before = [g for g in pool if g.workers and (g.start_time or 0.0) <= u.mtime]
            if before:
                return max(before, key=lambda g: g.start_time or 0.0)
    if named:
        return max(named, key=lambda g: g.start_time or 0.0)
    return None


def _name(groups: list[AttemptGroup]) -> None:
    """Reruns under one id become ``ID``, ``ID~2``, ... (oldest first)."""
    seen: dict[str, int] = defaultdict(int)
    for g in groups:
        seen[g.id] += 1
        if seen[g.id] > 1:
            g.id = f"{g.id}~{seen[g.id]}"


def _note_reruns(groups: list[AttemptGroup]) -> None:
    """Says, for each attempt after the first, why it is not part of the one before."""
    for prev, g in zip(groups, groups[1:], strict=False):
        if g in prev.concurrent or prev.end_time is None or not g.workers:
            continue
        ended = [w for w in prev.workers if w.ended_unclosed]
        how = " (some ended without a final write: pid gone)" if ended else ""
        g.why.append(f"started after every process of {prev.id} had ended{how}")


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
