// module/line/line_tracer.cpp: the LineTracer type: scope decisions, enable/disable, results.
//
// LineTracer(filter, scope_key) traces, while enabled, every code object whose co_filename the
// filter accepts (the filter runs once per file name; the decision is cached per code object).
// A line's time runs from its line event to the next event of the same frame, so it includes the
// calls it makes; a frame's time while suspended (yield/await) is charged to no line.
#include "module/line/line_tracer.h"

#include <algorithm>
#include <cstdio>

#include "module/line/line_tracer_state.h"

namespace lp_module {
namespace line {

Tracer* g_active = nullptr;
uint64_t g_generation = 1;
thread_local ThreadStack* t_stack = nullptr;
thread_local uint64_t t_generation = 0;

LineStat& CodeInfo::grow(int line) {
  if (lines.empty()) base = std::min(line, first_line);
  if (line < base) {
    lines.insert(lines.begin(), size_t(base - line), LineStat{});
    base = line;
  }
  size_t idx = size_t(line - base);
  if (idx >= lines.size()) lines.resize(idx + 8);
  return lines[idx];
}

ThreadStack* new_thread_stack() {
  Tracer* t = g_active;
  t->stacks.push_back(std::make_unique<ThreadStack>());
  t_stack = t->stacks.back().get();
  t_stack->frames.reserve(64);
  t_generation = g_generation;
  return t_stack;
}

namespace {

// The filter is Python code: while it runs, another thread may take the GIL and disable, clear
// or free this tracer. Its own references to the filter and the cache keep them alive meanwhile.
bool filter_accepts(Tracer* t, PyObject* filename) {
  SavedError saved;
  if (!t->file_cache || !t->filter) return false;                       // cleared (tp_clear)
  PyObject* cached = PyDict_GetItemWithError(t->file_cache, filename);  // borrowed
  if (cached) return cached == Py_True;
  PyErr_Clear();
  PyObject* filter = Py_NewRef(t->filter);
  PyObject* file_cache = Py_NewRef(t->file_cache);
  PyObject* r = PyObject_CallOneArg(filter, filename);
  int yes = 0;
  if (!r) {
    PyErr_WriteUnraisable(filter);  // a broken filter traces nothing; never raise into user code
  } else {
    yes = PyObject_IsTrue(r);
    Py_DECREF(r);
    if (yes < 0) {
      PyErr_WriteUnraisable(filter);
      yes = 0;
    }
  }
  if (PyDict_SetItem(file_cache, filename, yes ? Py_True : Py_False) < 0) PyErr_Clear();
  Py_DECREF(file_cache);
  Py_DECREF(filter);
  return yes != 0;
}

}  // namespace

CodeInfo g_stale_info;

CodeInfo* decide(Tracer* t, PyObject* code) {
  // The filter may let another thread disable this activation (or drop the last reference to the
  // tracer: its owner is held until the decision is stored). Then the event is not this
  // activation's: the caller gets g_stale_info and ignores it (its thread stack may be gone).
  uint64_t generation = g_generation;
  PyObject* owner = Py_NewRef(t->owner);
  uint64_t start = lp::wall_ticks();
  auto info = std::make_unique<CodeInfo>();
  info->code = Py_NewRef(code);
  if (PyCode_Check(code)) {
    auto* co = reinterpret_cast<PyCodeObject*>(code);
    info->first_line = co->co_firstlineno;
    info->base = co->co_firstlineno;
    info->generator_like = (co->co_flags & (CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR)) != 0;
    info->traced =
        co->co_filename && PyUnicode_Check(co->co_filename) && filter_accepts(t, co->co_filename);
  }
  CodeInfo* raw = info.get();
  t->infos.push_back(std::move(info));
  t->codes.emplace(code, raw);
  // The filter's time (file system calls, once per file) is the profiler's, not the user's:
  // shift this thread's open intervals past it.
  uint64_t spent = lp::wall_ticks() - start;
  if (t_generation == g_generation && t_stack) {
    for (Frame& f : t_stack->frames) f.t0 += spent;
  }
  bool stale = generation != g_generation;  // enabled or disabled meanwhile (any tracer)
  Py_DECREF(owner);  // may free t when stale: nothing of t is used after this
  return stale ? &g_stale_info : raw;
}

namespace {

struct LineTracerObject {
  PyObject_HEAD
  Tracer* t;
  EventCounts totals;  // callbacks counted over all activations since the last clear()
  PyObject* weakreflist;
};

PyObject* tracer_new(PyTypeObject* type, PyObject* args, PyObject* kwds) {
  static const char* kwlist[] = {"filter", "scope_key", nullptr};
  PyObject* filter = nullptr;
  const char* scope_key = "";
  if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|s:LineTracer", const_cast<char**>(kwlist),
                                   &filter, &scope_key)) {
    return nullptr;
  }
  if (!PyCallable_Check(filter)) {
    PyErr_SetString(PyExc_TypeError, "LineTracer(filter): filter must be callable(filename)");
    return nullptr;
  }
  auto* self = reinterpret_cast<LineTracerObject*>(type->tp_alloc(type, 0));
  if (!self) return nullptr;
  self->t = new Tracer();
  self->t->owner = reinterpret_cast<PyObject*>(self);
  self->t->filter = Py_NewRef(filter);
  self->t->scope_key = scope_key;
  self->t->file_cache = PyDict_New();
  self->totals = EventCounts{};
  if (!self->t->file_cache) {
    Py_DECREF(self);
    return nullptr;
  }
  return reinterpret_cast<PyObject*>(self);
}

void release_codes(Tracer* t) {
  for (auto& info : t->infos) Py_CLEAR(info->code);
  t->infos.clear();
  t->codes.clear();
}

int tracer_traverse(LineTracerObject* self, visitproc visit, void* arg) {
  if (self->t) {
    Py_VISIT(self->t->filter);
    Py_VISIT(self->t->file_cache);
  }
  return 0;
}

int tracer_clear_refs(LineTracerObject* self) {
  if (self->t) {
    Py_CLEAR(self->t->filter);
    Py_CLEAR(self->t->file_cache);
  }
  return 0;
}

// Ends the activation: removes the hooks and closes every open interval at now. The interval of
// the calling thread's innermost frame is dropped with its last hit when it is (ignore_code,
// ignore_line): that is the `with` line whose exit is running the profiler's own __exit__.
int deactivate(LineTracerObject* self, PyObject* ignore_code, int ignore_line, bool* displaced) {
  Tracer* t = self->t;
  uint64_t now = lp::wall_ticks();
  int rc = remove_hooks(t, displaced);
  ThreadStack* mine = t_generation == g_generation ? t_stack : nullptr;
  for (auto& ts : t->stacks) {
    for (size_t i = ts->frames.size(); i-- > 0;) {
      Frame& f = ts->frames[i];
      bool top_of_caller = ts.get() == mine && i + 1 == ts->frames.size();
      if (top_of_caller && ignore_code && f.info->code == ignore_code && f.line == ignore_line) {
        LineStat& s = f.info->stat(f.line);
        if (s.hits > 0) s.hits--;
        continue;
      }
      charge(ts.get(), f, now);
    }
    add_counts(self->totals, ts->events);
  }
  t->stacks.clear();
  t->enabled_ticks += now - t->enabled_at;
  t->only_thread = nullptr;
  t->only_context = nullptr;
  g_active = nullptr;
  g_generation++;
  return rc;
}

void tracer_dealloc(LineTracerObject* self) {
  PyObject_GC_UnTrack(self);
  if (self->weakreflist) PyObject_ClearWeakRefs(reinterpret_cast<PyObject*>(self));
  if (self->t) {
    if (g_active == self->t) {
      bool displaced = false;
      if (deactivate(self, nullptr, -1, &displaced) < 0) PyErr_WriteUnraisable(nullptr);
    }
    tracer_clear_refs(self);
    release_codes(self->t);
    delete self->t;
    self->t = nullptr;
  }
  Py_TYPE(self)->tp_free(self);
}

PyObject* tracer_enable(LineTracerObject* self, PyObject* args, PyObject* kwds) {
  static const char* kwlist[] = {"thread_only", "task_only", nullptr};
  int thread_only = 0, task_only = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kwds, "|pp:enable", const_cast<char**>(kwlist),
                                   &thread_only, &task_only)) {
    return nullptr;
  }
  Tracer* t = self->t;
