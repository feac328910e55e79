"""``lineprofiler export DIR --perfetto FILE``: the run's sampled timeline as a Chrome JSON trace.

Exit status 0 when the trace was written, 2 when the directory cannot be reported or none of its
workers has resource samples (the sampler was off: ``sample_interval_s=None``).
"""

from __future__ import annotations

import argparse
import sys

from lineprofiler.report.cli_report import fail, internal_error
from lineprofiler.report.merge import RunError
from lineprofiler.report.units import terminal_safe as term
from lineprofiler.safe_write import output_file

EXAMPLES = """\
examples:
  lineprofiler export profile/ --perfetto trace.json     then open it at https://ui.perfetto.dev
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_dir", metavar="DIR", help="the run directory")
    parser.add_argument(
        "--perfetto",
        metavar="FILE",
        required=True,
        help="write a Chrome JSON trace (Perfetto, chrome://tracing) to FILE ('-': stdout)",
    )


def main(args: argparse.Namespace) -> int:
    from lineprofiler.report.perfetto import export_perfetto

    dest = args.perfetto
    try:
        if dest == "-":
            info = export_perfetto(args.run_dir, sys.stdout)
            if not info["workers"]:
                raise RunError(f"{args.run_dir}: no worker has resource samples")
        else:
            with output_file(dest) as f:  # replaced only when the trace is complete
                info = export_perfetto(args.run_dir, f)
                if not info["workers"]:
                    raise RunError(
                        f"{args.run_dir}: no worker has resource samples (was the sampler off? "
                        "sample_interval_s=None)"
                    )
    except RunError as exc:
        return fail("export", str(exc))
    except OSError as exc:
        return fail("export", f"{dest}: {exc.strerror or exc}")
    except Exception as exc:  # never a traceback on a user's terminal
        return internal_error("export", exc)
    where = "stdout" if dest == "-" else dest
    msg = f"wrote {term(where)}: {info['workers']} worker track(s), {info['events']:,} events"
    if info["without_samples"]:
        msg += f"; {len(info['without_samples'])} worker(s) without samples left out"
    print(msg, file=sys.stderr)
    if "torch_trace" in info:
        print(f"kernel-level view: {term(info['torch_trace'])}", file=sys.stderr)
    return 0
