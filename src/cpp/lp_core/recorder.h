// lp_core/recorder.h: per-thread phase trees and the allocation-free enter/exit/count hot path.
//
// Each OS thread that records gets its own ThreadState: a tree of Nodes keyed by the path of
// phase names and stacks of open frames (its own, plus one per asyncio task that the module makes;
// the active one is the one enter/exit/count use). Only the owning thread writes its tree; values
// are relaxed atomics written with plain load+store (no lock prefix), so the snapshot thread
// reads them race-free without stopping the owner. Structural changes (a new node, a new
// counter) take the thread's own mutex, which only the snapshot reader ever contends.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "lp_core/clock.h"
#include "lp_core/cpu_clock.h"
#include "lp_core/histogram.h"
#include "lp_core/io_counters.h"
#include "lp_core/stable_array.h"

namespace lp {

constexpr uint32_t kRootNode = 0;
constexpr uint32_t kMaxDepth = 128;   // deeper phases are counted in depth_overflow, not recorded
constexpr uint32_t kMaxNodes = 4096;  // paths per thread before new ones fold into "(folded)"

/// Single-writer add: a relaxed load and store, no read-modify-write instruction.
template <typename T>
inline void bump(std::atomic<T>& a, T v) {
  a.store(a.load(std::memory_order_relaxed) + v, std::memory_order_relaxed);
}

struct Counter {
  explicit Counter(uint32_t name) : name_id(name) {}
  const uint32_t name_id;
  std::atomic<bool> saturated{false};  // a sum hit the int64 range (or an addend was clamped)
  std::atomic<int64_t> value{0};       // (after the flag: it fits the padding, 16 bytes in all)

  /// Single-writer saturating add of v; clamped (v itself already clamped) sets the flag too.
  void add(int64_t v, bool clamped = false) {
    int64_t sum;
    if (__builtin_add_overflow(value.load(std::memory_order_relaxed), v, &sum)) {
      sum = v > 0 ? INT64_MAX : INT64_MIN;
      clamped = true;
    }
    value.store(sum, std::memory_order_relaxed);
    if (clamped) saturated.store(true, std::memory_order_relaxed);
  }
};

struct Node {
  Node(uint32_t name, uint32_t parent_node) : name_id(name), parent(parent_node) {}
  const uint32_t name_id;
  const uint32_t parent;            // kRootNode's parent is itself
  std::vector<uint32_t> children;   // node indices; appended under ThreadState::struct_mu
  std::vector<uint32_t> counters;   // indices into ThreadState::counters; same rule
  uint32_t last_child = 0;          // owner-only lookup hint
  Counter* last_counter = nullptr;  // owner-only lookup hint: the counter count() last found
  uint32_t sample_countdown = 0;    // owner-only: sampled entries to skip before the next measured
  std::atomic<uint32_t> sample_every{0};  // largest scale recorded here (0/1: every entry measured)
  std::atomic<uint64_t> calls{0};
  std::atomic<uint64_t> wall_ns{0};
  std::atomic<uint64_t> cpu_ns{0};
  // Exact extremes of the measured entries' wall times (unscaled; UINT64_MAX/0 until the first):
  // what the histogram's quantiles are clamped into when reported.
  std::atomic<uint64_t> min_wall_ns{UINT64_MAX};
  std::atomic<uint64_t> max_wall_ns{0};
  std::atomic<uint64_t> hist[kHistBuckets]{};
  // phase(io=True) entries (this thread's /proc counters at the entry's own boundaries), in bytes.
  std::atomic<uint64_t> io_calls{0};   // entries whose two reads succeeded
  std::atomic<uint64_t> io_failed{0};  // entries that recorded no bytes: a boundary read failed
  std::atomic<uint64_t> io_async{0};   // task entries that spanned a switch: no bytes recorded
  std::atomic<uint64_t> io_read_bytes{0};
  std::atomic<uint64_t> io_write_bytes{0};
  std::atomic<uint64_t> io_rchar{0};
  std::atomic<uint64_t> io_wchar{0};
  // Entries of a task stack that spanned a switch of the active stack (an asyncio task's await
  // that suspended it): their wall time is in wall_ns, their CPU in no cpu_ns (the thread ran other
  // tasks meanwhile), so wait is not derivable for them.
  std::atomic<uint64_t> async_calls{0};
  std::atomic<uint64_t> async_wall_ns{0};
  // Entries that exited by an exception (mark_raised before their exit), scaled like calls.
  std::atomic<uint64_t> raised{0};
};

/// The token of a frame attach() opened (compared by address, never dereferenced).
inline constexpr char kAttachFrameToken = 0;

/// Name id of "[threads]", the path element under which attached work nests.
uint32_t threads_marker_id();

struct Frame {
  std::atomic<uint32_t> node{0};
  std::atomic<uint64_t> t0_ticks{0};
  std::atomic<uint32_t> scale{
      1};  // entries this one stands for (product of enclosing sample strides)
  uint64_t c0_ns = 0;
  uint64_t epoch0 = 0;  // the thread's stack-switch epoch at entry (see ThreadState::use_stack)
  const void* token = nullptr;
  // Only meaningful for an entry opened with enter_io(); owner-only.
  bool io_ok = false;
  uint64_t io_own0 = 0;  // the thread's own-read rchar before the entry read
  IoCounters io0;
};

class Recorder;
class ThreadState;
class FinishedThreads;
struct ThreadSnapshot;

/// One stack of open phases: a thread's own, or one asyncio task's. The frames live in an array
/// that grows (under the owning ThreadState's struct_mu_, which snapshots hold) up to kMaxDepth.
/// Owner-thread only, except depth/frames read by snapshots under struct_mu_.
struct PhaseStack {
  /// base_node/base_scale: the node the stack's outermost phase nests under, and its scale.
  PhaseStack(uint32_t capacity, bool task, uint32_t base_node = kRootNode, uint32_t base_scale = 1)
      : frames(new Frame[capacity]),
        capacity(capacity),
        is_task(task),
        base_node(base_node),
        base_scale(base_scale) {}
  ~PhaseStack() { delete[] frames; }
  PhaseStack(const PhaseStack&) = delete;
  PhaseStack& operator=(const PhaseStack&) = delete;

