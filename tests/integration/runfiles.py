"""Reading a run directory's worker files in tests (until every assertion goes through merge_run)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.helpers import read_worker, worker_files


@dataclass
class Worker:
    path: Path
    doc: dict[str, Any]
    meta: dict[str, Any] = field(init=False)
    tree: dict[tuple[str, ...], dict[str, Any]] = field(init=False)

    def __post_init__(self) -> None:
        self.meta = self.doc["meta"]
        self.tree = {}
        for thread in self.doc["threads"]:
            for row in thread["phases"]:
                key = tuple(row["path"])
                acc = self.tree.setdefault(
                    key, {"calls": 0, "open": 0, "open_ns": 0, "wall_ns": 0, "counters": Counter()}
                )
                for k in ("calls", "open", "open_ns", "wall_ns"):
                    acc[k] += row[k]
                acc["counters"].update(row.get("counters", {}))

    def calls(self, *path: str) -> int:
        return self.tree.get(path, {}).get("calls", 0)

    def counter(self, name: str, *path: str) -> int:
        return self.tree.get(path, {}).get("counters", {}).get(name, 0)


def workers(run_dir: Path) -> list[Worker]:
    return [Worker(p, read_worker(p)) for p in worker_files(run_dir)]


def roles(ws: list[Worker]) -> Counter[str]:
    return Counter(w.meta["role"] for w in ws)
