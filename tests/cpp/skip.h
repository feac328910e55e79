// tests/cpp/skip.h: a test case that cannot run on this machine is reported as skipped, not passed.
//
// LP_SKIP_IF(cond, why) records the skip and leaves the test case. The runner (test_main.cpp)
// prints each skip and exits with kSkipExitCode when nothing failed and something was skipped,
// which ctest (SKIP_RETURN_CODE, CMakeLists.txt) reports as "Skipped". Test cases that may skip
// sit in a doctest test suite named "may skip: <condition>", which CMake runs as its own ctest
// test, so a skip there never hides the rest of the suite's results.
#pragma once

#include <doctest/doctest.h>

#include <string>

namespace lp_test {

/// Exit status of a run in which nothing failed and at least one test case skipped.
constexpr int kSkipExitCode = 77;

/// Records that the current test case skipped, and why.
void note_skip(const std::string& why);

}  // namespace lp_test

#define LP_SKIP_IF(cond, why)               \
  do {                                      \
    if (cond) {                             \
      std::string lp_skip_why_ = (why);     \
      MESSAGE("SKIPPED: " << lp_skip_why_); \
      lp_test::note_skip(lp_skip_why_);     \
      return;                               \
    }                                       \
  } while (0)
