"""Every command that reads a run, run in one child process over one (possibly hostile) run.

``EVERY_COMMAND`` is code for a test's child interpreter (``tests.helpers.run_python``; the child
cannot import ``tests``): ``every_command(run, other, out_dir, seconds_each)`` runs ``report``,
``report --json``, ``report --html``, ``top -n 1``, ``attempts``, ``reduce``, ``compare``,
``export --perfetto`` and one ``serve`` scrape (the collector ``serve`` registers, scraped as
Prometheus does), each under a SIGALRM time limit, and returns ``{command: problem}`` for those
that failed: an exit status other than 0 or 2, a hang, an exception out of ``main()``, a
traceback or "internal error" in what it printed, a refusal (2) of more than one line, or a raw
control character (other than a line feed) in what a text command printed. The caller sets the
memory ceiling (RLIMIT_AS) for the child.
"""

from __future__ import annotations

COMMANDS = (
    "report",
    "report --json",
    "report --html",
    "top -n 1",
    "attempts",
    "reduce",
    "compare",
    "export",
    "serve",
)

EVERY_COMMAND = (
    f"COMMANDS = {COMMANDS!r}\n"
    + '''
import contextlib as _contextlib
import io as _io
import signal as _signal
import time as _time

from lineprofiler.cli import main as _cli_main

_TEXT = {"report", "top -n 1", "attempts", "reduce", "compare", "export"}


class Hang(Exception):
    pass


def _on_alarm(signum, frame):
    raise Hang()


def raw_control(text):
    """The control characters (as hex) a terminal would act on, other than a line feed."""
    return sorted({hex(ord(ch)) for ch in text if not ch.isprintable() and ch != "\\n"})[:5]


def _scrape(run):
    from prometheus_client import CollectorRegistry, generate_latest

    from lineprofiler.report.merge import RunError
    from lineprofiler.report.prometheus import RunCollector

    collector = RunCollector(str(run), 0.0, False)
    try:
        collector.refresh()  # what serve does at start-up: a RunError is its clean refusal
    except RunError as exc:
        return 2, "", str(exc) + "\\n"
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    return 0, generate_latest(registry).decode(), ""


def _argv(command, run, other, out_dir):
    return {
        "report": ["report", run],
        "report --json": ["report", "--json", run],
        "report --html": ["report", "--html", f"{out_dir}/report.html", run],
        "top -n 1": ["top", run, "-n", "1"],
        "attempts": ["attempts", run],
        "reduce": ["reduce", run],
        "compare": ["compare", other, run],
        "export": ["export", run, "--perfetto", f"{out_dir}/trace.json"],
    }[command]


def run_command(command, run, other, out_dir, seconds):
    """(rc, stdout, stderr, problem or None) of one command."""
    out, err = _io.StringIO(), _io.StringIO()
    _signal.signal(_signal.SIGALRM, _on_alarm)
    _signal.alarm(max(1, int(seconds)))
    t0 = _time.monotonic()
    try:
        with _contextlib.redirect_stdout(out), _contextlib.redirect_stderr(err):
            if command == "serve":
                rc, text, msg = _scrape(run)
                out.write(text)
                err.write(msg)
            else:
                rc = _cli_main(_argv(command, str(run), str(other), str(out_dir)))
    except Hang:
        rc = "hang"
    except BaseException as exc:  # anything escaping main() is a failure
        rc = f"raised {type(exc).__name__}: {str(exc)[:200]}"
    finally:
        _signal.alarm(0)
    took = _time.monotonic() - t0
    stdout, stderr = out.getvalue(), err.getvalue()
    problem = None
    if rc not in (0, 2):
        problem = f"exit {rc} after {took:.1f}s"
    elif "Traceback" in stdout + stderr or "internal error" in stdout + stderr:
        problem = "traceback or internal error"
    elif rc == 2 and len(stderr.strip().splitlines()) != 1:
        problem = "a refusal of more than one line"
    elif raw_control(stderr) or (command in _TEXT and raw_control(stdout)):
        problem = f"raw control characters {raw_control(stdout + stderr)}"
    return rc, stdout, stderr, problem


def every_command(run, other, out_dir, seconds_each, only=COMMANDS):
    """{command: (rc, stdout, stderr, problem)} for each command in ``only``."""
    return {c: run_command(c, run, other, out_dir, seconds_each) for c in only}
'''
)
