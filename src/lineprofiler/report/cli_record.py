"""``lineprofiler record [--role R] [--run-dir D] [--lines P [--lines-entries N|all]] -- COMMAND``:
profile a run, then report it.

Sets ``LINEPROFILER_PROFILE=1``, ``LINEPROFILER_RUN_DIR`` (absolute) and, with ``--role``,
``LINEPROFILER_ROLE`` (with ``--lines``, ``LINEPROFILER_LINES`` and ``LINEPROFILER_LINES_ENTRIES``:
the lines of those phases are traced) for the command and every process it starts, runs it, and prints the report
of the run directory when it ends. A ``Profiler(run_dir=...)`` in the command's code wins over
``--run-dir``: each enabled profiler appends the directory it writes to a hand-off file record
names in ``LINEPROFILER_RECORD_DIRS`` (accounting/_record_handoff.py), and record reports that
directory. The command's exit status is always ``record``'s (a report that cannot be made is
said on stderr); a non-zero one is also said on stderr.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from lineprofiler.report.cli_report import (
    ITERATION_HELP,
    emit,
    fail,
    internal_error,
    render_report,
)
from lineprofiler.report.merge import RunError, merge_run
from lineprofiler.report.units import terminal_safe
from lineprofiler.runfile.layout import (
    ENV_LINES,
    ENV_LINES_ENTRIES,
    ENV_PROFILE,
    ENV_RECORD_DIRS,
    ENV_ROLE,
    ENV_RUN_DIR,
    ENV_RUN_ID,
)
from lineprofiler.runfile.safe_read import UnsafeFile, read_regular

HANDOFF_LIMIT = 64 << 20  # the hand-off file: one path per enabled profiler of the command

EXAMPLES = """\
examples:
  lineprofiler record -- python train.py --epochs 3
  lineprofiler record --role learner --run-dir runs/today -- python learner.py
  lineprofiler record --json -- torchrun --nproc-per-node 4 train.py > report.json
  lineprofiler record --lines train_step -- python train.py
  lineprofiler record --lines iteration/train_step --lines-entries all -- python train.py

The command's processes join the run by building Profiler(role=...) (or calling
accounting.phase()); nothing else needs configuring. A Profiler(run_dir=...) in the
command's code wins over --run-dir: record then reports the directory the run wrote.
record exits with the command's own exit status, whatever the report.
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--run-dir",
        default="profile",
        metavar="DIR",
        help="where the run's files go (default: profile, under the current directory), unless "
        "the command's code passes its own Profiler(run_dir=...), which wins",
    )
    parser.add_argument("--role", metavar="R", help="the role of processes that set none")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument(
        "--no-samples", action="store_true", help="phases only: leave out the resource blocks"
    )
    parser.add_argument("--iteration", metavar="NAME", help=ITERATION_HELP)
    parser.add_argument(
        "--lines",
        action="append",
        type=_phase_names,
        metavar="PHASE",
        help="also trace the lines of this phase in every process (a name matches every path "
        "ending in it, a/b/c that path exactly; repeat it or separate names by commas); "
        f"sets {ENV_LINES}",
    )
    parser.add_argument(
        "--lines-entries",
        type=_entries,
        metavar="N|all",
        help=f"entries of each --lines phase traced per process, spread over the run (default "
        f"20; all: every entry); sets {ENV_LINES_ENTRIES}",
    )
    parser.add_argument("command", nargs=argparse.REMAINDER, help="the command, after --")


def main(args: argparse.Namespace) -> int:
    command = list(args.command)
    if command[:1] == ["--"]:
        command = command[1:]
    if not command:
        return fail("record", "no command to run (usage: lineprofiler record -- python train.py)")
    run_dir = Path(os.path.abspath(args.run_dir))  # as Profiler resolves it
    env = dict(os.environ)
    env[ENV_PROFILE] = "1"
    env[ENV_RUN_DIR] = str(run_dir)
    env.pop(ENV_RUN_ID, None)  # a new run: its processes agree on an attempt among themselves
    if args.role:
        env[ENV_ROLE] = args.role
    if args.lines:
        env[ENV_LINES] = ",".join(dict.fromkeys(n for group in args.lines for n in group))
    if args.lines_entries is not None:
        if not args.lines and not env.get(ENV_LINES, "").strip():
            return fail("record", "--lines-entries needs --lines (the phases to trace)")
        env[ENV_LINES_ENTRIES] = args.lines_entries
    with tempfile.TemporaryDirectory(prefix="lineprofiler-record-") as handoff_dir:
        handoff = Path(handoff_dir) / "run_dirs"
        handoff.touch(mode=0o600)
        env[ENV_RECORD_DIRS] = str(handoff)
        try:
            proc = subprocess.Popen(command, env=env)
        except OSError as exc:
            return fail("record", f"cannot run {command[0]!r}: {exc.strerror or exc}")
        # Ctrl-C reaches the command (same process group); wait for it to finish its exit path.
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            status = proc.wait()
        finally:
            signal.signal(signal.SIGINT, previous)
        written = _announced_dirs(handoff)
    rc = status if status >= 0 else 128 - status  # killed by a signal: as a shell reports it
    if rc:
        print(
            f"lineprofiler record: {terminal_safe(command[0])} exited with status {rc}",
            file=sys.stderr,
        )
    report_dir = _report_dir(run_dir, written)
    try:
        run = merge_run(report_dir, with_samples=not args.no_samples)
        out = render_report(run, args.json, iteration=args.iteration)
    except RunError as exc:
        fail(
            "record",
            f"{exc}. Did the command build a Profiler (or call accounting.phase())? Processes "
            f"join the run through {ENV_PROFILE}=1 and {ENV_RUN_DIR}, which record set.",
        )
        return rc
    except Exception as exc:  # never a traceback on a user's terminal
        internal_error("record", exc)
        return rc
    emit(out)
    return rc


def _phase_names(text: str) -> list[str]:
    """--lines: comma-separated phase names or "/"-joined paths."""
    names = [n.strip().strip("/") for n in text.split(",") if n.strip()]
    if not names or any(not p.strip() for n in names for p in n.split("/")):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a phase name or path (train_step, iteration/train_step)"
        )
    return names


def _entries(text: str) -> str:
    """--lines-entries: a positive int, or all."""
    if text.strip().lower() == "all":
        return "all"
    if not text.strip().isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number of entries or 'all'")
    return str(int(text))


def _announced_dirs(handoff: Path) -> list[Path]:
    """The run directories the command's profilers announced, first-announced first."""
    try:
        raw = read_regular(handoff, HANDOFF_LIMIT, within=handoff.parent)
    except UnsafeFile:
        return []
    names = [os.fsdecode(n) for n in raw.split(b"\0") if n]
    return [Path(n) for n in dict.fromkeys(names)]


def _report_dir(run_dir: Path, written: list[Path]) -> Path:
    """--run-dir when the run wrote there (or said nothing), else the directory it wrote first;
    any other directory it wrote is named on stderr."""
    chosen = run_dir if run_dir in written or not written else written[0]
    if chosen != run_dir:
        print(
            f"lineprofiler record: the command's Profiler(run_dir=...) wrote to "
            f"{terminal_safe(str(chosen))}, not --run-dir {terminal_safe(str(run_dir))}: "
            "reporting that",
            file=sys.stderr,
        )
    others = [d for d in written if d != chosen]
    if others:
        print(
            "lineprofiler record: the command also wrote to "
            f"{terminal_safe(', '.join(str(d) for d in others))} "
            "(lineprofiler report DIR for each)",
            file=sys.stderr,
        )
    return chosen
