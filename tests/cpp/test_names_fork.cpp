// tests/cpp/test_names_fork.cpp: a child forked while another thread reads the name table can
// intern.
#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <thread>

#include "lp_core/names.h"

TEST_CASE("a forked child can intern names whatever the parent's threads held") {
  lp::NameTable& table = lp::NameTable::instance();
  table.intern("fork-test");
  std::atomic<bool> stop{false};
  std::thread reader([&] {
    while (!stop.load()) (void)table.all();  // holds the table's mutex most of the time
  });
  int clean = 0;
  for (int i = 0; i < 50; ++i) {
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      alarm(2);  // a child stuck on the parent's lock dies of SIGALRM instead of hanging
      _exit(table.intern("from-child") > 0 ? 0 : 1);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) ++clean;
  }
  stop.store(true);
  reader.join();
  CHECK(clean == 50);
}
