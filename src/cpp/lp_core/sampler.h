// lp_core/sampler.h: the resource sampler: a C++ thread reading /proc, NVML and a CUDA probe.
//
// Every interval it reads the process's I/O counters (/proc/self/io) and RSS (/proc/self/statm),
// every device NVML sees, and (through an optional host probe) the CUDA allocator, and appends one
// fixed-width row to a binary sidecar beside the worker file (format: docs/worker-file.md). Each
// interval is tagged with the phase open on the recorder's first thread (the constructing one) when
// the interval began. An interval whose counters could not be read, and the one after it, are
// dropped (never differenced across the gap) and counted. The profiler's own I/O (own_io_totals())
// is subtracted.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "lp_core/io_counters.h"
#include "lp_core/nvml.h"
#include "lp_core/worker_dir.h"

namespace lp {

class Recorder;

constexpr char kSamplesMagic[8] = {'L', 'P', 'S', 'M', 'P', 'L', '0', '1'};
constexpr uint32_t kSamplesVersion = 1;
constexpr uint32_t kSamplesHeaderBytes = 64;
constexpr uint32_t kSampleBaseWords = 12;  // words per row before the per-GPU pairs

/// Columns of a sample row (int64 words, little-endian).
enum SampleWord : uint32_t {
  kSwTimeUnixNs = 0,  // end of the interval, Unix ns
  kSwDtNs = 1,        // interval length, monotonic ns
  kSwTag = 2,         // id of the phase path open when the interval began (0: none open)
  kSwFlags = 3,       // kSf* bits: which columns were measured
  kSwReadBytes = 4,   // disk layer, bytes in the interval (own I/O excluded)
  kSwWriteBytes = 5,
  kSwReadChars = 6,  // syscall layer (rchar/wchar)
  kSwWriteChars = 7,
  kSwRssBytes = 8,       // at the end of the interval; -1 when unread
  kSwCudaAlloc = 9,      // torch.cuda.memory_allocated() summed over devices; -1 when unread
  kSwCudaReserved = 10,  // torch.cuda.memory_reserved(); -1 when unread
  kSwOwnWriteBytes = 11  // the profiler's own write_bytes excluded from this interval
};
// Then for GPU k: word kSampleBaseWords + 2k = busy %, + 2k + 1 = this pid's SM % (see GpuReading).

enum SampleFlag : int64_t { kSfIo = 1, kSfRss = 2, kSfCuda = 4, kSfGpu = 8 };

/// Reads CUDA allocator bytes (allocated, reserved); false when unavailable. Called on the
/// sampler thread.
using CudaProbe = std::function<bool(int64_t* allocated, int64_t* reserved)>;

struct SamplerStats {
  uint64_t rows = 0;          // rows written
  uint64_t dropped = 0;       // intervals without I/O counters (read failed, or after a gap)
  uint64_t rss_failed = 0;    // rows without RSS
  uint64_t write_errors = 0;  // rows that could not be written
  std::string last_error;
  std::string gpu_error;  // why NVML is unavailable ("" when it is, or not tried yet)
  // I/O of reaped child processes, which the kernel folds into /proc/self/io at wait(): kept out
  // of the rows (those processes report their own), summed here, in bytes.
  IoCounters children_excluded;
  uint64_t reap_intervals = 0;  // intervals in which a child was reaped
  uint32_t gpu_devices = 0;
  bool io_available = false;  // the process io file opened
};

/// One process's resource sampler (see the file comment); every public method is thread-safe.
class Sampler {
 public:
  explicit Sampler(const Recorder& recorder);
  ~Sampler();
  Sampler(const Sampler&) = delete;
  Sampler& operator=(const Sampler&) = delete;

  /// samples_path: the binary sidecar "<stem>.samples", created on the first sample; phase tags go
  /// to "<stem>.tags". interval_ns 0: no thread (sample_now() still works). gpu: try NVML.
  void configure(std::string samples_path, uint64_t interval_ns, uint32_t pid, bool gpu);

  /// Creates the sidecars inside dir (a Worker's, shared with its file writes) rather than in a
  /// directory of the sampler's own. Call before the first sample; dir must outlive the sampler.
  void set_dir(WorkerDir* dir);

  /// Sets the CUDA allocator probe called at each sample (none: the CUDA columns read -1).
  void set_cuda_probe(CudaProbe probe);

  /// Takes one sample now: the first call (or start()) only sets the baseline; NVML is opened
  /// and the sidecar's header written at the first row. Thread-safe.
  void sample_now(bool allow_probe = true);

  /// Takes the baseline now (on the calling thread: /proc reads only) and starts the thread,
  /// unless no interval is set or it runs.
  void start();
  /// Takes a last sample (without the CUDA probe) and joins the thread.
  void stop();
  /// Whether the sampler thread runs.
  bool running() const { return thread_.joinable(); }

  /// In a forked child (thread stopped): a new sidecar for the child's pid, fresh baselines.
  void reset_after_fork(std::string samples_path, uint32_t pid);

  /// Counts so far: rows, drops, failures, excluded child I/O (bytes).
  SamplerStats stats() const;
  /// The worker file's "samples" object (see docs/worker-file.md).
  std::string status_json() const;

 private:
  void init_locked();
  void open_outputs_locked();
  void append_row_locked(const std::vector<int64_t>& row);
  uint32_t tag_locked(const std::vector<uint32_t>& path);
  void run_thread();
  bool read_tasks_locked(IoCounters* live_delta);
  bool children_reaped_locked();

  struct TaskIo {
    IoCounters last;
    bool seen = false;
  };

  int open_sidecar_locked(const std::string& path);
  bool write_row_bytes_locked(const void* data, size_t len);

  const Recorder& recorder_;
  WorkerDir own_dir_;  // used when no set_dir()
  WorkerDir* dir_ = &own_dir_;
  mutable std::mutex mu_;  // serialises steps and guards everything below
  std::string path_;
  std::string tags_path_;
  uint64_t interval_ns_ = 0;
  uint32_t pid_ = 0;
  bool gpu_wanted_ = true;
  CudaProbe cuda_probe_;
  bool inited_ = false;
  bool header_written_ = false;
  IoCounterFile proc_io_;
  int statm_fd_ = -1;
  int samples_fd_ = -1;
  uint64_t samples_bytes_ = 0;  // header and whole rows written: where a failed row rolls back to
  int tags_fd_ = -1;
  Nvml* nvml_ = nullptr;  // leaked in a forked child, like other shared state
  uint32_t n_gpu_ = 0;
  bool prev_ok_ = false;
  IoCounters prev_;
  IoCounters prev_own_;
  int64_t carry_[4] = {0, 0, 0, 0};
  bool subtract_own_ = true;      // reading the real /proc/self/io (not a scripted file)
  std::map<long, TaskIo> tasks_;  // live threads' last io counters, by tid
  long children_sig_[8] = {};
  bool reaped_last_check_ = false;  // RUSAGE_CHILDREN moved at the previous interval's check
  uint64_t prev_mono_ns_ = 0;
  uint32_t prev_tag_ = 0;
  std::map<std::vector<uint32_t>, uint32_t> tags_;
  SamplerStats stats_;

  std::thread thread_;
  std::mutex stop_mu_;
  std::condition_variable stop_cv_;
  bool stop_ = false;
};

}  // namespace lp
