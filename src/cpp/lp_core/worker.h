// lp_core/worker.h: one process's profiler: its recorder, its worker file and the snapshot thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "lp_core/recorder.h"
#include "lp_core/sampler.h"
#include "lp_core/worker_dir.h"
#include "lp_core/worker_file.h"

namespace lp {

/// What a Worker writes where, and how often (intervals in ns).
struct WorkerConfig {
  std::string path;                   // the worker file to (re)write
  std::string meta_json = "{}";       // a JSON object copied into the file's "meta"
  bool measure_cpu = true;            // record thread-CPU ns per phase
  uint64_t snapshot_interval_ns = 0;  // 0: no snapshot thread
  std::string samples_path;           // the sampler's sidecar; "": no sampler
  uint64_t sample_interval_ns = 0;    // 0: no sampler thread (Sampler::sample_now() still works)
  bool sample_gpu = true;             // let the sampler try NVML
};

/// Flush statistics, for the host to report.
struct FlushStats {
  uint64_t writes = 0;           // successful writes
  uint64_t errors = 0;           // failed writes
  std::string last_error;        // strerror of the latest failure, "" if none
  uint64_t own_write_bytes = 0;  // bytes the successful writes handed to write()
};

/// One process's profiler: owns its Recorder, the sampler, and the snapshot thread that rewrites
/// the worker file every snapshot_interval_ns.
class Worker {
 public:
  explicit Worker(WorkerConfig config);
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  /// The phase trees this worker writes.
  Recorder& recorder() { return recorder_; }

  /// Writes the worker file now (thread-safe, never throws). Returns 0 or the errno of the failure,
  /// which is also counted in stats().
  int flush(bool final);

  /// Starts the snapshot thread and the sampler thread (each if its interval is configured and it
  /// is not running).
  void start_thread();
  /// Stops and joins both threads (a write in progress completes first; the sampler takes a last
  /// sample).
  void stop_thread();
  /// Whether the snapshot or the sampler thread runs.
  bool thread_running() const { return thread_.joinable() || sampler_.running(); }

  /// The resource sampler (configured only when WorkerConfig::samples_path is set).
  Sampler& sampler() { return sampler_; }
  /// Whether a sampler is configured (WorkerConfig::samples_path was set).
  bool has_sampler() const { return has_sampler_; }

  /// In a forked child (threads already stopped): empty trees, a new file path and meta.
  void reset_after_fork(std::string path, std::string meta_json);

  /// Replaces the meta object written into the file.
  void set_meta(std::string meta_json);

  /// Called on the snapshot thread after each periodic write (never from flush() callers).
  void set_periodic_hook(std::function<void()> hook);

  /// Flush statistics so far (thread-safe).
  FlushStats stats() const;
  /// The worker file path (thread-safe; changes in a forked child).
  std::string path() const;
  std::string snapshot_json() const;  // the file text a flush would write now, without writing

 private:
  void run_thread();
  std::string render(bool final) const;
  void note_late_failure_locked();

  WorkerDir dir_;                 // workers/<host>, opened once; shared with the sampler
  int last_fd_ = -1;              // the worker file last written (for its late_flush_error slot)
  size_t slot_offset_ = 0;        // byte offset of that slot's text in it
  uint64_t errors_at_write_ = 0;  // stats_.errors when that file was written

  WorkerConfig config_;
  Recorder recorder_;
  Sampler sampler_;
  bool has_sampler_ = false;
  mutable std::mutex mu_;  // guards config_ strings, stats_, seq_, hook_, and serialises writes
  FlushStats stats_;
  uint64_t seq_ = 0;
  std::function<void()> hook_;
  std::thread thread_;
  std::mutex stop_mu_;
  std::condition_variable stop_cv_;
  bool stop_ = false;
};

}  // namespace lp
