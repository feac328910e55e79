// module/line/line_tracer_monitoring.cpp: the 3.12+ hooks (C callbacks registered with
// sys.monitoring).
//
// Callbacks are registered under tool id 4 (else 3; never 0 debugger, 1 coverage, 2 profiler,
// 5 optimizer) named "lineprofiler". Callbacks of code outside the project return
// sys.monitoring.DISABLE, so such code costs nothing after its first event at each location.
// sys.monitoring is process-wide: every thread's project code is traced while the block is active;
// under enable(thread_only=True) (a phase's lines) other threads' (tasks') events are ignored.
#include <string>

#include "module/line/line_tracer_state.h"

#if LP_LINE_MONITORING

namespace lp_module {
namespace line {

namespace {

PyObject* g_disable = nullptr;  // sys.monitoring.DISABLE
int g_tool = -1;
std::string g_scope_of_tool[6];  // scope key of the last activation that used each tool id

inline PyObject* disable_result() {
  return Py_NewRef(g_disable);
}

// An event of another thread (or task) under enable(thread_only=True): events are process-wide,
// so it is ignored; code outside the scope is disabled as usual (that decision is the same on
// every thread), project code stays enabled for the traced thread.
PyObject* other_thread_result(Tracer* t, PyObject* code) {
  CodeInfo* info = lookup(t, code);
  if (is_stale(info)) Py_RETURN_NONE;
  if (!info->traced) return disable_result();
  Py_RETURN_NONE;
}

PyObject* mon_start(PyObject*, PyObject* const* args, Py_ssize_t nargs) {  // PY_START
  Tracer* t = g_active;
  if (!t || nargs < 1) Py_RETURN_NONE;
  if (foreign_thread(t)) return other_thread_result(t, args[0]);
  ThreadStack* ts = thread_stack();
  CodeInfo* info = lookup(t, args[0]);
  if (is_stale(info)) Py_RETURN_NONE;
  if (!info->traced) return disable_result();
  uint64_t now = lp::wall_ticks();
  ts->events.calls++;
  push_frame(ts, args[0], info, -1, now);
  Py_RETURN_NONE;
}

PyObject* mon_resume(PyObject*, PyObject* const* args, Py_ssize_t nargs) {  // PY_RESUME, PY_THROW
  Tracer* t = g_active;
  if (!t || nargs < 2 || foreign_thread(t)) Py_RETURN_NONE;
  ThreadStack* ts = thread_stack();
  CodeInfo* info = lookup(t, args[0]);
  if (is_stale(info)) Py_RETURN_NONE;
  if (!info->traced) Py_RETURN_NONE;  // PY_THROW cannot be disabled; PY_RESUME is rare here
  uint64_t now = lp::wall_ticks();
  ts->events.calls++;
  int line = -1;
  long offset = PyLong_AsLong(args[1]);
  if (offset >= 0) line = PyCode_Addr2Line(reinterpret_cast<PyCodeObject*>(args[0]), int(offset));
  if (PyErr_Occurred()) PyErr_Clear();
  push_frame(ts, args[0], info, line, now);  // the resumed line continues (no new hit)
  Py_RETURN_NONE;
}

PyObject* mon_line(PyObject*, PyObject* const* args, Py_ssize_t nargs) {  // LINE
  Tracer* t = g_active;
  if (!t || nargs < 2) Py_RETURN_NONE;
  if (foreign_thread(t)) return other_thread_result(t, args[0]);
  uint64_t now = lp::wall_ticks();
  ThreadStack* ts = thread_stack();
  ts->events.lines++;
  int line = int(PyLong_AsLong(args[1]));
  if (!ts->frames.empty() && ts->frames.back().key == args[0]) {
    line_event(ts, ts->frames.back(), line, now);
    Py_RETURN_NONE;
  }
  CodeInfo* info = lookup(t, args[0]);
  if (is_stale(info)) Py_RETURN_NONE;
  if (!info->traced) {
    ts->events.lines--;
    return disable_result();
  }
  // A line in a frame we did not see start: one that was running when tracing began.
  now = lp::wall_ticks();  // after lookup: a first decision may have been slow
  Frame& f = push_frame(ts, args[0], info, -1, now);
  line_event(ts, f, line, now);
  Py_RETURN_NONE;
}

// The line of a backward jump that stays on its line, or -1 (sys.settrace reports such a jump,
// e.g. each iteration of a loop written on one line, as a line event; LINE does not).
int same_line_jump(CodeInfo* info, PyObject* code, long from, long to) {
  for (const auto& j : info->same_line_jumps) {
    if (j.first == from) return j.second;
  }
  auto* co = reinterpret_cast<PyCodeObject*>(code);
  int from_line = PyCode_Addr2Line(co, int(from));
  int to_line = PyCode_Addr2Line(co, int(to));
  if (PyErr_Occurred()) PyErr_Clear();
  if (from_line < 0 || from_line != to_line) return -1;
  info->same_line_jumps.emplace_back(int(from), from_line);
  return from_line;
}

PyObject* mon_jump(PyObject*, PyObject* const* args, Py_ssize_t nargs) {  // JUMP
  Tracer* t = g_active;
  if (!t || nargs < 3) Py_RETURN_NONE;
  if (foreign_thread(t)) Py_RETURN_NONE;  // (a backward jump in project code must stay enabled)
  uint64_t now = lp::wall_ticks();
  long from = PyLong_AsLong(args[1]);
  long to = PyLong_AsLong(args[2]);
  if (to > from) return disable_result();  // forward jumps never repeat a line
  ThreadStack* ts = thread_stack();
  bool on_top = !ts->frames.empty() && ts->frames.back().key == args[0];
  CodeInfo* info = on_top ? ts->frames.back().info : lookup(t, args[0]);
  if (is_stale(info)) Py_RETURN_NONE;
  if (!info->traced) return disable_result();
  int line = same_line_jump(info, args[0], from, to);
  if (line < 0) return disable_result();  // the target's LINE event reports it
  ts->events.lines++;
  if (!on_top) {
    now = lp::wall_ticks();
    push_frame(ts, args[0], info, -1, now);
  }
  line_event(ts, ts->frames.back(), line, now);
  Py_RETURN_NONE;
}

inline bool pop_if_top(PyObject* code) {
  ThreadStack* ts = thread_stack();
  if (ts->frames.empty() || ts->frames.back().key != code) return false;
  charge(ts, ts->frames.back(), lp::wall_ticks());
  ts->frames.pop_back();
  return true;
}

PyObject* mon_exit(PyObject*, PyObject* const* args, Py_ssize_t nargs) {  // PY_RETURN, PY_YIELD
  Tracer* t = g_active;
  if (!t || nargs < 1) Py_RETURN_NONE;
  if (foreign_thread(t)) return other_thread_result(t, args[0]);
  if (pop_if_top(args[0])) Py_RETURN_NONE;
  CodeInfo* info = lookup(t, args[0]);
  if (is_stale(info)) Py_RETURN_NONE;
  if (!info->traced) return disable_result();
  Py_RETURN_NONE;
}

PyObject* mon_unwind(PyObject*, PyObject* const* args, Py_ssize_t nargs) {  // PY_UNWIND
  if (!g_active || nargs < 1 || foreign_thread(g_active)) Py_RETURN_NONE;
  pop_if_top(args[0]);
  Py_RETURN_NONE;  // PY_UNWIND cannot be disabled
}

PyMethodDef g_defs[] = {
    {"_mon_start", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(mon_start)),
     METH_FASTCALL, nullptr},
    {"_mon_resume", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(mon_resume)),
     METH_FASTCALL, nullptr},
    {"_mon_line", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(mon_line)),
     METH_FASTCALL, nullptr},
    {"_mon_exit", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(mon_exit)),
     METH_FASTCALL, nullptr},
    {"_mon_unwind", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(mon_unwind)),
     METH_FASTCALL, nullptr},
    {"_mon_jump", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(mon_jump)),
     METH_FASTCALL, nullptr},
};

