"""Synthetic runs in the real on-disk formats, shared by the benchmarks and the tests (the tests
import them from here; no benchmark imports ``tests``): ``runs`` (worker documents and whole runs),
``samples`` (sampler sidecars), ``buckets`` (the histogram reference written from the docs alone),
``child`` (a child interpreter's environment)."""
