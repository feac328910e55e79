// lineprofiler/standalone.hpp: a C++ program with no Python as a worker of a run.
//
//   #include <lineprofiler/standalone.hpp>
//   int main() {
//     lineprofiler::Profiler prof({.run_dir = "profile", .role = "server", .enabled = true});
//     for (...) {
//       LP_PHASE("handle");                  // <lineprofiler/accounting.hpp>, included here
//       LP_COUNT("requests", 1);
//     }
//   }  // the destructor writes the final worker file
//
// Link with the CMake target lineprofiler::standalone (find_package(lineprofiler CONFIG) with the
// directory from `python -c "import lineprofiler; print(lineprofiler.get_cmake_dir())"`), or with
// -I$(get_include) $(get_library_dir)/liblineprofiler.a -pthread -ldl. C++17; C++20 callers may use
// designated initializers as above (in member order).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "lineprofiler/accounting.hpp"

namespace lineprofiler {

/// What a standalone Profiler records, where, and how often. Every field left at its default
/// takes the Python profiler's default, from the same LINEPROFILER_* environment variables, so a
/// program started by a profiled Python parent (or a launcher script) joins that run unchanged.
struct ProfilerOptions {
  /// The run directory; "": $LINEPROFILER_RUN_DIR, else "profile". Made absolute at construction
  /// against the working directory.
  std::string run_dir{};
  /// What this process does ("server", "env"); "": $LINEPROFILER_ROLE, else "main".
  std::string role{};
  /// Record or not; unset: $LINEPROFILER_PROFILE ("1", "true", "yes", "on"), else off, as in
  /// Python. A disabled profiler writes nothing and installs nothing; LP_PHASE stays a no-op.
  std::optional<bool> enabled{};
  /// Read the thread's CPU time at each phase boundary (gives the report's wait%).
  bool measure_cpu = true;
  /// Rewrite the worker file this often from a background thread; <= 0: only at construction,
  /// on the flush signals, on flush() and at exit.
  double snapshot_interval_s = 30.0;
  /// Resource sampler period (memory, I/O, GPU rows); <= 0: no sampler.
  double sample_interval_s = 1.0;
  /// Flush on SIGTERM, SIGINT (Ctrl-C), SIGUSR1 and SIGHUP, then chain to the handler installed
  /// before (or, when that was the default action, write the final file and re-raise the signal).
  /// A SIGINT ignored at construction (a shell's background job) stays ignored.
  bool handle_signals = true;
  /// Make LP_PHASE / lineprofiler::count / current() of this program record into this profiler.
  bool install = true;
  /// Export LINEPROFILER_PROFILE, _RUN_DIR, _RUN_ID and _PARENT_ROLE (restored by close()) so that
  /// child processes join the run. setenv() is not thread-safe: construct before other threads.
  bool export_env = true;
  /// Nest each thread's phases under its thread name in the report (pthread_setname_np).
  bool thread_names = false;
  /// Let the sampler read GPU utilisation through NVML (dlopen'ed; absent: no GPU rows).
  bool sample_gpu = true;
};

/// Worker-file writes so far.
struct FlushStats {
  uint64_t writes = 0;           // successful writes
  uint64_t errors = 0;           // failed writes
  std::string last_error;        // why the latest write failed, "" if none did
  uint64_t own_write_bytes = 0;  // bytes the successful writes handed to write()
};

/// One standalone process's profiler: writes <run_dir>/workers/<host>/w_<run>_<pid>_<uuid8>.json
/// exactly as the Python Profiler does, so `lineprofiler report` merges it with the run's Python
/// workers. Construction never throws for a run directory it cannot write: failed writes are
/// counted (stats()) and recording continues in memory. One profiler per process is expected; a
/// second one constructed while the first is open neither installs nor takes the signals.
///
/// A forked child records nothing into its parent's profiler and never writes its file: build a
/// new Profiler in the child to make it a worker of its own.
class Profiler {
 public:
  explicit Profiler(ProfilerOptions options = {});
  /// close().
  ~Profiler();
  Profiler(const Profiler&) = delete;
  Profiler& operator=(const Profiler&) = delete;

  /// Writes the worker file now (not final). Returns 0, or the errno of a failed write (also
  /// counted in stats()); 0 for a disabled or closed profiler. Thread-safe.
  int flush();

  /// Stops the background threads, writes the final worker file, uninstalls, puts the signal
  /// handlers and the exported environment back. Idempotent; also run at exit() (atexit) and by
  /// the destructor. Not to be called concurrently with LP_PHASE scopes still open on other
  /// threads' stacks expecting to be recorded: those stop recording here.
  void close();

  bool enabled() const;
  bool closed() const;
  /// The absolute run directory, the role, the attempt id and the worker file's path ("" when
  /// disabled).
  const std::string& run_dir() const;
  const std::string& role() const;
  const std::string& run_id() const;
  const std::string& worker_path() const;
  FlushStats stats() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace lineprofiler
