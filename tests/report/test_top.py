"""``lineprofiler top``: under tmux against a live multi-process run, and piped to a file."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lineprofiler.report.units import fmt_duration
from tests.report.synth import golden_run

TMUX = shutil.which("tmux")
ROOT = Path(__file__).resolve().parents[2]
INTERVAL_S = 1.0


def test_top_piped_prints_plain_frames(tmp_path):
    run_dir = golden_run(tmp_path / "run")
    out = tmp_path / "top.txt"
    with out.open("w") as f:
        proc = subprocess.run(
            [sys.executable, "-m", "lineprofiler", "top", str(run_dir), "--interval", "0.2",
             "-n", "2"],
            stdout=f, stderr=subprocess.PIPE, text=True, timeout=60,
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    text = out.read_text()
    assert "\x1b" not in text  # no terminal control codes in a file
    assert text.count("--- ") == 1  # a finished run: one frame is all there is, even with -n 2
    assert "(q quits)" not in text and "the run has finished" in text
    assert "ACTOR" in text and "LEARNER" in text
    # ground truth (tests/report/synth.py's golden run): 4 actors x 100 env_step entries of 2 ms
    line = next(ln for ln in text.splitlines() if ln.strip().startswith("iteration/env_step"))
    assert fmt_duration(4 * 100 * 2_000_000) in line
    # 4 actors x 100 steps over the run's 2 s runtime: 200.0/s since start
    assert any("+ steps" in ln and "200.0/s" in ln for ln in text.splitlines())
    assert "5 finished" in text


def _capture(sock: Path) -> str:
    return subprocess.run(
        ["tmux", "-S", str(sock), "capture-pane", "-p", "-t", "top"],
        capture_output=True, text=True, timeout=10,
    ).stdout  # fmt: skip


def _alive(sock: Path) -> bool:
    return (
        subprocess.run(
            ["tmux", "-S", str(sock), "has-session", "-t", "top"], capture_output=True, timeout=10
        ).returncode
        == 0
    )


@pytest.mark.skipif(TMUX is None, reason="tmux is not installed (scripts/setup-env installs it)")
def test_top_live_under_tmux(tmp_path):
    run_dir = tmp_path / "run"
    sock = tmp_path / "tmux.sock"
    demo = subprocess.Popen(
        [sys.executable, str(ROOT / "examples" / "pipeline.py"), "--run-dir", str(run_dir),
         "--actors", "2", "--seconds", "14"],
        cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    cmd = f"{sys.executable} -m lineprofiler top {run_dir} --interval {INTERVAL_S}"
    # top refuses a directory that does not exist yet (at once, as report does): start it once the
    # demo has made its run directory (a loaded machine can take seconds to get that far)
    deadline = time.monotonic() + 60
    while not run_dir.is_dir() and time.monotonic() < deadline:
        time.sleep(0.05)
    try:
        subprocess.run(
            ["tmux", "-S", str(sock), "new-session", "-d", "-s", "top", "-x", "140", "-y", "50",
             cmd],
            check=True, timeout=10,
        )  # fmt: skip
        # wait for the run's first worker files (children start and flush within ~2 s)
        deadline = time.monotonic() + 60
        while not list(run_dir.glob("workers/*/w_*.json")) and time.monotonic() < deadline:
            time.sleep(0.1)
        seen_at = time.monotonic()
        screens = []
        while time.monotonic() < seen_at + 20:
            screen = _capture(sock)
            if all(k in screen for k in ("ACTOR", "LEARNER", "mcts", "train_step")):
                break
            time.sleep(0.2)
        took = time.monotonic() - seen_at
        assert "ACTOR" in screen and "mcts" in screen, screen
        # within two intervals of the files appearing (a loaded machine may add ~ one more)
        assert took < 3 * INTERVAL_S + 2, took
        screens.append(screen)
        time.sleep(2.5 * INTERVAL_S)
        screens.append(_capture(sock))
        assert screens[1] != screens[0]  # the run moved on, the view with it
        assert "mcts" in screens[1]
        subprocess.run(["tmux", "-S", str(sock), "send-keys", "-t", "top", "q"], timeout=10)
        deadline = time.monotonic() + 10
        while _alive(sock) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _alive(sock), "top did not quit on q"
    finally:
        if _alive(sock):
            subprocess.run(["tmux", "-S", str(sock), "kill-server"], timeout=10)
        try:
            demo.wait(timeout=90)  # the demo stops its own children after --seconds
        except subprocess.TimeoutExpired:
            demo.terminate()
            demo.wait(timeout=30)


@pytest.mark.skipif(TMUX is None, reason="tmux is not installed (scripts/setup-env installs it)")
@pytest.mark.parametrize("key", ["C-c", "q"])
def test_top_quits_and_restores_the_terminal(tmp_path, key):
    run_dir = golden_run(tmp_path / "run")
    sock = tmp_path / "tmux.sock"
    cmd = (
        f"{sys.executable} -m lineprofiler top {run_dir} --interval 0.5; echo EXIT=$?; "
        "stty -a | tr ' ;' '\\n\\n' | grep -x -- '-\\?icanon'; sleep 30"
    )
    subprocess.run(
        ["tmux", "-S", str(sock), "new-session", "-d", "-s", "top", "-x", "120", "-y", "40", cmd],
        check=True, timeout=10,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while "LEARNER" not in _capture(sock) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert "LEARNER" in _capture(sock)
        subprocess.run(["tmux", "-S", str(sock), "send-keys", "-t", "top", key], timeout=10)
        deadline = time.monotonic() + 15
        while "EXIT=" not in _capture(sock) and time.monotonic() < deadline:
            time.sleep(0.2)
        screen = _capture(sock)
        assert "EXIT=0" in screen, screen
        assert "\nicanon" in "\n" + screen and "-icanon" not in screen  # line mode is back
        assert "LEARNER" not in screen  # the alternate screen was left
    finally:
        subprocess.run(["tmux", "-S", str(sock), "kill-server"], timeout=10, capture_output=True)
