"""Issue 31: the commands people type daily do what they mean. Each test types the command as a
user did (``python -m lineprofiler ...`` in a child process) and checks its output and exit
status against what the test itself set up or measured."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.helpers import child_env
from tests.report.synth import MS, Ph, worker_doc, write_worker


def lp(cwd: Path, *args: object, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    """``python -m lineprofiler ARGS`` as typed in a shell, in ``cwd``; never a traceback."""
    proc = subprocess.run(
        [sys.executable, "-m", "lineprofiler", *(str(a) for a in args)],
        cwd=cwd,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


# -- item 1: record with an unknown flag --


def test_record_with_a_mistyped_flag_says_what_was_meant_and_runs_nothing(tmp_path):
    marker = tmp_path / "ran"
    script = tmp_path / "train.py"
    script.write_text(f"open({str(marker)!r}, 'w').close()\n")
    proc = lp(tmp_path, "record", "--rundir", "x", "--", "python", script)
    assert proc.returncode == 2, proc.stderr
    assert "unrecognized arguments: --rundir (did you mean --run-dir?)" in proc.stderr
    assert not marker.exists() and not (tmp_path / "x").exists()
    proc = lp(tmp_path, "record", "--jsn", "--", sys.executable, script)
    assert proc.returncode == 2 and "did you mean --json?" in proc.stderr
    assert not marker.exists()
    # the command's own flags after -- are its own, not record's
    proc = lp(tmp_path, "record", "--run-dir", "r", "--", sys.executable, script, "--rundir")
    assert marker.exists() and "unrecognized" not in proc.stderr


# -- item 3: compare's gate --


def _runs(tmp_path: Path, step_a_ms: int, step_b_ms: int) -> tuple[Path, Path]:
    """Two one-process runs of role "trainer": load 10 ms x4 in both, step x4 of the given ms."""
    dirs = []
    for name, step_ms in (("a", step_a_ms), ("b", step_b_ms)):
        phases = [Ph(("load",), [10 * MS] * 4), Ph(("step",), [step_ms * MS] * 4)]
        write_worker(tmp_path / name, worker_doc(role="trainer", pid=7, threads=phases))
        dirs.append(tmp_path / name)
    return dirs[0], dirs[1]


def test_a_gate_that_compared_nothing_fails_and_says_why(tmp_path):
    write_worker(tmp_path / "a", worker_doc(role="actor", pid=1, threads=[Ph(("x",), [MS])]))
    write_worker(tmp_path / "b", worker_doc(role="learner", pid=2, threads=[Ph(("x",), [MS])]))
    proc = lp(tmp_path, "compare", "a", "b", "--fail-over", "20")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    first = proc.stdout.splitlines()[0]
    assert first.startswith("GATE failed: nothing was compared")
    assert "no role in common (A: actor; B: learner)" in first
    doc = json.loads(lp(tmp_path, "compare", "a", "b", "--fail-over", "20", "--json").stdout)
    assert doc["gate"]["passed"] is False and doc["gate"]["checked"] == 0
    assert "no role in common" in doc["gate"]["why_none"]
    # a role in common, but every phase under --min-share: fails too, and says so
    a, b = _runs(tmp_path, 20, 20)  # load 40/120 of the time, step 80/120
    proc = lp(tmp_path, "compare", a, b, "--fail-over", "20", "--min-share", "90")
    assert proc.returncode == 1
    assert "none of the 2 phase(s) in both runs took --min-share 90%" in proc.stdout
    # without a gate, nothing compared is no failure: compare only shows
    assert lp(tmp_path, "compare", "a", "b").returncode == 0


def test_fail_over_takes_a_percentage_with_or_without_percent_sign(tmp_path):
    a, b = _runs(tmp_path, 10, 13)  # step +30% per call, load unchanged
    for pct in ("20", "20%", " 20% "):
        proc = lp(tmp_path, "compare", a, b, "--fail-over", pct)
        assert proc.returncode == 1, (pct, proc.stdout, proc.stderr)
        assert "grew by more than 20%" in proc.stdout and "+30%" in proc.stdout
    for pct in ("40", "40%"):
        proc = lp(tmp_path, "compare", a, b, "--fail-over", pct)
        assert proc.returncode == 0 and "2 phase(s) compared" in proc.stdout
    # 0.2 reads as a fraction: refused with the two ways to say what was meant
    proc = lp(tmp_path, "compare", a, b, "--fail-over", "0.2")
    assert proc.returncode == 2 and "looks like a fraction" in proc.stderr
    assert "write 20 (or 20%)" in proc.stderr and "0.2%" in proc.stderr
    # ... and 0.2% is 0.2 percent, on purpose: +30% is far over it
    proc = lp(tmp_path, "compare", a, b, "--fail-over", "0.2%")
    assert proc.returncode == 1 and "grew by more than 0.2%" in proc.stdout
    proc = lp(tmp_path, "compare", a, b, "--fail-over", "twenty")
    assert proc.returncode == 2 and "not a percentage" in proc.stderr


def test_a_phase_typo_lists_the_phases_there_are(tmp_path):
    a, b = _runs(tmp_path, 10, 13)
    proc = lp(tmp_path, "compare", a, b, "--fail-over", "20", "--phase", "stpe")
    assert proc.returncode == 2
    assert "--phase 'stpe': no such phase in both runs (did you mean step?)" in proc.stderr
    assert "phases in both: load, step" in proc.stderr
    proc = lp(tmp_path, "compare", a, b, "--fail-over", "20", "--phase", "step")
    assert proc.returncode == 1 and "1 phase(s)" in proc.stdout


# -- item 2: record reports the directory the run wrote, and passes the status through --

OWN_RUN_DIR = """
import sys
from lineprofiler.accounting import Profiler

