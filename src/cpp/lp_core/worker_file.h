// lp_core/worker_file.h: serialising a recorder snapshot into the worker-file JSON, written
// atomically.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lp_core/recorder.h"

namespace lp {

constexpr int kWorkerSchemaVersion = 1;

/// What a worker file says besides the trees.
struct WorkerFileHeader {
  std::string meta_json = "{}";  // a JSON object from the host (role, pid, host, run id, ...)
  uint64_t snapshot_seq = 0;     // 1 for the first write, +1 per write
  bool final = false;            // written by close()
  bool measure_cpu = true;
  const char* wall_clock = "monotonic";
  const char* cpu_clock = "syscall";
  uint64_t flush_errors = 0;     // failed writes before this one
  std::string last_flush_error;  // strerror of the latest failure
  uint64_t own_write_bytes = 0;  // bytes this worker's own flushes handed to write() so far
  std::string samples_json;      // the sampler's status object; "" when there is no sampler
};

/// Every worker file carries "late_flush_error": a string of kLateFlushErrorWidth spaces. When a
/// later write fails (a full disk), the writer overwrites that slot in place in the file already
/// on disk (no new blocks needed) with what failed, so the report can name it.
constexpr const char* kLateFlushErrorKey = "late_flush_error";
constexpr size_t kLateFlushErrorWidth = 96;

/// The worker file text for a snapshot (see docs/worker-file.md for the schema).
std::string worker_file_json(const std::vector<ThreadSnapshot>& threads,
                             const WorkerFileHeader& header);

/// path with its suffix old_ext replaced by new_ext (new_ext appended when path lacks old_ext):
/// the worker file's sidecars, e.g. with_suffix("w_x.json", ".json", ".samples").
std::string with_suffix(const std::string& path, const std::string& old_ext,
                        const std::string& new_ext);

/// Writes text to path atomically: an unpredictable temporary file beside it, then rename(2), in a
/// directory opened with open_worker_dir() (created when missing; a symbolic link or another
/// user's directory is refused). Returns 0 on success, else an errno value (nothing partial is
/// left).
int write_file_atomically(const std::string& path, const std::string& text);

}  // namespace lp
