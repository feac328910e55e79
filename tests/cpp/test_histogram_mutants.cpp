// tests/cpp/test_histogram_mutants.cpp: cases that each fail under a listed plausible bug in
// lp_core/histogram.* (hand-made mutants; scripts/cpp-histogram-mutants applies each one).
//
// Every expected value comes from the documented layout (the comment atop histogram.h) computed
// here in long double, or from counts the case chose: never from another lp_core function.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "lp_core/histogram.h"

namespace {

// The first integer of bucket b >= 17: ceil(2^(e + j/12)), b = 16 + 12(e-4) + j. The bound is
// irrational for j > 0, so long double (64-bit mantissa) rounds it the right way up to 2^63.
uint64_t first_of(int b) {
  int k = b - 16;
  long double lo = std::pow(2.0L, 4.0L + (long double)(k / 12) + (long double)(k % 12) / 12.0L);
  return (uint64_t)std::ceil(lo);
}

// A histogram of counts {bucket: count}.
std::vector<uint64_t> counts_of(std::initializer_list<std::pair<int, uint64_t>> cells) {
  std::vector<uint64_t> c(lp::kHistBuckets, 0);
  for (auto [b, n] : cells) c[size_t(b)] += n;
  return c;
}

// The documented value of bucket b >= 16: 2ab/(a+b) of [2^(e+j/12), 2^(e+(j+1)/12)).
double value_of(int b) {
  int k = b - 16;
  long double a = std::pow(2.0L, 4.0L + (long double)(k / 12) + (long double)(k % 12) / 12.0L);
  long double hi = a * std::pow(2.0L, 1.0L / 12.0L);
  return double(2.0L * a * hi / (a + hi));
}

}  // namespace

// Mutants: `ns < kHistExactBuckets` -> `ns < 15` / `< 32`; `63 - clz` -> `64 - clz`;
// `e - 4` -> `e - 3`; `frac >> 58` -> `frac >> 59`; the `j += ...` comparison dropped;
// `threshold[j + 1]` -> `threshold[j]`; threshold[12] sentinel 0 instead of ~0; the table's
// `j / 12` -> `(j + 1) / 12`.
TEST_CASE("mutants: every bucket edge from 16 ns to the last bucket, both sides") {
  for (uint64_t v = 0; v < 16; ++v) REQUIRE(lp::hist_bucket(v) == int(v));
  CHECK(lp::hist_bucket(16) == 16);
  CHECK(lp::hist_bucket(17) == 17);  // 2^(1/12) * 16 = 16.95: 17 is already bucket 17
  for (int b = 17; b < lp::kHistBuckets; ++b) {
    uint64_t lo = first_of(b);
    CHECK_MESSAGE(lp::hist_bucket(lo) == b, "bucket ", b, " first value ", lo);
    CHECK_MESSAGE(lp::hist_bucket(lo - 1) == b - 1, "bucket ", b, " value before ", lo - 1);
  }
}

// Mutant: the clamp `b < kHistBuckets ? b : last` -> `b <= kHistBuckets ? ...` (index 512 for
// values in [2^45.33, 2^45.42) ns) or dropped.
TEST_CASE("mutants: the first value past the last bucket's nominal bound clamps into it") {
  long double past = std::pow(2.0L, 45.0L + 4.0L / 12.0L);  // where bucket 512 would begin
  uint64_t v = (uint64_t)std::ceil(past);
  CHECK(lp::hist_bucket(v) == lp::kHistBuckets - 1);
  CHECK(lp::hist_bucket(v - 1) == lp::kHistBuckets - 1);
  CHECK(lp::hist_bucket(uint64_t(1) << 50) == lp::kHistBuckets - 1);
  CHECK(lp::hist_bucket(~0ull) == lp::kHistBuckets - 1);
}

