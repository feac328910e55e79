"""``export --perfetto``'s tracks in C++ (``_core.perfetto_tracks``) write the same bytes as the
Python path the pure install uses, on tables no sampler would write: int64 extremes in every
column, clocks that step back, dt <= 0, negative and unknown tags, GPUs, names that need escaping
(and names that are not UTF-8, which the Python path takes). The tracks' figures themselves are
checked against the test's own row-by-row reading in test_perfetto.py, on both paths."""

from __future__ import annotations

import random
from array import array

import pytest

from lineprofiler.report import perfetto
from lineprofiler.report.perfetto import MAX_POINTS, _native_text, _tracks_text, worker_events
from lineprofiler.runfile.layout import THREADS_MARK
from lineprofiler.runfile.samples import BASE_WORDS, F_GPU, F_IO, F_RSS, SampleTable
from lineprofiler.runfile.worker_doc import Worker

I64 = (-(2**63), 2**63 - 1)
S = 1_000_000_000


def _pick(rng: random.Random, typical: list[int]) -> int:
    """A typical value mostly; now and then an int64 extreme or a small negative."""
    r = rng.random()
    if r < 0.04:
        return rng.choice(I64)
    if r < 0.08:
        return rng.randint(-5, -1)
    if r < 0.10:
        return rng.randint(*I64)
    return rng.choice(typical)


def _table(rng: random.Random, n: int, n_gpu: int, extremes: bool) -> list[array]:
    """The seven columns perfetto_tracks takes, then two a GPU."""
    t0 = rng.randint(0, 2 * 10**18)
    ends, dts, tags, flags, rb, wb, rss = ([] for _ in range(7))
    t = t0
    for _ in range(n):
        step = rng.choice([S, S, S, 2 * S, -3 * S, 0, 1234])  # steps back now and then
        t += step
        ends.append(t)
        dts.append(rng.choice([S, S, 2 * S, 0, -S, 999, 1001]))
        tags.append(rng.choice([0, 1, 1, 2, 3, 4, 99, -7]))  # 99, -7: not in the tags file
        flags.append(rng.randrange(16))
        rb.append(rng.choice([0, 0, 1234, 10**6, 4_000_000, 499, 500, 1500]))
        wb.append(rng.choice([0, 2_000_000, 1, 999_999]))
        rss.append(rng.choice([-1, 10**9, 10**9 + 50_000, 10**9 + 49_999, 150_000, 0]))
    cols = [ends, dts, tags, flags, rb, wb, rss]
    for _ in range(n_gpu):
        cols.append([rng.choice([-1, 0, 50, 100, 100, 37]) for _ in range(n)])
        cols.append([rng.choice([-1, 0, 3, 3, 99]) for _ in range(n)])
    if extremes:
        cols = [[_pick(rng, col) for _ in col] for col in cols]
    return [array("q", col) for col in cols]


TAGS = {
    1: ("load",),
    2: ("train", "step"),
    3: ("step", THREADS_MARK, "work"),
    4: ('q"uo\\te', "é\u2028\x07tab\t" * 30),  # escaped, control characters, cut at 120 bytes
}


@pytest.mark.skipif(perfetto._native_tracks is None, reason="no _core: the pure install")
@pytest.mark.parametrize("seed", range(40))
def test_native_tracks_are_the_python_paths_bytes(seed):
    rng = random.Random(seed)
    n = rng.choice([1, 2, 3, 17, 400])
    n_gpu = rng.choice([0, 1, 2])
    cols = _table(rng, n, n_gpu, extremes=seed % 2 == 1)
    origin = rng.choice([0, rng.randint(0, 2 * 10**18), rng.randint(*I64), I64[0], I64[1]])
    tid = rng.choice([1, 7, 123456])
    got = _native_text(tid, cols, n_gpu, TAGS, origin)
    want = _tracks_text(tid, cols, n_gpu, TAGS, origin)
    assert got == want
    assert seed % 2 or n < 17 or (want[0] and want[1])  # typical tables: slices and counters


