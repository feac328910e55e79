"""``benchmarks/bench_hot_paths.py`` reads other benchmarks' ``--json`` output by key: every key it
reads appears, quoted, in that benchmark's source (a case renamed in bench_accounting would
otherwise break the table only when someone runs it, ten minutes in). A key written under another
object than the one read is not caught: running the benchmarks is what checks that."""

from __future__ import annotations

import importlib.util
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


class _Keys(dict):
    """A JSON object that answers every key with 1.0 (or another such object) and records it."""

    def __init__(self, seen: set[str], top: bool = True) -> None:
        super().__init__()
        self.seen, self.top = seen, top

    def __getitem__(self, key: str):
        self.seen.add(key)
        nested = (self.top and key in _NESTED) or key in _NESTED_DEEPER
        return _Keys(self.seen, top=False) if nested else 1.0


_NESTED = {"ratio", "calling_conventions", "ratio_to_two_clock_reads", "tight_loop_processes",
           "line_calling_outside", "floor_processes"}  # fmt: skip
_NESTED_DEEPER = {"one_margin"}  # objects inside those


def test_every_key_read_is_one_its_benchmark_writes() -> None:
    spec = importlib.util.spec_from_file_location(
        "bench_hot_paths", BENCHMARKS / "bench_hot_paths.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    for name, cmd in mod.RUNS.items():
        seen: set[str] = set()
        rows = mod._rows(name, _Keys(seen))
        assert rows and seen, name
        source = (BENCHMARKS / cmd[0]).read_text()
        missing = sorted(k for k in seen if f'"{k}"' not in source)
        assert missing == [], (name, cmd[0], missing)
