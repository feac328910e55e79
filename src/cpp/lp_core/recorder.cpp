// lp_core/recorder.cpp: thread registration, tree growth, task stacks, out-of-order exits and
// snapshots.
#include "lp_core/recorder.h"

#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <unordered_map>

#include "lp_core/finished_threads.h"
#include "lp_core/names.h"

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

ThreadState::ThreadState(uint64_t os_tid, std::string thread_name, bool measure_cpu,
                         CpuClockTier cpu_tier)
    : os_tid_(os_tid),
      thread_name_(std::move(thread_name)),
      measure_cpu_(measure_cpu),
      cpu_(measure_cpu ? cpu_tier : CpuClockTier::kSyscall) {
  nodes_.emplace_back(kRootNameId, kRootNode);
}

uint32_t ThreadState::add_child(uint32_t parent, uint32_t name_id) {
  std::lock_guard<std::mutex> lock(struct_mu_);
  if (nodes_.size() >= kMaxNodes) {  // (one slot stays free for the fold node)
    // The tree is full: every new path lands on one "(folded)" node under the root, and
    // anything entered beneath it stays there.
    bump(folded_entries, uint64_t(1));
    if (folded_node_ == 0) {
      folded_node_ = uint32_t(nodes_.size());
      nodes_.emplace_back(NameTable::instance().intern("(folded)"), kRootNode);
      nodes_[kRootNode].children.push_back(folded_node_);
    }
    return folded_node_;
  }
  uint32_t index = uint32_t(nodes_.size());
  nodes_.emplace_back(name_id, parent);
  nodes_[parent].children.push_back(index);
  nodes_[parent].last_child = index;
  return index;
}

Counter* ThreadState::find_counter(uint32_t node, uint32_t name_id) {
  Node& n = nodes_[node];
  for (uint32_t c : n.counters) {
    if (counters_[c].name_id == name_id) return n.last_counter = &counters_[c];
  }
  return add_counter(node, name_id);
}

void ThreadState::count_slow(uint32_t node, uint32_t name_id, int64_t n, uint32_t scale) {
  bool clamped = false;
  if (scale > 1) n = scale_count(n, scale, &clamped);
  Counter* c = nodes_[node].last_counter;
  if (c == nullptr || c->name_id != name_id) {
    c = find_counter(node, name_id);
    if (!c) return;  // refused: the thread's counter table is full
  }
  c->add(n, clamped);
}

Counter* ThreadState::add_counter(uint32_t node, uint32_t name_id) {
  std::lock_guard<std::mutex> lock(struct_mu_);
  if (counters_.full()) {  // absurdly many counter names: refused and counted, never misrouted
    bump(counter_overflow, uint64_t(1));
    return nullptr;
  }
  uint32_t index = uint32_t(counters_.size());
  counters_.emplace_back(name_id);
  nodes_[node].counters.push_back(index);
  return nodes_[node].last_counter = &counters_.back();
}

void ThreadState::mark_raised_on(PhaseStack& st, const void* token) {
  for (uint32_t i = st.depth.load(std::memory_order_relaxed); i-- > 0;) {
    const Frame& f = st.frames[i];
    if (f.token == token) {
      bump(nodes_[f.node.load(std::memory_order_relaxed)].raised,
           uint64_t(f.scale.load(std::memory_order_relaxed)));
      return;
    }
  }
}

void ThreadState::exit_out_of_order(PhaseStack& st, const void* token) {
  uint32_t d = st.depth.load(std::memory_order_relaxed);
  uint32_t match = d;
  for (uint32_t i = d; i-- > 0;) {
    if (st.frames[i].token == token) {
      match = i;
      break;
    }
  }
  if (match == d) return;  // never entered (or entered past kMaxDepth): nothing to close
  bump(out_of_order_exits, uint64_t(1));
  for (uint32_t top = d; top > match; --top) {
    if (st.frames[top - 1].token == &kAttachFrameToken) {
      st.depth.store(top - 1, std::memory_order_release);  // an attached frame records nothing
      continue;
    }
    close_top(st, top);
  }
}

uint32_t threads_marker_id() {
  static const uint32_t id = NameTable::instance().intern("[threads]");
  return id;
}

uint32_t ThreadState::attach(const std::vector<uint32_t>& path) {
  PhaseStack& st = *active_;
  if (st.skip_token != nullptr) return 0;
  uint32_t d = st.depth.load(std::memory_order_relaxed);
  if (d >= st.capacity && !grow(st)) {
    bump(depth_overflow, uint64_t(1));
    return 0;
  }
  uint32_t node = kRootNode;  // the path is absolute: the handing thread's whole open path
  uint32_t scale = 1;
  for (uint32_t id : path) node = child(node, id);
  node = child(node, threads_marker_id());
  Frame& f = st.frames[d];
  f.node.store(node, std::memory_order_relaxed);
  f.scale.store(scale, std::memory_order_relaxed);
  f.token = &kAttachFrameToken;
  f.epoch0 = epoch_;
  f.t0_ticks.store(UINT64_MAX, std::memory_order_relaxed);  // snapshots skip it: never "open"
  st.depth.store(d + 1, std::memory_order_release);
  return d + 1;
}

