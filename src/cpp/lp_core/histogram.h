// lp_core/histogram.h: the fixed 512-bucket latency histogram shared by every process of a run.
//
// Layout: buckets 0..15 hold the exact integers 0..15 ns. From 16 ns up, each octave
// [2^e, 2^(e+1)) is split into 12 geometric sub-buckets of ratio r = 2^(1/12), so bucket
// 16 + 12*(e-4) + j covers [2^(e + j/12), 2^(e + (j+1)/12)). Bucket 511, the last, starts at
// 2^45.25 ns (11.6 h) and also takes every longer value. A bucket reports the value
// 2ab/(a+b) of its bounds [a, b), so a quantile read from the histogram is within
// (r-1)/(r+1) = 2.8873% of the true sample at the same rank, for every value below 2^45.33 ns
// (12.3 h), and exact below 16 ns. The index is computed from the bit position and a 64-entry
// table of the top mantissa bits: no log(), no floating point.
#pragma once

#include <cstddef>
#include <cstdint>

namespace lp {

constexpr int kHistBuckets = 512;
constexpr int kHistExactBuckets = 16;
constexpr int kHistSubBuckets = 12;
/// Worst-case relative error of a quantile: (2^(1/12) - 1) / (2^(1/12) + 1).
constexpr double kHistMaxRelError = 0.0288731051;

namespace detail {
struct HistTables {
  uint64_t threshold[kHistSubBuckets + 1];  // fractional-mantissa lower bound of sub-bucket j
  uint8_t first_sub[64];                    // sub-bucket of the first value of each 1/64 cell
  HistTables();
};
extern const HistTables g_hist_tables;
}  // namespace detail

/// Bucket index of a duration in nanoseconds.
inline int hist_bucket(uint64_t ns) {
  if (ns < kHistExactBuckets) return int(ns);
  int e = 63 - __builtin_clzll(ns);  // 4..63
  uint64_t frac = ns << (64 - e);    // fractional bits of the mantissa, as 0.64 fixed point
  int j = detail::g_hist_tables.first_sub[frac >> 58];
  j += (frac >= detail::g_hist_tables.threshold[j + 1]);
  int b = kHistExactBuckets + kHistSubBuckets * (e - 4) + j;
  return b < kHistBuckets ? b : kHistBuckets - 1;
}

/// Lower bound of bucket b in nanoseconds (exact integers below 16).
double hist_bucket_lower(int b);

/// Upper bound (exclusive) of bucket b in nanoseconds; the last bucket reports its nominal bound.
double hist_bucket_upper(int b);

/// The value a bucket stands for: b itself below 16, else 2ab/(a+b) of its bounds.
double hist_bucket_value(int b);

/// Quantile q in [0, 1] of a histogram given as kHistBuckets counts, in nanoseconds: the value
/// of the bucket holding the sample of rank ceil(q * total) (at least 1). Returns -1 when empty.
double hist_quantile(const uint64_t* counts, double q);

}  // namespace lp