with Profiler(run_dir=sys.argv[1], role="solo") as p:
    for _ in range(int(sys.argv[2])):
        with p.phase("step"):
            pass
if len(sys.argv) > 4:  # a second run directory of the same command
    with Profiler(run_dir=sys.argv[4], role="other") as p:
        with p.phase("step"):
            pass
sys.exit(int(sys.argv[3]))
"""


def test_record_reports_the_run_dir_the_script_chose(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(OWN_RUN_DIR)
    cmd = ["record", "--json", "--no-samples", "--", sys.executable, script]
    proc = lp(tmp_path, *cmd, "mydir", "3", "0")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["run"]["roles"] == {"solo": 1}
    (step,) = [p for r in doc["roles"] for p in r["phases"] if p["path"] == ["step"]]
    assert step["calls"] == 3  # the three entries the script made
    assert f"wrote to {tmp_path / 'mydir'}, not --run-dir {tmp_path / 'profile'}" in proc.stderr
    assert not (tmp_path / "profile").exists()
    # status 0 is not announced (the README's `> /dev/null` examples stay quiet) ...
    assert "exited with status" not in proc.stderr
    # ... another is, and passes through, with the report still printed
    proc = lp(tmp_path, *cmd, "mydir2", "2", "3")
    assert proc.returncode == 3 and "exited with status 3" in proc.stderr
    assert json.loads(proc.stdout)["run"]["roles"] == {"solo": 1}
    # two run directories: the first is reported, the other named
    proc = lp(tmp_path, *cmd, "one", "1", "0", "two")
    assert proc.returncode == 0
    assert json.loads(proc.stdout)["run"]["roles"] == {"solo": 1}
    assert f"also wrote to {tmp_path / 'two'}" in proc.stderr
    # the script writing where record asked: nothing said about directories
    proc = lp(tmp_path, "record", "--run-dir", "r", "--", sys.executable, script, "r", "1", "0")
    assert proc.returncode == 0 and "SOLO" in proc.stdout and proc.stderr == ""


def test_record_help_says_which_run_dir_wins(tmp_path):
    out = " ".join(lp(tmp_path, "record", "--help").stdout.split())
    assert "unless the command's code passes its own Profiler(run_dir=...), which wins" in out
    assert "exits with the command's own exit status" in out


# -- item 4: top --

LIVE = """
import sys, time
from lineprofiler.accounting import Profiler
run_dir, interval_s, seconds = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
before = time.time()  # the profiler's first write comes after this
p = Profiler(run_dir=run_dir, role="worker", enabled=True, snapshot_interval_s=interval_s,
             sample_interval_s=0.1)
print(before, flush=True)
end = time.monotonic() + seconds
while time.monotonic() < end:
    with p.phase("work"):
        time.sleep(0.02)
