"""A C++ program with no Python (examples/native/standalone/server.cpp, linked with
liblineprofiler.a) as one worker of a run: started next to Python workers it joins their attempt,
its role is in the report with exactly the counts it made, and SIGTERM/SIGINT/SIGUSR1/SIGHUP flush
it (chaining to a handler of its own); an ignored SIGINT stays ignored."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import child_env, read_worker, run_python, worker_files
from tests.native.standalone_build import build_cmake, build_direct

pytestmark = pytest.mark.slow


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example server, compiled directly against get_include() and liblineprofiler.a."""
    return build_direct(tmp_path_factory.mktemp("server"))


def expected_bytes(requests: int) -> int:
    """What the server's LP_COUNT("bytes", 100 + r % 7) adds up to over its requests."""
    return sum(100 + r % 7 for r in range(requests))


def report_json(run_dir: Path) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, "-m", "lineprofiler", "report", str(run_dir), "--json", "--no-samples"],
        capture_output=True,
        text=True,
        timeout=120,
        env=child_env(),
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def phase(role: dict[str, Any], name: str) -> dict[str, Any]:
    return next(p for p in role["phases"] if p["name"] == name)


def counter(ph: dict[str, Any], name: str) -> int:
    return next(c["count"] for c in ph["counters"] if c["name"] == name)


def server_phases(doc: dict[str, Any]) -> dict[tuple[str, ...], dict[str, Any]]:
    """The server's worker file, summed over threads by path: calls and counters."""
    out: dict[tuple[str, ...], dict[str, Any]] = {}
    for thread in doc["threads"]:
        for rec in thread["phases"]:
            entry = out.setdefault(tuple(rec["path"]), {"calls": 0, "counters": {}})
            entry["calls"] += rec["calls"]
            for k, v in rec["counters"].items():
                entry["counters"][k] = entry["counters"].get(k, 0) + v
    return out


def test_server_joins_python_workers_in_one_run_with_exact_counts(
    server: Path, tmp_path: Path
) -> None:
    requests, steps = 1234, 25
    run_dir = tmp_path / "run"
    run_python(
        f"""
        import multiprocessing as mp, subprocess
        from lineprofiler.accounting import Profiler

        def worker(steps):
            with Profiler(role="worker", snapshot_interval_s=None, sample_interval_s=None) as p:
                for _ in range(steps):
                    with p.phase("step"):
                        p.count("items", 2)

        if __name__ == "__main__":
            with Profiler(run_dir={str(run_dir)!r}, role="coordinator", enabled=True,
                          snapshot_interval_s=None, sample_interval_s=None) as p:
                with p.phase("run"):
                    ctx = mp.get_context("spawn")
                    ws = [ctx.Process(target=worker, args=({steps},)) for _ in range(2)]
                    for w in ws:
                        w.start()
                    subprocess.run([{str(server)!r}, "{requests}"], check=True)
                    for w in ws:
                        w.join()
                    assert all(w.exitcode == 0 for w in ws)
        """,
        cwd=tmp_path,
    )
    files = worker_files(run_dir)
    assert len(files) == 4
    docs = [read_worker(f) for f in files]
    assert len({d["meta"]["run_id"] for d in docs}) == 1  # one attempt, the C++ one included
    (server_doc,) = [d for d in docs if d["meta"]["role"] == "server"]
    assert server_doc["final"] is True
    assert server_doc["meta"]["runtime"] == "c++"
    coordinator = next(d for d in docs if d["meta"]["role"] == "coordinator")
    assert server_doc["meta"]["ppid"] == coordinator["meta"]["pid"]

    run = report_json(run_dir)
    assert run["run"]["roles"] == {"coordinator": 1, "worker": 2, "server": 1}
    assert run["run"]["superseded"] == []
    assert not any("server" in json.dumps(c) for c in run["caveats"]), run["caveats"]
    role = next(r for r in run["roles"] if r["role"] == "server")
    assert role["processes"] == 1
    handle = phase(role, "handle")
    assert handle["calls"] == requests
    assert phase(role, "handle/parse")["calls"] == requests
    assert phase(role, "handle/respond")["calls"] == requests
    assert counter(handle, "requests") == requests
    assert counter(handle, "bytes") == expected_bytes(requests)
    # The server's times are its own clock's: the children's fit inside the parent's.
    assert (
        phase(role, "handle/parse")["wall_ns"] + phase(role, "handle/respond")["wall_ns"]
        <= (handle["wall_ns"])
    )
    workers = next(r for r in run["roles"] if r["role"] == "worker")
    assert phase(workers, "step")["calls"] == 2 * steps
    assert counter(phase(workers, "step"), "items") == 4 * steps


