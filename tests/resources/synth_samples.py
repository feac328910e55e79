"""The sampler sidecars' writer lives in benchmarks/synth/samples.py (shared with
benchmarks/bench_samples.py, which must not import ``tests``); this name keeps the tests' imports."""

from benchmarks.synth.samples import S, attach_samples, samples_bytes  # noqa: F401