@pytest.mark.skipif(perfetto._native_tracks is None, reason="no _core: the pure install")
def test_a_merged_worker_and_an_origin_beyond_int64_are_the_same_bytes():
    rng = random.Random(5)
    n, n_gpu = MAX_POINTS + 5, 1  # rows merged 2 at a time
    cols = _table(rng, n, n_gpu, extremes=False)
    full = [array("q", bytes(8 * n)) for _ in range(BASE_WORDS + 2 * n_gpu)]
    for word, col in zip((0, 1, 2, 3, 4, 5, 8), cols[:7], strict=True):  # W_T .. W_RSS
        full[word] = col
    full[BASE_WORDS], full[BASE_WORDS + 1] = cols[7], cols[8]
    table = SampleTable(pid=1, interval_ns=S, n_gpu=n_gpu, start_unix_ns=0, rows=n, cols=full)
    w = _worker()
    for origin in (0, 2**63):  # beyond int64: the Python path writes it
        native = worker_events(3, w, table, TAGS, origin)
        python = _python_events(3, w, table, TAGS, origin)
        assert native == python
        assert native[1] > MAX_POINTS // 10 and len(native[0]) == 3


def _worker() -> Worker:
    return Worker(path="w", role="r", host="h", pid=1, run_id="x", uuid="u", start_time=0.0, written_at=0.0)  # fmt: skip


def _python_events(*args):
    return worker_events(*args, native=False)


@pytest.mark.skipif(perfetto._native_tracks is None, reason="no _core: the pure install")
def test_a_name_that_is_not_utf8():
    """A tags file may name a phase with a lone surrogate (JSON's "\\ud800"): slice_name writes
    it as "?" on both paths; a name given to the C++ as is, which UTF-8 cannot hold, makes it
    decline (None) rather than raise, and the worker is the Python path's."""
    rng = random.Random(1)
    cols = _table(rng, 50, 0, extremes=False)
    tags = {1: ("bad\ud800name",)}
    cols[2] = array("q", [1] * 50)
    table = SampleTable(pid=1, interval_ns=S, n_gpu=0, start_unix_ns=0, rows=50, cols=[
        cols[0], cols[1], cols[2], cols[3], cols[4], cols[5], array("q", [0] * 50),
        array("q", [0] * 50), cols[6], *(array("q", [0] * 50) for _ in range(3))
    ])  # fmt: skip
    native = worker_events(1, _worker(), table, tags, 0)
    assert native == _python_events(1, _worker(), table, tags, 0)
    assert '"name":"bad?name"' in native[0][1]
    assert perfetto._native_tracks(1, 0, cols, 0, {1: '"bad\ud800"'}, '"x"') is None
    assert perfetto._native_tracks(1, 0, cols, 0, {1: '"ok"'}, '"x"') is not None


@pytest.mark.skipif(perfetto._native_tracks is None, reason="no _core: the pure install")
def test_bad_columns_raise_clearly():
    good = [array("q", [1, 2]) for _ in range(7)]
    with pytest.raises(TypeError, match="int64"):
        perfetto._native_tracks(1, 0, [*good[:6], array("d", [1.0, 2.0])], 0, {}, '"x"')
    with pytest.raises(ValueError, match="different lengths"):
        perfetto._native_tracks(1, 0, [*good[:6], array("q", [1])], 0, {}, '"x"')
    with pytest.raises(ValueError, match="7 columns"):
        perfetto._native_tracks(1, 0, good, 1, {}, '"x"')
    for n_gpu in (2**63 - 1, 2**63 - 2, 2**63 - 3, -1):  # never a count that wraps around
        with pytest.raises(ValueError, match="7 columns"):
            perfetto._native_tracks(1, 0, good[:5], n_gpu, {}, '"x"')
    with pytest.raises(ValueError, match="7 columns"):
        perfetto._native_tracks(1, 0, good[:6], 0, {}, '"x"')
    assert F_GPU | F_IO | F_RSS < 16  # the tables above draw every combination of flags