// Mutants: `b + 1` -> `b` in hist_bucket_upper; `return b` -> `b + 1` in lower/value; the
// harmonic mean 2ab/(a+b) -> the arithmetic (a+b)/2 or the geometric sqrt(ab); `k % 12` <->
// `k / 12`; `4 + k / 12` -> `3 + ...`; upper's `2^(1/12)` -> `2^(1/11)`.
TEST_CASE("mutants: bounds and value of every bucket against the documented formulas") {
  for (int b = 0; b < 16; ++b) {
    CHECK(lp::hist_bucket_lower(b) == double(b));
    CHECK(lp::hist_bucket_upper(b) == double(b + 1));
    CHECK(lp::hist_bucket_value(b) == double(b));
  }
  for (int b = 16; b < lp::kHistBuckets; ++b) {
    int k = b - 16;
    double lo = double(std::pow(2.0L, 4.0L + (k / 12) + (k % 12) / 12.0L));
    double hi = double(std::pow(2.0L, 4.0L + (k / 12) + (k % 12 + 1) / 12.0L));
    CHECK(lp::hist_bucket_lower(b) == doctest::Approx(lo).epsilon(1e-12));
    CHECK(lp::hist_bucket_upper(b) == doctest::Approx(hi).epsilon(1e-12));
    CHECK(lp::hist_bucket_value(b) == doctest::Approx(value_of(b)).epsilon(1e-12));
  }
}

// Mutants: rank `ceil` -> `floor` / `round` / truncation; `seen >= rank` -> `seen > rank`.
TEST_CASE("mutants: the quantile is the bucket of the sample at rank ceil(q * n)") {
  int one_ms = lp::hist_bucket(1000000), nine_ms = lp::hist_bucket(9000000);
  // [1, 9, 9] ms: p50 has rank ceil(1.5) = 2, the first 9 ms (floor or round-half-down: 1 ms)
  auto c = counts_of({{one_ms, 1}, {nine_ms, 2}});
  CHECK(lp::hist_quantile(c.data(), 0.5) == doctest::Approx(value_of(nine_ms)));
  // [1, 1, 9, 9] ms: p50 has rank 2 exactly, the second 1 ms (`seen > rank`: 9 ms)
  auto d = counts_of({{one_ms, 2}, {nine_ms, 2}});
  CHECK(lp::hist_quantile(d.data(), 0.5) == doctest::Approx(value_of(one_ms)));
  // 10 samples, p95: rank ceil(9.5) = 10, the single 9 ms (round-half-even or floor: 1 ms)
  auto e = counts_of({{one_ms, 9}, {nine_ms, 1}});
  CHECK(lp::hist_quantile(e.data(), 0.95) == doctest::Approx(value_of(nine_ms)));
  CHECK(lp::hist_quantile(e.data(), 0.89) == doctest::Approx(value_of(one_ms)));
  CHECK(lp::hist_quantile(e.data(), 0.91) == doctest::Approx(value_of(nine_ms)));
}

// Mutants: the `q < 0` / `q > 1` clamps dropped or swapped (min <-> max); `rank < 1` clamp
// dropped (q = 0 would report bucket 0, which holds nothing); the total leaving out the last
// bucket (`b < kHistBuckets - 1`); the empty result -1 -> 0.
TEST_CASE("mutants: q clamped to [0, 1], rank at least 1, every bucket counted") {
  int lo_b = lp::hist_bucket(2000), hi_b = lp::hist_bucket(5000000);
  auto c = counts_of({{lo_b, 3}, {hi_b, 4}});
  CHECK(lp::hist_quantile(c.data(), 0.0) == doctest::Approx(value_of(lo_b)));
  CHECK(lp::hist_quantile(c.data(), -0.5) == doctest::Approx(value_of(lo_b)));
  CHECK(lp::hist_quantile(c.data(), 1.0) == doctest::Approx(value_of(hi_b)));
  CHECK(lp::hist_quantile(c.data(), 7.0) == doctest::Approx(value_of(hi_b)));
  auto last = counts_of({{lp::kHistBuckets - 1, 1}});
  CHECK(lp::hist_quantile(last.data(), 0.5) == doctest::Approx(value_of(lp::kHistBuckets - 1)));
  auto zero = counts_of({{0, 2}, {3, 1}});  // exact buckets: 0, 0, 3 ns
  CHECK(lp::hist_quantile(zero.data(), 0.5) == 0.0);
  CHECK(lp::hist_quantile(zero.data(), 0.9) == 3.0);
  std::vector<uint64_t> empty(lp::kHistBuckets, 0);
  CHECK(lp::hist_quantile(empty.data(), 0.5) == -1.0);
}