  Frame* frames;
  uint32_t capacity;
  const bool is_task;
  const uint32_t base_node;
  const uint32_t base_scale;
  const void* skip_token = nullptr;  // the skipped sampled entry this stack is inside, if any
  std::atomic<uint32_t> depth{0};
};

/// The calling thread's last-used (recorder generation, thread state). A plain __thread POD with
/// the initial-exec model: one %fs-relative load, no TLS wrapper or __tls_get_addr call.
struct TlsCache {
  uint64_t gen;
  ThreadState* state;
};
extern __thread TlsCache g_tls_cache __attribute__((tls_model("initial-exec")));

/// One thread's tree and open-frame stack. Created on the thread's first record; when the thread
/// exits (any thread but the process's main one) its tree is folded into the recorder's
/// FinishedThreads and the state is freed, with its perf event and /proc io fds.
class ThreadState {
 public:
  /// cpu_tier: the CPU-clock tier to open on this thread (ignored when measure_cpu is false).
  ThreadState(uint64_t os_tid, std::string thread_name, bool measure_cpu,
              CpuClockTier cpu_tier = CpuClockTier::kSyscall);

  /// Opens a phase named name_id under the innermost open one of the active stack (its base node
  /// when it has none open). token identifies the entry at exit.
  /// sample_every > 1 measures one entry in sample_every of this path (a deterministic stride,
  /// the first entry measured) and scales what it records by that factor; a skipped entry makes
  /// this stack record nothing (no entries, no counters) until exit_skipped(token).
  /// Returns true when the entry was recorded and must be closed with exit(token); false when it
  /// was skipped (sampling, an enclosing skipped entry, or depth overflow).
  inline bool enter(uint32_t name_id, const void* token, uint32_t sample_every = 1) {
    PhaseStack& st = *active_;
    if (__builtin_expect(st.skip_token != nullptr, 0)) return false;
    uint32_t d = st.depth.load(std::memory_order_relaxed);
    if (__builtin_expect(d >= st.capacity, 0) && !grow(st)) {
      bump(depth_overflow, uint64_t(1));
      return false;
    }
    uint32_t parent = d ? st.frames[d - 1].node.load(std::memory_order_relaxed) : st.base_node;
    uint32_t scale = d ? st.frames[d - 1].scale.load(std::memory_order_relaxed) : st.base_scale;
    uint32_t node = child(parent, name_id);
    if (sample_every > 1) {
      Node& n = nodes_[node];
      if (n.sample_countdown) {
        --n.sample_countdown;
        st.skip_token = token;
        return false;
      }
      n.sample_countdown = sample_every - 1;
      uint64_t s = uint64_t(scale) * sample_every;
      scale = s > UINT32_MAX ? UINT32_MAX : uint32_t(s);
    }
    if (scale > 1) mark_sampled(node, scale);
    Frame& f = st.frames[d];
    f.node.store(node, std::memory_order_relaxed);
    f.scale.store(scale, std::memory_order_relaxed);
    f.token = token;
    f.epoch0 = epoch_;
    uint64_t t0 = wall_ticks();
    f.t0_ticks.store(t0, std::memory_order_relaxed);
    if (measure_cpu_) f.c0_ns = cpu_.now_ns_at(t0);
    st.depth.store(d + 1, std::memory_order_release);
    return true;
  }

