// tests/cpp/test_task_stacks.cpp: task stacks (nesting, switching, async entries), several
// recorders on one thread, and snapshots racing stacks that grow and die (run under TSan).
#include <doctest/doctest.h>

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "lp_core/names.h"
#include "lp_core/recorder.h"

namespace {

uint32_t id(const char* name) {
  return lp::NameTable::instance().intern(name);
}

const lp::NodeSnapshot* find(const lp::ThreadSnapshot& t, std::initializer_list<const char*> path) {
  uint32_t node = lp::kRootNode;
  for (const char* name : path) {
    uint32_t want = id(name), next = UINT32_MAX;
    for (const auto& n : t.nodes) {
      if (n.parent == node && n.name_id == want && n.index != lp::kRootNode) next = n.index;
    }
    if (next == UINT32_MAX) return nullptr;
    node = next;
  }
  return &t.nodes[node];
}

}  // namespace

TEST_CASE("task stacks nest under their parent's open phase, never under each other's") {
  lp::wall_clock_init();
  lp::Recorder rec(lp::RecorderOptions{true});
  lp::ThreadState* ts = rec.register_thread("main");
  int serve, req[3], parse[3];
  ts->enter(id("serve"), &serve);  // the thread's own stack
  std::vector<std::shared_ptr<lp::PhaseStack>> tasks;
  for (int i = 0; i < 3; ++i) tasks.push_back(ts->new_task_stack(nullptr));
  // Interleave: every task opens request, then parse, switching stacks between each step.
  for (int i = 0; i < 3; ++i) {
    ts->use_stack(tasks[i]);
    REQUIRE(ts->enter(id("request"), &req[i]));
    CHECK(ts->current_name() == id("request"));
  }
  for (int i = 0; i < 3; ++i) {
    ts->use_stack(tasks[i]);
    REQUIRE(ts->enter(id("parse"), &parse[i]));
    ts->count(id("n"), 1);
  }
  // A child task made while task 0 is inside request/parse nests under it.
  ts->use_stack(tasks[0]);
  auto child = ts->new_task_stack(tasks[0].get());
  ts->use_stack(child);
  CHECK(ts->current_name() == id("parse"));  // nothing open yet: its base is the parent's top
  int sub;
  REQUIRE(ts->enter(id("sub"), &sub));
  ts->exit(&sub);  // same epoch: CPU recorded
  for (int i = 0; i < 3; ++i) {
    ts->use_stack(tasks[i]);
    ts->exit(&parse[i]);
    ts->exit(&req[i]);
  }
  ts->use_stack(nullptr);
  ts->exit(&serve);
  auto snap = rec.snapshot();
  const auto* request = find(snap[0], {"serve", "request"});
  const auto* p = find(snap[0], {"serve", "request", "parse"});
  const auto* s = find(snap[0], {"serve", "request", "parse", "sub"});
  REQUIRE(request);
  REQUIRE(p);
  REQUIRE(s);
  CHECK(request->calls == 3);
  CHECK(p->calls == 3);
  CHECK(s->calls == 1);
  CHECK(s->async_calls == 0);
  // Every request and parse entry saw another stack made active inside it: no CPU is theirs.
  CHECK(request->async_calls == 3);
  CHECK(p->async_calls == 3);
  CHECK(request->cpu_ns == 0);
  CHECK(request->async_wall_ns == request->wall_ns);
  REQUIRE(p->counters.size() == 1);
  CHECK(p->counters[0].second == 3);
  CHECK(find(snap[0], {"serve"})->async_calls == 0);  // the thread's own stack is never async
  CHECK(snap[0].out_of_order_exits == 0);
  CHECK(snap[0].task_stacks_made == 4);
}

TEST_CASE("a task stack grows to kMaxDepth; open frames of every stack are in snapshots") {
  lp::Recorder rec(lp::RecorderOptions{false});
  lp::ThreadState* ts = rec.register_thread("main");
  auto task = ts->new_task_stack(nullptr);
  ts->use_stack(task);
  std::vector<int> tokens(lp::kMaxDepth + 5);
  for (auto& t : tokens) ts->enter(id("d"), &t);
  CHECK(ts->depth() == lp::kMaxDepth);
  CHECK(ts->depth_overflow.load() == 5);
  auto snap = rec.snapshot();
  uint32_t open = 0;
  for (const auto& n : snap[0].nodes) open += n.open_count;
  CHECK(open == lp::kMaxDepth);
  ts->exit(&tokens[0]);  // out of order: closes everything above it, counted once
  CHECK(ts->depth() == 0);
  snap = rec.snapshot();
  CHECK(snap[0].out_of_order_exits == 1);
  open = 0;
  for (const auto& n : snap[0].nodes) open += n.open_count;
  CHECK(open == 0);
  ts->use_stack(nullptr);
}

