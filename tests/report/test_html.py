"""``lineprofiler report DIR --html FILE``, opened in headless Chromium (Debian's ``chromium``).

Checked in the browser, not in our own strings: the DOM Chromium builds (role and phase names as
text, the charts as SVG, a hostile phase name as text and not as an element), the console
(no uncaught script error), and a screenshot's pixels (not blank). Numbers are checked against
the durations the synthetic run was written with.
"""

from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

from lineprofiler.report.units import fmt_bytes, fmt_duration, fmt_share
from tests.report.synth import MS, T0, Ph, S, big_run, worker_doc, write_samples, write_worker

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None, reason="chromium is not installed (scripts/setup-env installs it)"
)
ROOT = Path(__file__).resolve().parents[2]
HOSTILE = "<script>alert(1)</script>"
IMAGE_OUT = os.environ.get("LP_SAVE_SCREENSHOT")  # a path: keep the pipeline's screenshot there


def lp(*args: str, cwd: Path, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [sys.executable, "-m", "lineprofiler", *map(str, args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def chromium(*args: str, cwd: Path, timeout: float = 150) -> subprocess.CompletedProcess[str]:
    cmd = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        f"--user-data-dir={cwd / 'chromium-profile'}",
        *args,
    ]
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout)


def uncaught_errors(stderr: str) -> list[str]:
    return [ln for ln in stderr.splitlines() if "Uncaught" in ln]


def png_colors(path: Path) -> tuple[int, float]:
    """(distinct colours, fraction of pixels not near-white) of an 8-bit RGB(A) PNG."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, ihdr = 8, b"", None
    while pos < len(data):
        (n,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + n]
        if kind == b"IHDR":
            ihdr = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    assert ihdr is not None
    w, h, depth, ctype = ihdr[:4]
    assert depth == 8 and ctype in (2, 6), ihdr
    bpp = 3 if ctype == 2 else 4
    raw = zlib.decompress(idat)
    stride = w * bpp
    prev = bytearray(stride)
    colors: set[bytes] = set()
    dark = 0
    for y in range(h):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        for i in range(stride):  # PNG's five filters
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        prev = line
        if y % 4 == 0:
            for x in range(0, w, 4):
                px = bytes(line[x * bpp : x * bpp + 3])
                colors.add(px)
                dark += min(px) < 235
    return len(colors), dark / ((h + 3) // 4 * ((w + 3) // 4))


@pytest.fixture(scope="module")
def pipeline_html(tmp_path_factory) -> Path:
    """The demo pipeline (2 actors, a learner, 3 s), run for real, then reported as HTML."""
    tmp = tmp_path_factory.mktemp("pipeline")
    run_dir = tmp / "run"
    subprocess.run(
        [sys.executable, str(ROOT / "examples" / "pipeline.py"), "--run-dir", str(run_dir),
         "--actors", "2", "--seconds", "3"],
        cwd=tmp, check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    out = tmp / "report.html"
    proc = lp("report", run_dir, "--html", out, cwd=tmp)
    assert proc.returncode == 0, proc.stderr
    return out


@pytest.fixture(scope="module")
def big_html(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("big")
    run_dir = big_run(tmp / "run", 1024, phase_name=HOSTILE)
    out = tmp / "report.html"
    proc = lp("report", run_dir, "--html", out, cwd=tmp)
    assert proc.returncode == 0, proc.stderr
    return out


def test_html_is_self_contained_and_small(big_html):
    page = big_html.read_text()
    assert len(page.encode()) < 5_000_000
    # nothing fetched: no URL an element would load, no external script, stylesheet or font
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page)
    assert "@import" not in page and "url(http" not in page
    assert "<script src" not in page


@needs_chromium
def test_pipeline_html_in_chromium(pipeline_html, tmp_path):
    dom = chromium("--dump-dom", pipeline_html.as_uri(), cwd=tmp_path)
    assert dom.returncode == 0, dom.stderr[-2000:]
    html = dom.stdout
    for name in ("actor", "learner", "supervisor", "mcts", "env_step", "train_step", "wait_batch"):
        assert f">{name}" in html or f"/{name}<" in html, name
    assert html.count("<svg") >= 8
    assert "<rect" in html and "<polyline" in html  # bars and the sampler's timelines

    log = chromium("--enable-logging=stderr", "--v=0", "--dump-dom", pipeline_html.as_uri(),
                   cwd=tmp_path)  # fmt: skip
    assert uncaught_errors(log.stderr) == []

    shot = tmp_path / "shot.png"
    got = chromium(f"--screenshot={shot}", "--window-size=1100,1500", "--hide-scrollbars",
                   pipeline_html.as_uri(), cwd=tmp_path)  # fmt: skip
    assert shot.exists(), got.stderr[-2000:]
    colors, inked = png_colors(shot)
    assert colors > 40 and inked > 0.03, (colors, inked)
    if IMAGE_OUT:
        shutil.copyfile(shot, IMAGE_OUT)


@needs_chromium
def test_big_run_html_in_chromium(big_html, tmp_path):
    dom = chromium("--enable-logging=stderr", "--v=0", "--dump-dom", big_html.as_uri(),
                   cwd=tmp_path)  # fmt: skip
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert uncaught_errors(dom.stderr) == []
    html = dom.stdout
    # the hostile phase name is text: escaped in the DOM, never an element, never run
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<script>alert(1)" not in html
    assert len(re.findall(r"<script\b", html)) == 2  # the embedded data and the page's script
    # ground truth: 1,024 processes x 100 entries of 2 ms in step/data; rank 7's backward is 2x
    assert "1,024 processes" in html
    assert f">{fmt_duration(1024 * 100 * 2 * MS)}<" in html
    assert "rank 7 (gpu000)" in html
    # 1,024 processes x 20 rows of 1 MB read, in the sampled I/O table
    assert f">{fmt_bytes(1024 * 20 * 1_000_000)}<" in html
    assert html.count("<svg") >= 6


@needs_chromium
def test_checks_can_fail(tmp_path):
    """The console check sees an uncaught error, and a blank page's screenshot is blank."""
    bad = tmp_path / "bad.html"
    bad.write_text("<html><body><script>null.x = 1;</script></body></html>")
    log = chromium("--enable-logging=stderr", "--v=0", "--dump-dom", bad.as_uri(), cwd=tmp_path)
    assert uncaught_errors(log.stderr)
    shot = tmp_path / "blank.png"
    chromium(f"--screenshot={shot}", "--window-size=400,300", bad.as_uri(), cwd=tmp_path)
    colors, inked = png_colors(shot)
    assert colors <= 2 and inked == 0.0


@needs_chromium
def test_gpu_timeline_and_hostile_role(tmp_path):
    """Two processes on one GPU: busy 50% then 90%, this run's pids 20% + 30%. A role named like
    markup is text too."""
    run_dir = tmp_path / "run"
    for i, mine in enumerate((20, 30)):
        doc = worker_doc(
            role=f"<b>{HOSTILE}</b>", pid=100 + i, rank=i, written_at=T0 + 20.0,
            threads=[Ph(("train",), dist=[(5 * MS, 100)])],
        )  # fmt: skip
        path = write_worker(run_dir, doc)
        rows = [
            {"time_unix_ns": int((T0 + 1 + t) * S), "dt_ns": S, "tag": 1,
             "flags": _gpu_flags(), "gpu0_busy": 50 if t < 10 else 90, "gpu0_mine": mine}
            for t in range(19)
        ]  # fmt: skip
        doc["samples"] = write_samples(path, 100 + i, rows, tags={1: ["train"]}, n_gpu=1)
        write_worker(run_dir, doc)
    out = tmp_path / "r.html"
    assert lp("report", run_dir, "--html", out, cwd=tmp_path).returncode == 0
    dom = chromium("--enable-logging=stderr", "--v=0", "--dump-dom", out.as_uri(), cwd=tmp_path)
    assert uncaught_errors(dom.stderr) == []
    html = dom.stdout
    assert "GPU 0 on node01" in html
    assert ">90%<" in html  # the chart's scale: the busiest window
    assert "GPU 0 this run" in html
    # time-weighted busy (10 s at 50%, 9 s at 90%) and this run's pids' sum (20% + 30%)
    assert f"busy {fmt_share((10 * 50 + 9 * 90) / 19 / 100)}, this run 50.0%" in html
    assert "&lt;b&gt;&lt;script&gt;alert(1)&lt;/script&gt;&lt;/b&gt;" in html
    assert "<b><script>" not in html and len(re.findall(r"<script\b", html)) == 2


def _gpu_flags() -> int:
    from lineprofiler import _core

    return _core.SAMPLE_FLAGS["gpu"]


@needs_chromium
def test_caveats_first_and_sampled_marks(tmp_path):
    """A stale worker's caveat is shown above the roles, worded as in the text report; a sampled
    phase keeps its ``~`` and says its rate."""
    from tests.report.synth import golden_run

    run_dir = golden_run(tmp_path / "run")
    write_worker(
        run_dir,
        worker_doc(
            role="actor", pid=1100, host="node09", rank=5, final=False, start_time=T0 - 700.0,
            written_at=T0 - 600.0,
            threads=[Ph(("iteration",), dist=[(5 * MS, 10)]),
                     Ph(("iteration", "fast_op"), dist=[(100_000, 1000)], sample_every=100)],
        ),
    )  # fmt: skip
    # a process alive from before the stale one started until now keeps both in one attempt
    write_worker(
        run_dir,
        worker_doc(role="supervisor", pid=1200, host="node09", start_time=T0 - 800.0,
                   written_at=T0 + 2.0, threads=[Ph(("watch",), dist=[(MS, 1)])]),
    )  # fmt: skip
    out = tmp_path / "r.html"
    assert lp("report", run_dir, "--html", out, cwd=tmp_path).returncode == 0
    text = lp("report", run_dir, "--top", "0", cwd=tmp_path).stdout
    dom = chromium("--dump-dom", out.as_uri(), cwd=tmp_path).stdout
    caveats = " ".join(text.split("CAVEATS", 1)[1].split())  # the text report's, unwrapped
    said = "stopped writing before the run's newest file"
    assert said in caveats and "actor rank 5 (node09) 10m behind" in caveats
    body = dom.split("<body>", 1)[1]
    assert 0 <= body.index("CAVEATS") < body.index(said) < body.index('<details class="role"')
    assert "actor rank 5 (node09) 10m behind" in body
    assert "~iteration/fast_op" in dom and "1 entry in 100" in dom
