"""``lineprofiler serve DIR --port P``: a Prometheus scrape endpoint over a run directory.

Binds to 127.0.0.1 unless ``--host`` says otherwise. Exit status 2 when the directory cannot be
reported, the port cannot be bound, or prometheus_client is not installed
(``pip install with-line-profiler[prometheus]``); it otherwise serves until interrupted.
"""

from __future__ import annotations

import argparse
import sys
import threading

from lineprofiler.report.cli_report import fail, internal_error
from lineprofiler.report.merge import RunError
from lineprofiler.report.units import terminal_safe as term

EXAMPLES = """\
examples:
  lineprofiler serve profile/ --port 9464             then scrape http://127.0.0.1:9464/metrics
  lineprofiler serve profile/ --port 9464 --host 0.0.0.0 --interval 15
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from lineprofiler.report.prometheus import DEFAULT_INTERVAL_S, DEFAULT_PORT

    parser.add_argument("run_dir", metavar="DIR", help="the run directory")
    parser.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help=f"TCP port (default {DEFAULT_PORT})"
    )
    parser.add_argument(
        "--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine)"
    )
    parser.add_argument(
        "--interval",
        type=float,
        default=DEFAULT_INTERVAL_S,
        metavar="S",
        help=f"merge the run at most every S seconds (default {DEFAULT_INTERVAL_S:g}); scrapes "
        "in between get the last merge",
    )
    parser.add_argument(
        "--per-process-labels",
        action="store_true",
        help="add host and rank labels (phase seconds per process; processes per host): "
        "one series per process, mind the cardinality",
    )


def main(args: argparse.Namespace) -> int:
    try:
        import prometheus_client  # noqa: F401
    except ImportError:
        return fail(
            "serve", "needs prometheus_client: pip install 'with-line-profiler[prometheus]'"
        )
    if not (0 <= args.port <= 65535):
        return fail("serve", f"--port must be 0..65535, not {args.port}")
    if not (args.interval >= 0 and args.interval < float("inf")):
        return fail("serve", f"--interval must be 0 or more seconds, not {args.interval:g}")
    from prometheus_client import CollectorRegistry, start_http_server

    from lineprofiler.report.prometheus import RunCollector

    try:
        collector = RunCollector(args.run_dir, args.interval, args.per_process_labels)
        collector.refresh()  # bad input is said now, not on the first scrape
        registry = CollectorRegistry(auto_describe=False)
        registry.register(collector)
        got = start_http_server(args.port, addr=args.host, registry=registry)
    except RunError as exc:
        return fail("serve", str(exc))
    except OSError as exc:
        return fail("serve", f"cannot listen on {args.host}:{args.port}: {exc.strerror}")
    except Exception as exc:  # never a traceback on a user's terminal
        return internal_error("serve", exc)
    server = got[0] if isinstance(got, tuple) else None
    port = server.server_port if server is not None else args.port
    print(
        f"serving {term(args.run_dir)} at http://{term(args.host)}:{port}/metrics "
        f"(merged at most every {args.interval:g}s)",
        file=sys.stderr,
        flush=True,
    )
    threading.Event().wait()  # until interrupted (Ctrl-C: exit 130; SIGTERM ends the process)
    return 0
