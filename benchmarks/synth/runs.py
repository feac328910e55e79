"""Writes synthetic runs in the real worker-file format (docs/worker-file.md), for the report's
tests and the benchmarks (bench_merge, bench_reduce, bench_top, bench_samples); it lives under
benchmarks/ so that no benchmark imports ``tests`` (tests/unit/test_benchmarks_import_no_tests.py).

Every derived field is computed from the durations given, the way the recorder derives it:
``calls`` and ``wall_ns`` from the entries, ``hist`` with the test suite's own reference of the
documented bucket layout (benchmarks/synth/buckets.py, never ``_core``), ``self_ns`` as (wall+open)
minus the children's (wall+open). The numbers a report prints can
therefore be checked against the durations the test chose (the ground truth), not against
anything the merge computed.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.synth.buckets import bucket_of

from lineprofiler import _core  # the sample-row layout only (buckets come from synth.buckets)

RUN_ID = "20261202T1535-471c94"
T0 = 1_796_226_000.0  # a fixed Unix time (2026-12-02), so rendered output is reproducible


@dataclass
class Ph:
    """One phase of a synthetic thread.

    ``durations``: the completed entries' wall times in ns, either a list of ints or a list of
    ``(ns, count)`` pairs (``dist``). ``cpu``: the fraction of wall spent on CPU (None: CPU not
    measured). Counters are the totals recorded on this phase.
    """

    path: tuple[str, ...]
    durations: Sequence[int] = ()
    dist: Sequence[tuple[int, int]] = ()
    cpu: float | None = 1.0
    counters: dict[str, int] = field(default_factory=dict)
    open: int = 0
    open_ns: int = 0
    sample_every: int | None = None

    def entries(self) -> list[tuple[int, int]]:
        pairs = list(self.dist) + [(d, 1) for d in self.durations]
        return pairs

    @property
    def calls(self) -> int:
        return sum(c for _, c in self.entries())

    @property
    def wall_ns(self) -> int:
        return sum(d * c for d, c in self.entries())


def phase_records(phases: Iterable[Ph]) -> list[dict[str, Any]]:
    """The ``phases`` list of one thread, with self_ns derived from the tree."""
    phases = list(phases)
    total = {p.path: p.wall_ns + p.open_ns for p in phases}
    child_total: dict[tuple[str, ...], int] = {}
    for path, t in total.items():
        if path:
            child_total[path[:-1]] = child_total.get(path[:-1], 0) + t
    out = []
    for p in phases:
        hist: Counter[int] = Counter()
        for d, c in p.entries():
            hist[bucket_of(d)] += c
        rec: dict[str, Any] = {
            "path": list(p.path),
            "calls": p.calls,
            "wall_ns": p.wall_ns,
            "self_ns": max(0, total[p.path] - child_total.get(p.path, 0)),
            "cpu_ns": None if p.cpu is None else int(p.wall_ns * p.cpu),
            "open": p.open,
            "open_ns": p.open_ns,
            "hist": [[b, c] for b, c in sorted(hist.items())],
            "counters": dict(p.counters),
        }
        if p.sample_every is not None:
            rec["sample_every"] = p.sample_every
        if p.path == ("(folded)",):  # as the recorder marks the node a full tree folds into
            rec["synthetic"] = True
        out.append(rec)
    return out


def worker_doc(
    *,
    role: str,
    pid: int,
    host: str = "node01",
    run_id: str = RUN_ID,
    uuid: str | None = None,
    rank: int | None = None,
    start_time: float = T0,
    written_at: float = T0 + 600.0,
    threads: Sequence[tuple[str, Sequence[Ph]]] | Sequence[Ph] = (),
    final: bool = True,
    flush_errors: int = 0,
    last_flush_error: str = "",
    measure_cpu: bool = True,
    thread_names: bool = False,
    snapshot_interval_s: float | None = 30.0,
    own_write_bytes: int | None = 4096,
    folded_entries: int = 0,
    clock: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A whole worker document. ``threads``: ``[(name, [Ph...]), ...]`` or one thread's phases."""
    if threads and isinstance(threads[0], Ph):
        threads = [("MainThread", threads)]  # type: ignore[list-item]
    doc: dict[str, Any] = {
        "format": "lineprofiler-worker",
        "schema_version": 1,
        "meta": {
            "role": role,
            "pid": pid,
            "ppid": 1,
            "host": host,
            "run_id": run_id,
            "uuid": uuid or f"{pid:08x}"[-8:],
            "start_unix_ns": int(start_time * 1e9),
            "start_time": start_time,
            "rank": rank,
            "rank_source": None if rank is None else "RANK",
            "local_rank": None,
            "job_id": None,
            "argv": ["train.py"],
            "python": "3.11.7",
            "measure_cpu": measure_cpu,
            "snapshot_interval_s": snapshot_interval_s,
            "sample_interval_s": None,
            "thread_names": thread_names,
            "lineprofiler_version": "0.1.0",
        },
        "written_at": written_at,
        "written_at_ns": int(written_at * 1e9),
        "snapshot_seq": 3,
        "final": final,
        "clock": clock or {"wall": "tsc", "cpu": "syscall" if measure_cpu else None},
        "flush_errors": flush_errors,
        "last_flush_error": last_flush_error,
        "threads": [
            {
                "tid": pid + i,
                "name": name,
                "depth_overflow": 0,
                "folded_entries": folded_entries if i == 0 else 0,
                "phases": phase_records(
                    p if measure_cpu else _no_cpu(p)
                    for p in phases  # type: ignore[union-attr]
                ),
            }
            for i, (name, phases) in enumerate(threads)  # type: ignore[misc]
        ],
    }
    if own_write_bytes is not None:
        doc["own_write_bytes"] = own_write_bytes
    return doc