#ifdef Py_GIL_DISABLED
  PyErr_SetString(PyExc_RuntimeError,
                  "LineProfiler needs the GIL: free-threaded Python builds are not supported");
  return nullptr;
#endif
  if (g_active == t) {
    PyErr_SetString(PyExc_RuntimeError,
                    "this LineProfiler is already active: it cannot be entered twice (nesting "
                    "LineProfilers is not supported)");
    return nullptr;
  }
  if (g_active) {
    PyErr_SetString(PyExc_RuntimeError,
                    "another LineProfiler is already active: only one can trace at a time "
                    "(nesting LineProfilers is not supported)");
    return nullptr;
  }
  if (!t->filter || !t->file_cache) {
    PyErr_SetString(PyExc_RuntimeError, "LineTracer was cleared");
    return nullptr;
  }
  PyObject* why = nullptr;
  int conflict = find_conflict(&why);
  if (conflict < 0) return nullptr;
  if (conflict > 0) {
    PyErr_SetObject(PyExc_RuntimeError, why);
    Py_DECREF(why);
    return nullptr;
  }
  g_active = t;
  g_generation++;
  t->only_thread = thread_only || task_only ? PyThreadState_Get() : nullptr;
  t->only_context = task_only ? PyThreadState_Get()->context : nullptr;
  t->stacks.clear();
  t->enabled_at = lp::wall_ticks();
  if (install_hooks(t) < 0) {
    g_active = nullptr;
    g_generation++;
    return nullptr;
  }
  Py_RETURN_NONE;
}

