// tests/cpp/test_histogram.cpp: bucket bounds and quantile error of the fixed histogram.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "lp_core/histogram.h"

TEST_CASE("exact buckets below 16 ns") {
  for (uint64_t v = 0; v < 16; ++v) {
    CHECK(lp::hist_bucket(v) == int(v));
    CHECK(lp::hist_bucket_value(int(v)) == double(v));
  }
}

TEST_CASE("every value lies inside its bucket's bounds") {
  std::mt19937_64 rng(1);
  for (int i = 0; i < 200000; ++i) {
    // log-uniform over 16 ns .. 2^45 ns
    double e = 4.0 + 41.0 * double(rng() >> 11) / double(1ull << 53);
    uint64_t v = uint64_t(std::ldexp(1.0, 0) * std::pow(2.0, e));
    int b = lp::hist_bucket(v);
    REQUIRE(b >= 16);
    REQUIRE(b < lp::kHistBuckets);
    if (b < lp::kHistBuckets - 1) {
      CHECK(double(v) >= lp::hist_bucket_lower(b) * (1 - 1e-12));
      CHECK(double(v) < lp::hist_bucket_upper(b) * (1 + 1e-12));
    }
  }
}

TEST_CASE("bucket boundaries: octave edges and monotonicity") {
  CHECK(lp::hist_bucket(16) == 16);
  CHECK(lp::hist_bucket(32) == 28);
  CHECK(lp::hist_bucket(31) == 27);
  int prev = 0;
  for (uint64_t v = 1; v < (1ull << 20); v += 1 + v / 1000) {
    int b = lp::hist_bucket(v);
    CHECK(b >= prev);
    prev = b;
  }
  // The covered range reaches 10 hours; longer values clamp into the last bucket.
  uint64_t ten_hours = 36000ull * 1000000000ull;
  CHECK(lp::hist_bucket(ten_hours) < lp::kHistBuckets - 1);
  CHECK(lp::hist_bucket(~0ull) == lp::kHistBuckets - 1);
  CHECK(lp::hist_bucket_lower(lp::kHistBuckets - 1) > double(ten_hours));
}

TEST_CASE("quantiles are within the documented error of exact quantiles") {
  std::mt19937_64 rng(7);
  std::lognormal_distribution<double> dist(std::log(2e6), 1.5);  // ~2 ms, wide
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<uint64_t> data(5000 + trial * 311);
    std::vector<uint64_t> counts(lp::kHistBuckets, 0);
    for (auto& v : data) {
      v = uint64_t(std::max(1.0, dist(rng)));
      counts[lp::hist_bucket(v)] += 1;
    }
    std::sort(data.begin(), data.end());
    for (double q : {0.01, 0.1, 0.5, 0.9, 0.95, 0.99, 0.999, 1.0}) {
      size_t rank = std::max<size_t>(1, size_t(std::ceil(q * double(data.size()))));
      double exact = double(data[rank - 1]);
      double est = lp::hist_quantile(counts.data(), q);
      CHECK(std::fabs(est - exact) / exact <= lp::kHistMaxRelError + 1e-9);
    }
  }
}

TEST_CASE("the documented error bound is (r-1)/(r+1) with r = 2^(1/12), and it is attained") {
  double r = std::pow(2.0, 1.0 / 12);
  CHECK(std::fabs(lp::kHistMaxRelError - (r - 1) / (r + 1)) < 1e-6);
  int b = lp::hist_bucket(1000000);
  double lo = lp::hist_bucket_lower(b);
  double worst = (lp::hist_bucket_value(b) - lo) / lo;
  CHECK(worst == doctest::Approx((r - 1) / (r + 1)).epsilon(1e-6));
}

TEST_CASE("empty histogram") {
  std::vector<uint64_t> counts(lp::kHistBuckets, 0);
  CHECK(lp::hist_quantile(counts.data(), 0.5) == -1.0);
}
