"""The histogram reference (written from docs/worker-file.md alone, sharing no code with lp_core)
lives in benchmarks/synth/buckets.py, where the synthetic runs use it too; this name keeps the
tests' imports."""

from benchmarks.synth.buckets import (  # noqa: F401
    BUCKETS,
    EXACT,
    MAX_REL_ERROR,
    PER_OCTAVE,
    R,
    bucket_bounds,
    bucket_of,
    bucket_value,
    histogram,
    order_statistic,
    rank_of,
)
