// lp_core/cpu_clock.cpp: names of the thread-CPU clock tiers.
#include "lp_core/cpu_clock.h"

namespace lp {

const char* cpu_clock_tier_name(CpuClockTier tier) {
  switch (tier) {
    case CpuClockTier::kSyscall:
      return "syscall";
  }
  return "unknown";
}

}  // namespace lp
