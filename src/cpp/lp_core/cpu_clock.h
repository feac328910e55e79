// lp_core/cpu_clock.h: the calling thread's CPU time in three tiers (exact, anchored, syscall).
//
// Tiers, chosen once per process by cpu_clock_probe() (LINEPROFILER_CPU_CLOCK=auto|exact|
// anchored|syscall forces one; a forced tier this machine cannot provide degrades to syscall):
//   exact     user-space read of the perf task-clock page (cap_user_time): time_running plus
//             the rdtsc-derived time since the kernel last wrote the page. No system call.
//   anchored  where cap_user_time is 0 (KVM guests): a slow read (the system call) anchors
//             (page lock, wall ticks, CPU ns); the kernel rewrites the page (lock += 2) each time
//             it schedules the thread in (task_clock_event_add), so while the lock is unchanged
//             the thread was never switched out and its CPU time advanced as the wall clock did.
//             Re-anchors when the lock moves or the anchor is kAnchorMaxAgeNs old. A read is
//             high by the time the kernel did not bill the thread since the anchor although it
//             stayed switched in: host pauses of the vCPU (measured here: periodic ~30 us ones
//             and bursts up to ~5 ms that /proc/stat steal does not show), IRQ time on
//             CONFIG_IRQ_TIME_ACCOUNTING kernels. That is < kAnchorMaxAgeNs by construction
//             (a longer pause makes the next read re-anchor), so one phase's CPU time is within
//             kAnchorMaxAgeNs + kAnchorMaxCallNs / 2 of CLOCK_THREAD_CPUTIME_ID's; in aggregate
//             it over-counts by the share of short host pauses (unbilled_ns() / audited_ns()
//             below).
//   syscall   clock_gettime(CLOCK_THREAD_CPUTIME_ID): the ground truth, ~600 ns a read in a VM.
#pragma once

#include <cstdint>
#include <ctime>
#include <string>

#include "lp_core/clock.h"
#include "lp_core/perf_task_clock.h"

namespace lp {

/// How ThreadCpuClock reads CPU time.
enum class CpuClockTier { kExact, kAnchored, kSyscall };

/// What LINEPROFILER_CPU_CLOCK asks for: the best available tier, or one tier.
enum class CpuClockMode { kAuto, kExact, kAnchored, kSyscall };

/// Name of a tier as written into worker files: "exact", "anchored" or "syscall".
const char* cpu_clock_tier_name(CpuClockTier tier);

/// Name of a mode: "auto", "exact", "anchored" or "syscall".
const char* cpu_clock_mode_name(CpuClockMode mode);

/// Parses a mode name (as above). Returns false, leaving *mode alone, for anything else.
bool parse_cpu_clock_mode(const char* text, CpuClockMode* mode);

/// Parses a tier name ("exact", "anchored", "syscall"; "auto" is the probed tier). Returns false,
/// leaving *tier alone, for anything else. May run the probe.
bool parse_cpu_clock_tier(const char* text, CpuClockTier* tier);

/// The anchored tier re-anchors (one system call) once its anchor is this old, in ns: the bound on
/// one read's error, and at most one system call per this much wall time of a busy thread.
constexpr uint64_t kAnchorMaxAgeNs = 250'000;

/// An anchoring system call that took longer than this (ns of wall time; paused or interrupted)
/// is not used as an anchor: its sample could lie anywhere inside it.
constexpr uint64_t kAnchorMaxCallNs = 20'000;

/// What the start-up probe found and chose.
struct CpuClockProbe {
  CpuClockMode mode = CpuClockMode::kAuto;     // what was asked for
  CpuClockTier tier = CpuClockTier::kSyscall;  // what ThreadCpuClock uses
  int perf_errno = 0;                          // errno of perf_event_open/mmap; 0 when it opened
  bool cap_user_time = false;                  // the page publishes user-space time
  bool lock_tracks_switches = false;           // the page's lock moved across each probe sleep
  bool exact_validated = false;                // user-space time agreed with the system call
  std::string detail;                          // one line: why this tier
};

/// The process's probe result. The first call probes (on the calling thread, < 1 ms: opens one
/// event, sleeps 3 x 20 us, spins 200 us) with LINEPROFILER_CPU_CLOCK (unset or unparsable: auto).
/// Thread-safe.
CpuClockProbe cpu_clock_probe();

/// Probes again with mode (tests and benchmarks). Clocks constructed afterwards use the new tier;
/// existing ones keep theirs. Thread-safe.
CpuClockProbe cpu_clock_reprobe(CpuClockMode mode);

/// CLOCK_THREAD_CPUTIME_ID of the calling thread, in ns (a system call).
inline uint64_t thread_cpu_syscall_ns() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

/// Per-thread CPU clock. Construct and use it on the thread it measures (it opens that thread's
/// perf event). Not copyable. Values are ns of CPU time on the CLOCK_THREAD_CPUTIME_ID scale.
class ThreadCpuClock {
 public:
  /// A clock of the process's probed tier.
  ThreadCpuClock() : ThreadCpuClock(cpu_clock_probe().tier) {}
  /// A clock of tier want; falls back to kSyscall when this thread's event cannot be opened
  /// (or want is kExact and the page has no cap_user_time).
  explicit ThreadCpuClock(CpuClockTier want);
  ThreadCpuClock(const ThreadCpuClock&) = delete;
  ThreadCpuClock& operator=(const ThreadCpuClock&) = delete;