struct EventBinding {
  const char* event;
  int def;
};
const EventBinding kBindings[] = {
    {"PY_START", 0},  {"PY_RESUME", 1}, {"PY_THROW", 1},  {"LINE", 2},
    {"PY_RETURN", 3}, {"PY_YIELD", 3},  {"PY_UNWIND", 4}, {"JUMP", 5},
};

PyObject* monitoring() {
  return PySys_GetObject("monitoring");
}  // borrowed

long event_bit(PyObject* events, const char* name) {
  PyObject* v = PyObject_GetAttrString(events, name);
  if (!v) return -1;
  long bit = PyLong_AsLong(v);
  Py_DECREF(v);
  return bit;
}

int call_ok(PyObject* result) {
  if (!result) return -1;
  Py_DECREF(result);
  return 0;
}

// Keeps the first failure of a sequence of calls: a failed step's exception is parked here so
// the next step runs with none set (the C API requires it), and restored by take().
struct FirstError {
  PyObject* exc = nullptr;
  void note() {
    PyObject* e = PyErr_GetRaisedException();
    if (exc) {
      Py_XDECREF(e);
    } else {
      exc = e;
    }
  }
  int take() {
    if (!exc) return 0;
    PyErr_SetRaisedException(exc);
    exc = nullptr;
    return -1;
  }
};

// Frees tool: no events, no callbacks, the id released. Every step runs even when one fails;
// returns -1 with the first failure's exception set. Call with no exception set.
int unregister(PyObject* mon, int tool) {
  FirstError err;
  if (call_ok(PyObject_CallMethod(mon, "set_events", "ii", tool, 0)) < 0) err.note();
  PyObject* events = PyObject_GetAttrString(mon, "events");
  if (!events) err.note();
  for (const EventBinding& b : kBindings) {
    long bit = events ? event_bit(events, b.event) : -1;
    if (bit < 0 ||
        call_ok(PyObject_CallMethod(mon, "register_callback", "ilO", tool, bit, Py_None)) < 0) {
      if (PyErr_Occurred()) err.note();
    }
  }
  Py_XDECREF(events);
  if (call_ok(PyObject_CallMethod(mon, "free_tool_id", "i", tool)) < 0) err.note();
  return err.take();
}

}  // namespace