def test_cmake_package_builds_the_server(tmp_path: Path) -> None:
    """find_package(lineprofiler CONFIG) + lineprofiler::standalone, as the example's CMakeLists."""
    exe = build_cmake(tmp_path / "build")
    run_dir = tmp_path / "run"
    env = child_env({"LINEPROFILER_PROFILE": "1", "LINEPROFILER_RUN_DIR": str(run_dir)})
    proc = subprocess.run([str(exe), "10"], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    (path,) = worker_files(run_dir)
    assert server_phases(read_worker(path))[("handle",)]["calls"] == 10


def start_waiting_server(
    server: Path, run_dir: Path, requests: int, *extra: str, sigint: Any = signal.SIG_DFL
) -> subprocess.Popen[str]:
    """The server after its requests, waiting for a signal; ``sigint``: its SIGINT disposition
    (the test runner's own may be SIG_IGN, as in a shell's background job)."""
    env = child_env({"LINEPROFILER_PROFILE": "1", "LINEPROFILER_RUN_DIR": str(run_dir)})
    proc = subprocess.Popen(
        [str(server), str(requests), "--wait-for-signal", *extra],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, sigint),
    )
    assert proc.stdout is not None
    for line in proc.stdout:  # its requests are done: only a flush can bring them to the file
        if line.strip() == "ready":
            break
    else:
        raise AssertionError(f"server ended early: {proc.wait()} {proc.stderr.read()}")
    return proc


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGUSR1, signal.SIGHUP])
def test_flush_signal_writes_the_final_file_then_ends_the_process(
    server: Path, tmp_path: Path, sig: signal.Signals
) -> None:
    requests = 777
    run_dir = tmp_path / "run"
    proc = start_waiting_server(server, run_dir, requests)
    (path,) = worker_files(run_dir)
    before = read_worker(path)
    assert before["threads"] == [] or ("handle",) not in server_phases(before)  # not written yet
    proc.send_signal(sig)
    assert proc.wait(timeout=30) == -sig  # the default action still ends it, by that signal
    doc = read_worker(path)
    assert doc["final"] is True
    assert doc["meta"]["exit_signal"] == sig.name
    assert doc["meta"]["signal_flush"] is True
    got = server_phases(doc)
    assert got[("handle",)]["calls"] == requests
    assert got[("handle",)]["counters"] == {"requests": requests, "bytes": expected_bytes(requests)}


def test_an_ignored_sigint_stays_ignored(server: Path, tmp_path: Path) -> None:
    # A shell starts a background job with SIGINT ignored: Ctrl-C at the terminal must not end
    # it, nor write its final file, with or without the profiler.
    run_dir = tmp_path / "run"
    proc = start_waiting_server(server, run_dir, 5, sigint=signal.SIG_IGN)
    (path,) = worker_files(run_dir)
    proc.send_signal(signal.SIGINT)
    with pytest.raises(subprocess.TimeoutExpired):
        proc.wait(timeout=1.0)  # still running: the signal was ignored
    assert read_worker(path)["final"] is False
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == -signal.SIGTERM
    doc = read_worker(path)
    assert doc["final"] is True and doc["meta"]["exit_signal"] == "SIGTERM"
    assert server_phases(doc)[("handle",)]["calls"] == 5


def test_sigterm_chains_to_the_programs_own_handler(server: Path, tmp_path: Path) -> None:
    requests = 321
    run_dir = tmp_path / "run"
    proc = start_waiting_server(server, run_dir, requests, "--own-sigterm-handler")
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0  # its handler ran and exited 0: the signal was not re-raised
    assert "own handler ran" in out
    (path,) = worker_files(run_dir)
    doc = read_worker(path)
    assert doc["final"] is False  # the program kept control: a flush, not a close
    assert server_phases(doc)[("handle",)]["calls"] == requests