void ThreadState::detach(uint32_t level) {
  if (level == 0) return;
  for (PhaseStack* st : {active_, &own_}) {
    uint32_t d = st->depth.load(std::memory_order_relaxed);
    if (d < level || st->frames[level - 1].token != &kAttachFrameToken) continue;
    if (d > level) bump(out_of_order_exits, uint64_t(1));
    st->depth.store(level - 1, std::memory_order_release);
    return;
  }
}

std::vector<uint32_t> ThreadState::open_path() const {
  const PhaseStack& st = *active_;
  uint32_t d = st.depth.load(std::memory_order_relaxed);
  uint32_t node = d ? st.frames[d - 1].node.load(std::memory_order_relaxed) : st.base_node;
  uint32_t marker = threads_marker_id();
  std::vector<uint32_t> path;
  for (uint32_t i = node; i != kRootNode; i = nodes_[i].parent) {
    if (nodes_[i].name_id != marker) path.push_back(nodes_[i].name_id);
  }
  std::reverse(path.begin(), path.end());
  return path;
}

bool ThreadState::grow(PhaseStack& st) {
  if (st.capacity >= kMaxDepth) return false;
  uint32_t cap = st.capacity * 2 > kMaxDepth ? kMaxDepth : st.capacity * 2;
  Frame* bigger = new Frame[cap];
  uint32_t d = st.depth.load(std::memory_order_relaxed);
  for (uint32_t i = 0; i < d; ++i) {
    const Frame& a = st.frames[i];
    Frame& b = bigger[i];
    b.node.store(a.node.load(std::memory_order_relaxed), std::memory_order_relaxed);
    b.t0_ticks.store(a.t0_ticks.load(std::memory_order_relaxed), std::memory_order_relaxed);
    b.scale.store(a.scale.load(std::memory_order_relaxed), std::memory_order_relaxed);
    b.c0_ns = a.c0_ns;
    b.epoch0 = a.epoch0;
    b.token = a.token;
    b.io_ok = a.io_ok;
    b.io_own0 = a.io_own0;
    b.io0 = a.io0;
  }
  Frame* old;
  {
    std::lock_guard<std::mutex> lock(struct_mu_);  // snapshots read the frames under it
    old = st.frames;
    st.frames = bigger;
    st.capacity = cap;
  }
  delete[] old;
  return true;
}

std::shared_ptr<PhaseStack> ThreadState::new_task_stack(const PhaseStack* parent) {
  const PhaseStack& p = parent ? *parent : own_;
  uint32_t d = p.depth.load(std::memory_order_relaxed);
  uint32_t base = d ? p.frames[d - 1].node.load(std::memory_order_relaxed) : p.base_node;
  uint32_t scale = d ? p.frames[d - 1].scale.load(std::memory_order_relaxed) : p.base_scale;
  auto stack = std::make_shared<PhaseStack>(8, true, base, scale);
  bump(task_stacks_made, uint64_t(1));
  has_task_stacks_ = true;
  std::lock_guard<std::mutex> lock(struct_mu_);
  if (task_stacks_.size() >= 2 * task_stacks_pruned_at_ + 16) {
    // Forget the stacks of finished tasks (only this registry still holds them).
    task_stacks_.erase(
        std::remove_if(task_stacks_.begin(), task_stacks_.end(),
                       [](const std::shared_ptr<PhaseStack>& s) { return s.use_count() == 1; }),
        task_stacks_.end());
    task_stacks_pruned_at_ = task_stacks_.size();
  }
  task_stacks_.push_back(stack);
  return stack;
}

void ThreadState::forget_task_stacks_if_unused() {
  if (!has_task_stacks_) return;
  // Newest first: a task still running is usually among the last to have made a stack.
  size_t dead = 0;
  for (auto it = task_stacks_.rbegin(); it != task_stacks_.rend(); ++it, ++dead) {
    if (it->use_count() > 1) {  // a task (or a snapshot's copy) still holds it
      if (dead >= 8) {
        // Forget the finished tasks' stacks now, so that the next check stops at once.
        std::lock_guard<std::mutex> lock(struct_mu_);
        task_stacks_.erase(std::remove_if(task_stacks_.begin(), task_stacks_.end(),
                                          [](const std::shared_ptr<PhaseStack>& st) {
                                            return st.use_count() == 1;
                                          }),
                           task_stacks_.end());
        task_stacks_pruned_at_ = task_stacks_.size();
      }
      return;
    }
  }
  std::lock_guard<std::mutex> lock(struct_mu_);
  task_stacks_.clear();  // finished tasks' stacks, as new_task_stack()'s prune forgets them
  task_stacks_pruned_at_ = 0;
  has_task_stacks_ = false;
}