  /// Ends a skipped entry: when token is the sampled entry that started skipping, the active
  /// stack records again. Any other token (a phase entered while skipping) is ignored.
  inline void exit_skipped(const void* token) { exit_skipped_on(*active_, token); }
  inline void exit_skipped_on(PhaseStack& st, const void* token) {
    if (st.skip_token == token) st.skip_token = nullptr;
  }

  /// Whether the active stack is inside a skipped sampled entry (records nothing). Owner only.
  bool skipping() const { return active_->skip_token != nullptr; }

  /// Restarts the clocks of the innermost open entry (after work that must not be billed to it,
  /// such as a CUDA synchronize at entry). Owner only.
  void restart_top() {
    PhaseStack& st = *active_;
    uint32_t d = st.depth.load(std::memory_order_relaxed);
    if (d == 0) return;
    Frame& f = st.frames[d - 1];
    f.t0_ticks.store(wall_ticks(), std::memory_order_relaxed);
    if (measure_cpu_) f.c0_ns = cpu_.now_ns();
  }

  /// Closes the entry opened with token on the active stack. An out-of-order exit closes the
  /// frames above it too and is counted in out_of_order_exits; an exit with no matching entry
  /// (depth overflow, never entered, or entered on another stack) records nothing.
  inline void exit(const void* token) { exit_on(*active_, token); }

  /// exit() on a given stack of this thread (the one the entry was made on), active or not.
  inline void exit_on(PhaseStack& st, const void* token) {
    uint32_t d = st.depth.load(std::memory_order_relaxed);
    if (d == 0) return;
    if (st.frames[d - 1].token != token) {
      exit_out_of_order(st, token);
      return;
    }
    close_top(st, d);
  }

  /// Counts the entry opened with token on stack st as one that exits by an exception; the caller
  /// then closes it as usual. Called only on that path (a Python __exit__ given an exception, a
  /// C++ scope destroyed while unwinding), so a normal exit pays nothing. Owner only.
  void mark_raised_on(PhaseStack& st, const void* token);

  /// enter() for phase(io=True): reads this thread's I/O counters first (a skipped sampled entry
  /// wastes that read). A failed read still opens the phase (its time is recorded) but the entry
  /// records no bytes. Returns what enter() returns.
  bool enter_io(uint32_t name_id, const void* token, uint32_t sample_every = 1);

