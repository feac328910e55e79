// tests/cpp/test_recorder.cpp: tree nesting, self time, counters, snapshots racing recording.
#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "lp_core/cpu_clock.h"
#include "lp_core/names.h"
#include "lp_core/recorder.h"
#include "lp_core/worker.h"

namespace {

const lp::NodeSnapshot* find(const lp::ThreadSnapshot& t, std::initializer_list<const char*> path) {
  uint32_t node = lp::kRootNode;
  for (const char* name : path) {
    uint32_t id = lp::NameTable::instance().intern(name);
    uint32_t next = UINT32_MAX;
    for (const auto& n : t.nodes) {
      if (n.parent == node && n.name_id == id && n.index != lp::kRootNode) next = n.index;
    }
    if (next == UINT32_MAX) return nullptr;
    node = next;
  }
  return &t.nodes[node];
}

// Spins until the thread has used ns of CPU time (a wall spin gets less CPU on a loaded host).
void spin_cpu_ns(uint64_t ns) {
  uint64_t t0 = lp::thread_cpu_syscall_ns();
  while (lp::thread_cpu_syscall_ns() - t0 < ns) {
  }
}

}  // namespace

TEST_CASE("nesting builds a tree keyed by the path of names" * doctest::test_suite("timing")) {
  lp::wall_clock_init();
  lp::Recorder rec(lp::RecorderOptions{true});
  lp::ThreadState* ts = rec.register_thread("main");
  REQUIRE(rec.thread_state() == ts);
  uint32_t it = lp::NameTable::instance().intern("iteration");
  uint32_t a = lp::NameTable::instance().intern("a");
  uint32_t b = lp::NameTable::instance().intern("b");
  int tok_it, tok_a, tok_b;
  for (int i = 0; i < 3; ++i) {
    ts->enter(it, &tok_it);
    ts->enter(a, &tok_a);
    spin_cpu_ns(200000);
    ts->exit(&tok_a);
    ts->enter(b, &tok_b);
    ts->count(lp::NameTable::instance().intern("items"), 5);
    ts->exit(&tok_b);
    ts->exit(&tok_it);
  }
  ts->count(lp::NameTable::instance().intern("at_root"), 2);
  auto snap = rec.snapshot();
  REQUIRE(snap.size() == 1);
  const auto* n_it = find(snap[0], {"iteration"});
  const auto* n_a = find(snap[0], {"iteration", "a"});
  const auto* n_b = find(snap[0], {"iteration", "b"});
  REQUIRE(n_it);
  REQUIRE(n_a);
  REQUIRE(n_b);
  CHECK(n_it->calls == 3);
  CHECK(n_a->calls == 3);
  CHECK(n_a->wall_ns >= 3 * 200000);
  CHECK(n_it->wall_ns >= n_a->wall_ns + n_b->wall_ns);
  CHECK(n_a->cpu_ns <= n_a->wall_ns + 100000);
  // It spun 600 us of CPU time (the system call's truth); the tier may read low by its aggregate
  // bound, 2% plus 10 us a phase (docs/cpu-clock.md). Not a share of wall: load stretches wall.
  CHECK(n_a->cpu_ns + 3 * 200000 / 50 + 3 * 10000 >= 3 * 200000);
  REQUIRE(n_b->counters.size() == 1);
  CHECK(n_b->counters[0].second == 15);
  REQUIRE(snap[0].nodes[0].counters.size() == 1);
  CHECK(snap[0].nodes[0].counters[0].second == 2);
  uint64_t hist_total = 0;
  for (auto& [bucket, count] : n_a->hist) hist_total += count;
  CHECK(hist_total == 3);
}

