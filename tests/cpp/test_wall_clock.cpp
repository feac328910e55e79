// tests/cpp/test_wall_clock.cpp: the hot-path wall clock's tick-to-ns conversion against
// CLOCK_MONOTONIC and against exact arithmetic.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <ctime>
#include <initializer_list>
#include <string>

#include "lp_core/clock.h"

TEST_CASE("wall clock: monotonic fallback converts ticks exactly") {
  lp::wall_clock_init(/*allow_tsc=*/false);
  CHECK(std::string(lp::wall_clock_name()) == "monotonic");
  for (uint64_t v : {0ull, 1ull, 999ull, 123456789012345ull, 36000000000000ull * 1000}) {
    CHECK(lp::ticks_to_ns(v) == v);
  }
  lp::wall_clock_init();
}

TEST_CASE("wall clock: a 50 ms sleep measures as CLOCK_MONOTONIC does" *
          doctest::test_suite("timing")) {
  lp::wall_clock_init();
  uint64_t m0 = lp::monotonic_ns();
  uint64_t t0 = lp::wall_ticks();
  timespec req{0, 50 * 1000 * 1000};
  nanosleep(&req, nullptr);
  uint64_t t1 = lp::wall_ticks();
  uint64_t m1 = lp::monotonic_ns();
  double ns = double(lp::ticks_to_ns(t1 - t0));
  double mono = double(m1 - m0);
  CHECK(ns >= 50e6 * 0.995);
  CHECK(ns <= mono * 1.005);
}

TEST_CASE("wall clock: fixed-point conversion matches the calibrated factor up to 10 hours") {
  lp::wall_clock_init();
  double per_tick = lp::detail::g_wall.ns_per_tick;
  for (double hours : {1e-9, 1e-6, 0.001, 1.0, 10.0}) {
    uint64_t ticks = uint64_t(hours * 3600e9 / per_tick);
    double exact = double(ticks) * per_tick;
    double got = double(lp::ticks_to_ns(ticks));
    // The factor is rounded to 2^-32 ns per tick: at most ~1 ns per 4e9 ticks, plus rounding.
    CHECK(std::fabs(got - exact) <= 1.0 + exact * 1e-9);
  }
}
