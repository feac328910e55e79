// module/line/line_tracer_state.h: the line tracer data (per-code line stats, per-thread stacks).
//
// Everything here is touched only with the GIL held: statistics are shared by all threads, frame
// stacks are per thread. Times are raw wall-clock ticks (lp::wall_ticks) until results().
#pragma once

#include <Python.h>

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "lp_core/clock.h"
#include "module/common/saved_error.h"

#if PY_VERSION_HEX >= 0x030C0000
#define LP_LINE_MONITORING 1
#else
#define LP_LINE_MONITORING 0
#endif

namespace lp_module {
namespace line {

/// Counters of tracer callbacks, used to subtract the tracer's own calibrated cost.
struct EventCounts {
  uint64_t lines = 0;    // line events in traced frames
  uint64_t calls = 0;    // traced frame entries (start or resume); each has a matching exit
  uint64_t foreign = 0;  // call events of untraced frames (3.11 only; 3.12 disables them)
};

inline void add_counts(EventCounts& a, const EventCounts& b) {
  a.lines += b.lines;
  a.calls += b.calls;
  a.foreign += b.foreign;
}

/// One source line of one code object.
struct LineStat {
  uint64_t hits = 0;
  uint64_t ticks = 0;  // wall ticks from this line's events to the next event in the same frame
  EventCounts nested;  // tracer callbacks that ran inside those intervals (incl. the closing one)
  uint64_t child_ticks = 0;  // the part of ticks spent in traced frames called from this line
  EventCounts child_nested;  // the part of nested counted inside those frames' intervals
};

/// The tracer's decision about one code object, and its statistics when it is traced.
struct CodeInfo {
  PyObject* code = nullptr;  // strong reference: keeps the map key's address unique
  bool traced = false;
  bool generator_like = false;  // generator, coroutine or async generator
  int first_line = 0;
  int base = 0;  // line number of lines[0]
  std::vector<LineStat> lines;
  std::vector<std::pair<int, int>> same_line_jumps;  // 3.12+: (jump offset, its line)