TEST_CASE("mark_raised_on counts the entries an exception left, scaled like calls") {
  lp::wall_clock_init();
  lp::Recorder rec(lp::RecorderOptions{true});
  lp::ThreadState* ts = rec.register_thread("main");
  uint32_t outer = lp::NameTable::instance().intern("outer");
  uint32_t maybe = lp::NameTable::instance().intern("maybe");
  uint32_t sampled = lp::NameTable::instance().intern("sampled");
  int tok_outer, tok_maybe, tok_sampled, unknown;
  ts->enter(outer, &tok_outer);
  for (int i = 0; i < 10; ++i) {
    ts->enter(maybe, &tok_maybe);
    if (i < 3) ts->mark_raised_on(*ts->active_stack(), &tok_maybe);
    ts->exit(&tok_maybe);
  }
  ts->mark_raised_on(*ts->active_stack(), &unknown);  // no such entry open: nothing counted
  ts->exit(&tok_outer);
  // A measured entry of a phase sampled 1 in 4 stands for 4 entries: so does its raise.
  for (int i = 0; i < 4; ++i) {
    if (ts->enter(sampled, &tok_sampled, 4)) {
      ts->mark_raised_on(*ts->active_stack(), &tok_sampled);
      ts->exit(&tok_sampled);
    } else {
      ts->exit_skipped(&tok_sampled);
    }
  }
  auto snap = rec.snapshot();
  REQUIRE(snap.size() == 1);
  const auto* n_outer = find(snap[0], {"outer"});
  const auto* n_maybe = find(snap[0], {"outer", "maybe"});
  const auto* n_sampled = find(snap[0], {"sampled"});
  REQUIRE(n_outer);
  REQUIRE(n_maybe);
  REQUIRE(n_sampled);
  CHECK(n_maybe->calls == 10);
  CHECK(n_maybe->raised == 3);
  CHECK(n_outer->raised == 0);
  CHECK(n_sampled->calls >= 4);
  CHECK(n_sampled->raised == n_sampled->calls);
}

TEST_CASE("attach nests a thread's phases under another's path, recording no entry itself") {
  lp::wall_clock_init();
  lp::Recorder rec(lp::RecorderOptions{false});
  lp::ThreadState* ts = rec.register_thread("pool");
  uint32_t iteration = lp::NameTable::instance().intern("iteration");
  uint32_t self_play = lp::NameTable::instance().intern("self_play");
  uint32_t search = lp::NameTable::instance().intern("search");
  int t1, t2, t3;
  // The handing thread's open path, captured there (markers left out).
  ts->enter(iteration, &t1);
  ts->enter(self_play, &t2);
  std::vector<uint32_t> path = ts->open_path();
  CHECK(path == std::vector<uint32_t>{iteration, self_play});
  ts->exit(&t2);
  ts->exit(&t1);

  uint32_t level = ts->attach(path);
  REQUIRE(level == 1);
  CHECK(ts->current_name() == self_play);  // nothing open yet: the phase it was handed from
  CHECK(ts->open_path() == path);          // a nested hand-off captures the same path
  for (int i = 0; i < 5; ++i) {
    ts->enter(search, &t3);
    ts->exit(&t3);
  }
  auto during = rec.snapshot();  // the attached frame is never reported as an open entry
  const auto* mark = find(during[0], {"iteration", "self_play", "[threads]"});
  REQUIRE(mark);
  CHECK(mark->calls == 0);
  CHECK(mark->open_count == 0);
  ts->enter(search, &t3);
  ts->detach(level);  // a phase left open inside is dropped, counted as out of order
  CHECK(ts->depth() == 0);
  CHECK(ts->out_of_order_exits.load() == 1);
  ts->exit(&t3);           // its late exit finds nothing to close
  ts->detach(level);       // a second detach does nothing
  ts->enter(search, &t3);  // detached: back at the thread's own root
  ts->exit(&t3);

  // An out-of-order exit across an attached frame drops it without recording anything there.
  ts->enter(iteration, &t1);
  ts->attach(path);
  ts->enter(search, &t3);
  ts->exit(&t1);
  CHECK(ts->depth() == 0);

  auto snap = rec.snapshot();
  const auto* handed = find(snap[0], {"iteration", "self_play", "[threads]", "search"});
  REQUIRE(handed);
  CHECK(handed->calls == 6);  // 5, the dropped one nothing, and the one closed out of order
  const auto* own = find(snap[0], {"search"});
  REQUIRE(own);
  CHECK(own->calls == 1);
  const auto* n_iter = find(snap[0], {"iteration"});
  REQUIRE(n_iter);
  CHECK(n_iter->calls == 2);  // the capture's entry and the out-of-order one; attach adds none
  CHECK(find(snap[0], {"iteration", "self_play", "[threads]"})->calls == 0);
}

TEST_CASE("out-of-order exits close the frames above; unmatched exits record nothing") {
  lp::Recorder rec(lp::RecorderOptions{false});
  lp::ThreadState* ts = rec.register_thread("main");
  uint32_t x = lp::NameTable::instance().intern("x");
  uint32_t y = lp::NameTable::instance().intern("y");
  int tx, ty, never;
  ts->enter(x, &tx);
  ts->enter(y, &ty);
  ts->exit(&tx);  // closes y then x
  CHECK(ts->depth() == 0);
  ts->exit(&ty);  // already closed: nothing
  ts->exit(&never);
  auto snap = rec.snapshot();
  CHECK(find(snap[0], {"x"})->calls == 1);
  CHECK(find(snap[0], {"x", "y"})->calls == 1);
}

