// tests/cpp/test_standalone.cpp: the standalone Profiler: files, threads, signals, fork.
#include <dirent.h>
#include <doctest/doctest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "lineprofiler/standalone.hpp"
#include "lp_core/argv_mask.h"
#include "lp_core/identity.h"
#include "lp_core/sha1.h"
#include "standalone/front.h"

namespace {

std::string read_text(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

std::string temp_dir() {
  char dir_template[] = "/tmp/lp_standalone_test_XXXXXX";
  REQUIRE(mkdtemp(dir_template));
  return dir_template;
}

// The value after `"key":` in the phase record whose path is exactly path_json, or -1.
long long phase_field(const std::string& doc, const std::string& path_json,
                      const std::string& key) {
  size_t at = doc.find("{\"path\":" + path_json + ",");
  if (at == std::string::npos) return -1;
  size_t k = doc.find("\"" + key + "\":", at);
  size_t end = doc.find("\n", at);
  if (k == std::string::npos || (end != std::string::npos && k > end)) return -1;
  return std::atoll(doc.c_str() + k + key.size() + 3);
}

std::atomic<int> g_user_handler_calls{0};
int g_in_forked_child = 0;
void user_handler(int) {
  g_user_handler_calls.fetch_add(1);
}

}  // namespace

// LeakSanitizer asks this at exit: a forked child exits through exit() on purpose (its atexit hooks
// are under test), leaving the locks that lp_core's fork handlers replaced (never freed, by
// design).
extern "C" int __lsan_is_turned_off() {
  return g_in_forked_child;
}

TEST_CASE("identity helpers follow Python's rules") {
  using namespace lp::identity;
  CHECK(sha1_hex("abc") == "a9993e364706816aba3e25717850c26c9cd0d89d");
  CHECK(sha1_hex("") == "da39a3ee5e6b4b0d3255bfef95601890afd80709");
  CHECK(sha1_hex(std::string(1000, 'a')) == "291e9a6c66994949b57ba5e650361e98fc36b1ba");
  CHECK(abspath("/a/./b/../c//d/") == "/a/c/d");
  CHECK(abspath("//x/y") == "//x/y");
  CHECK(abspath("///x") == "/x");
  CHECK(abspath("/..") == "/");
  CHECK(sub_unsafe_run_id("job_1 \xc3\xa9\xff", "-") == "job-1---");
  CHECK(strip("  7\t") == "7");
  std::vector<std::string> argv = {"prog", "--api-key", "s3", "--token=abc", "--x", "y"};
  std::vector<std::string> want = {"prog", "--api-key", "<masked>", "--token=<masked>", "--x", "y"};
  CHECK(lp::masked_argv(argv) == want);
}

TEST_CASE("a standalone profiler writes exact counts from several threads (run under TSan)") {
  std::string dir = temp_dir();
  constexpr int kThreads = 4, kIters = 2000;
  std::string path;
  {
    lineprofiler::ProfilerOptions o;
    o.run_dir = dir;
    o.role = "server";
    o.enabled = true;
    o.snapshot_interval_s = 0.002;  // snapshots race the recording threads
    o.sample_interval_s = 0.002;
    o.handle_signals = false;
    o.export_env = false;
    lineprofiler::Profiler prof(o);
    path = prof.worker_path();
    REQUIRE(!path.empty());
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&] {
        for (int i = 0; i < kIters; ++i) {
          LP_PHASE("handle");
          { lineprofiler::Phase p(std::string_view("parse")); }
          LP_COUNT("requests", 3);
        }
      });
    }
    {
      LP_PHASE("handle");
      CHECK(lineprofiler::current() == "handle");
      std::string long_name(300, 'x');
      lineprofiler::Phase inner{std::string_view(long_name)};
      CHECK(lineprofiler::current() == long_name);
    }
    CHECK(lineprofiler::current() == "");
    for (auto& t : threads) t.join();
    CHECK(prof.stats().writes >= 1);
  }
  // Nothing installed any more: a scope is a no-op.
  CHECK(lp::standalone::installed_recorder() == nullptr);
  CHECK_FALSE(lineprofiler::enabled());
  {
    lineprofiler::Phase after("after");
    CHECK_FALSE(after.recorded());
  }
  std::string doc = read_text(path);
  CHECK(doc.find("\"final\":true") != std::string::npos);
  CHECK(doc.find("\"role\":\"server\"") != std::string::npos);
  CHECK(doc.find("\"runtime\":\"c++\"") != std::string::npos);
  // The exited threads' trees are folded into one record; the main thread's is its own.
  long long calls = 0, counted = 0;
  for (size_t at = 0; (at = doc.find("{\"path\":[\"handle\"],", at)) != std::string::npos; ++at) {
    calls += phase_field(doc.substr(at), "[\"handle\"]", "calls");
    size_t c = doc.find("\"requests\":", at);
    if (c != std::string::npos && c < doc.find('\n', at))
      counted += std::atoll(doc.c_str() + c + 11);
  }
  CHECK(calls == kThreads * kIters + 1);
  CHECK(counted == 3LL * kThreads * kIters);
  CHECK(doc.find("{\"path\":[\"handle\",\"parse\"],\"calls\":") != std::string::npos);
}