  LineStat& stat(int line) {
    int idx = line - base;
    if (idx >= 0 && idx < int(lines.size())) return lines[size_t(idx)];
    return grow(line);
  }
  LineStat& grow(int line);
};

/// One traced frame on a thread's stack.
struct Frame {
  const void* key = nullptr;  // PyFrameObject* (3.11) or the code object (3.12+)
  CodeInfo* info = nullptr;
  int line = -1;           // line whose interval is open; -1: none
  uint64_t t0 = 0;         // ticks at the start of the open interval
  EventCounts ev0;         // thread counters at the start of the open interval
  uint64_t sub_ticks = 0;  // ticks of traced callees' intervals inside the open interval
  EventCounts sub_ev;      // their callbacks
};

/// The traced frames of one thread, innermost last.
struct ThreadStack {
  std::vector<Frame> frames;
  EventCounts events;
};

/// Closes f (an element of ts->frames) 's open interval at now: charges ticks and nested
/// callbacks to its line, and adds them to the caller frame's callee time (self time).
inline void charge(ThreadStack* ts, Frame& f, uint64_t now) {
  if (f.line < 0) return;
  LineStat& s = f.info->stat(f.line);
  uint64_t ticks = now - f.t0;
  EventCounts ev{ts->events.lines - f.ev0.lines, ts->events.calls - f.ev0.calls,
                 ts->events.foreign - f.ev0.foreign};
  s.ticks += ticks;
  add_counts(s.nested, ev);
  s.child_ticks += f.sub_ticks;
  add_counts(s.child_nested, f.sub_ev);
  f.sub_ticks = 0;
  f.sub_ev = EventCounts{};
  if (&f != ts->frames.data()) {
    Frame& caller = (&f)[-1];
    caller.sub_ticks += ticks;
    add_counts(caller.sub_ev, ev);
  }
}

/// A line event in frame f: closes the open interval at now (read as the callback began) and
/// opens one for line (one more hit) at a second clock read, so the bookkeeping done here is in
/// neither interval; what the interpreter spends reaching the callback and leaving it still is
/// (the calibrated cost subtracted at report time).
inline void line_event(ThreadStack* ts, Frame& f, int line, uint64_t now) {
  charge(ts, f, now);
  f.info->stat(line).hits++;
  f.line = line;
  f.ev0 = ts->events;
  f.sub_ticks = 0;  // (a frame resumed mid-line may have seen callees with no line open)
  f.sub_ev = EventCounts{};
  f.t0 = lp::wall_ticks();
}

/// Pushes a traced frame whose open interval (if line >= 0) starts now; returns it.
inline Frame& push_frame(ThreadStack* ts, const void* key, CodeInfo* info, int line, uint64_t now) {
  ts->frames.push_back(Frame{key, info, line, now, ts->events, 0, EventCounts{}});
  return ts->frames.back();
}

/// The process-wide tracer state (only one LineTracer may be active at a time).
struct Tracer {
  PyObject* owner = nullptr;       // the LineTracer object (borrowed while active)
  PyObject* filter = nullptr;      // callable(filename: str) -> bool
  PyObject* file_cache = nullptr;  // dict: filename -> bool
  std::string scope_key;           // names the filter's scope (3.12: restart DISABLEd events)
  std::unordered_map<PyObject*, CodeInfo*> codes;
  std::vector<std::unique_ptr<CodeInfo>> infos;
  std::vector<std::unique_ptr<ThreadStack>> stacks;  // stacks of this activation
  uint64_t generation = 0;     // bumped at each enable/disable: invalidates thread-local stacks
  uint64_t enabled_at = 0;     // ticks at enable
  uint64_t enabled_ticks = 0;  // total ticks spent enabled
  // Gaps, counted since the last clear() (3.11; always 0 on sys.monitoring):
  uint64_t displacements = 0;    // another trace function replaced ours and then gave it back
  uint64_t threads_skipped = 0;  // threads running another trace function at enable (untraced)
  // enable(thread_only=True) (a phase's lines, issue 32): only the enabling thread is traced and,
  // when only_context is set, only while that contextvars context (an asyncio task's) is current.
  PyThreadState* only_thread = nullptr;
  PyObject* only_context = nullptr;  // borrowed: compared by address only, while active
};

/// Whether the calling thread's events are not this activation's (enable(thread_only=True)).
inline bool foreign_thread(const Tracer* t) {
  if (!t->only_thread) return false;
  PyThreadState* ts = PyThreadState_Get();
  return ts != t->only_thread || (t->only_context && ts->context != t->only_context);
}

/// The active tracer, or nullptr.
extern Tracer* g_active;
extern uint64_t g_generation;

/// This thread's stack for the active tracer (created on first use in an activation).
ThreadStack* new_thread_stack();
extern thread_local ThreadStack* t_stack;
extern thread_local uint64_t t_generation;

inline ThreadStack* thread_stack() {
  if (t_generation == g_generation) return t_stack;
  return new_thread_stack();
}

/// The decision for code (cached per code object; calls the filter once per new file name).
CodeInfo* decide(Tracer* t, PyObject* code);
/// What decide() returns when the activation ended (or the tracer went) while its filter ran:
/// not traced, and the caller must not touch its thread stack.
extern CodeInfo g_stale_info;
inline bool is_stale(const CodeInfo* info) {
  return info == &g_stale_info;
}

inline CodeInfo* lookup(Tracer* t, PyObject* code) {
  auto it = t->codes.find(code);
  if (it != t->codes.end()) return it->second;
  return decide(t, code);
}

// ---- hooks (line_tracer_hooks.cpp) ----

/// Installs the interpreter hooks for t. Returns 0, or -1 with a Python exception set.
int install_hooks(Tracer* t);
/// Removes the hooks from every thread. Sets *displaced when another tracer had replaced ours on
/// the calling thread (that tracer is left in place). Returns 0, or -1 with an exception set.
int remove_hooks(Tracer* t, bool* displaced);
/// find_conflict() for a trace function (sys.settrace level) on the calling thread.
int settrace_conflict(PyObject** why);
/// The LineTracer object called as a Python trace function: someone saved sys.gettrace() (ours)
/// and restored it with sys.settrace. Puts the C hook back on this thread (counting the gap) and
/// feeds it this event; when t is not active, removes the trace function. Never raises.
void reclaim(Tracer* t, bool active, PyObject* frame, PyObject* event, PyObject* arg);
/// Looks for a conflicting tracer already installed. Returns 1 with *why (a new str describing
/// it) on conflict, 0 when there is none, -1 with an exception set on error.
int find_conflict(PyObject** why);
/// 3.11: the function given to threading.settrace so threads started inside the block are traced.
extern PyMethodDef g_thread_hook_def;
/// _call_unprofiled(fn): fn() with the thread's profile function off (the calibration).
extern PyMethodDef g_call_unprofiled_def;
/// _noop_trace(on): a do-nothing C trace function on the calling thread (benchmarks' floor).
extern PyMethodDef g_noop_trace_def;
/// "settrace" or "sys.monitoring".
const char* mechanism_name();

}  // namespace line
}  // namespace lp_module