PyMethodDef g_thread_hook_def = {nullptr, nullptr, 0, nullptr};

const char* mechanism_name() {
  return "sys.monitoring";
}

int find_conflict(PyObject** why) {
  if (int rc = settrace_conflict(why)) return rc;
  // Another sys.monitoring tool tracing lines (line_profiler 5, coverage, a debugger).
  PyObject* mon = monitoring();
  if (!mon) return 0;
  PyObject* events = PyObject_GetAttrString(mon, "events");
  if (!events) return -1;
  long line_bits = event_bit(events, "LINE") | event_bit(events, "INSTRUCTION");
  Py_DECREF(events);
  if (PyErr_Occurred()) return -1;
  for (int tool = 0; tool < 6; ++tool) {
    PyObject* name = PyObject_CallMethod(mon, "get_tool", "i", tool);
    if (!name) return -1;
    if (name == Py_None) {
      Py_DECREF(name);
      continue;
    }
    PyObject* ev = PyObject_CallMethod(mon, "get_events", "i", tool);
    long bits = ev ? PyLong_AsLong(ev) : -1;
    Py_XDECREF(ev);
    if (bits == -1 && PyErr_Occurred()) {
      Py_DECREF(name);
      return -1;
    }
    if (bits & line_bits) {
      *why = PyUnicode_FromFormat(
          "sys.monitoring tool %d (%S) is already tracing lines: LineProfiler cannot run "
          "alongside another tracer (a debugger, coverage, line_profiler); stop it first",
          tool, name);
      Py_DECREF(name);
      return *why ? 1 : -1;
    }
    Py_DECREF(name);
  }
  return 0;
}

int install_hooks(Tracer* t) {
  PyObject* mon = monitoring();
  if (!mon) {
    PyErr_SetString(PyExc_RuntimeError, "sys.monitoring is not available");
    return -1;
  }
  if (!g_disable) {
    g_disable = PyObject_GetAttrString(mon, "DISABLE");
    if (!g_disable) return -1;
  }
  int tool = -1;
  std::string taken;
  for (int candidate : {4, 3}) {
    PyObject* name = PyObject_CallMethod(mon, "get_tool", "i", candidate);
    if (!name) return -1;
    bool free_id = name == Py_None;
    if (!free_id) {
      PyObject* s = PyObject_Str(name);
      const char* u = s ? PyUnicode_AsUTF8(s) : nullptr;
      taken += std::to_string(candidate) + " (" + (u ? u : "?") + ") ";
      Py_XDECREF(s);
      PyErr_Clear();
    }
    Py_DECREF(name);
    if (free_id) {
      tool = candidate;
      break;
    }
  }
  if (tool < 0) {
    PyErr_Format(PyExc_RuntimeError,
                 "LineProfiler needs a free sys.monitoring tool id (4 or 3), but both are taken: "
                 "%s; another tracing tool is running",
                 taken.c_str());
    return -1;
  }
  if (call_ok(PyObject_CallMethod(mon, "use_tool_id", "is", tool, "lineprofiler")) < 0) return -1;
  PyObject* events = PyObject_GetAttrString(mon, "events");
  if (!events) {
    SavedError saved;  // unregister() calls into Python: report the error that stopped us
    unregister(mon, tool);
    return -1;
  }
  long mask = 0;
  for (const EventBinding& b : kBindings) {
    long bit = event_bit(events, b.event);
    PyObject* fn = bit < 0 ? nullptr : PyCFunction_New(&g_defs[b.def], nullptr);
    int rc = fn ? call_ok(PyObject_CallMethod(mon, "register_callback", "ilO", tool, bit, fn)) : -1;
    Py_XDECREF(fn);
    if (rc < 0) {
      Py_DECREF(events);
      SavedError saved;  // unregister() calls into Python: report the error that stopped us
      unregister(mon, tool);
      return -1;
    }
    mask |= bit;
  }
  Py_DECREF(events);
  // Locations disabled by an earlier activation with another scope must report again.
  const std::string& key = t->scope_key;
  if (g_scope_of_tool[tool] != key) {
    if (call_ok(PyObject_CallMethod(mon, "restart_events", nullptr)) < 0) {
      SavedError saved;
      unregister(mon, tool);
      return -1;
    }
    g_scope_of_tool[tool] = key;
  }
  if (call_ok(PyObject_CallMethod(mon, "set_events", "il", tool, mask)) < 0) {
    SavedError saved;
    unregister(mon, tool);
    return -1;
  }
  g_tool = tool;
  return 0;
}

void reclaim(Tracer*, bool, PyObject*, PyObject*, PyObject*) {
  // sys.monitoring does not use the trace function: sys.gettrace() never returns the tracer.
}

int remove_hooks(Tracer*, bool* displaced) {
  *displaced = false;
  if (g_tool < 0) return 0;
  int tool = g_tool;
  g_tool = -1;
  PyObject* mon = monitoring();
  if (!mon) return 0;
  return unregister(mon, tool);
}

}  // namespace line
}  // namespace lp_module

#endif
