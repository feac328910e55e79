// lp_core/recorder.cpp: the recorder's side: thread registration and retirement, the per-thread
// cache, snapshots and the fork reset (a thread's own state: thread_state.cpp).
#include "lp_core/recorder.h"

#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <unordered_map>

#include "lp_core/finished_threads.h"

namespace lp {

namespace {
std::atomic<uint64_t> g_next_generation{1};

std::atomic<uint64_t> g_next_thread_serial{1};

uint64_t current_os_tid() {
  return uint64_t(syscall(SYS_gettid));
}

// The calling thread's serial: unique for the process's lifetime, unlike its OS tid, which the
// kernel hands to a new thread once the old one has exited. 0 until first asked.
__thread uint64_t g_thread_serial __attribute__((tls_model("initial-exec"))) = 0;

uint64_t current_thread_serial() {
  if (!g_thread_serial) g_thread_serial = g_next_thread_serial.fetch_add(1);
  return g_thread_serial;
}
}  // namespace

__thread TlsCache g_tls_cache __attribute__((tls_model("initial-exec"))) = {0, nullptr};

namespace {
// States of other recorders this thread used recently (g_tls_cache holds the latest one): a
// thread that records with two profilers in turn finds each without a lock.
constexpr int kTlsVictims = 4;
__thread TlsCache g_tls_victims[kTlsVictims] __attribute__((tls_model("initial-exec")));
__thread unsigned g_tls_victim_next __attribute__((tls_model("initial-exec"))) = 0;

// Makes (gen, state) the primary cache entry, keeping the one it replaces among the victims.
void tls_cache_put(uint64_t gen, ThreadState* state) {
  if (g_tls_cache.gen == gen) {
    g_tls_cache.state = state;
    return;
  }
  if (g_tls_cache.state) {
    int slot = -1;
    for (int i = 0; i < kTlsVictims; ++i) {
      if (g_tls_victims[i].gen == g_tls_cache.gen || g_tls_victims[i].gen == gen) {
        slot = i;
        break;
      }
    }
    if (slot < 0) slot = int(g_tls_victim_next++ % kTlsVictims);
    g_tls_victims[slot] = g_tls_cache;
  }
  g_tls_cache.gen = gen;
  g_tls_cache.state = state;
}
}  // namespace

// -- thread exit --------------------------------------------------------------------------------
//
// A thread that registers with a recorder gets a thread_local hook whose destructor runs when the
// thread exits and retires its states in every recorder still alive. Recorders are found by
// generation in a process-wide table (a destroyed or fork-reset recorder is simply absent), under
// a lock that a recorder's destructor also takes, so a retirement never meets a freed recorder.

namespace {

std::mutex* g_live_mu = new std::mutex();  // leaked on purpose: thread exits may outlive statics
auto* g_live = new std::unordered_map<uint64_t, Recorder*>();

void live_mu_after_fork_in_child() {
  g_live_mu = new std::mutex();  // a parent thread may have held the old one: leak it
}

void live_add(uint64_t generation, Recorder* r) {
  static std::once_flag once;
  std::call_once(once, [] { pthread_atfork(nullptr, nullptr, live_mu_after_fork_in_child); });
  std::lock_guard<std::mutex> lock(*g_live_mu);
  (*g_live)[generation] = r;
}

void live_remove(uint64_t generation) {
  std::lock_guard<std::mutex> lock(*g_live_mu);
  g_live->erase(generation);
}

__thread bool g_thread_exiting __attribute__((tls_model("initial-exec"))) = false;

struct ThreadExitHook {
  std::vector<std::pair<uint64_t, ThreadState*>> states;  // (recorder generation, state)
  ~ThreadExitHook() {
    g_thread_exiting = true;
    g_tls_cache = {0, nullptr};
    for (TlsCache& v : g_tls_victims) v = {0, nullptr};
    // The main thread's hook runs inside exit(): its tree stays as it is, to be written as is.
    if (states.empty() || uint64_t(syscall(SYS_gettid)) == uint64_t(getpid())) return;
    std::lock_guard<std::mutex> lock(*g_live_mu);
    for (auto& [generation, state] : states) {
      auto it = g_live->find(generation);
      if (it != g_live->end()) it->second->retire_thread(state);
    }
  }
};

thread_local ThreadExitHook t_exit_hook;

}  // namespace

Recorder::Recorder(RecorderOptions options)
    : options_(options),
      cpu_tier_(options.measure_cpu ? cpu_clock_probe().tier : CpuClockTier::kSyscall),
      generation_(g_next_generation.fetch_add(1)),
      finished_(new FinishedThreads()),
      threads_(new std::vector<std::unique_ptr<ThreadState>>()) {
  live_add(generation_, this);
}

Recorder::~Recorder() {
  live_remove(generation_);
  delete threads_;
}

void Recorder::retire_thread(ThreadState* ts) {
  std::lock_guard<std::mutex> retire(retire_mu_);
  std::unique_ptr<ThreadState> owned;
  {
    std::lock_guard<std::mutex> lock(threads_mu_);
    auto it = std::find_if(threads_->begin(), threads_->end(),
                           [ts](const std::unique_ptr<ThreadState>& t) { return t.get() == ts; });
    if (it == threads_->end()) return;
    owned = std::move(*it);
    threads_->erase(it);
  }
  std::vector<ThreadSnapshot> snap = snapshot_of({owned.get()});
  finished_->fold(snap[0]);
  owned.reset();  // closes the thread's perf event and io file
}

ThreadState* Recorder::register_thread(const std::string& thread_name) {
  // Matched by serial, not tid: a thread that reuses an exited thread's tid gets a state of its
  // own (its name, an empty stack, its own /proc/thread-self/io), not the dead thread's.
  uint64_t serial = current_thread_serial();
  std::lock_guard<std::mutex> lock(threads_mu_);
  ThreadState* found = nullptr;
  for (auto& t : *threads_) {
    if (t->thread_serial_ == serial) {
      found = t.get();
      break;
    }
  }
  if (!found) {
    threads_->push_back(std::make_unique<ThreadState>(current_os_tid(), thread_name,
                                                      options_.measure_cpu, cpu_tier_));
    found = threads_->back().get();
    found->thread_serial_ = serial;
    // (a thread already running its exit hooks records into a state kept until the recorder
    // goes: the hook object is gone)
    if (!g_thread_exiting) t_exit_hook.states.emplace_back(generation_, found);
  }
  tls_cache_put(generation_, found);
  return found;
}

ThreadState* Recorder::find_thread() {
  if (g_tls_cache.gen == generation_) return g_tls_cache.state;
  for (TlsCache& v : g_tls_victims) {
    if (v.gen == generation_) {
      ThreadState* found = v.state;
      v.gen = 0;
      v.state = nullptr;
      tls_cache_put(generation_, found);
      return found;
    }
  }
  uint64_t serial = current_thread_serial();
  ThreadState* found = nullptr;
  {
    std::lock_guard<std::mutex> lock(threads_mu_);
    for (auto& t : *threads_) {
      if (t->thread_serial_ == serial) {
        found = t.get();
        break;
      }
    }
  }
  if (found) tls_cache_put(generation_, found);
  return found;
}

std::vector<ThreadSnapshot> Recorder::snapshot() const {
  std::lock_guard<std::mutex> retire(retire_mu_);
  std::vector<ThreadState*> states;
  {
    std::lock_guard<std::mutex> lock(threads_mu_);
    for (auto& t : *threads_) states.push_back(t.get());
  }
  std::vector<ThreadSnapshot> out = snapshot_of(states);
  finished_->append_to(&out);
  return out;
}

std::vector<ThreadSnapshot> Recorder::snapshot_of(const std::vector<ThreadState*>& states) const {
  uint64_t now = wall_ticks();
  std::vector<ThreadSnapshot> out;
  out.reserve(states.size());
  for (ThreadState* ts : states) {
    ThreadSnapshot snap;
    snap.os_tid = ts->os_tid_;
    snap.thread_name = ts->thread_name_;
    snap.depth_overflow = ts->depth_overflow.load(std::memory_order_relaxed);
    snap.folded_entries = ts->folded_entries.load(std::memory_order_relaxed);
    snap.counters_refused = ts->counter_overflow.load(std::memory_order_relaxed);
    snap.out_of_order_exits = ts->out_of_order_exits.load(std::memory_order_relaxed);
    snap.task_stacks_made = ts->task_stacks_made.load(std::memory_order_relaxed);
    std::lock_guard<std::mutex> lock(ts->struct_mu_);
    snap.nodes.resize(ts->nodes_.size());
    for (uint32_t i = 0; i < ts->nodes_.size(); ++i) {
      const Node& n = ts->nodes_[i];
      NodeSnapshot& s = snap.nodes[i];
      s.index = i;
      s.parent = n.parent;
      s.name_id = n.name_id;
      s.synthetic = i != kRootNode && i == ts->folded_node_;
      s.calls = n.calls.load(std::memory_order_relaxed);
      s.wall_ns = n.wall_ns.load(std::memory_order_relaxed);
      s.cpu_ns = n.cpu_ns.load(std::memory_order_relaxed);
      s.min_wall_ns = n.min_wall_ns.load(std::memory_order_relaxed);
      s.max_wall_ns = n.max_wall_ns.load(std::memory_order_relaxed);
      s.sample_every = n.sample_every.load(std::memory_order_relaxed);
      for (int b = 0; b < kHistBuckets; ++b) {
        uint64_t c = n.hist[b].load(std::memory_order_relaxed);
        if (c) s.hist.emplace_back(uint16_t(b), c);
      }
      s.io_calls = n.io_calls.load(std::memory_order_relaxed);
      s.io_failed = n.io_failed.load(std::memory_order_relaxed);
      s.io_async = n.io_async.load(std::memory_order_relaxed);
      s.io_read_bytes = n.io_read_bytes.load(std::memory_order_relaxed);
      s.io_write_bytes = n.io_write_bytes.load(std::memory_order_relaxed);
      s.io_rchar = n.io_rchar.load(std::memory_order_relaxed);
      s.io_wchar = n.io_wchar.load(std::memory_order_relaxed);
      s.async_calls = n.async_calls.load(std::memory_order_relaxed);
      s.async_wall_ns = n.async_wall_ns.load(std::memory_order_relaxed);
      s.raised = n.raised.load(std::memory_order_relaxed);
      for (uint32_t c : n.counters) {
        const Counter& counter = ts->counters_[c];
        s.counters.emplace_back(counter.name_id, counter.value.load(std::memory_order_relaxed));
        if (counter.saturated.load(std::memory_order_relaxed))
          s.saturated.push_back(counter.name_id);
      }
    }
    ts->add_open_frames(ts->own_, now, snap);
    for (const auto& stack : ts->task_stacks_) ts->add_open_frames(*stack, now, snap);
    out.push_back(std::move(snap));
  }
  return out;
}

std::vector<uint32_t> Recorder::first_thread_open_path() const {
  std::lock_guard<std::mutex> retire(retire_mu_);
  ThreadState* ts = nullptr;
  {
    std::lock_guard<std::mutex> lock(threads_mu_);
    if (!threads_->empty()) ts = (*threads_)[0].get();
  }
  std::vector<uint32_t> path;
  if (!ts) return path;
  uint32_t depth = ts->own_.depth.load(std::memory_order_acquire);
  if (depth == 0 || depth > kMaxDepth) return path;
  uint32_t node = ts->own_.frames[depth - 1].node.load(std::memory_order_relaxed);
  std::lock_guard<std::mutex> lock(ts->struct_mu_);
  if (node >= ts->nodes_.size()) return path;  // a node newer than this view: treat as none open
  for (uint32_t i = node; i != kRootNode; i = ts->nodes_[i].parent) {
    path.push_back(ts->nodes_[i].name_id);
  }
  std::reverse(path.begin(), path.end());
  return path;
}

void Recorder::reset_after_fork() {
  threads_ = new std::vector<std::unique_ptr<ThreadState>>();  // the old set is leaked on purpose
  new (&threads_mu_) std::mutex();
  new (&retire_mu_) std::mutex();
  (void)finished_.release();  // leaked like the thread states (a fold may have been under way)
  finished_.reset(new FinishedThreads());
  live_remove(generation_);
  generation_ = g_next_generation.fetch_add(1);
  live_add(generation_, this);
}

}  // namespace lp