PyObject* tracer_disable(LineTracerObject* self, PyObject* args, PyObject* kwds) {
  static const char* kwlist[] = {"ignore_code", "ignore_line", nullptr};
  PyObject* ignore_code = Py_None;
  int ignore_line = -1;
  if (!PyArg_ParseTupleAndKeywords(args, kwds, "|Oi:disable", const_cast<char**>(kwlist),
                                   &ignore_code, &ignore_line)) {
    return nullptr;
  }
  if (g_active != self->t) Py_RETURN_FALSE;
  bool displaced = false;
  if (deactivate(self, ignore_code == Py_None ? nullptr : ignore_code, ignore_line, &displaced) <
      0) {
    return nullptr;
  }
  if (displaced) Py_RETURN_TRUE;
  Py_RETURN_FALSE;
}

PyObject* tracer_clear(LineTracerObject* self, PyObject*) {
  Tracer* t = self->t;
  uint64_t now = lp::wall_ticks();
  for (auto& info : t->infos) info->lines.clear();
  for (auto& ts : t->stacks) {
    for (Frame& f : ts->frames) {
      f.t0 = now;
      f.ev0 = ts->events;
    }
  }
  t->enabled_ticks = 0;
  t->displacements = 0;
  t->threads_skipped = 0;
  if (g_active == t) t->enabled_at = now;
  // Counters of the running activation are added later: start from minus their current values
  // (unsigned arithmetic wraps back to the delta).
  self->totals = EventCounts{};
  for (auto& ts : t->stacks) {
    self->totals.lines -= ts->events.lines;
    self->totals.calls -= ts->events.calls;
    self->totals.foreign -= ts->events.foreign;
  }
  Py_RETURN_NONE;
}

// Appends item (a new reference; nullptr when building it failed) to list, and releases it.
bool append_new(PyObject* list, PyObject* item) {
  if (!item) return false;
  int rc = PyList_Append(list, item);
  Py_DECREF(item);
  return rc == 0;
}

// The rows of info's recorded lines (see results()): a new list, or nullptr with an exception set.
PyObject* line_rows(const CodeInfo& info) {
  PyObject* rows = PyList_New(0);
  if (!rows) return nullptr;
  for (size_t i = 0; i < info.lines.size(); ++i) {
    const LineStat& s = info.lines[i];
    if (s.hits == 0 && s.ticks == 0) continue;
    using ull = unsigned long long;
    PyObject* row = Py_BuildValue("(iKKKKKKKKK)", info.base + int(i), ull(s.hits),
                                  ull(lp::ticks_to_ns(s.ticks)), ull(s.nested.lines),
                                  ull(s.nested.calls), ull(s.nested.foreign),
                                  ull(lp::ticks_to_ns(s.child_ticks)), ull(s.child_nested.lines),
                                  ull(s.child_nested.calls), ull(s.child_nested.foreign));
    if (!append_new(rows, row)) {
      Py_DECREF(rows);
      return nullptr;
    }
  }
  return rows;
}

