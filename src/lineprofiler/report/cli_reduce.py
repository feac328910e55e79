"""``lineprofiler reduce DIR [--host H ...]``: fold hosts' worker files into summaries.

For big jobs: each node folds its own directory (``srun --ntasks-per-node=1 lineprofiler reduce
DIR --host "$(hostname)"``), and ``report`` then reads one summary per host instead of every
worker file, re-reading a host's files only where they changed since its summary.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from lineprofiler.report.cli_report import fail, internal_error
from lineprofiler.report.merge import RunError, check_run_dir
from lineprofiler.report.units import terminal_safe
from lineprofiler.runfile.layout import WORKERS_DIR

EXAMPLES = """\
examples:
  lineprofiler reduce profile/                       fold every host's worker files
  srun --ntasks-per-node=1 lineprofiler reduce profile/ --host "$(hostname)"
                                                     each node folds its own, in parallel
  lineprofiler report profile/                       then reads one summary per host
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_dir", metavar="DIR", help="the run directory")
    parser.add_argument(
        "--host",
        action="append",
        metavar="H",
        help="a host directory under DIR/workers/ to reduce (repeatable; default: every host)",
    )


def main(args: argparse.Namespace) -> int:
    from lineprofiler.report.reduce import reduce_host

    root = Path(args.run_dir)
    try:
        check_run_dir(root)
        known = sorted(p.name for p in (root / WORKERS_DIR).iterdir() if p.is_dir())
        hosts = args.host or known
        for host in hosts:
            if host not in known:
                return fail(
                    "reduce",
                    f"{root}: no host {host!r} under workers/ (hosts: "
                    f"{', '.join(known) or 'none'})",
                )
            path, n = reduce_host(root, host)
            # a host is a directory name anyone who can write workers/ chooses
            print(
                f"{terminal_safe(host)}: {n} worker file(s) -> {terminal_safe(str(path))}",
                file=sys.stderr,
            )
    except RunError as exc:
        return fail("reduce", str(exc))
    except OSError as exc:
        where = f"{exc.filename}: " if exc.filename else ""
        return fail("reduce", f"cannot write the summary: {where}{exc.strerror or exc}")
    except Exception as exc:  # never a traceback on a user's terminal
        return internal_error("reduce", exc)
    return 0