TEST_CASE("counters clamp at the int64 range instead of wrapping") {
  lp::Recorder rec(lp::RecorderOptions{false});
  lp::ThreadState* ts = rec.register_thread("main");
  uint32_t up = lp::NameTable::instance().intern("up");
  uint32_t down = lp::NameTable::instance().intern("down");
  ts->count(up, INT64_MAX - 1);
  ts->count(up, 5);
  ts->count(down, INT64_MIN + 1);
  ts->count(down, -5);
  ts->count(down, 3);  // back off the floor by what was added
  auto snap = rec.snapshot();
  std::map<uint32_t, int64_t> got(snap[0].nodes[0].counters.begin(),
                                  snap[0].nodes[0].counters.end());
  CHECK(got[up] == INT64_MAX);
  CHECK(got[down] == INT64_MIN + 3);
}

TEST_CASE("count() adds to the counter of its name whatever the order of names and phases") {
  // count() checks the counter it found last on the node first: interleaved names, nodes and
  // repeats must all land on their own counter (a reference map is the truth).
  lp::Recorder rec(lp::RecorderOptions{false});
  lp::ThreadState* ts = rec.register_thread("main");
  uint32_t names[3] = {lp::NameTable::instance().intern("c0"),
                       lp::NameTable::instance().intern("c1"),
                       lp::NameTable::instance().intern("c2")};
  uint32_t phase = lp::NameTable::instance().intern("p");
  std::map<std::pair<bool, uint32_t>, int64_t> truth;  // (inside p, name) -> sum
  uint64_t state = 12345;
  int token;
  for (int i = 0; i < 3000; ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    bool inside = (state >> 60) & 1;
    uint32_t name = names[(state >> 40) % 3];
    int64_t n = int64_t((state >> 20) % 100);
    if (inside) ts->enter(phase, &token);
    if (i % 2) {
      ts->count(name, n);
    } else {
      ts->count_own(name, n);  // no task stack here: the same counter, by the own-stack path
    }
    if (inside) ts->exit(&token);
    truth[{inside, name}] += n;
  }
  auto snap = rec.snapshot();
  std::map<std::pair<bool, uint32_t>, int64_t> got;
  for (auto& [name, value] : snap[0].nodes[0].counters) got[{false, name}] += value;
  for (auto& [name, value] : find(snap[0], {"p"})->counters) got[{true, name}] += value;
  CHECK(got == truth);
  CHECK(snap[0].nodes[0].counters.size() == 3);  // one counter per name, never a duplicate
}

TEST_CASE("depth overflow is counted, and the tree folds at kMaxNodes") {
  lp::Recorder rec(lp::RecorderOptions{false});
  lp::ThreadState* ts = rec.register_thread("main");
  uint32_t d = lp::NameTable::instance().intern("deep");
  static int tokens[lp::kMaxDepth + 10];
  for (uint32_t i = 0; i < lp::kMaxDepth + 10; ++i) ts->enter(d, &tokens[i]);
  for (uint32_t i = lp::kMaxDepth + 10; i-- > 0;) ts->exit(&tokens[i]);
  CHECK(ts->depth() == 0);
  CHECK(ts->depth_overflow.load() == 10);

  int tok;
  for (uint32_t i = 0; i < lp::kMaxNodes + 50; ++i) {
    uint32_t id = lp::NameTable::instance().intern("fold_" + std::to_string(i));
    ts->enter(id, &tok);
    ts->exit(&tok);
  }
  CHECK(ts->folded_entries.load() > 0);
  auto snap = rec.snapshot();
  CHECK(snap[0].nodes.size() <= lp::kMaxNodes + 1);
  const auto* folded = find(snap[0], {"(folded)"});
  REQUIRE(folded);
  CHECK(folded->calls == ts->folded_entries.load());
}

