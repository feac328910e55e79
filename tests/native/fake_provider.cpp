// tests/native/fake_provider.cpp: the header's side of the table contract, against a fake provider.
//
// Built and run by tests/native/test_header.py (with g++ and clang++, -Wall -Wextra -Werror). The
// fake provider counts every call, so each check compares what the header did with what the
// program asked for. Exits 0 and prints "ok", or prints the first failed check and exits 1.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "lineprofiler/accounting.hpp"

namespace {

int g_failures = 0;
#define CHECK(cond)                                                  \
  do {                                                               \
    if (!(cond)) {                                                   \
      std::printf("%s:%d: failed: %s\n", __FILE__, __LINE__, #cond); \
      ++g_failures;                                                  \
    }                                                                \
  } while (0)

// The fake provider: names are indices into a list; each call is counted.
std::vector<std::string> g_names{""};
int g_interns = 0, g_enters = 0, g_exits = 0, g_counts = 0, g_currents = 0, g_raised = 0;
int g_captures = 0, g_attaches = 0, g_detaches = 0;
bool g_refuse_attach = false;      // attach_path() answers 0 (as a provider at its depth limit)
std::vector<std::string> g_open;   // names of the entries open now, outermost first
std::vector<uint32_t> g_open_ids;  // their handles (0: an attached path's "[threads]")
std::vector<const lp_frame*> g_frames;  // their frames
std::string g_last_count;
int64_t g_count_sum = 0;

uint32_t fake_intern(const char* s, size_t n) {
  ++g_interns;
  std::string name(s, n);
  if (name.empty()) return 0;
  for (size_t i = 1; i < g_names.size(); ++i) {
    if (g_names[i] == name) return uint32_t(i);
  }
  g_names.push_back(name);
  return uint32_t(g_names.size() - 1);
}
int fake_enter(uint32_t name, lp_frame* frame) {
  ++g_enters;
  if (name == 0 || name >= g_names.size()) return 0;
  g_open.push_back(g_names[name]);
  g_open_ids.push_back(name);
  g_frames.push_back(frame);
  return 1;
}
void fake_exit(lp_frame* frame) {
  ++g_exits;
  if (g_frames.empty() || g_frames.back() != frame) {
    std::printf("exit of a frame that is not the innermost\n");
    std::exit(1);
  }
  g_frames.pop_back();
  g_open.pop_back();
  g_open_ids.pop_back();
}
void fake_exit_raised(lp_frame* frame) {
  ++g_raised;
  fake_exit(frame);
}
void fake_count(uint32_t name, int64_t n) {
  ++g_counts;
  g_last_count = name < g_names.size() ? g_names[name] : "?";
  g_count_sum += n;
}
void fake_attach(const lp_api** slot) {
  *slot = nullptr;
}
size_t fake_current(char* buf, size_t cap) {
  ++g_currents;
  std::string s = g_open.empty() ? "" : g_open.back();
  std::memcpy(buf, s.data(), s.size() < cap ? s.size() : cap);
  return s.size();
}

// Level 4: capture() copies the open handles (outermost first, without "[threads]" elements);
// attach_path() opens the given path and a "[threads]" element under whatever is open, as one
// attached frame; detach() closes it (and must get the frame attach_path() was given).
size_t fake_capture(uint32_t* names, size_t cap) {
  ++g_captures;
  size_t n = 0;
  for (uint32_t id : g_open_ids) {
    if (id == 0) continue;
    if (n < cap) names[n] = id;
    ++n;
  }
  return n;
}
int fake_attach_path(const uint32_t* names, size_t n, lp_frame* frame) {
  ++g_attaches;
  if (g_refuse_attach || n == 0) return 0;
  std::string path;
  for (size_t i = 0; i < n; ++i)
    path += (names[i] < g_names.size() ? g_names[names[i]] : "?") + "/";
  g_open.push_back(path + "[threads]");
  g_open_ids.push_back(0);
  g_frames.push_back(frame);
  return 1;
}
void fake_detach(lp_frame* frame) {
  ++g_detaches;
  if (g_frames.empty() || g_frames.back() != frame || g_open_ids.back() != 0) {
    std::printf("detach of a frame that is not the innermost attached one\n");
    std::exit(1);
  }
  g_frames.pop_back();
  g_open.pop_back();
  g_open_ids.pop_back();
}

lp_api make_table(uint32_t size, uint32_t epoch) {
  lp_api t;
  std::memset(&t, 0, sizeof t);
  t.abi_version = LP_API_ABI_VERSION;
  t.size = size;
  t.names_epoch = epoch;
  t.provider = "fake";
  t.intern = fake_intern;
  t.enter = fake_enter;
  t.exit = fake_exit;
  t.count = fake_count;
  t.attach = fake_attach;
  t.current = fake_current;
  t.exit_raised = fake_exit_raised;
  t.capture = fake_capture;
  t.attach_path = fake_attach_path;
  t.detach = fake_detach;
  return t;
}

// Enters "maybe" ten times; entries i % 10 < 3 leave by an exception. Returns those caught.
int raising_loop() {
  int caught = 0;
  for (int i = 0; i < 10; ++i) {
    try {
      LP_PHASE("maybe");
      if (i % 10 < 3) throw std::runtime_error("no");
    } catch (const std::runtime_error&) {
      ++caught;
    }
  }
  return caught;
}

void hot_loop(int n) {
  for (int i = 0; i < n; ++i) {
    LP_PHASE("loop");
    LP_COUNT("iterations", 2);
  }
}

}  // namespace

int main() {
  // Nothing installed: no call reaches any provider, current() is "".
  hot_loop(10);
  { lineprofiler::Phase p{std::string_view("x")}; }
  CHECK(lineprofiler::current().empty());
  CHECK(!lineprofiler::enabled());

  // Tables the header must refuse.
  lp_api bad_abi = make_table(sizeof(lp_api), 1);
  bad_abi.abi_version = LP_API_ABI_VERSION + 1;
  CHECK(lineprofiler::detail::install_api(&bad_abi) == -1);
  lp_api too_small = make_table(uint32_t(LP_API_V1_SIZE - 1), 1);
  CHECK(lineprofiler::detail::install_api(&too_small) == -1);
  CHECK(!lineprofiler::enabled());

  // A full table: exact calls; each call site interns its name once.
  static lp_api table = make_table(sizeof(lp_api), 1);
  CHECK(lineprofiler::detail::install_api(&table) == 0);
  hot_loop(1000);
  CHECK(g_enters == 1000 && g_exits == 1000 && g_counts == 1000 && g_count_sum == 2000);
  CHECK(g_interns == 2);
  CHECK(g_last_count == "iterations");
  {
    LP_PHASE("outer");
    LP_PHASE("inner");
    CHECK(lineprofiler::current() == "inner");
    CHECK((g_open == std::vector<std::string>{"outer", "inner"}));
  }
  CHECK(g_open.empty());
  std::string long_name(300, 'n');  // longer than current()'s stack buffer
  {
    lineprofiler::Phase p{std::string_view(long_name)};
    CHECK(lineprofiler::current() == long_name);
  }

  // Names given as views: a buffer reused for another name never takes the first one's handle.
  char buf[16];
  for (int i = 0; i < 3; ++i) {
    std::strcpy(buf, i % 2 ? "odd" : "even");
    lineprofiler::Phase p{std::string_view(buf)};
    CHECK(g_open.back() == (i % 2 ? "odd" : "even"));
  }
  int interns_before = g_interns;
  for (int i = 0; i < 100; ++i) lineprofiler::count(std::string_view(buf), 1);  // cached
  CHECK(g_interns == interns_before);
  CHECK(g_last_count == "even");

  // Scopes unwound by an exception exit through exit_raised (3 of 10), the rest through exit;
  // a scope opened and closed normally inside a destructor that runs while unwinding is not.
  int exits_before_raise = g_exits;
  CHECK(raising_loop() == 3);
  CHECK(g_raised == 3 && g_exits == exits_before_raise + 10);
  try {
    struct Cleanup {
      ~Cleanup() { LP_PHASE("cleanup"); }
    } cleanup;
    throw std::runtime_error("unwind");
  } catch (const std::runtime_error&) {
  }
  CHECK(g_raised == 3);

  // Level 4: a context captured inside two phases, attached after they closed (as a pool thread
  // would), makes the phases opened meanwhile nest under outer/inner/[threads]; detach() gets the
  // frame attach_path() got, once.
  lineprofiler::Context ctx;
  CHECK(ctx.depth() == 0);
  {
    LP_PHASE("outer");
    LP_PHASE("inner");
    ctx = lineprofiler::capture();
  }
  CHECK(g_captures == 1 && ctx.depth() == 2);
  {
    lineprofiler::Attach at(ctx);
    CHECK(at.attached() && g_attaches == 1);
    LP_PHASE("work");
    CHECK(lineprofiler::current() == "work");
    CHECK((g_open == std::vector<std::string>{"outer/inner/[threads]", "work"}));
    // Captured inside an attached path: the path without its "[threads]" element.
    lineprofiler::Context nested = lineprofiler::capture();
    CHECK(nested.depth() == 1);
  }
  CHECK(g_detaches == 1 && g_open.empty());
  // Nothing open: an empty context, which attaching ignores (no call to the provider).
  lineprofiler::Context empty = lineprofiler::capture();
  CHECK(empty.depth() == 0 && g_captures == 3);
  {
    lineprofiler::Attach at(empty);
    CHECK(!at.attached());
  }
  CHECK(g_attaches == 1 && g_detaches == 1);
  // A path deeper than a Context holds keeps its outermost kMaxContextDepth phases.
  {
    std::vector<std::string> names;
    for (size_t i = 0; i < lineprofiler::kMaxContextDepth + 5; ++i)
      names.push_back("d" + std::to_string(i));
    std::vector<std::unique_ptr<lineprofiler::Phase>> deep;
    for (const std::string& n : names)
      deep.push_back(std::make_unique<lineprofiler::Phase>(std::string_view(n)));
    lineprofiler::Context full = lineprofiler::capture();
    CHECK(full.depth() == lineprofiler::kMaxContextDepth);
    while (!deep.empty()) deep.pop_back();  // innermost first
    lineprofiler::Attach at(full);
    CHECK(at.attached());
    CHECK(g_open.size() == 1 && g_open[0].rfind("d0/d1/", 0) == 0);
    CHECK(g_open[0].find("/d127/[threads]") != std::string::npos);
    CHECK(g_open[0].find("d128") == std::string::npos);
  }
  CHECK(g_detaches == 2 && g_open.empty());
  // A provider refusing the attachment: not attached, and detach() is never called.
  g_refuse_attach = true;
  {
    lineprofiler::Attach at(ctx);
    CHECK(!at.attached());
  }
  g_refuse_attach = false;
  CHECK(g_attaches == 3 && g_detaches == 2);

  // A new names_epoch: every call site interns again, once.
  static lp_api next_epoch = make_table(sizeof(lp_api), 2);
  CHECK(lineprofiler::detail::install_api(&next_epoch) == 0);
  interns_before = g_interns;
  hot_loop(10);
  CHECK(g_interns == interns_before + 2);
  // A context captured under another epoch holds handles this table does not know: not attached.
  {
    int attaches_before = g_attaches;
    lineprofiler::Attach at(ctx);
    CHECK(!at.attached() && g_attaches == attaches_before);
  }
  // A level-3 table (no capture/attach_path/detach): never called, nothing captured.
  {
    static lp_api level3 = make_table(uint32_t(offsetof(lp_api, capture)), 2);
    CHECK(lineprofiler::detail::install_api(&level3) == 0);
    int captures_before = g_captures, attaches_before = g_attaches;
    LP_PHASE("in_v3");
    CHECK(lineprofiler::capture().depth() == 0);
    CHECK(g_captures == captures_before && g_attaches == attaches_before);
    CHECK(lineprofiler::current() == "in_v3");
    lineprofiler::detail::install_api(&next_epoch);
  }

  // A provider with the first table only (no current()): current() is "" and never called.
  static lp_api first = make_table(uint32_t(LP_API_V1_SIZE), 2);
  CHECK(lineprofiler::detail::install_api(&first) == 0);
  int currents_before = g_currents;
  {
    LP_PHASE("in_v1");
    CHECK(lineprofiler::current().empty());
  }
  CHECK(g_currents == currents_before);
  // ... nor capture()/attach_path(): nothing is captured, and a context from before does nothing.
  int captures_before = g_captures, attaches_before = g_attaches;
  {
    LP_PHASE("in_v1");
    CHECK(lineprofiler::capture().depth() == 0);
    lineprofiler::Attach at(ctx);
    CHECK(!at.attached());
  }
  CHECK(g_captures == captures_before && g_attaches == attaches_before);
  // ... nor exit_raised: an entry left by an exception exits through exit.
  int raised_before = g_raised;
  CHECK(raising_loop() == 3);
  CHECK(g_raised == raised_before);

  // A scope open while the table is removed exits through the table it entered with.
  {
    int exits_before = g_exits;
    {
      LP_PHASE("across");
      lineprofiler::detail::install_api(nullptr);
    }
    CHECK(g_exits == exits_before + 1);
    int enters_before = g_enters;
    hot_loop(5);
    CHECK(g_enters == enters_before);
  }

  if (g_failures) return 1;
  std::printf("ok\n");
  return 0;
}