  /// CPU time consumed by the calling thread, in ns.
  uint64_t now_ns() { return now_ns_at(wall_ticks()); }

  /// As now_ns(), given wall_ticks() read by the caller just before (the anchored tier then needs
  /// no clock read of its own; the other tiers ignore it).
  inline uint64_t now_ns_at(uint64_t ticks) {
    if (tier_ == CpuClockTier::kAnchored) {
      std::atomic_signal_fence(std::memory_order_seq_cst);  // the caller's ticks precede the lock
      // The fork check comes first: in a forked child the inherited page is already unmapped.
      // Ticks become ns in 32.32 fixed point (no float conversions on the hot path).
      uint64_t dt = ticks - anchor_ticks_;
      if (gen_ == detail::g_fork_generation.load(std::memory_order_relaxed) &&
          ev_.lock() == anchor_lock_ && dt < anchor_max_ticks_) {
        return anchor_cpu_ns_ + ((dt * anchor_ns_per_tick_q32_) >> 32);
      }
      return anchor();
    }
    if (tier_ == CpuClockTier::kExact &&
        gen_ == detail::g_fork_generation.load(std::memory_order_relaxed)) {
      return exact_base_ns_ + ev_.user_time_ns();
    }
    if (tier_ == CpuClockTier::kSyscall) return thread_cpu_syscall_ns();
    return after_fork();
  }

  CpuClockTier tier() const { return tier_; }

  /// Number of system calls the anchored tier made (anchors), for tests and benchmarks.
  uint64_t slow_reads() const { return slow_reads_; }

  /// The anchored tier audits itself: each re-anchor that finds the lock unchanged since the
  /// previous anchor compares its extrapolation with the system call. audited_ns() is the wall
  /// time so checked; unbilled_ns() how much CPU time the extrapolation claimed beyond what the
  /// kernel billed (host pauses of the vCPU, steal; signed: anchor placement jitter cancels).
  /// unbilled_ns() / audited_ns() is the tier's measured over-count rate of CPU time.
  uint64_t audited_ns() const { return audited_ns_; }
  int64_t unbilled_ns() const { return unbilled_ns_; }

 private:
  bool open_event(CpuClockTier want);
  uint64_t anchor();      // anchored tier: a system call that also (re)sets the anchor
  uint64_t after_fork();  // a clock inherited through fork(): reopen this thread's event

  CpuClockTier tier_ = CpuClockTier::kSyscall;
  uint32_t gen_ = 0;
  uint32_t anchor_lock_ = 1;  // odd: never equal to a stable lock, so the first read anchors
  uint64_t anchor_ticks_ = 0;
  uint64_t anchor_cpu_ns_ = 0;
  uint64_t anchor_max_ticks_ = 0;        // kAnchorMaxAgeNs in wall ticks
  uint64_t anchor_ns_per_tick_q32_ = 0;  // ns per wall tick, times 2^32
  uint64_t exact_base_ns_ = 0;           // CLOCK_THREAD_CPUTIME_ID minus the page's time at open
  uint64_t slow_reads_ = 0;
  uint64_t audited_ns_ = 0;
  int64_t unbilled_ns_ = 0;
  PerfTaskEvent ev_;
};

/// Average cost of one now_ns() of clock over n reads, in ns (benchmarks).
double cpu_clock_read_cost_ns(ThreadCpuClock& clock, uint64_t n);

}  // namespace lp