  /// exit() for phase(io=True), for an entry enter_io() recorded: reads the counters, then
  /// closes. Bytes are recorded only when both boundary reads succeeded and the entry is the
  /// innermost one (an out-of-order exit records none and counts as failed) and, on a task stack,
  /// did not span a switch (the thread's counters then include other tasks' I/O: counted in
  /// io_async, no bytes); the bytes of this thread's own counter reads are subtracted from rchar.
  /// Inside a sampled entry, entries and bytes are scaled like the entry's time.
  void exit_io(const void* token) { exit_io_on(*active_, token); }
  void exit_io_on(PhaseStack& st, const void* token);

  /// Adds n to counter name_id on the innermost open phase of the active stack (its base node
  /// when none is open), clamped to the int64 range (the counter is then marked saturated).
  /// Inside a sampled entry n is scaled like the entry; inside a skipped one nothing is added. A
  /// new counter past the thread's table (65,536) is refused and counted in counters_refused.
  inline void count(uint32_t name_id, int64_t n) {
    const PhaseStack& st = *active_;
    if (__builtin_expect(st.skip_token != nullptr, 0)) return;
    uint32_t d = st.depth.load(std::memory_order_relaxed);
    uint32_t node = st.base_node;
    uint32_t scale = st.base_scale;
    if (d) {
      const Frame& f = st.frames[d - 1];
      node = f.node.load(std::memory_order_relaxed);
      scale = f.scale.load(std::memory_order_relaxed);
    }
    Counter* c = nodes_[node].last_counter;
    if (__builtin_expect(scale > 1 || c == nullptr || c->name_id != name_id, 0)) {
      return count_slow(node, name_id, n, scale);
    }
    c->add(n);
  }

  /// count() on the thread's own stack, for a caller that knows no task stack was ever made on
  /// this thread (has_task_stacks() false: the own stack is then the active one). The common
  /// path without asyncio: no active-stack load, and the root's node and scale are constants; a
  /// new counter or a sampled entry goes out of line. Owner only.
  inline void count_own(uint32_t name_id, int64_t n) {
    const PhaseStack& st = own_;
    if (__builtin_expect(st.skip_token != nullptr, 0)) return;
    uint32_t d = st.depth.load(std::memory_order_relaxed);
    uint32_t node = kRootNode;
    uint32_t scale = 1;
    if (d) {
      const Frame& f = st.frames[d - 1];
      node = f.node.load(std::memory_order_relaxed);
      scale = f.scale.load(std::memory_order_relaxed);
    }
    Counter* c = nodes_[node].last_counter;
    if (__builtin_expect(scale > 1 || c == nullptr || c->name_id != name_id, 0)) {
      return count_slow(node, name_id, n, scale);
    }
    c->add(n);
  }

  /// Name id of the innermost open phase of the active stack (for a task stack with none open,
  /// the phase it nests under), or kRootNameId (0) at the root. Owner only.
  uint32_t current_name() const;

  /// Number of open phases on the active stack. Owner only (others may read a stale value).
  uint32_t depth() const { return active_->depth.load(std::memory_order_relaxed); }

  // --- Attaching: work handed to this thread by another keeps the other thread's open phases.

  /// Opens, on the active stack, a frame that records nothing (no calls, never reported open)
  /// whose node is path (name ids, outermost first, from the root of this thread's tree) followed
  /// by the threads marker (threads_marker_id()): phases entered after it nest there. Returns the
  /// level to give detach(); 0 when nothing was attached (inside a skipped sampled entry, or at
  /// the depth limit). Cold path: the hot path is unchanged. Owner only.
  uint32_t attach(const std::vector<uint32_t>& path);

  /// Ends the attachment attach() returned level for (on the active stack, else the own one);
  /// phases still open inside it are dropped unrecorded (counted in out_of_order_exits). A level
  /// that no longer names an attached frame does nothing. Owner only.
  void detach(uint32_t level);

  /// Name ids of the phases open on the active stack (its base path included), outermost first,
  /// without threads markers: what attach() in another thread nests under. Owner only.
  std::vector<uint32_t> open_path() const;

  // --- Stacks. The module keeps one stack per asyncio task and makes the current task's active
  // before each enter/exit/count; without it, the thread's own stack is always the active one.

