"""Issue 31, items 6 and 7: what the report says. Each test runs real programs, then
``python -m lineprofiler report`` as a user types it, and checks the printed figures against what
the test itself measured or wrote (its own timers, the bytes it fsync'd, the worker files that
appeared on disk)."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from tests.helpers import child_env

UNIT_NS = {"ns": 1, "us": 1e3, "ms": 1e6, "s": 1e9}
UNIT_B = {"B": 1, "kB": 1e3, "MB": 1e6, "GB": 1e9}


def lp(cwd: Path, *args: object) -> subprocess.CompletedProcess[str]:
    """``python -m lineprofiler ARGS`` in ``cwd``; never a traceback."""
    proc = subprocess.run(
        [sys.executable, "-m", "lineprofiler", *(str(a) for a in args)],
        cwd=cwd,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def python(cwd: Path, code: str, *args: str) -> float:
    """Runs ``code`` as a script in ``cwd``; returns the outer wall time in ns."""
    script = cwd / "script.py"
    script.write_text(textwrap.dedent(code))
    t0 = time.perf_counter_ns()
    proc = subprocess.run(
        [sys.executable, str(script), *args],
        cwd=cwd,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    outer = time.perf_counter_ns() - t0
    assert proc.returncode == 0, proc.stderr
    return outer


def duration(text: str) -> tuple[float, float]:
    """``505.1ms`` -> (ns, half the last printed digit in ns)."""
    m = re.fullmatch(r"([0-9]+)(\.[0-9])?(ns|us|ms|s)", text)
    assert m, text
    unit = UNIT_NS[m.group(3)]
    return float(m.group(1) + (m.group(2) or "")) * unit, (0.05 if m.group(2) else 0.5) * unit


def size(text: str) -> tuple[float, float]:
    """``3.1 MB`` -> (bytes, half the last printed digit)."""
    m = re.fullmatch(r"([0-9]+)(\.[0-9])? (B|kB|MB|GB)", text)
    assert m, text
    unit = UNIT_B[m.group(3)]
    return float(m.group(1) + (m.group(2) or "")) * unit, (0.05 if m.group(2) else 0.5) * unit


# -- item 7: an asyncio role's phase time over its process's wall time --

ASYNC_SERVER = """
    import asyncio, sys, time
    from lineprofiler.accounting import Profiler

    profiler = Profiler(run_dir="run", role="server", enabled=True, sample_interval_s=None)
    inner = []

    async def request():
        async with profiler.phase("request"):
            t0 = time.perf_counter_ns()
            await asyncio.sleep(0.05)
            inner.append(time.perf_counter_ns() - t0)

    async def main():
        if sys.argv[1] == "concurrent":
            await asyncio.gather(*(request() for _ in range(10)))
        else:
            for _ in range(3):
                await request()

    asyncio.run(main())
    profiler.close()
    open("inner_ns", "w").write(str(sum(inner)))
"""

OVERLAP = re.compile(
    r"phase time (\S+) is ([0-9.]+)x the process's wall time (\S+): it sums concurrent asyncio "
    r"tasks, each counting its own wall time"
)


def test_an_asyncio_role_says_its_phase_time_sums_concurrent_tasks(tmp_path):
    outer_ns = python(tmp_path, ASYNC_SERVER, "concurrent")
    inner_ns = int((tmp_path / "inner_ns").read_text())
    proc = lp(tmp_path, "report", "run")
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout
    header = " ".join(text.split("SERVER  (1 process", 1)[1].split("request ", 1)[0].split())
    m = OVERLAP.search(header)
    assert m, text
    phase_ns, phase_half = duration(m.group(1))
    wall_ns, wall_half = duration(m.group(3))
    # the phase encloses each task's own timer, ten tasks of >= 50 ms each
    assert phase_ns + phase_half >= inner_ns >= 10 * 50_000_000
    # the process's wall time lies within the time the test saw the whole interpreter run
    assert 0 < wall_ns - wall_half <= outer_ns
    assert phase_ns > wall_ns
    ratio = float(m.group(2))
    lo = (phase_ns - phase_half) / (wall_ns + wall_half)
    hi = (phase_ns + phase_half) / (wall_ns - wall_half)
    assert lo - 0.005 <= ratio <= hi + 0.005, (ratio, lo, hi)
    # the wait column shows async, and the legend says what it means
    assert re.search(r"^request +\S+ +async ", text, re.M), text
    legend = " ".join(text.split())
    assert "async (in the wait% column): the phase has entries inside asyncio tasks" in legend
    assert "sums concurrent tasks (it can exceed the processes' wall time)" in legend


def test_tasks_awaited_one_after_another_get_no_overlap_line(tmp_path):
    python(tmp_path, ASYNC_SERVER, "sequential")
    text = lp(tmp_path, "report", "run").stdout
    assert "SERVER  (1 process" in text and "phase time" not in text, text
    assert "async (in the wait% column)" in " ".join(text.split())  # async entries all the same


# -- item 7: the I/O block's (no phase open) share, of the bytes its table shows --

FSYNC_WRITER = """
    import os, time
    from lineprofiler.accounting import Profiler

    p = Profiler(run_dir="run", role="writer", enabled=True, sample_interval_s=0.1)

    def write_fsync(path, n):
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        view = memoryview(os.urandom(n))
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
        os.close(fd)

    time.sleep(0.3)
    with p.phase("save"):  # open over several sample intervals either side of the write
        time.sleep(0.4)
        write_fsync("in_phase.bin", 3 * 1024 * 1024)
        time.sleep(0.4)
    time.sleep(0.4)
    write_fsync("no_phase.bin", 1024 * 1024)  # the intervals around it start with no phase open
    for _ in range(2):  # read_chars that are no disk bytes: from the page cache
        with open("in_phase.bin", "rb", buffering=0) as f:
            while f.read(1 << 20):
                pass
    time.sleep(0.4)
    p.close()
