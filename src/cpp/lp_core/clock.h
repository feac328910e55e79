// lp_core/clock.h: the hot-path wall clock: the TSC calibrated against CLOCK_MONOTONIC, or that.
#pragma once

#include <cstdint>
#include <ctime>

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#define LP_HAVE_RDTSC 1
#else
#define LP_HAVE_RDTSC 0
#endif

namespace lp {

/// CLOCK_MONOTONIC in nanoseconds (vDSO, ~25 ns).
inline uint64_t monotonic_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

/// CLOCK_REALTIME in nanoseconds since the Unix epoch.
inline uint64_t unix_ns() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

namespace detail {
struct WallClockState {
  bool use_tsc = false;
  double ns_per_tick = 1.0;               // 1.0 when ticks are CLOCK_MONOTONIC ns
  uint64_t ns_per_tick_q32 = 1ull << 32;  // ns_per_tick times 2^32, rounded
};
extern WallClockState g_wall;
}  // namespace detail

/// Chooses the wall clock once per process: the TSC where the kernel itself uses it as its
/// clocksource and the CPU advertises constant_tsc and nonstop_tsc, calibrated against
/// CLOCK_MONOTONIC over ~10 ms; CLOCK_MONOTONIC otherwise. allow_tsc=false forces the fallback.
/// Idempotent; safe to call again (re-probes). Not thread-safe against concurrent wall_ticks().
void wall_clock_init(bool allow_tsc = true);

/// Name of the source: "tsc" or "monotonic".
const char* wall_clock_name();

/// Raw ticks of the chosen wall clock; differences convert with ticks_to_ns().
inline uint64_t wall_ticks() {
#if LP_HAVE_RDTSC
  if (detail::g_wall.use_tsc) return __rdtsc();
#endif
  return monotonic_ns();
}

/// Converts a tick difference to nanoseconds, rounded (one 64x64->128-bit multiply; exact for
/// CLOCK_MONOTONIC ticks, whose factor is 1).
inline uint64_t ticks_to_ns(uint64_t dticks) {
  unsigned __int128 q32 = static_cast<unsigned __int128>(dticks) * detail::g_wall.ns_per_tick_q32;
  return uint64_t((q32 + (1ull << 31)) >> 32);
}

}  // namespace lp