TEST_CASE("SIGUSR1 flushes, then calls the handler installed before; close() puts it back") {
  std::string dir = temp_dir();
  struct sigaction user = {}, saved;
  user.sa_handler = user_handler;
  sigemptyset(&user.sa_mask);
  REQUIRE(sigaction(SIGUSR1, &user, &saved) == 0);
  g_user_handler_calls = 0;
  {
    lineprofiler::ProfilerOptions o;
    o.run_dir = dir;
    o.role = "sig";
    o.enabled = true;
    o.snapshot_interval_s = 0;  // no periodic write: only the signal's
    o.sample_interval_s = 0;
    o.export_env = false;
    lineprofiler::Profiler prof(o);
    for (int i = 0; i < 7; ++i) {
      LP_PHASE("work");
    }
    uint64_t writes = prof.stats().writes;
    CHECK(read_text(prof.worker_path()).find("[\"work\"]") == std::string::npos);
    raise(SIGUSR1);
    CHECK(g_user_handler_calls.load() == 1);
    CHECK(prof.stats().writes == writes + 1);  // flushed before the handler was chained
    std::string doc = read_text(prof.worker_path());
    CHECK(phase_field(doc, "[\"work\"]", "calls") == 7);
    CHECK(doc.find("\"final\":false") != std::string::npos);
    CHECK(doc.find("\"signal_flush\":true") != std::string::npos);
  }
  struct sigaction now;
  REQUIRE(sigaction(SIGUSR1, nullptr, &now) == 0);
  CHECK((now.sa_handler == user_handler));  // restored on close
  raise(SIGUSR1);
  CHECK(g_user_handler_calls.load() == 2);
  sigaction(SIGUSR1, &saved, nullptr);
}

TEST_CASE("a disabled profiler writes nothing and installs nothing") {
  std::string dir = temp_dir();
  lineprofiler::ProfilerOptions o;
  o.run_dir = dir;
  o.enabled = false;
  lineprofiler::Profiler prof(o);
  CHECK_FALSE(prof.enabled());
  CHECK(prof.worker_path().empty());
  CHECK(lp::standalone::installed_recorder() == nullptr);
  CHECK_FALSE(lineprofiler::enabled());
  CHECK(prof.flush() == 0);
  CHECK(access((dir + "/workers").c_str(), F_OK) != 0);
}

