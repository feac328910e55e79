// tests/cpp/test_hardening.cpp: saturated and refused counters, exited threads folded and freed,
// worker directories that refuse links and other users' directories.
#include <dirent.h>
#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "lp_core/names.h"
#include "lp_core/recorder.h"
#include "lp_core/worker.h"
#include "lp_core/worker_dir.h"
#include "lp_core/worker_file.h"

namespace {

uint32_t id(const char* name) {
  return lp::NameTable::instance().intern(name);
}

int open_fds() {
  int n = 0;
  DIR* d = opendir("/proc/self/fd");
  while (dirent* e = readdir(d)) n += e->d_name[0] != '.';
  closedir(d);
  return n;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string temp_dir() {
  char dir_template[] = "/tmp/lp_harden_test_XXXXXX";
  REQUIRE(mkdtemp(dir_template));
  return dir_template;
}

}  // namespace

TEST_CASE("a counter that reaches the int64 range saturates and says so, both ways") {
  lp::Recorder rec(lp::RecorderOptions{false});
  lp::ThreadState* ts = rec.register_thread("main");
  ts->count(id("d"), -(int64_t(1) << 62));
  ts->count(id("d"), -(int64_t(1) << 62));
  ts->count(id("d"), -1);  // one past: clamps at INT64_MIN
  ts->count(id("u"), INT64_MAX);
  ts->count(id("u"), 1);
  ts->count(id("fine"), 7);
  auto snap = rec.snapshot();
  const lp::NodeSnapshot& root = snap[0].nodes[0];
  std::map<uint32_t, int64_t> got(root.counters.begin(), root.counters.end());
  CHECK(got[id("d")] == INT64_MIN);
  CHECK(got[id("u")] == INT64_MAX);
  CHECK(got[id("fine")] == 7);
  std::vector<uint32_t> sat = root.saturated;
  std::sort(sat.begin(), sat.end());
  std::vector<uint32_t> want = {id("d"), id("u")};
  std::sort(want.begin(), want.end());
  CHECK(sat == want);
}

TEST_CASE("the 65,537th counter of a thread is refused and counted, never misrouted") {
  lp::Recorder rec(lp::RecorderOptions{false});
  lp::ThreadState* ts = rec.register_thread("main");
  uint32_t phase = id("p");
  int token;
  ts->enter(phase, &token);
  ts->count(id("inside"), 1);  // counter 1, on p
  ts->exit(&token);
  std::vector<uint32_t> many;
  for (int i = 0; i < 65536; ++i) many.push_back(id(("c" + std::to_string(i)).c_str()));
  for (int i = 0; i < 65535; ++i) ts->count(many[size_t(i)], 1);  // counters 2 .. 65,536
  ts->count(many[65535], 5);                                      // the 65,537th: refused
  ts->count(many[65535], 5);                                      // refused again
  ts->enter(phase, &token);
  ts->count(id("inside"), 1);  // an existing counter still counts
  ts->exit(&token);
  auto snap = rec.snapshot();
  CHECK(snap[0].counters_refused == 2);
  size_t root_counters = snap[0].nodes[0].counters.size();
  CHECK(root_counters == 65535);
  for (const auto& n : snap[0].nodes) {
    for (const auto& [name, value] : n.counters) {
      CHECK(name != many[65535]);
      if (name == id("inside")) CHECK(value == 2);
    }
  }
}

TEST_CASE("an exited thread's tree is folded into its name's record and its state freed") {
  lp::Recorder rec(lp::RecorderOptions{true});
  rec.register_thread("main");
  int fds_before = open_fds();
  constexpr int kThreads = 200;
  for (int i = 0; i < kThreads; ++i) {
    std::thread t([&rec, i] {
      lp::ThreadState* ts = rec.register_thread(i % 2 ? "odd" : "even");
      int outer, inner;
      ts->enter(id("work"), &outer);
      for (int k = 0; k < 3; ++k) {
        ts->enter(id("step"), &inner);
        ts->count(id("items"), 2);
        ts->exit(&inner);
      }
      ts->exit(&outer);
    });
    t.join();
  }
  CHECK(open_fds() <= fds_before + 1);  // no fd kept per exited thread
  auto snap = rec.snapshot();
  REQUIRE(snap.size() == 3);  // main (live), then the "even" and "odd" records
  uint64_t threads = 0, work = 0, steps = 0;
  int64_t items = 0;
  for (size_t k = 1; k < snap.size(); ++k) {
    threads += snap[k].exited_threads;
    for (const auto& n : snap[k].nodes) {
      if (n.name_id == id("work")) work += n.calls;
      if (n.name_id == id("step")) steps += n.calls;
      for (const auto& [name, value] : n.counters) items += name == id("items") ? value : 0;
    }
    CHECK(snap[k].nodes.size() == 3);  // root, work, work/step: merged by path
  }
  CHECK(threads == kThreads);
  CHECK(work == kThreads);
  CHECK(steps == 3 * kThreads);
  CHECK(items == 6 * kThreads);
}

TEST_CASE("exiting threads race snapshots safely (run under TSan and ASan)") {
  lp::Recorder rec(lp::RecorderOptions{true});
  std::atomic<bool> stop{false};
  std::thread reader([&] {
    while (!stop.load()) rec.snapshot();
  });
  std::vector<std::thread> threads;
  for (int i = 0; i < 64; ++i) {
    threads.emplace_back([&rec] {
      lp::ThreadState* ts = rec.register_thread("w");
      int token;
      for (int k = 0; k < 50; ++k) {
        ts->enter(id("x"), &token);
        ts->exit(&token);
      }
    });
  }
  for (auto& t : threads) t.join();
  stop = true;
  reader.join();
  uint64_t calls = 0;
  for (const auto& t : rec.snapshot()) {
    for (const auto& n : t.nodes) calls += n.name_id == id("x") ? n.calls : 0;
  }
  CHECK(calls == 64 * 50);
}

TEST_CASE("workers/<host> that is a symlink is refused, and the link's target is untouched") {
  std::string run = temp_dir();
  std::string elsewhere = temp_dir();
  REQUIRE(mkdir((run + "/workers").c_str(), 0755) == 0);
  REQUIRE(symlink(elsewhere.c_str(), (run + "/workers/host").c_str()) == 0);
  int err = 0;
  std::string why;
  CHECK(lp::open_worker_dir(run + "/workers/host", &err, &why) < 0);
  CHECK(err == ELOOP);
  CHECK(why.find("symbolic link") != std::string::npos);
  lp::WorkerConfig config;
  config.path = run + "/workers/host/w_r_1_abcd.json";
  lp::Worker worker(config);
  CHECK(worker.flush(false) == ELOOP);
  CHECK(worker.stats().last_error.find("symbolic link") != std::string::npos);
  DIR* d = opendir(elsewhere.c_str());
  int entries = 0;
  while (dirent* e = readdir(d)) entries += e->d_name[0] != '.';
  closedir(d);
  CHECK(entries == 0);
}

TEST_CASE("the run directory itself may be a symlink; files are 0640 at most") {
  std::string real = temp_dir();
  std::string link = temp_dir() + "/run";
  REQUIRE(symlink(real.c_str(), link.c_str()) == 0);
  lp::WorkerConfig config;
  config.path = link + "/workers/h/w_r_1_abcd.json";
  lp::Worker worker(config);
  mode_t old = umask(0);
  int err = worker.flush(true);
  umask(old);
  REQUIRE(err == 0);
  struct stat st;
  REQUIRE(stat((real + "/workers/h/w_r_1_abcd.json").c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0640);
  REQUIRE(stat((real + "/workers/h").c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0750);
  std::string text = read_text(real + "/workers/h/w_r_1_abcd.json");
  CHECK(text.find("\"late_flush_error\":\"" + std::string(lp::kLateFlushErrorWidth, ' ') + "\"") !=
        std::string::npos);
}

TEST_CASE("the recorder's (folded) node is marked synthetic; a phase named (folded) is not") {
  lp::Recorder rec(lp::RecorderOptions{false});
  std::thread t([&rec] {
    lp::ThreadState* ts = rec.register_thread("w");
    int token;
    ts->enter(id("(folded)"), &token);  // the user's own phase of that name
    ts->exit(&token);
    for (uint32_t i = 0; i < lp::kMaxNodes + 5; ++i) {
      ts->enter(id(("p" + std::to_string(i)).c_str()), &token);
      ts->exit(&token);
    }
  });
  t.join();  // exited: its tree is in the record of its name, the flag kept
  auto snap = rec.snapshot();
  REQUIRE(snap.size() == 1);
  REQUIRE(snap[0].exited_threads == 1);
  int synthetic = 0, users = 0;
  for (const auto& n : snap[0].nodes) {
    if (n.name_id != id("(folded)") || n.parent != lp::kRootNode || n.index == 0) continue;
    (n.synthetic ? synthetic : users) += 1;
    if (!n.synthetic) CHECK(n.calls == 1);
  }
  CHECK(synthetic == 1);
  CHECK(users == 1);
  CHECK(snap[0].folded_entries > 0);
}
