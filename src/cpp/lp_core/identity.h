// lp_core/identity.h: who and where a worker is: run id, host, rank, env names, worker paths.
//
// The one place of these rules (issue 30): the standalone profiler (liblineprofiler.a) calls them
// directly and the Python profiler through _core (accounting/_identity.py); the names the reading
// side needs without _core (env names, the worker format, the workers directory) are exported and
// generated into runfile/core_constants.py by scripts/gen-core-constants, which runfile/layout.py
// reads. tests/native/test_standalone_identity.py still runs both profilers on one environment.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace lp::identity {

/// The worker document's "format" and the run directory's folder of worker files.
constexpr const char* kWorkerFormat = "lineprofiler-worker";
constexpr const char* kWorkersDir = "workers";

/// The environment variables an enabled profiler reads and exports (runfile/layout.py).
constexpr const char* kEnvProfile = "LINEPROFILER_PROFILE";
constexpr const char* kEnvRunDir = "LINEPROFILER_RUN_DIR";
constexpr const char* kEnvRunId = "LINEPROFILER_RUN_ID";
constexpr const char* kEnvRole = "LINEPROFILER_ROLE";
constexpr const char* kEnvParentRole = "LINEPROFILER_PARENT_ROLE";

/// getenv(name) as a string, or nullopt when unset.
std::optional<std::string> env(const char* name);

/// Whether $LINEPROFILER_PROFILE says on ("1", "true", "yes", "on"; case and spaces ignored).
bool env_enabled();

/// os.path.abspath(path): made absolute against the working directory and normalised lexically
/// (".", "..", repeated "/"), symbolic links left alone.
std::string abspath(const std::string& path);

/// Python's str.strip() of ASCII whitespace.
std::string strip(const std::string& s);

/// Each code point of s outside [A-Za-z0-9.-] replaced by replacement (one per code point, an
/// invalid UTF-8 byte counting as one, as Python's surrogateescape decoding of the environment).
std::string sub_unsafe_run_id(const std::string& s, const std::string& replacement);

/// The attempt this process belongs to for run_dir (absolute): $LINEPROFILER_RUN_ID when it was
/// exported for run_dir (or with no $LINEPROFILER_RUN_DIR), else the id an earlier profiler of
/// this process used for run_dir, else launcher_run_id(), else new_run_id(). Thread-safe.
std::string resolve_run_id(const std::string& run_dir);

/// An attempt id shared by every rank of one launch (Slurm, torchrun, Open MPI, PMI), or nullopt.
std::optional<std::string> launcher_run_id();

/// A fresh attempt id: UTC minute plus 6 random hex digits, e.g. "20261202T1535-471c94".
std::string new_run_id();

/// 2 * bytes random lowercase hex digits (getrandom, else /dev/urandom, else the clock).
std::string random_hex(size_t bytes);

/// The node's UTS name ("localhost" when empty).
std::string real_host_name();

/// real_host_name() safe as one directory name: code points outside [A-Za-z0-9._-] become "_",
/// at most 200 of them, and a leading "." gets a "_" prefix.
std::string host_name();

/// sha1 of the parts joined by NUL, as 8 lowercase hex digits.
std::string short_hash(const std::vector<std::string>& parts);

/// The start time of pid in clock ticks since boot (/proc/<pid>/stat field 22), or "".
std::string process_start(long pid);

/// This process's own start, "<boot id>:<clock ticks since boot>" (/proc/sys/kernel/random/boot_id,
/// at most 36 characters, and /proc/self/stat field 22), or "" where the ticks are unreadable (the
/// boot id part is "" where it is). With the host and pid it names one process: several profilers
/// built one after another in it share it, a reused pid (or a pid namespace's pid 1 started again)
/// gets another. The worker file's meta.process_start (meta_doc.h).
std::string own_process_start();

/// Rank, local rank and job id from whichever launcher set them.
struct LauncherIdentity {
  std::optional<long long> rank;
  std::string rank_source;  // the variable the rank came from; "" when none
  std::optional<long long> local_rank;
  std::optional<std::string> job_id;
};
LauncherIdentity launcher_identity();

/// This process's command line (/proc/self/cmdline), at most max_args arguments.
std::vector<std::string> process_argv(size_t max_args);

/// The worker file: <run_dir>/workers/<host>/w_<run_id>_<pid>_<uid8>.json.
std::string worker_path(const std::string& run_dir, const std::string& host,
                        const std::string& run_id, long pid, const std::string& uid8);

}  // namespace lp::identity
