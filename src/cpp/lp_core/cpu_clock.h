// lp_core/cpu_clock.h: the calling thread's CPU time, behind one small per-thread interface.
#pragma once

#include <cstdint>
#include <ctime>

namespace lp {

/// How ThreadCpuClock reads CPU time. Only the system call exists so far; faster tiers
/// (perf_event user-space reads) plug in behind the same interface.
enum class CpuClockTier { kSyscall };

/// Name of a tier as written into worker files: "syscall".
const char* cpu_clock_tier_name(CpuClockTier tier);

/// Per-thread CPU clock. Construct and use it on the thread it measures.
class ThreadCpuClock {
 public:
  /// CPU time consumed by the calling thread, in nanoseconds (CLOCK_THREAD_CPUTIME_ID).
  uint64_t now_ns() {
    timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
  }
  CpuClockTier tier() const { return CpuClockTier::kSyscall; }
};

}  // namespace lp