"""


def test_the_no_phase_share_is_of_the_disk_bytes_the_table_shows(tmp_path):
    in_phase, no_phase = 3 * 1024 * 1024, 1024 * 1024
    python(tmp_path, FSYNC_WRITER)
    proc = lp(tmp_path, "report", "run")
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout
    io = text.split("\nI/O\n", 1)[1].split("\n\n", 1)[0]
    written, half = size(re.search(r"^Write +(\d\S* \S+)", io, re.M).group(1))
    if written < in_phase + no_phase - half:
        import pytest

        pytest.skip(f"the filesystem under tmp_path does not account write_bytes: {io}")
    rows = {
        m.group(1): m.group(3)
        for m in re.finditer(r"^    (\S.*?) +r +(\S+ \S+) +w +(\S+ \S+) +cache", io, re.M)
    }
    assert set(rows) >= {"save", "(no phase open)"}, io
    slack = 256 * 1024  # the interpreter's own writes, if any, beside the test's
    save_w, save_half = size(rows["save"])
    none_w, none_half = size(rows["(no phase open)"])
    assert in_phase - save_half <= save_w <= in_phase + save_half + slack, io
    assert no_phase - none_half <= none_w <= no_phase + none_half + slack, io
    # the share line: one quantity with the table beside it (disk bytes), against the test's
    # own bytes; the 6 MiB it read back from the page cache with no phase open are in neither
    # (of read_chars + write_chars, the share would be about 70%)
    m = re.search(
        r"^  ([0-9.]+)% of disk bytes \(read \+ written\) landed with \(no phase open\)$", io, re.M
    )
    assert m, io
    share = float(m.group(1)) / 100
    assert no_phase / (in_phase + no_phase + slack) - 0.0005 <= share
    assert share <= (no_phase + slack) / (in_phase + no_phase) + 0.0005
    # the HTML report of the same run: its time axis starts at a plain 0
    assert lp(tmp_path, "report", "run", "--html", "r.html").returncode == 0
    html = (tmp_path / "r.html").read_text()
    assert ">0</text>" in html and ">0ns</text>" not in html


# -- item 6: three superseded reruns give one caveat; one entry is "1 entry" --

TRAIN = """
    from lineprofiler.accounting import Profiler

    p = Profiler(run_dir="run", role="trainer", enabled=True, sample_interval_s=None)
    with p.phase("step"):
        sum(range(10_000))
    p.close()
"""


def test_three_superseded_reruns_give_one_caveat_with_a_count(tmp_path):
    ids = []
    for _ in range(4):
        before = set((tmp_path / "run").rglob("w_*.json"))
        python(tmp_path, TRAIN)
        (new,) = set((tmp_path / "run").rglob("w_*.json")) - before
        ids.append(new.name.split("_")[1])  # w_<run id>_<pid>_<uuid>.json
        time.sleep(1.1)  # the next launch starts in a later second
    assert len(set(ids)) == 4, ids
    proc = lp(tmp_path, "report", "run")
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout
    assert f"Run {ids[-1]}" in text
    caveats = text.split("CAVEATS\n", 1)[1].split("\n\n", 1)[0]
    bullets = [b for b in " ".join(caveats.split("\n")[1:]).split("- ") if b.strip()]
    bullets = [" ".join(b.split()) for b in bullets]
    assert len(bullets) == 1, caveats
    assert bullets[0].startswith("3 older attempts superseded"), bullets
    assert all(f"{i} (1 worker file(s)" in bullets[0] for i in ids[:3]), bullets
    assert ids[-1] not in bullets[0]
    # the HTML report shares the list: one item; and its one-entry phase says "1 entry"
    assert lp(tmp_path, "report", "run", "--html", "r.html").returncode == 0
    html = (tmp_path / "r.html").read_text()
    items = html.split('<div class="caveats">', 1)[1].split("</div>", 1)[0]
    assert items.count("<li>") == 1 and "3 older attempts superseded" in items
    assert "step — 1 entry, p50" in html and "step — 1 entries" not in html