p.close()
"""


def _start_live(tmp_path: Path, run_dir: str, interval_s: float, seconds: float):
    script = tmp_path / "live.py"
    script.write_text(LIVE)
    child = subprocess.Popen(
        [sys.executable, script, run_dir, str(interval_s), str(seconds)],
        cwd=tmp_path,
        env=child_env(),
        stdout=subprocess.PIPE,
        text=True,
    )
    return child, float(child.stdout.readline())


def _seconds(text: str) -> float:
    """A duration as fmt_duration prints it below a minute (``850ns``, ``9.4ms``, ``28.3s``)."""
    for unit, scale in (("ns", 1e-9), ("us", 1e-6), ("ms", 1e-3), ("s", 1.0)):
        if text.endswith(unit):
            return float(text[: -len(unit)]) * scale
    raise AssertionError(text)


def test_top_of_a_missing_directory_fails_at_once_as_report_does(tmp_path):
    report = lp(tmp_path, "report", "nope")
    top = lp(tmp_path, "top", "nope", timeout=30)  # it used to wait forever
    assert top.returncode == report.returncode == 2
    assert top.stderr.replace("lineprofiler top", "lineprofiler report") == report.stderr


def test_top_in_the_first_interval_says_when_the_first_write_is_due(tmp_path):
    import time

    child, before = _start_live(tmp_path, "live", 30.0, 60.0)
    try:
        proc = lp(tmp_path, "top", "live", "-n", "1")
        seen_at = time.time()
    finally:
        child.kill()
        child.wait()
    assert proc.returncode == 0, proc.stderr
    assert "(q quits)" not in proc.stdout  # piped: there is no key to press
    line = next(ln for ln in proc.stdout.splitlines() if "have not written a phase yet" in ln)
    assert line.startswith("1 process(es)")
    due_s = _seconds(line.rsplit(" ", 1)[1])
    # the first write came after `before` and before top read it; the next is 30 s after it
    # (printed to 0.1 s: +-0.05)
    assert 30.0 - (seen_at - before) - 0.05 <= due_s <= 30.0 + 0.05, (due_s, line)


def test_top_between_writes_says_since_when_and_keeps_the_last_interval(tmp_path):
    child, _ = _start_live(tmp_path, "live", 2.0, 60.0)
    try:
        proc = lp(tmp_path, "top", "live", "--interval", "0.25", "-n", "20")
    finally:
        child.kill()
        child.wait()
    assert proc.returncode == 0, proc.stderr
    frames = proc.stdout.split("--- ")[1:]
    assert len(frames) == 20  # the run goes on: -n ends it
    stalls = [f for f in frames if "No new snapshot since" in f and "(none yet)" not in f]
    # 20 refreshes at least 0.25 s apart (5 s or more) and a write every 2 s: some refreshes
    # after the second write see no new one
    assert stalls, proc.stdout
    for f in stalls:
        since = float(f.split("No new snapshot since ")[1].split("s")[0])
        assert since <= 2.0 + 5.0, f  # the newest write's age (2 s apart), not the run's
        work = next(ln.split() for ln in f.splitlines() if ln.strip().startswith("work"))
        # 'last' is the interval between the two newest writes: the child was in "work" all the
        # time (sleeping 20 ms per entry), so never 0 — the stall of old
        assert _seconds(work[1]) > 0.1, f


def test_top_piped_ends_with_the_run_and_says_it_finished(tmp_path):
    child, _ = _start_live(tmp_path, "done", 0.5, 1.0)
    child.wait(timeout=60)
    proc = lp(tmp_path, "top", "done", "--interval", "0.2", timeout=60)  # no -n: it must end
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("--- ") == 1
    assert "1 finished" in proc.stdout and "the run has finished" in proc.stdout
    assert "RSS at the end" in proc.stdout and "RSS now" not in proc.stdout


# -- item 5: serve --

SERVE_CHILD = """
import sys, time
from lineprofiler.accounting import Profiler
before = time.time()
p = Profiler(run_dir=sys.argv[1], role="trainer", enabled=True, snapshot_interval_s=30,
             sample_interval_s=None)
for _ in range(5):
    with p.phase("step"):
        time.sleep(0.01)