TEST_CASE("a forked child records nothing into the parent's profiler and never writes its file") {
  std::string dir = temp_dir();
  lineprofiler::ProfilerOptions o;
  o.run_dir = dir;
  o.role = "parent";
  o.enabled = true;
  o.snapshot_interval_s = 0.001;  // the snapshot thread runs across the fork
  o.sample_interval_s = 0;
  o.handle_signals = false;
  o.export_env = false;
  lineprofiler::Profiler prof(o);
  for (int i = 0; i < 3; ++i) {
    LP_PHASE("before_fork");
  }
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    g_in_forked_child = 1;
    int bad = 0;
    bad |= lineprofiler::enabled() ? 1 : 0;  // nothing installed here
    {
      LP_PHASE("in_child");
      LP_COUNT("child_count", 1);
    }
    bad |= prof.flush() != 0 ? 2 : 0;  // a no-op, not the parent's file
    std::exit(bad);  // atexit and static destructors run: they must not write either
  }
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  prof.close();
  std::string doc = read_text(prof.worker_path());
  CHECK(phase_field(doc, "[\"before_fork\"]", "calls") == 3);
  CHECK(doc.find("in_child") == std::string::npos);
  CHECK(doc.find("\"pid\":" + std::to_string(getpid()) + ",") != std::string::npos);
  CHECK(doc.find("\"final\":true") != std::string::npos);
}

// In a child process (it dies by the signal): a profiler with sig at its default disposition
// records 11 phases and raises sig; its worker file, read after it ended, is final and complete.
void final_file_of_a_child_ended_by(int sig, const char* name) {
  std::string dir = temp_dir();
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    g_in_forked_child = 1;
    signal(sig, SIG_DFL);
    lineprofiler::ProfilerOptions o;
    o.run_dir = dir;
    o.role = "term";
    o.enabled = true;
    o.snapshot_interval_s = 60;  // running, but never due: only the signal's write can happen
    o.sample_interval_s = 0.001;
    o.export_env = false;
    lineprofiler::Profiler prof(o);
    for (int i = 0; i < 11; ++i) {
      LP_PHASE("served");
    }
    raise(sig);
    _exit(3);  // not reached: the re-raised signal ended the process
  }
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == sig);
  std::string host_dir = dir + "/workers/" + lp::identity::host_name();
  std::string doc;
  DIR* d = opendir(host_dir.c_str());
  REQUIRE(d);
  while (dirent* e = readdir(d)) {
    std::string name = e->d_name;
    if (name.size() > 5 && name.substr(name.size() - 5) == ".json") {
      doc = read_text(host_dir + "/" + name);
    }
  }
  closedir(d);
  CHECK(phase_field(doc, "[\"served\"]", "calls") == 11);
  CHECK(doc.find("\"final\":true") != std::string::npos);
  CHECK(doc.find(std::string("\"exit_signal\":\"") + name + "\"") != std::string::npos);
}

TEST_CASE("SIGTERM with the default disposition writes the final file, then ends the process") {
  final_file_of_a_child_ended_by(SIGTERM, "SIGTERM");
}

TEST_CASE("SIGINT (Ctrl-C) with the default disposition writes the final file, then ends it") {
  final_file_of_a_child_ended_by(SIGINT, "SIGINT");
}

TEST_CASE("a SIGINT ignored at construction stays ignored (a shell's background job)") {
  std::string dir = temp_dir();
  pid_t pid = fork();  // the child changes its SIGINT disposition: its own process
  REQUIRE(pid >= 0);
  if (pid == 0) {
    g_in_forked_child = 1;
    signal(SIGINT, SIG_IGN);
    int bad = 0;
    {
      lineprofiler::ProfilerOptions o;
      o.run_dir = dir;
      o.role = "background";
      o.enabled = true;
      o.snapshot_interval_s = 0;
      o.sample_interval_s = 0;
      o.export_env = false;
      lineprofiler::Profiler prof(o);
      struct sigaction now;
      sigaction(SIGINT, nullptr, &now);
      bad |= ((now.sa_flags & SA_SIGINFO) || now.sa_handler != SIG_IGN) ? 1 : 0;
      uint64_t writes = prof.stats().writes;
      raise(SIGINT);  // ignored: no flush, and the process goes on
      bad |= prof.stats().writes != writes ? 2 : 0;
    }
    struct sigaction after;
    sigaction(SIGINT, nullptr, &after);
    bad |= after.sa_handler != SIG_IGN ? 4 : 0;
    _exit(bad);
  }
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}