  /// A new task stack whose outermost phase nests under parent's innermost open phase (parent's
  /// base when it has none open; the thread's own stack when parent is nullptr). Registered for
  /// snapshots until only the registry holds it. Owner only.
  std::shared_ptr<PhaseStack> new_task_stack(const PhaseStack* parent);

  /// Makes stack (nullptr: the thread's own) the active one and starts a new switch epoch: an
  /// entry of a task stack whose exit sees another epoch than its entry spanned a switch, so its
  /// CPU time is not recorded (it is counted in async_calls/async_wall_ns instead). Owner only.
  /// Back on the own stack with no task stack alive any more (only the registry holds them: their
  /// tasks finished), the thread is again one that never made one (has_task_stacks() false): a
  /// task's next first phase makes a new stack nested under the own stack's top, where a count()
  /// with no context check lands too.
  void use_stack(std::shared_ptr<PhaseStack> stack) {
    active_ref_ = std::move(stack);
    active_ = active_ref_ ? active_ref_.get() : &own_;
    ++epoch_;
    if (!active_ref_ && has_task_stacks_) forget_task_stacks_if_unused();
  }
  /// What use_stack(nullptr) checks, for a caller on the own stack whose tasks may have been
  /// freed since (a finished task in a reference cycle goes at a later collection). Owner only.
  void forget_task_stacks_if_unused();
  PhaseStack* active_stack() const { return active_; }
  /// Whether a task stack made on this thread may still be in use (new_task_stack() was called
  /// since the thread last went back to its own stack with every task stack released). While
  /// false, the own stack is the active one and phases and counts need no context check. Owner
  /// only.
  bool has_task_stacks() const { return has_task_stacks_; }
  PhaseStack* own_stack() { return &own_; }

  /// The module's key of the context the active stack was chosen for (opaque to lp_core).
  uint64_t context_key_a = ~uint64_t(0);
  uint64_t context_key_b = ~uint64_t(0);

  uint64_t os_tid() const { return os_tid_; }
  const std::string& thread_name() const { return thread_name_; }
  CpuClockTier cpu_tier() const { return cpu_.tier(); }

  std::atomic<uint64_t> depth_overflow{0};
  std::atomic<uint64_t> folded_entries{0};
  std::atomic<uint64_t> counter_overflow{0};    // count()s refused: a new counter, table full
  std::atomic<uint64_t> out_of_order_exits{0};  // exits that closed inner entries too
  std::atomic<uint64_t> task_stacks_made{0};    // stacks new_task_stack() made on this thread

 private:
  friend class Recorder;
  uint32_t child(uint32_t parent, uint32_t name_id) {
    Node& p = nodes_[parent];
    if (p.last_child && nodes_[p.last_child].name_id == name_id) return p.last_child;
    for (uint32_t c : p.children) {
      if (nodes_[c].name_id == name_id) {
        p.last_child = c;
        return c;
      }
    }
    return add_child(parent, name_id);
  }
  uint32_t add_child(uint32_t parent, uint32_t name_id);
  Counter* find_counter(uint32_t node, uint32_t name_id);  // found or added (nullptr: table full)
  Counter* add_counter(uint32_t node, uint32_t name_id);   // sets the hint; nullptr: table full
  // count()'s rest out of line (a counter not the node's last, or an entry sampled at scale > 1),
  // so that the inline paths keep no registers across a call.
  void count_slow(uint32_t node, uint32_t name_id, int64_t n, uint32_t scale);
  void exit_out_of_order(PhaseStack& st, const void* token);
  bool grow(PhaseStack& st);  // doubles st's frames up to kMaxDepth; false when already there
  bool read_io(IoCounters* out);
  void add_open_frames(const PhaseStack& st, uint64_t now, ThreadSnapshot& snap) const;
  void mark_sampled(uint32_t node, uint32_t scale) {
    std::atomic<uint32_t>& every = nodes_[node].sample_every;
    if (every.load(std::memory_order_relaxed) < scale)
      every.store(scale, std::memory_order_relaxed);
  }
  static int64_t scale_count(int64_t n, uint32_t scale, bool* clamped) {
    int64_t out;
    if (__builtin_mul_overflow(n, int64_t(scale), &out)) {
      *clamped = true;
      return n > 0 ? INT64_MAX : INT64_MIN;
    }
    return out;
  }