print(before, flush=True)
sys.stdin.readline()  # the test says when to close
p.close()
"""


class _Serve:
    """``python -m lineprofiler serve DIR --port 0 --interval 0``; ``lines``: its stderr lines up
    to and including the one naming its URL."""

    def __init__(self, cwd: Path, run_dir: str, started=None):
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "lineprofiler", "serve", run_dir, "--port", "0",
             "--interval", "0"],
            cwd=cwd, env=child_env(), stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            self.lines = [self.proc.stderr.readline()]
            if started is not None:  # serve is waiting: start the run now
                started(self.proc)
            while "http://" not in self.lines[-1] and self.lines[-1]:
                self.lines.append(self.proc.stderr.readline())
            import re

            m = re.search(r"http://127\.0\.0\.1:(\d+)/metrics", self.lines[-1])
            assert m is not None, self.lines
        except BaseException:
            self.close()
            raise
        self.base = f"http://127.0.0.1:{m.group(1)}"

    def get(self, path: str) -> tuple[int, str]:
        import urllib.error
        import urllib.request

        try:
            with urllib.request.urlopen(self.base + path, timeout=30) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()

    def metrics(self) -> dict:
        from prometheus_client.parser import text_string_to_metric_families

        status, text = self.get("/metrics")
        assert status == 200
        return {f.name: f for f in text_string_to_metric_families(text)}

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=30)
        self.proc.stderr.close()


def _serve_child(tmp_path: Path, run_dir: str) -> subprocess.Popen:
    script = tmp_path / "serve_child.py"
    script.write_text(SERVE_CHILD)
    return subprocess.Popen(
        [sys.executable, script, run_dir], cwd=tmp_path, env=child_env(),
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip


def _value(fams: dict, name: str, suffix: str = "") -> float | None:
    fam = fams.get(name)
    got = [s.value for s in fam.samples if s.name == name + suffix] if fam else []
    assert len(got) <= 1
    return got[0] if got else None


def test_serve_answers_metrics_an_index_and_404(tmp_path):
    import pytest

    pytest.importorskip("prometheus_client")
    write_worker(tmp_path / "run", worker_doc(role="a", pid=1, threads=[Ph(("x",), [MS] * 3)]))
    served = _Serve(tmp_path, "run")
    try:
        assert _value(served.metrics(), "lineprofiler_phase_calls", "_total") == 3
        status, page = served.get("/")
        assert status == 200 and 'href="metrics"' in page
        for path in ("/metricz", "/metrics/", "/favicon.ico", "/x/metrics"):
            status, body = served.get(path)
            assert status == 404 and "lineprofiler_" not in body, path
    finally:
        served.close()


def test_serve_waits_for_the_run_and_says_what_is_live(tmp_path):
    import time

    import pytest

    pytest.importorskip("prometheus_client")
    children: list[subprocess.Popen] = []

    def start_the_run(serve: subprocess.Popen) -> None:
        time.sleep(1.0)
        assert serve.poll() is None  # still waiting for the directory, not failed
        children.append(_serve_child(tmp_path, "later"))

    served = None
    try:
        # serve started before the run: it waits, says so, then serves
        served = _Serve(tmp_path, "later", start_the_run)
        assert "waiting for later" in served.lines[0], served.lines
        (child,) = children
        before = float(child.stdout.readline())  # five steps done, not written yet (30 s)
        fams = served.metrics()
        seen_at = time.time()
        # the report's LIVE semantics: going on, one process whose first write is to come
        assert _value(fams, "lineprofiler_run_live_seconds") is not None
        assert _value(fams, "lineprofiler_processes_not_written_yet") == 1
        due = _value(fams, "lineprofiler_next_write_seconds")
        assert 30 - (seen_at - before) - 0.5 <= due <= 30.0, due
        assert not _value(fams, "lineprofiler_phase_calls", "_total")
        # the child closes: its five entries, and the run is no longer live
        child.stdin.write("\n")
        child.stdin.flush()
        assert child.wait(timeout=60) == 0
        fams = served.metrics()
        assert _value(fams, "lineprofiler_phase_calls", "_total") == 5
        assert _value(fams, "lineprofiler_run_live_seconds") is None
        assert _value(fams, "lineprofiler_processes_not_written_yet") is None
    finally:
        for c in children:
            if c.poll() is None:
                c.kill()
                c.wait()
        if served is not None:
            served.close()


# -- item 8: --help --


def _option_help(out: str, option: str) -> str | None:
    """The help text of ``option`` in a --help page (up to the next option or section)."""
    import re

    m = re.search(rf"^  (?:-\w, )?{re.escape(option)}\b(.*?)(?=^  -|^\S|\Z)", out, re.M | re.S)
    return " ".join(m.group(1).split()) if m else None


def test_every_subcommand_help_has_examples_in_one_style(tmp_path):
    import re

    from lineprofiler.cli import COMMANDS

    tops = {}
    for name, command in COMMANDS.items():
        assert command.help[0].isupper() and command.help.endswith("."), name
        out = lp(tmp_path, name, "--help").stdout
        assert "examples:" in out, name
        examples = out.split("examples:", 1)[1]
        assert re.search(rf"^  (\S.* )?lineprofiler {name}\b", examples, re.M), (name, examples)
        flat = " ".join(out.split())
        assert not re.search(r"\(\d+\)", flat), (name, flat)  # "(default 30)", never "(30)"
        tops[name] = _option_help(out, "--top")
    # --top's default differs (10, 20, 8, 30): each says what it counts, and its default
    assert {n for n, t in tops.items() if t} == {"report", "compare", "top", "run", "show"}
    for name, text in tops.items():
        if text:
            assert "(default" in text and re.search(r"phases|lines", text), (name, text)