PyObject* tracer_results(LineTracerObject* self, PyObject*) {
  PyObject* out = PyList_New(0);
  if (!out) return nullptr;
  for (auto& info : self->t->infos) {
    if (!info->traced || !info->code) continue;
    PyObject* rows = line_rows(*info);
    bool ok = rows && (PyList_GET_SIZE(rows) == 0 ||
                       append_new(out, Py_BuildValue("(OO)", info->code, rows)));
    Py_XDECREF(rows);
    if (!ok) {
      Py_DECREF(out);
      return nullptr;
    }
  }
  return out;
}

// The tracer object called as a Python trace function (see reclaim()): returns None.
PyObject* tracer_call(LineTracerObject* self, PyObject* args, PyObject* kwds) {
  PyObject *frame = nullptr, *event = nullptr, *arg = nullptr;
  if (kwds || !PyArg_UnpackTuple(args, "LineTracer", 3, 3, &frame, &event, &arg)) {
    PyErr_Clear();  // never raise into the code being traced
    Py_RETURN_NONE;
  }
  reclaim(self->t, g_active == self->t, frame, event, arg);
  Py_RETURN_NONE;
}

PyObject* tracer_get_gaps(LineTracerObject* self, void*) {
  return Py_BuildValue("(KK)", (unsigned long long)self->t->displacements,
                       (unsigned long long)self->t->threads_skipped);
}

PyObject* tracer_add_code(LineTracerObject* self, PyObject* code) {
  if (!PyCode_Check(code)) {
    PyErr_SetString(PyExc_TypeError, "add_code(code): a code object is required");
    return nullptr;
  }
  Tracer* t = self->t;
  CodeInfo* info = lookup(t, code);
  if (is_stale(info)) info = lookup(t, code);  // stored all the same: found this time
  if (!info->traced) {
    info->traced = true;
    // 3.12+: a new scope key makes the next enable() restart the locations an earlier activation
    // disabled for this code.
    char buf[32];
    snprintf(buf, sizeof buf, "|code:%p", static_cast<void*>(code));
    t->scope_key += buf;
  }
  Py_RETURN_NONE;
}

PyObject* tracer_get_active(LineTracerObject* self, void*) {
  return PyBool_FromLong(g_active == self->t);
}

PyObject* tracer_get_enabled_ns(LineTracerObject* self, void*) {
  Tracer* t = self->t;
  uint64_t ticks = t->enabled_ticks;
  if (g_active == t) ticks += lp::wall_ticks() - t->enabled_at;
  return PyLong_FromUnsignedLongLong(lp::ticks_to_ns(ticks));
}

PyObject* tracer_get_events(LineTracerObject* self, void*) {
  EventCounts c = self->totals;
  if (g_active == self->t) {
    for (auto& ts : self->t->stacks) add_counts(c, ts->events);
  }
  return Py_BuildValue("(KKK)", (unsigned long long)c.lines, (unsigned long long)c.calls,
                       (unsigned long long)c.foreign);
}

PyObject* tracer_get_scope_key(LineTracerObject* self, void*) {
  return PyUnicode_FromStringAndSize(self->t->scope_key.data(),
                                     Py_ssize_t(self->t->scope_key.size()));
}

