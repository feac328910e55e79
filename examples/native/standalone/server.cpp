// examples/native/standalone/server.cpp: a C++ server with no Python, a worker of a run.
//
// It joins the run its environment names (LINEPROFILER_PROFILE=1, LINEPROFILER_RUN_DIR, exported by
// any enabled Python profiler to its children, or set by a launcher script), handles N requests
// (handle > parse, respond; counters requests and bytes) and writes its worker file at exit.
//
//   server [N] [--run-dir DIR] [--wait-for-signal] [--own-sigterm-handler]
//
//   --run-dir DIR          the run directory (default: $LINEPROFILER_RUN_DIR, else "profile")
//   --wait-for-signal      after the N requests, print "ready" and sleep until a signal ends it
//   --own-sigterm-handler  install a SIGTERM handler of the program's own before the profiler's: it
//                          prints "own handler ran" and exits 0 (the profiler flushes, then chains)
#include <signal.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <lineprofiler/standalone.hpp>
#include <string>

namespace {

// A request's work: a few microseconds of hashing (real CPU, not a sleep).
uint64_t work(uint64_t seed, int rounds) {
  uint64_t h = seed | 1;
  for (int i = 0; i < rounds; ++i) h = (h ^ (h >> 29)) * 0xbf58476d1ce4e5b9ull + uint64_t(i);
  return h;
}

void own_sigterm(int) {
  const char msg[] = "own handler ran\n";
  ssize_t n = write(STDOUT_FILENO, msg, sizeof msg - 1);
  (void)n;
  _exit(0);
}

}  // namespace

int main(int argc, char** argv) {
  long requests = 1000;
  bool wait_for_signal = false;
  std::string run_dir;  // "": as a Python worker, from the environment
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--run-dir") == 0 && i + 1 < argc) {
      run_dir = argv[++i];
    } else if (std::strcmp(argv[i], "--wait-for-signal") == 0) {
      wait_for_signal = true;
    } else if (std::strcmp(argv[i], "--own-sigterm-handler") == 0) {
      signal(SIGTERM, own_sigterm);
    } else {
      requests = std::atol(argv[i]);
    }
  }

  // enabled and the run id (and run_dir unless given) come from the environment, as for a Python
  // worker.
  lineprofiler::Profiler prof({.run_dir = run_dir, .role = "server", .snapshot_interval_s = 5.0});

  uint64_t sink = 0;
  for (long r = 0; r < requests; ++r) {
    LP_PHASE("handle");
    {
      LP_PHASE("parse");
      sink += work(uint64_t(r), 200);
    }
    {
      LP_PHASE("respond");
      sink += work(sink, 400);
    }
    LP_COUNT("requests", 1);
    LP_COUNT("bytes", 100 + r % 7);
  }
  std::printf("server: %ld requests, role %s, worker file %s (%llu)\n", requests,
              prof.role().c_str(), prof.worker_path().c_str(), (unsigned long long)(sink & 0xff));
  if (wait_for_signal) {
    std::printf("ready\n");
    std::fflush(stdout);
    for (;;) pause();
  }
  return 0;
}
