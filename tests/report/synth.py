"""The synthetic runs live in benchmarks/synth/runs.py (shared with the benchmarks, which must not
import ``tests``); this name keeps the tests' imports."""

from benchmarks.synth.runs import (  # noqa: F401
    MS,
    RUN_ID,
    T0,
    Ph,
    S,
    big_run,
    golden_run,
    phase_records,
    worker_doc,
    write_samples,
    write_worker,
)