TEST_CASE("several recorders on one thread each find their own state and frames") {
  lp::Recorder a(lp::RecorderOptions{false});
  lp::Recorder b(lp::RecorderOptions{false});
  lp::ThreadState* ta = a.register_thread("main");
  lp::ThreadState* tb = b.register_thread("main");
  CHECK(a.thread_state() == nullptr);  // the primary cache holds b's now
  for (int i = 0; i < 200; ++i) {
    int ka, kb;
    lp::ThreadState* sa = a.thread_state() ? a.thread_state() : a.find_thread();
    REQUIRE(sa == ta);
    sa->enter(id("step"), &ka);
    lp::ThreadState* sb = b.thread_state() ? b.thread_state() : b.find_thread();
    REQUIRE(sb == tb);
    sb->enter(id("inner"), &kb);
    sb->exit(&kb);
    REQUIRE(a.find_thread() == ta);
    ta->exit(&ka);
  }
  CHECK(find(a.snapshot()[0], {"step"})->calls == 200);
  CHECK(find(b.snapshot()[0], {"inner"})->calls == 200);
  lp::Recorder never(lp::RecorderOptions{false});
  CHECK(never.find_thread() == nullptr);
}

TEST_CASE("snapshots race task stacks that grow and are dropped (run under TSan)") {
  lp::Recorder rec(lp::RecorderOptions{true});
  std::atomic<bool> stop{false};
  std::thread owner([&rec, &stop] {
    lp::ThreadState* ts = rec.register_thread("loop");
    std::vector<int> tokens(40);
    uint64_t round = 0;
    while (!stop.load()) {
      auto task = ts->new_task_stack(nullptr);
      ts->use_stack(task);
      size_t depth = 1 + round++ % tokens.size();
      for (size_t i = 0; i < depth; ++i) ts->enter(id("nest"), &tokens[i]);
      for (size_t i = depth; i-- > 0;) ts->exit(&tokens[i]);
      ts->use_stack(nullptr);  // the task is done: only the registry holds its stack
    }
  });
  for (int i = 0; i < 50; ++i) {
    auto snap = rec.snapshot();
    for (auto& t : snap) {
      for (auto& n : t.nodes) CHECK(n.parent < t.nodes.size());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  stop = true;
  owner.join();
  auto snap = rec.snapshot();
  REQUIRE(snap.size() == 1);
  CHECK(snap[0].task_stacks_made > 0);
  const auto* top = find(snap[0], {"nest"});
  REQUIRE(top);
  CHECK(top->calls == snap[0].task_stacks_made);
}

TEST_CASE("has_task_stacks clears once the thread is back on its own stack and no task holds one") {
  lp::wall_clock_init();
  lp::Recorder rec(lp::RecorderOptions{false});
  lp::ThreadState* ts = rec.register_thread("main");
  CHECK(!ts->has_task_stacks());
  auto a = ts->new_task_stack(nullptr);
  auto b = ts->new_task_stack(nullptr);
  CHECK(ts->has_task_stacks());
  ts->use_stack(a);
  ts->use_stack(nullptr);  // a and b are still held (their tasks are alive): checked
  CHECK(ts->has_task_stacks());
  a.reset();
  ts->use_stack(nullptr);  // b still held
  CHECK(ts->has_task_stacks());
  ts->use_stack(b);
  b.reset();  // held only as the active stack now
  CHECK(ts->has_task_stacks());
  ts->use_stack(nullptr);  // released: nothing holds a task stack any more
  CHECK(!ts->has_task_stacks());
  CHECK(ts->active_stack() == ts->own_stack());
  // A count on the own stack lands on its top, as a new task's first stack would nest there.
  int outer;
  REQUIRE(ts->enter(id("outer"), &outer));
  ts->count_own(id("n"), 2);
  auto c = ts->new_task_stack(nullptr);  // a new task's stack turns the check on again
  CHECK(ts->has_task_stacks());
  ts->use_stack(c);
  ts->count(id("n"), 3);  // nothing open on c: its base, outer
  ts->use_stack(nullptr);
  ts->exit(&outer);
  auto snap = rec.snapshot();
  REQUIRE(snap.size() == 1);
  const lp::NodeSnapshot* o = find(snap[0], {"outer"});
  REQUIRE(o != nullptr);
  REQUIRE(o->counters.size() == 1);
  CHECK(o->counters[0].second == 5);
  CHECK(snap[0].task_stacks_made == 3);
  // On the own stack already (no use_stack call): a long-lived task's stack behind many finished
  // ones keeps the check on; once it is released too, the check stops.
  std::vector<std::shared_ptr<lp::PhaseStack>> finished;
  auto long_lived = ts->new_task_stack(nullptr);
  for (int i = 0; i < 20; ++i) finished.push_back(ts->new_task_stack(nullptr));
  finished.clear();
  c.reset();
  REQUIRE(ts->active_stack() == ts->own_stack());
  ts->forget_task_stacks_if_unused();
  CHECK(ts->has_task_stacks());
  ts->forget_task_stacks_if_unused();  // (the finished ones were forgotten: stops at once)
  CHECK(ts->has_task_stacks());
  long_lived.reset();
  ts->forget_task_stacks_if_unused();
  CHECK(!ts->has_task_stacks());
}
