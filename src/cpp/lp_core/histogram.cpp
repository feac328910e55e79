// lp_core/histogram.cpp: bucket tables, bounds and quantiles of the fixed histogram.
#include "lp_core/histogram.h"

#include <cmath>

namespace lp {
namespace detail {

HistTables::HistTables() {
  // threshold[j] = (2^(j/12) - 1) * 2^64, the fractional mantissa where sub-bucket j begins;
  // threshold[12] is a sentinel no 64-bit fraction reaches.
  for (int j = 0; j < kHistSubBuckets; ++j) {
    long double f = std::pow(2.0L, (long double)j / kHistSubBuckets) - 1.0L;
    threshold[j] = (uint64_t)std::ceil(f * 18446744073709551616.0L);
  }
  threshold[kHistSubBuckets] = ~0ull;
  // Sub-buckets are wider than 1/64 of an octave, so each 1/64 cell holds at most one boundary:
  // the cell's first value fixes j, and one comparison against threshold[j+1] finishes the job.
  for (int cell = 0; cell < 64; ++cell) {
    uint64_t start = uint64_t(cell) << 58;
    int j = 0;
    while (j + 1 < kHistSubBuckets && threshold[j + 1] <= start) ++j;
    first_sub[cell] = uint8_t(j);
  }
}

const HistTables g_hist_tables;

}  // namespace detail

double hist_bucket_lower(int b) {
  if (b < kHistExactBuckets) return b;
  int k = b - kHistExactBuckets;
  return std::ldexp(std::pow(2.0, double(k % kHistSubBuckets) / kHistSubBuckets),
                    4 + k / kHistSubBuckets);
}

double hist_bucket_upper(int b) {
  if (b < kHistExactBuckets) return b + 1;
  return hist_bucket_lower(b) * std::pow(2.0, 1.0 / kHistSubBuckets);
}

double hist_bucket_value(int b) {
  if (b < kHistExactBuckets) return b;
  double lo = hist_bucket_lower(b), hi = hist_bucket_upper(b);
  return 2.0 * lo * hi / (lo + hi);
}

double hist_quantile(const uint64_t* counts, double q) {
  uint64_t total = 0;
  for (int b = 0; b < kHistBuckets; ++b) total += counts[b];
  if (total == 0) return -1.0;
  if (q < 0) q = 0;
  if (q > 1) q = 1;
  uint64_t rank = uint64_t(std::ceil(q * double(total)));
  if (rank < 1) rank = 1;
  uint64_t seen = 0;
  for (int b = 0; b < kHistBuckets; ++b) {
    seen += counts[b];
    if (seen >= rank) return hist_bucket_value(b);
  }
  return hist_bucket_value(kHistBuckets - 1);
}

}  // namespace lp