def _no_cpu(p: Ph) -> Ph:
    return Ph(p.path, p.durations, p.dist, None, p.counters, p.open, p.open_ns, p.sample_every)


def write_worker(run_dir: Path, doc: dict[str, Any] | str | bytes, name: str | None = None) -> Path:
    """Writes a worker document (or raw text) where the profiler would put it."""
    if isinstance(doc, dict):
        meta = doc["meta"]
        host, default = meta["host"], f"w_{meta['run_id']}_{meta['pid']}_{meta['uuid']}.json"
        text: str | bytes = json.dumps(doc)
    else:
        host, default, text = "node01", name or "w_x_1_00000000.json", doc
    path = Path(run_dir) / "workers" / host / (name or default)
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return path


MS = 1_000_000
S = 1_000_000_000


def golden_run(run_dir: Path) -> Path:
    """The fixed run the golden report tests render: 4 actors on 2 nodes and a learner.

    Actor k (k = 0..3) runs 100 iterations of [self_play/mcts, env_step]; mcts takes 9 ms
    (+1 ms for actor 3, the straggler), env_step 2 ms, waiting 20% of mcts. The learner trains
    with 2 threads (thread_names=True): train_step, and a collector blocked on a queue.
    """
    run_dir = Path(run_dir)
    for k in range(4):
        mcts = 9 * MS + (1 * MS if k == 3 else 0)
        phases = [
            Ph(
                ("iteration",),
                dist=[(mcts + 2_150_000, 95), (2 * mcts + 2_150_000, 5)],
                cpu=0.85,
            ),
            Ph(("iteration", "self_play"), dist=[(mcts + 50_000, 95), (2 * mcts + 50_000, 5)]),
            Ph(
                ("iteration", "self_play", "mcts"),
                dist=[(mcts, 95), (mcts * 2, 5)],
                cpu=0.8,
                counters={"mcts_simulations": 6_400},
            ),
            Ph(("iteration", "env_step"), dist=[(2 * MS, 100)], cpu=1.0, counters={"steps": 100}),
        ]
        write_worker(
            run_dir,
            worker_doc(
                role="actor",
                pid=1000 + k,
                host="node07" if k < 2 else "node08",
                rank=k + 1,
                written_at=T0 + 2.0,
                threads=phases,
            ),
        )
    learner = [
        ("learner", [Ph(("train_step",), dist=[(40 * MS, 30), (55 * MS, 2)], cpu=0.96)]),
        (
            "collector",
            [
                Ph(
                    ("drain_queue",),
                    dist=[(2 * MS, 300), (200 * MS, 1)],
                    cpu=0.06,
                    counters={"items": 1_200},
                )
            ],
        ),
    ]
    write_worker(
        run_dir,
        worker_doc(
            role="learner",
            pid=2000,
            host="node07",
            rank=0,
            written_at=T0 + 2.0,
            threads=learner,
            thread_names=True,
        ),
    )
    return run_dir


