// tests/cpp/test_sampled.cpp: sampled entries (stride, subtree skipping, scaling) and name shapes.
#include <doctest/doctest.h>

#include <atomic>
#include <thread>

#include "lp_core/name_shapes.h"
#include "lp_core/names.h"
#include "lp_core/recorder.h"

namespace {

const lp::NodeSnapshot* find(const lp::ThreadSnapshot& t, uint32_t parent, uint32_t name_id) {
  for (const auto& n : t.nodes) {
    if (n.index != lp::kRootNode && n.parent == parent && n.name_id == name_id) return &n;
  }
  return nullptr;
}

}  // namespace

TEST_CASE("a sampled phase measures one entry in N and scales it and its subtree") {
  lp::Recorder rec(lp::RecorderOptions{false});
  lp::ThreadState* ts = rec.register_thread("t");
  uint32_t outer = lp::NameTable::instance().intern("sampled_outer");
  uint32_t inner = lp::NameTable::instance().intern("sampled_inner");
  uint32_t ctr = lp::NameTable::instance().intern("sampled_counter");
  int tokens[3];
  int recorded = 0;
  for (int i = 0; i < 1000; ++i) {
    bool on = ts->enter(outer, &tokens[0], 100);
    recorded += on;
    CHECK(ts->skipping() == !on);
    ts->count(ctr, 3);
    bool in = ts->enter(inner, &tokens[1]);
    CHECK(in == on);  // children of a skipped entry are skipped too
    if (in) {
      ts->exit(&tokens[1]);
    } else {
      ts->exit_skipped(&tokens[1]);
      CHECK(ts->skipping());  // only the sampled entry itself ends the skip
    }
    if (on) {
      ts->exit(&tokens[0]);
    } else {
      ts->exit_skipped(&tokens[0]);
    }
    CHECK(!ts->skipping());
    CHECK(ts->depth() == 0);
  }
  CHECK(recorded == 10);  // entries 0, 100, ..., 900
  auto snap = rec.snapshot();
  REQUIRE(snap.size() == 1);
  const lp::NodeSnapshot* o = find(snap[0], lp::kRootNode, outer);
  REQUIRE(o);
  CHECK(o->calls == 1000);
  CHECK(o->sample_every == 100);
  uint64_t hist_total = 0;
  for (auto& b : o->hist) hist_total += b.second;
  CHECK(hist_total == 1000);
  REQUIRE(o->counters.size() == 1);
  CHECK(o->counters[0].second == 3000);
  const lp::NodeSnapshot* n = find(snap[0], o->index, inner);
  REQUIRE(n);
  CHECK(n->calls == 1000);
  CHECK(n->sample_every == 100);
}

TEST_CASE("nested sampled phases multiply their strides; unsampled phases stay unmarked") {
  lp::Recorder rec(lp::RecorderOptions{false});
  lp::ThreadState* ts = rec.register_thread("t");
  uint32_t a = lp::NameTable::instance().intern("nest_a");
  uint32_t b = lp::NameTable::instance().intern("nest_b");
  uint32_t plain = lp::NameTable::instance().intern("nest_plain");
  int ta, tb, tp;
  for (int i = 0; i < 40; ++i) {
    if (ts->enter(a, &ta, 2)) {
      if (ts->enter(b, &tb, 4)) {
        ts->exit(&tb);
      } else {
        ts->exit_skipped(&tb);
      }
      ts->exit(&ta);
    } else {
      ts->exit_skipped(&ta);
    }
    REQUIRE(ts->enter(plain, &tp));
    ts->exit(&tp);
  }
  auto snap = rec.snapshot();
  const lp::NodeSnapshot* na = find(snap[0], lp::kRootNode, a);
  const lp::NodeSnapshot* nb = find(snap[0], na->index, b);
  const lp::NodeSnapshot* np = find(snap[0], lp::kRootNode, plain);
  CHECK(na->calls == 40);
  CHECK(na->sample_every == 2);
  CHECK(nb->calls == 40);  // 5 measured of 20 entries, each standing for 2 * 4
  CHECK(nb->sample_every == 8);
  CHECK(np->calls == 40);
  CHECK(np->sample_every == 0);
}

TEST_CASE("name shapes fold digit runs and hex ids") {
  CHECK(lp::name_shape("episode_127") == "episode_#");
  CHECK(lp::name_shape("conv2d") == "conv#d");
  CHECK(lp::name_shape("layer.3.attn") == "layer.#.attn");
  CHECK(lp::name_shape("ckpt_9f86d081e5") == "ckpt_#");
  CHECK(lp::name_shape("deadbeef") == "deadbeef");  // no digit: a word, not an id
  CHECK(lp::name_shape("mcts") == "mcts");
}

TEST_CASE("NameShapes counts distinct names per shape and warns once at 128") {
  lp::NameShapes shapes;
  int warnings = 0;
  for (int round = 0; round < 2; ++round) {
    for (int i = 0; i < 300; ++i) {
      std::string name = "ns_episode_" + std::to_string(i);
      lp::ShapeVerdict v = shapes.note(lp::NameTable::instance().intern(name), name);
      CHECK(v.is_new == (round == 0));
      CHECK(v.ordinal == uint32_t(i + 1));
      CHECK(v.shape == "ns_episode_#");
      warnings += v.warn_now;
      if (v.warn_now) CHECK(i == 127);
    }
  }
  CHECK(warnings == 1);
  lp::ShapeVerdict plain = shapes.note(lp::NameTable::instance().intern("ns_mcts"), "ns_mcts");
  CHECK(plain.ordinal == 1);
  CHECK(plain.shape.empty());
}

TEST_CASE("snapshots read sampled scales race-free while the owner records") {
  lp::Recorder rec(lp::RecorderOptions{true});
  uint32_t a = lp::NameTable::instance().intern("race_sampled");
  uint32_t b = lp::NameTable::instance().intern("race_child");
  uint32_t c = lp::NameTable::instance().intern("race_counter");
  std::atomic<bool> done{false};
  std::thread owner([&] {
    lp::ThreadState* ts = rec.register_thread("owner");
    int ta, tb;
    for (int i = 0; i < 20000; ++i) {
      if (ts->enter(a, &ta, 7)) {
        ts->count(c, 1);
        if (ts->enter(b, &tb)) ts->exit(&tb);
        ts->exit(&ta);
      } else {
        ts->exit_skipped(&ta);
      }
    }
    done = true;
  });
  uint64_t last_calls = 0;
  while (!done) {
    for (const auto& t : rec.snapshot()) {
      for (const auto& n : t.nodes) {
        if (n.name_id == a) {
          CHECK(n.calls >= last_calls);
          last_calls = n.calls;
        }
      }
    }
  }
  owner.join();
  auto snap = rec.snapshot();
  REQUIRE(snap.size() == 1);
  const lp::NodeSnapshot* na = find(snap[0], lp::kRootNode, a);
  REQUIRE(na);
  CHECK(na->calls == 7 * ((20000 + 6) / 7));
  CHECK(na->counters[0].second == int64_t(na->calls));
}
