// lp_core/perf_task_clock.h: the calling thread's perf task-clock event and its mmap'd user page.
//
// perf_event_open(PERF_COUNT_SW_TASK_CLOCK, pid=0, cpu=-1, exclude_kernel=1) counts the CPU time
// of exactly the calling thread. Mapping one page of the event gives a perf_event_mmap_page
// that the kernel rewrites (lock += 2 around the write) whenever it schedules the event in, i.e.
// each time the thread is switched back onto a CPU. Two uses:
//   - cap_user_time = 1 (bare metal, or a guest whose sched_clock is the native TSC): the thread's
//     CPU time is time_running plus the rdtsc-derived time since the last update (exact tier);
//   - otherwise the lock value alone tells whether the thread was switched out between two
//     reads (anchored tier).
// Events are registered process-wide so that a forked child closes and unmaps the parent's copies
// (pthread_atfork) and any clock used in the child notices (fork_generation()) and reopens.
#pragma once

#include <linux/perf_event.h>

#include <atomic>
#include <cstdint>

namespace lp {

/// Counts fork()s this process is a child of (0 in the original process). A PerfTaskEvent opened
/// under an older generation belongs to a parent's thread and is already closed.
uint32_t fork_generation();

namespace detail {
extern std::atomic<uint32_t> g_fork_generation;
}

/// One thread's task-clock event. Open on the thread it measures; reads are lock-free.
class PerfTaskEvent {
 public:
  PerfTaskEvent() = default;
  ~PerfTaskEvent() { close(); }
  PerfTaskEvent(const PerfTaskEvent&) = delete;
  PerfTaskEvent& operator=(const PerfTaskEvent&) = delete;

  /// Opens the event for the calling thread and maps its user page. Returns 0, or the errno of
  /// the failing perf_event_open/mmap (EACCES/EPERM under paranoid >= 3 or seccomp, ENOSYS,
  /// ENOENT, EMFILE, ...).
  int open();

  /// Unmaps and closes (no-op when not open, and in a forked child for a parent's event, whose
  /// copy the at-fork handler already closed).
  void close();

  /// True when this event was opened in the current process (not inherited through fork()).
  bool current() const {
    return page_ != nullptr && gen_ == detail::g_fork_generation.load(std::memory_order_relaxed);
  }

  /// The page's sequence counter: even when stable, +2 at every kernel rewrite of the page.
  uint32_t lock() const { return page_->lock; }

  /// Whether the kernel publishes time_offset/mult/shift for user-space time (cap_user_time).
  bool cap_user_time() const;

  /// The thread's task-clock time in ns, computed in user space from the page and rdtsc
  /// (only meaningful when cap_user_time()); ns since the event was enabled, not since the thread
  /// started. Returns 0 on architectures without rdtsc.
  uint64_t user_time_ns() const;

  /// Computes the user-space time from page fields (exposed for unit tests of the arithmetic).
  /// running_ns: time_running; cyc: the rdtsc value; the rest as in perf_event_mmap_page.
  static uint64_t user_time_from(uint64_t running_ns, uint64_t cyc, uint64_t time_offset,
                                 uint32_t time_mult, uint16_t time_shift, bool cap_short,
                                 uint64_t time_cycles, uint64_t time_mask);

  int fd() const { return fd_; }

 private:
  int fd_ = -1;
  const volatile perf_event_mmap_page* page_ = nullptr;
  uint32_t gen_ = 0;
};

}  // namespace lp