def write_samples(
    worker_file: Path,
    pid: int,
    rows: Sequence[dict[str, int]],
    interval_ns: int = S,
    tags: dict[int, Sequence[str]] | None = None,
    n_gpu: int = 0,
) -> dict[str, Any]:
    """Writes a ``.samples`` sidecar (and ``.tags``) beside a worker file in lp_core's row layout
    (``_core.SAMPLE_WORDS``); each row names its words (missing ones are 0), GPU k's as
    ``gpu<k>_busy`` and ``gpu<k>_mine`` (%). Returns the ``samples`` status object the worker
    document carries."""
    from lineprofiler.runfile import samples as sm

    words = sm.BASE_WORDS + 2 * n_gpu
    head = bytearray(sm.HEADER_BYTES)
    head[0:8] = sm.MAGIC
    for off, v in ((8, sm.VERSION), (12, sm.HEADER_BYTES), (16, words), (20, n_gpu)):
        head[off : off + 4] = v.to_bytes(4, "little")
    start = rows[0]["time_unix_ns"] - interval_ns if rows else 0
    for off, v in ((24, interval_ns), (32, pid), (40, start)):
        head[off : off + 8] = v.to_bytes(8, "little")
    body = bytearray()
    for r in rows:
        vals = [0] * words
        for k, v in r.items():
            if k.startswith("gpu"):
                g, kind = k[3:].split("_")
                vals[sm.BASE_WORDS + 2 * int(g) + (kind == "mine")] = v
            else:
                vals[_core.SAMPLE_WORDS[k]] = v
        body += b"".join(v.to_bytes(8, "little", signed=True) for v in vals)
    side = worker_file.with_suffix(".samples")
    side.write_bytes(bytes(head) + bytes(body))
    tag_file = worker_file.with_suffix(".tags")
    tag_file.write_text("".join(json.dumps([k, list(v)]) + "\n" for k, v in (tags or {}).items()))
    status: dict[str, Any] = {"file": side.name, "tags_file": tag_file.name, "rows": len(rows)}
    if n_gpu:
        status["gpu_devices"] = n_gpu
    return status


def big_run(run_dir: Path, workers: int = 1024, phase_name: str = "forward") -> Path:
    """A synthetic ``workers``-process run (ranks on 16 per node): role ``trainer`` runs
    ``step/{data,forward,backward}`` (``forward`` named ``phase_name``); rank 7 is 2x slower in
    backward. Each process has 60 one-second sampler rows: RSS 100 MB + rank kB, 1 MB read per
    row during ``step/data``; every row's tag is ``step/<phase>`` by second."""
    run_dir = Path(run_dir)
    io_flags = _core.SAMPLE_FLAGS["io"] | _core.SAMPLE_FLAGS["rss"]
    for w in range(workers):
        back = (8 if w == 7 else 4) * MS
        phases = [
            Ph(("step",), dist=[(10 * MS + back, 100)], cpu=0.9),
            Ph(("step", "data"), dist=[(2 * MS, 100)], cpu=0.2, counters={"samples": 3200}),
            Ph(("step", phase_name), dist=[(3 * MS, 90), (5 * MS, 10)], cpu=1.0),
            Ph(("step", "backward"), dist=[(back, 100)], cpu=1.0),
        ]
        doc = worker_doc(
            role="trainer",
            pid=30_000 + w,
            host=f"gpu{w // 16:03d}",
            rank=w,
            written_at=T0 + 60.0,
            threads=phases,
        )
        path = write_worker(run_dir, doc)
        tags = {1: ["step", "data"], 2: ["step", phase_name], 3: ["step", "backward"]}
        rows = [
            {
                "time_unix_ns": int((T0 + 1 + i) * S),
                "dt_ns": S,
                "tag": 1 + i % 3,
                "flags": io_flags,
                "read_bytes": 1_000_000 if i % 3 == 0 else 0,
                "read_chars": 1_000_000 if i % 3 == 0 else 0,
                "rss_bytes": 100_000_000 + 1000 * w,
            }
            for i in range(60)
        ]
        doc["samples"] = write_samples(path, 30_000 + w, rows, tags=tags)
        write_worker(run_dir, doc)
    return run_dir
