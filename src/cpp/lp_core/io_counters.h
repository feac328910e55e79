// lp_core/io_counters.h: reading Linux I/O accounting (/proc/<...>/io) through a kept-open fd.
//
// The kernel's per-task I/O accounting gives two layers: read_bytes/write_bytes (traffic that
// reached the block device; write_bytes is charged when a page is dirtied) and rchar/wchar (bytes
// handed through read/write system calls, page-cache hits included). A procfs io file regenerates
// its text on every pread at offset 0, so one open per thread (or process) and one pread per read.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>

namespace lp {

/// Cumulative counters of one task or process, in bytes.
struct IoCounters {
  uint64_t rchar = 0;        // bytes returned by read-like system calls
  uint64_t wchar = 0;        // bytes handed to write-like system calls
  uint64_t read_bytes = 0;   // bytes fetched from the block device
  uint64_t write_bytes = 0;  // bytes dirtied for the block device
};

/// Parses the text of a /proc io file. Returns false unless all four counters were found.
bool parse_proc_io(const char* text, size_t len, IoCounters* out);

/// One kept-open io file. Not thread-safe: one owner thread.
class IoCounterFile {
 public:
  IoCounterFile() = default;
  ~IoCounterFile() { close(); }
  IoCounterFile(const IoCounterFile&) = delete;
  IoCounterFile& operator=(const IoCounterFile&) = delete;

  /// Opens path (O_RDONLY|O_CLOEXEC). Returns 0 or an errno value.
  int open(const std::string& path);
  /// Reads and parses the counters. Returns the number of bytes the pread returned (this read's
  /// own contribution to the caller's rchar), or -1 when the file is not open, the read failed or
  /// the text did not parse (*out is then unchanged).
  long read(IoCounters* out);
  void close();

 private:
  int fd_ = -1;
};

/// The profiler's own I/O in this process, in bytes, summed over every reader and writer of
/// lp_core: the counter reads themselves (rchar) and the measured worker-file and sample writes.
/// The sampler subtracts it from the process's counters so the report never bills the profiler's
/// own traffic to the user.
IoCounters own_io_totals();

/// Adds measured own I/O to own_io_totals().
void add_own_io(const IoCounters& delta);

/// Serialises the profiler's own measured writes with the sampler's read of the process counters,
/// so a write is never half in one interval's counters and half in the next's exclusion.
std::mutex& own_io_mutex();
/// In a forked child: a fresh own_io_mutex() (a parent thread may have held it at the fork).
void reset_own_io_mutex_after_fork();

/// Measures the calling thread's I/O around a block of the profiler's own writes (its own file
/// opened per use: one open, two preads, one close) and adds the difference to own_io_totals().
/// If either read fails nothing is added and ok() is false. Holds own_io_mutex() from construction
/// to finish().
class OwnIoMeter {
 public:
  OwnIoMeter();
  /// Ends the measurement (also done by the destructor).
  void finish();
  ~OwnIoMeter() { finish(); }
  bool ok() const { return ok_; }
  const IoCounters& delta() const { return delta_; }

 private:
  std::unique_lock<std::mutex> lock_;
  IoCounterFile file_;
  IoCounters before_;
  IoCounters delta_;
  bool started_ = false;
  bool done_ = false;
  bool ok_ = false;
};

/// Path of the calling thread's io file: the override set by set_io_counter_paths() if any, else
/// /proc/thread-self/io (Linux >= 3.17), else /proc/self/task/<tid>/io.
std::string thread_io_path();

/// Path of the process's io file: the override if any, else /proc/self/io.
std::string process_io_path();

/// Overrides both paths for files opened from now on ("" restores the default). For tests, which
/// point them at files they script; thread-safe.
void set_io_counter_paths(const std::string& thread_path, const std::string& process_path);

}  // namespace lp