bool ThreadState::read_io(IoCounters* out) {
  if (!io_open_tried_) {
    io_open_tried_ = true;
    io_file_.open(thread_io_path());
  }
  long n = io_file_.read(out);
  if (n < 0) return false;
  io_own_rchar_ += uint64_t(n);
  return true;
}

bool ThreadState::enter_io(uint32_t name_id, const void* token, uint32_t sample_every) {
  PhaseStack& st = *active_;
  if (st.skip_token != nullptr) return false;  // in a skipped entry: record nothing, read nothing
  uint64_t own0 = io_own_rchar_;
  IoCounters c;
  bool ok = read_io(&c);
  uint32_t d = st.depth.load(std::memory_order_relaxed);
  if (!enter(name_id, token, sample_every)) return false;
  Frame& f = st.frames[d];  // (after enter: it may have grown the frames)
  f.io_ok = ok;
  f.io_own0 = own0;
  f.io0 = c;
  return true;
}

void ThreadState::exit_io_on(PhaseStack& st, const void* token) {
  uint32_t d = st.depth.load(std::memory_order_relaxed);
  if (d == 0) return;
  Frame& f = st.frames[d - 1];
  if (f.token != token) {
    // Closing inner frames too: no bytes for this entry (counted as failed when it is open).
    for (uint32_t i = d; i-- > 0;) {
      if (st.frames[i].token == token) {
        bump(nodes_[st.frames[i].node.load(std::memory_order_relaxed)].io_failed, uint64_t(1));
        break;
      }
    }
    exit_out_of_order(st, token);
    return;
  }
  if (st.is_task && f.epoch0 != epoch_) {
    // The task was suspended inside: the thread's counters also moved for other tasks' I/O.
    bump(nodes_[f.node.load(std::memory_order_relaxed)].io_async, uint64_t(1));
    close_top(st, d);
    return;
  }
  uint64_t own_between = io_own_rchar_ - f.io_own0;  // the entry read and any nested io reads
  IoCounters c;
  bool ok = read_io(&c) && f.io_ok;
  Node& n = nodes_[f.node.load(std::memory_order_relaxed)];
  const IoCounters& a = f.io0;
  if (ok && c.rchar >= a.rchar + own_between && c.wchar >= a.wchar &&
      c.read_bytes >= a.read_bytes && c.write_bytes >= a.write_bytes) {
    uint64_t scale = f.scale.load(std::memory_order_relaxed);  // 1 unless sampled
    bump(n.io_calls, scale);
    bump(n.io_read_bytes, (c.read_bytes - a.read_bytes) * scale);
    bump(n.io_write_bytes, (c.write_bytes - a.write_bytes) * scale);
    bump(n.io_rchar, (c.rchar - a.rchar - own_between) * scale);
    bump(n.io_wchar, (c.wchar - a.wchar) * scale);
  } else {
    bump(n.io_failed, uint64_t(1));
  }
  close_top(st, d);
}

uint32_t ThreadState::current_name() const {
  const PhaseStack& st = *active_;
  uint32_t d = st.depth.load(std::memory_order_relaxed);
  uint32_t node = d ? st.frames[d - 1].node.load(std::memory_order_relaxed) : st.base_node;
  if (node != kRootNode && nodes_[node].name_id == threads_marker_id()) {
    node = nodes_[node].parent;  // attached, nothing open yet: the phase the work was handed from
  }
  return node == kRootNode ? kRootNameId : nodes_[node].name_id;
}

void ThreadState::add_open_frames(const PhaseStack& st, uint64_t now, ThreadSnapshot& snap) const {
  uint32_t depth = st.depth.load(std::memory_order_acquire);
  for (uint32_t i = 0; i < depth && i < st.capacity; ++i) {
    uint32_t node = st.frames[i].node.load(std::memory_order_relaxed);
    uint64_t t0 = st.frames[i].t0_ticks.load(std::memory_order_relaxed);
    uint64_t scale = st.frames[i].scale.load(std::memory_order_relaxed);
    if (node >= snap.nodes.size() || now < t0) continue;
    snap.nodes[node].open_ns += ticks_to_ns(now - t0) * scale;
    snap.nodes[node].open_count += 1;
  }
}

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