PyMethodDef tracer_methods[] = {
    {"enable", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(tracer_enable)),
     METH_VARARGS | METH_KEYWORDS,
     "enable(thread_only=False, task_only=False): starts tracing every thread, or only the "
     "calling one (and with task_only, only while its current contextvars context, an asyncio "
     "task's, is current). Raises RuntimeError when another LineTracer is active or another "
     "trace function is installed."},
    {"disable", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(tracer_disable)),
     METH_VARARGS | METH_KEYWORDS,
     "disable(ignore_code=None, ignore_line=-1) -> bool: stops tracing (no-op when not active). "
     "Returns True when another tracer had displaced this one on the calling thread."},
    {"add_code", reinterpret_cast<PyCFunction>(tracer_add_code), METH_O,
     "add_code(code): traces this code object whatever its file (kept across clear())."},
    {"clear", reinterpret_cast<PyCFunction>(tracer_clear), METH_NOARGS,
     "Forgets all hits and times (decisions about code objects are kept)."},
    {"results", reinterpret_cast<PyCFunction>(tracer_results), METH_NOARGS,
     "[(code, [(line, hits, wall_ns, nested_line_events, nested_calls, nested_foreign_calls, "
     "callee_wall_ns, callee_line_events, callee_calls, callee_foreign_calls)])] for every traced "
     "code object with a recorded line; callee_*: the part spent in traced frames it called."},
    {nullptr, nullptr, 0, nullptr},
};

PyGetSetDef tracer_getset[] = {
    {"active", reinterpret_cast<getter>(tracer_get_active), nullptr, "True while tracing.",
     nullptr},
    {"enabled_ns", reinterpret_cast<getter>(tracer_get_enabled_ns), nullptr,
     "Wall time spent enabled since the last clear(), in ns.", nullptr},
    {"events", reinterpret_cast<getter>(tracer_get_events), nullptr,
     "(line_events, traced_calls, foreign_calls) counted since the last clear().", nullptr},
    {"gaps", reinterpret_cast<getter>(tracer_get_gaps), nullptr,
     "(displacements, threads_skipped) since the last clear(): times another trace function "
     "displaced this one and gave it back, threads left untraced at enable (3.11; else 0).",
     nullptr},
    {"scope_key", reinterpret_cast<getter>(tracer_get_scope_key), nullptr,
     "The scope name given at construction.", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr},
};

PyTypeObject LineTracerType = {PyVarObject_HEAD_INIT(nullptr, 0)};

PyObject* line_tracer_active(PyObject*, PyObject*) {
  if (!g_active) Py_RETURN_NONE;
  return Py_NewRef(g_active->owner);
}

PyMethodDef module_defs[] = {
    {"line_tracer_active", line_tracer_active, METH_NOARGS, "The active LineTracer, or None."},
    {nullptr, nullptr, 0, nullptr},
};

}  // namespace
}  // namespace line

int add_line_tracer(PyObject* module) {
  using namespace line;
  LineTracerType.tp_name = "lineprofiler._core.LineTracer";
  LineTracerType.tp_basicsize = sizeof(LineTracerObject);
  LineTracerType.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC;
  LineTracerType.tp_doc =
      "LineTracer(filter, scope_key=''): the C++ line tracer; filter(filename) -> bool.";
  LineTracerType.tp_new = tracer_new;
  LineTracerType.tp_call = reinterpret_cast<ternaryfunc>(tracer_call);
  LineTracerType.tp_dealloc = reinterpret_cast<destructor>(tracer_dealloc);
  LineTracerType.tp_traverse = reinterpret_cast<traverseproc>(tracer_traverse);
  LineTracerType.tp_clear = reinterpret_cast<inquiry>(tracer_clear_refs);
  LineTracerType.tp_methods = tracer_methods;
  LineTracerType.tp_getset = tracer_getset;
  LineTracerType.tp_weaklistoffset = offsetof(LineTracerObject, weakreflist);
  if (PyType_Ready(&LineTracerType) < 0) return -1;
  if (PyModule_AddObjectRef(module, "LineTracer", reinterpret_cast<PyObject*>(&LineTracerType)) <
      0) {
    return -1;
  }
  if (PyModule_AddStringConstant(module, "LINE_TRACER_MECHANISM", mechanism_name()) < 0) return -1;
  PyMethodDef* defs[] = {&module_defs[0], &g_noop_trace_def, &g_call_unprofiled_def,
                         g_thread_hook_def.ml_name ? &g_thread_hook_def : nullptr};
  for (PyMethodDef* def : defs) {
    if (!def) continue;
    PyObject* f = PyCFunction_New(def, nullptr);
    if (!f || PyModule_AddObject(module, def->ml_name, f) < 0) {
      Py_XDECREF(f);
      return -1;
    }
  }
  return 0;
}

}  // namespace lp_module
