// lp_core/clock.cpp: probing and calibrating the hot-path wall clock.
#include "lp_core/clock.h"

#include <fstream>
#include <string>

namespace lp {
namespace detail {
WallClockState g_wall;
}

namespace {

bool kernel_trusts_tsc() {
  std::ifstream cs("/sys/devices/system/clocksource/clocksource0/current_clocksource");
  std::string source;
  if (!(cs >> source) || source != "tsc") return false;
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("flags", 0) == 0) {
      return line.find(" constant_tsc") != std::string::npos &&
             line.find(" nonstop_tsc") != std::string::npos;
    }
  }
  return false;
}

}  // namespace

void wall_clock_init(bool allow_tsc) {
  detail::g_wall = detail::WallClockState{};
#if LP_HAVE_RDTSC
  if (!allow_tsc || !kernel_trusts_tsc()) return;
  // Calibrate ticks against CLOCK_MONOTONIC across a ~10 ms sleep; take the tightest bracket of
  // each end so a preemption between the two reads does not skew the factor.
  auto anchor = [](uint64_t& tsc, uint64_t& mono) {
    uint64_t best = ~0ull;
    for (int i = 0; i < 5; ++i) {
      uint64_t a = monotonic_ns();
      uint64_t t = __rdtsc();
      uint64_t b = monotonic_ns();
      if (b - a < best) {
        best = b - a;
        tsc = t;
        mono = a + (b - a) / 2;
      }
    }
  };
  uint64_t tsc0 = 0, mono0 = 0, tsc1 = 0, mono1 = 0;
  anchor(tsc0, mono0);
  timespec req{0, 10 * 1000 * 1000};
  nanosleep(&req, nullptr);
  anchor(tsc1, mono1);
  if (tsc1 <= tsc0 || mono1 <= mono0) return;
  detail::g_wall.ns_per_tick = double(mono1 - mono0) / double(tsc1 - tsc0);
  detail::g_wall.ns_per_tick_q32 = uint64_t(detail::g_wall.ns_per_tick * 4294967296.0 + 0.5);
  detail::g_wall.use_tsc = true;
#else
  (void)allow_tsc;
#endif
}

const char* wall_clock_name() {
  return detail::g_wall.use_tsc ? "tsc" : "monotonic";
}

}  // namespace lp
