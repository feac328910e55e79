// tests/cpp/test_main.cpp: the doctest runner of lp_core's unit tests; reports skipped test cases.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "skip.h"

namespace {
std::vector<std::string>& skips() {
  static std::vector<std::string> all;
  return all;
}
}  // namespace

namespace lp_test {
void note_skip(const std::string& why) {
  skips().push_back(why);
}
}  // namespace lp_test

int main(int argc, char** argv) {
  doctest::Context ctx(argc, argv);
  int rc = ctx.run();
  if (ctx.shouldExit()) return rc;
  for (const std::string& why : skips()) std::printf("[lp_core_tests] SKIPPED: %s\n", why.c_str());
  if (rc == 0 && !skips().empty()) {
    std::printf("[lp_core_tests] %zu test case(s) skipped: this machine lacks what they need\n",
                skips().size());
    return lp_test::kSkipExitCode;
  }
  return rc;
}
