// tests/cpp/test_wall_extremes.cpp: the exact per-path shortest and longest entry (min/max wall).
#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "lp_core/names.h"
#include "lp_core/recorder.h"
#include "lp_core/worker.h"

namespace {

using Clock = std::chrono::steady_clock;

uint32_t id(const char* name) {
  return lp::NameTable::instance().intern(name);
}

uint64_t ns_since(Clock::time_point t0) {
  return uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count());
}

// What the test itself measured of one entry: the spin inside it (a lower bound of its wall
// time) and enter-to-exit from outside (an upper bound).
struct Bounds {
  uint64_t lo_ns;
  uint64_t hi_ns;
};

// One entry of name_id on ts that spins for at least spin_ns, timed by the test's own clock.
Bounds timed_entry(lp::ThreadState* ts, uint32_t name_id, uint64_t spin_ns) {
  int tok;
  Clock::time_point outer = Clock::now();
  ts->enter(name_id, &tok);
  Clock::time_point inner = Clock::now();
  uint64_t spun = 0;
  while ((spun = ns_since(inner)) < spin_ns) {
  }
  ts->exit(&tok);
  return Bounds{spun, ns_since(outer)};
}

// The two clocks (TSC-derived wall vs steady_clock) may differ by their calibration error.
uint64_t slack(uint64_t ns) {
  return 2000 + ns / 1000;
}

// The bracket of a path's shortest and longest entry from what the test measured of every
// entry: any entry can be the extreme (one meant to be short, preempted between its spin and
// its exit, becomes the longest), so each bound is over all of them.
struct Extremes {
  uint64_t min_lo_ns;  // the shortest entry lasted at least this (the smallest spin)
  uint64_t min_hi_ns;  // ... and at most this (the smallest enter-to-exit)
  uint64_t max_lo_ns;  // the longest entry lasted at least this (the largest spin)
  uint64_t max_hi_ns;  // ... and at most this (the largest enter-to-exit)
};

Extremes extremes_of(const std::vector<Bounds>& seen) {
  Extremes e{UINT64_MAX, UINT64_MAX, 0, 0};
  for (const Bounds& b : seen) {
    e.min_lo_ns = std::min(e.min_lo_ns, b.lo_ns);
    e.min_hi_ns = std::min(e.min_hi_ns, b.hi_ns);
    e.max_lo_ns = std::max(e.max_lo_ns, b.lo_ns);
    e.max_hi_ns = std::max(e.max_hi_ns, b.hi_ns);
  }
  return e;
}

void check_extremes(const lp::NodeSnapshot& n, const std::vector<Bounds>& seen) {
  Extremes e = extremes_of(seen);
  INFO("min_wall_ns=" << n.min_wall_ns << " in [" << e.min_lo_ns << ", " << e.min_hi_ns
                      << "], max_wall_ns=" << n.max_wall_ns << " in [" << e.max_lo_ns << ", "
                      << e.max_hi_ns << "]");
  CHECK(n.min_wall_ns + slack(e.min_lo_ns) >= e.min_lo_ns);
  CHECK(n.min_wall_ns <= e.min_hi_ns + slack(e.min_hi_ns));
  CHECK(n.max_wall_ns + slack(e.max_lo_ns) >= e.max_lo_ns);
  CHECK(n.max_wall_ns <= e.max_hi_ns + slack(e.max_hi_ns));
}

const lp::NodeSnapshot* child_named(const lp::ThreadSnapshot& t, uint32_t name_id) {
  for (const auto& n : t.nodes) {
    if (n.index != lp::kRootNode && n.parent == lp::kRootNode && n.name_id == name_id) return &n;
  }
  return nullptr;
}

}  // namespace