  inline void close_top(PhaseStack& st, uint32_t d) {
    Frame& f = st.frames[d - 1];
    uint64_t t1 = wall_ticks();
    uint64_t c1 = measure_cpu_ ? cpu_.now_ns_at(t1) : 0;
    uint64_t wall = ticks_to_ns(t1 - f.t0_ticks.load(std::memory_order_relaxed));
    Node& n = nodes_[f.node.load(std::memory_order_relaxed)];
    uint64_t scale = f.scale.load(std::memory_order_relaxed);  // 1 unless sampled
    // Two compares: single-writer, so a relaxed load and a store when the extreme moves.
    if (wall < n.min_wall_ns.load(std::memory_order_relaxed))
      n.min_wall_ns.store(wall, std::memory_order_relaxed);
    if (wall > n.max_wall_ns.load(std::memory_order_relaxed))
      n.max_wall_ns.store(wall, std::memory_order_relaxed);
    bump(n.calls, scale);
    bump(n.wall_ns, wall * scale);
    if (__builtin_expect(f.epoch0 != epoch_, 0) && st.is_task) {
      // The task was suspended inside this entry: the thread's CPU clock also ran other tasks.
      bump(n.async_calls, scale);
      bump(n.async_wall_ns, wall * scale);
    } else if (measure_cpu_) {
      bump(n.cpu_ns, (c1 > f.c0_ns ? c1 - f.c0_ns : uint64_t(0)) * scale);
    }
    bump(n.hist[hist_bucket(wall)], scale);
    st.depth.store(d - 1, std::memory_order_release);
  }

  const uint64_t os_tid_;
  uint64_t thread_serial_ = 0;  // set by Recorder::register_thread: which live thread owns this
  const std::string thread_name_;
  const bool measure_cpu_;
  ThreadCpuClock cpu_;
  mutable std::mutex struct_mu_;
  StableArray<Node, 4, (kMaxNodes + 1 + 15) / 16> nodes_;  // kMaxNodes paths + "(folded)"
  StableArray<Counter, 6, 1024> counters_;                 // up to 65,536 counters per thread
  uint32_t folded_node_ = 0;                               // created on first fold
  PhaseStack own_{kMaxDepth, false};                       // the thread's own stack
  PhaseStack* active_ = &own_;
  std::shared_ptr<PhaseStack> active_ref_;                // keeps a task stack alive while active
  uint64_t epoch_ = 0;                                    // bumped by use_stack()
  bool has_task_stacks_ = false;                          // owner only; see has_task_stacks()
  std::vector<std::shared_ptr<PhaseStack>> task_stacks_;  // under struct_mu_: for snapshots
  size_t task_stacks_pruned_at_ = 0;  // registry size after the last prune of unused stacks
  IoCounterFile io_file_;  // this thread's /proc io file, opened on the first io=True entry
  bool io_open_tried_ = false;
  uint64_t io_own_rchar_ = 0;  // bytes this thread's own counter reads returned
};

/// A consistent-enough copy of one node: each value is read atomically; values of one node may
/// differ by the one entry in flight at the moment of the copy.
struct NodeSnapshot {
  uint32_t index = 0;
  uint32_t parent = 0;
  uint32_t name_id = 0;
  uint64_t calls = 0;
  uint64_t wall_ns = 0;
  uint64_t cpu_ns = 0;
  uint64_t min_wall_ns = UINT64_MAX;  // shortest measured entry (UINT64_MAX: none completed)
  uint64_t max_wall_ns = 0;           // longest measured entry
  uint64_t open_ns = 0;               // time so far of entries still open at the snapshot
  uint32_t open_count = 0;            // how many entries of this node are open
  uint32_t sample_every = 0;          // > 1: values are scaled estimates (one entry in N measured)
  std::vector<std::pair<uint16_t, uint64_t>> hist;     // sparse (bucket, count)
  std::vector<std::pair<uint32_t, int64_t>> counters;  // (name id, value)
  std::vector<uint32_t> saturated;                     // name ids of counters that saturated
  bool synthetic = false;  // the "(folded)" node a full tree made, not a phase of that name
  uint64_t io_calls = 0, io_failed = 0, io_read_bytes = 0, io_write_bytes = 0, io_rchar = 0,
           io_wchar = 0;
  uint64_t async_calls = 0, async_wall_ns = 0;  // entries that spanned a task switch (no CPU)
  uint64_t raised = 0;                          // entries that exited by an exception
  uint64_t io_async = 0;  // io=True entries that spanned a task switch (no bytes)
};

struct ThreadSnapshot {
  uint64_t os_tid = 0;
  std::string thread_name;
  uint64_t depth_overflow = 0;
  uint64_t folded_entries = 0;
  uint64_t counters_refused = 0;  // count()s refused because the counter table was full
  uint64_t exited_threads = 0;    // > 0: the folded record of this many exited threads
  uint64_t out_of_order_exits = 0;
  uint64_t task_stacks_made = 0;    // > 0: entries of this thread's tasks may overlap in time
  std::vector<NodeSnapshot> nodes;  // index 0 is the root; parents precede children
};

struct RecorderOptions {
  bool measure_cpu = true;
};

/// The set of thread trees of one profiler in one process.
class Recorder {
 public:
  explicit Recorder(RecorderOptions options);
  ~Recorder();
  Recorder(const Recorder&) = delete;
  Recorder& operator=(const Recorder&) = delete;

