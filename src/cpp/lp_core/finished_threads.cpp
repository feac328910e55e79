// lp_core/finished_threads.cpp: adding an exited thread's tree into its name's record.
#include "lp_core/finished_threads.h"

#include <algorithm>

#include "lp_core/names.h"

namespace lp {

namespace {

uint64_t add_sat(uint64_t a, uint64_t b) {
  uint64_t s;
  return __builtin_add_overflow(a, b, &s) ? UINT64_MAX : s;
}

void add_hist(std::vector<std::pair<uint16_t, uint64_t>>& into,
              const std::vector<std::pair<uint16_t, uint64_t>>& from) {
  for (const auto& [bucket, count] : from) {
    auto it = std::lower_bound(into.begin(), into.end(), std::make_pair(bucket, uint64_t(0)));
    if (it != into.end() && it->first == bucket) {
      it->second = add_sat(it->second, count);
    } else {
      into.insert(it, {bucket, count});
    }
  }
}

void add_counters(NodeSnapshot& into, const NodeSnapshot& from) {
  for (const auto& [name_id, value] : from.counters) {
    auto it = std::find_if(into.counters.begin(), into.counters.end(),
                           [id = name_id](const auto& c) { return c.first == id; });
    if (it == into.counters.end()) {
      into.counters.emplace_back(name_id, value);
      continue;
    }
    int64_t sum;
    if (__builtin_add_overflow(it->second, value, &sum)) {
      sum = value > 0 ? INT64_MAX : INT64_MIN;
      if (std::find(into.saturated.begin(), into.saturated.end(), name_id) ==
          into.saturated.end()) {
        into.saturated.push_back(name_id);
      }
    }
    it->second = sum;
  }
  for (uint32_t name_id : from.saturated) {
    if (std::find(into.saturated.begin(), into.saturated.end(), name_id) == into.saturated.end())
      into.saturated.push_back(name_id);
  }
}

void add_node(NodeSnapshot& into, const NodeSnapshot& from) {
  into.calls = add_sat(into.calls, from.calls);
  into.wall_ns = add_sat(into.wall_ns, from.wall_ns);
  into.cpu_ns = add_sat(into.cpu_ns, from.cpu_ns);
  into.min_wall_ns = std::min(into.min_wall_ns, from.min_wall_ns);
  into.max_wall_ns = std::max(into.max_wall_ns, from.max_wall_ns);
  into.open_ns = add_sat(into.open_ns, from.open_ns);
  into.open_count += from.open_count;
  into.sample_every = std::max(into.sample_every, from.sample_every);
  add_hist(into.hist, from.hist);
  add_counters(into, from);
  into.io_calls = add_sat(into.io_calls, from.io_calls);
  into.io_failed = add_sat(into.io_failed, from.io_failed);
  into.io_read_bytes = add_sat(into.io_read_bytes, from.io_read_bytes);
  into.io_write_bytes = add_sat(into.io_write_bytes, from.io_write_bytes);
  into.io_rchar = add_sat(into.io_rchar, from.io_rchar);
  into.io_wchar = add_sat(into.io_wchar, from.io_wchar);
  into.io_async = add_sat(into.io_async, from.io_async);
  into.async_calls = add_sat(into.async_calls, from.async_calls);
  into.async_wall_ns = add_sat(into.async_wall_ns, from.async_wall_ns);
  into.raised = add_sat(into.raised, from.raised);
}

}  // namespace

uint32_t FinishedThreads::folded_node(Record& r) {
  if (r.folded_node == 0) {
    r.folded_node = uint32_t(r.snap.nodes.size());
    NodeSnapshot folded;
    folded.index = r.folded_node;
    folded.parent = kRootNode;
    folded.name_id = NameTable::instance().intern("(folded)");
    folded.synthetic = true;
    r.snap.nodes.push_back(std::move(folded));
  }
  return r.folded_node;
}

uint32_t FinishedThreads::node_for(Record& r, uint32_t parent, uint32_t name_id, uint64_t calls) {
  auto it = r.child.find({parent, name_id});
  if (it != r.child.end()) return it->second;
  std::vector<NodeSnapshot>& nodes = r.snap.nodes;
  if (parent == r.folded_node && r.folded_node != 0) return r.folded_node;
  if (nodes.size() >= kMaxNodes) {  // full, like a live tree: new paths share "(folded)"
    r.snap.folded_entries = add_sat(r.snap.folded_entries, calls);
    return folded_node(r);
  }
  uint32_t index = uint32_t(nodes.size());
  NodeSnapshot n;
  n.index = index;
  n.parent = parent;
  n.name_id = name_id;
  nodes.push_back(std::move(n));
  r.child.emplace(std::make_pair(parent, name_id), index);
  return index;
}

void FinishedThreads::fold(const ThreadSnapshot& t) {
  std::string name = by_name_.size() < kMaxFinishedNames || by_name_.count(t.thread_name)
                         ? t.thread_name
                         : std::string(kFinishedThreadsName);
  auto found = by_name_.find(name);
  if (found == by_name_.end()) {
    found = by_name_.emplace(name, records_.size()).first;
    records_.emplace_back();
    Record& fresh = records_.back();
    fresh.snap.thread_name = name;
    NodeSnapshot root;
    root.index = kRootNode;
    root.parent = kRootNode;
    root.name_id = kRootNameId;
    fresh.snap.nodes.push_back(std::move(root));
  }
  Record& r = records_[found->second];
  r.snap.exited_threads += 1;
  r.snap.depth_overflow = add_sat(r.snap.depth_overflow, t.depth_overflow);
  r.snap.folded_entries = add_sat(r.snap.folded_entries, t.folded_entries);
  r.snap.counters_refused = add_sat(r.snap.counters_refused, t.counters_refused);
  r.snap.out_of_order_exits = add_sat(r.snap.out_of_order_exits, t.out_of_order_exits);
  r.snap.task_stacks_made = add_sat(r.snap.task_stacks_made, t.task_stacks_made);
  // Parents precede children in a snapshot, so each node's parent is mapped before it.
  std::vector<uint32_t> mapped(t.nodes.size(), kRootNode);
  for (size_t i = 0; i < t.nodes.size(); ++i) {
    const NodeSnapshot& n = t.nodes[i];
    uint32_t into = kRootNode;
    if (n.synthetic) {  // the thread's own "(folded)": the record's, never a phase's
      into = folded_node(r);
    } else if (i != kRootNode) {
      uint32_t parent = n.parent < i ? mapped[n.parent] : kRootNode;
      into = node_for(r, parent, n.name_id, n.calls);
    }
    mapped[i] = into;
    add_node(r.snap.nodes[into], n);
  }
}

void FinishedThreads::append_to(std::vector<ThreadSnapshot>* out) const {
  for (const Record& r : records_) out->push_back(r.snap);
}

}  // namespace lp