TEST_CASE("a path keeps the exact shortest and longest of its entries, not a bucket edge" *
          doctest::test_suite("timing")) {
  lp::wall_clock_init();
  lp::Recorder rec(lp::RecorderOptions{false});
  lp::ThreadState* ts = rec.register_thread("main");
  const uint32_t name = id("extremes");
  std::vector<Bounds> seen;
  for (uint64_t us : {300, 1000, 50, 2000, 700}) seen.push_back(timed_entry(ts, name, us * 1000));
  auto snap = rec.snapshot();
  const lp::NodeSnapshot* n = child_named(snap[0], name);
  REQUIRE(n);
  REQUIRE(n->calls == 5);
  // The shortest entry lies between the smallest spin and the smallest enter-to-exit of the
  // five, the longest between the largest of each: whichever entries those are.
  check_extremes(*n, seen);
  CHECK(n->min_wall_ns * 5 <= n->wall_ns);
  CHECK(n->max_wall_ns <= n->wall_ns);
  // A path with no completed entry has none (the root, which only holds counters here).
  CHECK(snap[0].nodes[lp::kRootNode].min_wall_ns > snap[0].nodes[lp::kRootNode].max_wall_ns);
}

TEST_CASE("exited threads fold their extremes: min of the minima, max of the maxima" *
          doctest::test_suite("timing")) {
  lp::wall_clock_init();
  lp::Recorder rec(lp::RecorderOptions{false});
  rec.register_thread("main");
  const uint32_t name = id("fold_extremes");
  std::vector<Bounds> seen(2);
  for (auto [spin_ns, out] : {std::pair<uint64_t, Bounds*>{3000000, &seen[0]},
                              std::pair<uint64_t, Bounds*>{400000, &seen[1]}}) {
    std::thread t([&rec, name, spin_ns = spin_ns, out = out] {
      *out = timed_entry(rec.register_thread("worker"), name, spin_ns);
    });
    t.join();
  }
  auto snap = rec.snapshot();
  REQUIRE(snap.size() == 2);  // main, then the record of the exited "worker" threads
  REQUIRE(snap[1].exited_threads == 2);
  const lp::NodeSnapshot* n = child_named(snap[1], name);
  REQUIRE(n);
  CHECK(n->calls == 2);
  check_extremes(*n, seen);
}

TEST_CASE("the worker file carries min_wall_ns/max_wall_ns for paths with completed entries" *
          doctest::test_suite("timing")) {
  lp::wall_clock_init();
  char dir_template[] = "/tmp/lp_extremes_test_XXXXXX";
  REQUIRE(mkdtemp(dir_template));
  lp::WorkerConfig config;
  config.path = std::string(dir_template) + "/w.json";
  config.measure_cpu = false;
  lp::Worker worker(config);
  lp::ThreadState* ts = worker.recorder().register_thread("main");
  Bounds b = timed_entry(ts, id("written_extremes"), 200000);
  int tok;
  ts->enter(id("still_open"), &tok);
  std::string text = worker.snapshot_json();
  ts->exit(&tok);
  size_t at = text.find("\"path\":[\"written_extremes\"]");
  REQUIRE(at != std::string::npos);
  std::string rec = text.substr(at, text.find('\n', at) - at);
  size_t lo_at = rec.find("\"min_wall_ns\":");
  size_t hi_at = rec.find("\"max_wall_ns\":");
  REQUIRE(lo_at != std::string::npos);
  REQUIRE(hi_at != std::string::npos);
  uint64_t lo = std::stoull(rec.substr(lo_at + 14));
  uint64_t hi = std::stoull(rec.substr(hi_at + 14));
  CHECK(lo == hi);  // one entry: both are its wall time
  CHECK(lo + slack(b.lo_ns) >= b.lo_ns);
  CHECK(lo <= b.hi_ns + slack(b.hi_ns));
  size_t open_at = text.find("\"path\":[\"still_open\"]");
  REQUIRE(open_at != std::string::npos);
  std::string open_rec = text.substr(open_at, text.find('\n', open_at) - open_at);
  CHECK(open_rec.find("min_wall_ns") == std::string::npos);  // nothing completed yet
  rmdir(dir_template);
}