  /// The calling thread's state, or nullptr when it has not registered with this recorder
  /// (one thread-local compare on the hot path).
  ThreadState* thread_state() const {
    return g_tls_cache.gen == generation_ ? g_tls_cache.state : nullptr;
  }

  /// Finds or creates the calling thread's state; caches it for thread_state(). thread_name is
  /// used only on creation.
  ThreadState* register_thread(const std::string& thread_name);

  /// The calling thread's state when it has registered with this recorder (found without
  /// creating, and cached for thread_state()), else nullptr. For a thread that records with
  /// several recorders in turn: a few recently used states are kept per thread.
  ThreadState* find_thread();

  /// Copies every thread's tree (live threads, then the folded records of exited ones). Safe to
  /// call from any thread while others record or exit.
  std::vector<ThreadSnapshot> snapshot() const;

  /// Called on an exiting thread (its thread_local exit hook): folds ts's tree into the finished
  /// threads' record and frees ts (closing its fds). The thread must not record again.
  void retire_thread(ThreadState* ts);

  /// Name ids of the phases open right now on the own stack (not its tasks') of the first thread
  /// that recorded with this recorder, outermost first; empty when none is open. Safe to call from
  /// any thread (the sampler's tag).
  std::vector<uint32_t> first_thread_open_path() const;

  /// In a forked child: forgets every thread state (leaked, not destroyed: a parent thread may
  /// have held one of their locks at the fork) and starts empty under a new generation.
  void reset_after_fork();

  bool measure_cpu() const { return options_.measure_cpu; }
  /// The CPU-clock tier this recorder's threads open (probed when the recorder was made).
  CpuClockTier cpu_tier() const { return cpu_tier_; }

 private:
  RecorderOptions options_;
  CpuClockTier cpu_tier_;
  std::vector<ThreadSnapshot> snapshot_of(const std::vector<ThreadState*>& states) const;

  uint64_t generation_;
  // Held by snapshot(), first_thread_open_path() and retire_thread() throughout: a thread state
  // is never freed while a reader looks at it, and an exiting thread's data is counted once.
  mutable std::mutex retire_mu_;
  std::unique_ptr<FinishedThreads> finished_;  // guarded by retire_mu_
  mutable std::mutex threads_mu_;
  std::vector<std::unique_ptr<ThreadState>>* threads_;  // leaked on fork, deleted otherwise
};

}  // namespace lp
