// lp_core/thread_state.cpp: one thread's state: tree growth, counters, attached work, task stacks,
// out-of-order and raised exits, I/O phases and its open frames in a snapshot.
#include <algorithm>

#include "lp_core/names.h"
#include "lp_core/recorder.h"

namespace lp {

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

}  // namespace lp