TEST_CASE("count_own() scales inside sampled entries and clamps, as count() does") {
  lp::Recorder rec(lp::RecorderOptions{false});
  lp::ThreadState* ts = rec.register_thread("main");
  REQUIRE(!ts->has_task_stacks());
  uint32_t items = lp::NameTable::instance().intern("own_items");
  uint32_t big = lp::NameTable::instance().intern("own_big");
  uint32_t sampled = lp::NameTable::instance().intern("own_sampled");
  int token;
  ts->count_own(items, 5);       // root, a new counter (the out-of-line path)
  ts->count_own(items, 2);       // root, the node's last counter (inline)
  for (int i = 0; i < 8; ++i) {  // 1 entry in 4 measured, and what it counts scaled by 4
    if (ts->enter(sampled, &token, 4)) {
      ts->count_own(items, 3);
      ts->count_own(big, INT64_MAX / 3);  // x4 saturates
      ts->exit(&token);
    } else {
      ts->count_own(items, 1000);  // a skipped entry counts nothing
      ts->exit_skipped(&token);
    }
  }
  auto snap = rec.snapshot();
  std::map<uint32_t, int64_t> root(snap[0].nodes[0].counters.begin(),
                                   snap[0].nodes[0].counters.end());
  CHECK(root[items] == 7);
  const lp::NodeSnapshot* n = find(snap[0], {"own_sampled"});
  REQUIRE(n);
  std::map<uint32_t, int64_t> got(n->counters.begin(), n->counters.end());
  CHECK(got[items] == 2 * 3 * 4);  // two measured entries of eight
  CHECK(got[big] == INT64_MAX);
  CHECK(std::find(n->saturated.begin(), n->saturated.end(), big) != n->saturated.end());
}

TEST_CASE("snapshots race recording threads safely (run under TSan)") {
  lp::Recorder rec(lp::RecorderOptions{true});
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&rec, &stop, t] {
      lp::ThreadState* ts = rec.register_thread("t" + std::to_string(t));
      int tok1, tok2;
      uint64_t i = 0;
      while (!stop.load()) {
        ts->enter(lp::NameTable::instance().intern("outer"), &tok1);
        ts->enter(lp::NameTable::instance().intern("inner_" + std::to_string(i++ % 7)), &tok2);
        ts->count(lp::NameTable::instance().intern("n"), 1);
        ts->exit(&tok2);
        ts->exit(&tok1);
      }
    });
  }
  for (int i = 0; i < 50; ++i) {
    auto snap = rec.snapshot();
    for (auto& t : snap) {
      for (auto& n : t.nodes) CHECK(n.parent < t.nodes.size());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  stop = true;
  for (auto& th : threads) th.join();
  auto snap = rec.snapshot();
  CHECK(snap.size() == 3);
  for (auto& t : snap) {
    const auto* outer = find(t, {"outer"});
    REQUIRE(outer);
    uint64_t inner_calls = 0;
    for (auto& n : t.nodes) {
      if (n.parent == outer->index) inner_calls += n.calls;
    }
    CHECK(inner_calls == outer->calls);
  }
}

TEST_CASE("the worker writes atomically and its snapshot thread flushes periodically") {
  char dir_template[] = "/tmp/lp_worker_test_XXXXXX";
  REQUIRE(mkdtemp(dir_template));
  std::string path = std::string(dir_template) + "/workers/host/w_run_1_abcd.json";
  lp::WorkerConfig config;
  config.path = path;
  config.meta_json = "{\"role\":\"test\"}";
  config.snapshot_interval_ns = 5 * 1000 * 1000;
  lp::Worker worker(config);
  lp::ThreadState* ts = worker.recorder().register_thread("main");
  int tok;
  ts->enter(lp::NameTable::instance().intern("with \"quotes\"\n"), &tok);
  ts->exit(&tok);
  worker.start_thread();
  // at least two periodic writes (5 ms apart; a loaded machine under a sanitizer may take longer)
  for (int i = 0; i < 400 && worker.stats().writes < 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  worker.stop_thread();
  CHECK(worker.stats().writes >= 2);
  CHECK(worker.flush(true) == 0);
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  CHECK(text.str().find("\"final\":true") != std::string::npos);
  CHECK(text.str().find("\"path\":[\"with \\\"quotes\\\"\\u000a\"]") != std::string::npos);
  CHECK(text.str().find("\"role\":\"test\"") != std::string::npos);
  std::ifstream tmp(path + ".tmp");
  CHECK(!tmp.good());  // no temporary left behind
}

TEST_CASE("a failed write is counted and leaves nothing") {
  lp::WorkerConfig config;
  config.path = "/proc/definitely/not/writable.json";
  lp::Worker worker(config);
  CHECK(worker.flush(false) != 0);
  CHECK(worker.stats().errors == 1);
  CHECK(!worker.stats().last_error.empty());
}