def test_disabled_by_default_like_python(server: Path, tmp_path: Path) -> None:
    env = child_env({"LINEPROFILER_RUN_DIR": str(tmp_path / "run")})  # no LINEPROFILER_PROFILE
    proc = subprocess.run([str(server), "5"], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert not (tmp_path / "run").exists()
    assert "worker file  (" in proc.stdout  # no path: it made none


RAISING = """
#include <lineprofiler/standalone.hpp>

#include <cstdio>
#include <stdexcept>

int main(int, char** argv) {
  lineprofiler::Profiler prof({.run_dir = argv[1],
                               .role = "native",
                               .enabled = true,
                               .snapshot_interval_s = 0,
                               .sample_interval_s = 0});
  int caught = 0;
  for (int i = 0; i < 10; ++i) {
    try {
      LP_PHASE("attempt");
      if (i % 10 < 3) throw std::runtime_error("dead end");
    } catch (const std::runtime_error&) {
      ++caught;
    }
  }
  {
    LP_PHASE("outer");  // an exception caught inside leaves it normally
    try {
      LP_PHASE("inner");
      throw std::runtime_error("inner");
    } catch (const std::runtime_error&) {
      ++caught;
    }
  }
  prof.close();
  std::printf("%d\\n", caught);
  return 0;
}
"""


def test_cpp_scopes_unwound_by_an_exception_count_as_raised(tmp_path: Path) -> None:
    """A program linked with liblineprofiler.a: 3 of 10 entries throw, and one nested entry;
    the report shows exactly those as raised, against the count the program caught."""
    source = tmp_path / "raising.cpp"
    source.write_text(RAISING)
    exe = build_direct(tmp_path / "bin", source)
    run_dir = tmp_path / "run"
    proc = subprocess.run(
        [str(exe), str(run_dir)], capture_output=True, text=True, timeout=60, env=child_env()
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["4"]
    role = next(r for r in report_json(run_dir)["roles"] if r["role"] == "native")
    assert (phase(role, "attempt")["calls"], phase(role, "attempt")["raised"]) == (10, 3)
    assert phase(role, "outer/inner")["raised"] == 1
    assert phase(role, "outer")["raised"] == 0


POOL = """
#include <lineprofiler/standalone.hpp>

#include <atomic>
#include <cstdio>
#include <thread>
#include <vector>

int main(int, char** argv) {
  lineprofiler::Profiler prof({.run_dir = argv[1],
                               .role = "native",
                               .enabled = true,
                               .snapshot_interval_s = 0,
                               .sample_interval_s = 0});
  std::atomic<int> next{0};
  std::atomic<long> searched{0};
  {
    LP_PHASE("iteration");
    LP_PHASE("self_play");
    const lineprofiler::Context ctx = lineprofiler::capture();
    std::vector<std::thread> pool;
    for (int t = 0; t < 4; ++t) {
      pool.emplace_back([&] {
        lineprofiler::Attach attached(ctx);
        while (next.fetch_add(1) < 40) {
          LP_PHASE("search");
          searched.fetch_add(1);
        }
      });
    }
    for (std::thread& t : pool) t.join();
  }
  prof.close();
  std::printf("%ld\\n", searched.load());
  return 0;
}
"""


def test_a_cpp_pool_attached_to_the_open_phases_nests_under_them(tmp_path: Path) -> None:
    """A program linked with liblineprofiler.a hands 40 searches to 4 std::threads attached to
    iteration/self_play: they nest there behind "[threads]", exactly as many as the program's own
    atomic counted, with no share and nothing at the root."""
    source = tmp_path / "pool.cpp"
    source.write_text(POOL)
    exe = build_direct(tmp_path / "bin", source)
    run_dir = tmp_path / "run"
    proc = subprocess.run(
        [str(exe), str(run_dir)], capture_output=True, text=True, timeout=60, env=child_env()
    )
    assert proc.returncode == 0, proc.stderr
    searched = int(proc.stdout.split()[-1])
    assert searched == 40
    role = next(r for r in report_json(run_dir)["roles"] if r["role"] == "native")
    row = phase(role, "iteration/self_play/[threads]/search")
    assert row["calls"] == searched and row["on_threads"] and row["share"] is None
    assert 1 <= row["threads"] <= 4
    assert [p["name"] for p in role["phases"] if p["depth"] == 1] == ["iteration"]
    assert phase(role, "iteration")["share"] == 1.0
