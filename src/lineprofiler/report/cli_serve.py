"""``lineprofiler serve DIR --port P``: a Prometheus scrape endpoint over a run directory.

Binds to 127.0.0.1 unless ``--host`` says otherwise. ``/metrics`` is the scrape endpoint, ``/``
a small index; any other path is 404. A run directory that does not exist yet (or is still
empty) is waited for, said once on stderr. Exit status 2 when the directory cannot be reported,
the port cannot be bound, or prometheus_client is not installed
(``pip install with-line-profiler[prometheus]``); it otherwise serves until interrupted.
"""

from __future__ import annotations

import argparse
import html
import os
import socket
import sys
import threading
import time
from collections.abc import Callable
from socketserver import ThreadingMixIn
from typing import TYPE_CHECKING, Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from lineprofiler.report.cli_report import fail, internal_error
from lineprofiler.report.merge import RunError
from lineprofiler.report.units import terminal_safe as term
from lineprofiler.runfile.layout import WORKERS_DIR

if TYPE_CHECKING:
    from lineprofiler.report.prometheus import RunCollector

WAIT_POLL_S = 0.5  # how often a run directory that does not exist yet is looked for

EXAMPLES = """\
examples:
  lineprofiler serve profile/ --port 9464             then scrape http://127.0.0.1:9464/metrics
  lineprofiler serve profile/ --port 9464 --host 0.0.0.0 --interval 15
  lineprofiler serve profile/ & lineprofiler record -- python train.py
                                                      started first: waits for the run
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
    from prometheus_client import CollectorRegistry, make_wsgi_app

    from lineprofiler.report.prometheus import RunCollector

    try:
        collector = RunCollector(args.run_dir, args.interval, args.per_process_labels)
        _first_merge(collector)  # bad input is said now, not on the first scrape
        registry = CollectorRegistry(auto_describe=False)
        registry.register(collector)
        server = _start_server(args.host, args.port, _routes(make_wsgi_app(registry), args))
    except RunError as exc:
        return fail("serve", str(exc))
    except OSError as exc:
        return fail("serve", f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}")
    except Exception as exc:  # never a traceback on a user's terminal
        return internal_error("serve", exc)
    print(
        f"serving {term(args.run_dir)} at http://{term(args.host)}:{server.server_port:d}/metrics "
        f"(merged at most every {args.interval:g}s)",
        file=sys.stderr,
        flush=True,
    )
    threading.Event().wait()  # until interrupted (Ctrl-C: exit 130; SIGTERM ends the process)
    return 0


def _not_started(run_dir: str) -> bool:
    """The run has not begun writing there: no such path yet, or an empty directory (or one whose
    workers/ holds no file yet). Anything else that cannot be merged is an error."""
    if not os.path.lexists(run_dir):
        return True
    if not os.path.isdir(run_dir):
        return False
    entries = set(os.listdir(run_dir))
    if not entries:
        return True
    workers = os.path.join(run_dir, WORKERS_DIR)
    if entries <= {WORKERS_DIR, "metadata.json", ".metadata.lock"} and os.path.isdir(workers):
        return not any(files for _, _, files in os.walk(workers))
    return False


def _first_merge(collector: RunCollector) -> None:
    """Merges once, waiting (and saying so, once) while the run has not started writing."""
    said = False
    while True:
        try:
            collector.refresh()
            return
        except RunError:
            if not _not_started(collector.run_dir):
                raise
        if not said:
            print(
                f"lineprofiler serve: waiting for {term(collector.run_dir)}: no worker file there "
                "yet (the run has not started); serving begins with its first file",
                file=sys.stderr,
                flush=True,
            )
            said = True
        time.sleep(WAIT_POLL_S)


INDEX = """<!doctype html><title>lineprofiler serve</title>
<p>lineprofiler: the phases of the run in {run_dir} as Prometheus metrics:
<a href="metrics">/metrics</a></p>
"""


def _routes(metrics_app: Callable, args: argparse.Namespace) -> Callable:
    """The WSGI app: /metrics, an index at /, 404 elsewhere (a typo'd path is not a scrape)."""
    index = INDEX.format(run_dir=html.escape(args.run_dir)).encode()

    def app(environ: dict, start_response: Callable) -> Any:
        path = environ.get("PATH_INFO") or "/"
        if path == "/metrics":
            return metrics_app(environ, start_response)
        if path == "/":
            start_response("200 OK", [("Content-Type", "text/html; charset=utf-8")])
            return [index]
        start_response("404 Not Found", [("Content-Type", "text/plain; charset=utf-8")])
        return [b"not found: the metrics are at /metrics\n"]

    return app


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # no line per scrape on stderr
        pass


def _start_server(host: str, port: int, app: Callable) -> WSGIServer:
    """A threaded WSGI server on host:port (IPv4 or IPv6, as the address is), serving in a
    daemon thread."""
    family = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM)[0][0]
    server_class = type(
        "_Server", (ThreadingMixIn, WSGIServer), {"daemon_threads": True, "address_family": family}
    )
    server = make_server(host, port, app, server_class, handler_class=_QuietHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server
