// lp_core/meta_doc.h: the worker file's "meta" object, built in one place for both profilers.
//
// The host (the Python profiler through _core.meta_json, the standalone profiler directly) fills
// a MetaDoc with what only it knows: its role, ids, options and argv as given. meta_json() adds
// the facts both share, computed here from lp_core: the real host name, ppid, the process's own
// start (identity::own_process_start), the launcher's rank and job (identity::launcher_identity),
// argv with its secrets masked (argv_mask.h) and the package version. One key set in one order
// for both runtimes (docs/worker-file.md lists them); "exit_signal" only when set.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace lp {

/// What the host knows of its worker. Strings are UTF-8 (an invalid byte is written as U+FFFD);
/// an unset optional is written as null.
struct MetaDoc {
  std::string role;
  std::optional<std::string> process_name;  // "ForkPoolWorker-2", "loader worker 0"
  std::optional<std::string> parent_role;   // a forked child's parent's role
  int64_t pid = 0;
  std::string host_dir;  // the directory under workers/ (identity::host_name())
  std::string run_id;
  std::string uuid;
  uint64_t start_unix_ns = 0;
  std::vector<std::string> argv;      // as given (at most 8 are written), masked by meta_json
  bool signal_flush = false;          // a SIGTERM & co. flush is installed
  std::string runtime;                // "python" or "c++"
  std::optional<std::string> python;  // the interpreter's version ("3.11.7"); null in C++
  bool measure_cpu = true;
  double snapshot_interval_s = 0;  // <= 0: null (no periodic write)
  double sample_interval_s = 0;    // <= 0: null (no sampler)
  bool thread_names = false;
  bool strict_names = false;
  bool annotate = false;
  std::optional<std::string> backend;    // "torch", "viztracer"
  std::vector<std::string> lines;        // lines=: the traced phases; [] none
  std::optional<int64_t> lines_entries;  // entries traced per phase; null: every entry
  std::string exit_signal;               // "SIGTERM" &c.; "" (the key left out) when none
};

/// At most this many arguments of MetaDoc::argv are written.
inline constexpr size_t kMetaArgvMax = 8;

/// The meta object's JSON text (no whitespace), from doc and the shared facts above.
std::string meta_json(const MetaDoc& doc);

/// The package version compiled into lp_core (pyproject.toml's): meta.lineprofiler_version.
const char* package_version();

}  // namespace lp
