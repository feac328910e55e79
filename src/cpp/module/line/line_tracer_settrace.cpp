// module/line/line_tracer_settrace.cpp: the 3.11 hooks (one C trace function, PyEval_SetTrace).
//
// Frames of code outside the project get f_trace_lines = 0 at their call event, so they cost only
// call/return; their return event (or yield) gives it back, and at disable so does every such frame
// still on a thread's stack, so a tracer started later sees their lines. (Remembering suspended
// generators instead, by weak reference, is unsafe: a generator closed by its deallocation resumes
// after its weak references were cleared, and one made then outlives it.) Every thread is
// traced: those running at enable through _PyEval_SetTrace, those started in the block through
// threading.settrace (g_thread_hook_def). Under enable(thread_only=True) (a phase's lines) only the
// enabling thread gets the function, and with task_only its other contexts' events are ignored. At
// disable the function is removed from every thread.
#include <algorithm>
#include <vector>

#include "module/line/line_tracer_state.h"

#if !LP_LINE_MONITORING

namespace lp_module {
namespace line {

namespace {

// The layout of PyFrameObject in 3.11 (Include/internal/pycore_frame.h), checked at install.
struct FrameMirror {
  PyObject_HEAD
  PyFrameObject* f_back;
  void* f_frame;
  PyObject* f_trace;
  int f_lineno;
  char f_trace_lines;
  char f_trace_opcodes;
  char f_fast_as_locals;
};
int g_mirror_state = -1;  // -1 unchecked, 0 layout differs (use setattr), 1 layout verified

bool check_mirror() {
  PyObject* sys_getframe = PySys_GetObject("_getframe");  // borrowed
  if (!sys_getframe) return false;
  PyObject* frame = PyObject_CallNoArgs(sys_getframe);
  if (!frame) {
    PyErr_Clear();
    return false;
  }
  auto* m = reinterpret_cast<FrameMirror*>(frame);
  bool ok = true;
  for (PyObject* v : {Py_False, Py_True, Py_False}) {
    if (PyObject_SetAttrString(frame, "f_trace_lines", v) < 0) {
      PyErr_Clear();
      ok = false;
      break;
    }
    if (m->f_trace_lines != (v == Py_True ? 1 : 0)) ok = false;
  }
  PyObject_SetAttrString(frame, "f_trace_lines", Py_True);
  PyErr_Clear();
  Py_DECREF(frame);
  return ok;
}

// Sets frame.f_trace_lines (errors are cleared: a frame that refuses keeps its value).
void set_trace_lines(PyFrameObject* frame, bool on) {
  if (g_mirror_state == 1) {
    reinterpret_cast<FrameMirror*>(frame)->f_trace_lines = on ? 1 : 0;
  } else if (PyObject_SetAttrString(reinterpret_cast<PyObject*>(frame), "f_trace_lines",
                                    on ? Py_True : Py_False) < 0) {
    PyErr_Clear();
  }
}

bool trace_lines_on(PyFrameObject* frame) {
  if (g_mirror_state == 1) return reinterpret_cast<FrameMirror*>(frame)->f_trace_lines != 0;
  PyObject* v = PyObject_GetAttrString(reinterpret_cast<PyObject*>(frame), "f_trace_lines");
  int on = v ? PyObject_IsTrue(v) : 1;
  Py_XDECREF(v);
  if (on < 0) PyErr_Clear();
  return on != 0;
}

// Turns line events off in a frame of out-of-project code (its return event, or a yield, turns
// them back on: a suspended generator never keeps them off, so nothing has to be remembered).
void lines_off(PyFrameObject* frame) {
  set_trace_lines(frame, false);
}

// Gives f_trace_lines back to every frame of out-of-project code on any thread's stack (the only
// frames that can have it off: see lines_off()).
void restore_trace_lines(Tracer* t) {
  SavedError saved;
  for (PyThreadState* ts = PyInterpreterState_ThreadHead(PyInterpreterState_Get()); ts;
       ts = PyThreadState_Next(ts)) {
    PyFrameObject* frame = PyThreadState_GetFrame(ts);  // new reference, or nullptr
    while (frame) {
      PyCodeObject* code = PyFrame_GetCode(frame);  // new reference
      auto it = t->codes.find(reinterpret_cast<PyObject*>(code));
      Py_DECREF(code);
      if (it != t->codes.end() && !it->second->traced) set_trace_lines(frame, true);
      PyFrameObject* back = PyFrame_GetBack(frame);  // new reference, or nullptr
      Py_DECREF(frame);
      frame = back;
    }
  }
}

inline PyObject* frame_code(PyFrameObject* frame) {
  PyCodeObject* code = PyFrame_GetCode(frame);  // new reference; the frame keeps it alive
  Py_DECREF(code);
  return reinterpret_cast<PyObject*>(code);
}

int lazy_line(Tracer* t, ThreadStack* ts, PyFrameObject* frame) {
  // A line in a frame we did not see start: one that was running when tracing began.
  CodeInfo* info = lookup(t, frame_code(frame));
  if (is_stale(info)) return 0;
  if (!info->traced) {
    ts->events.lines--;
    lines_off(frame);
    return 0;
  }
  uint64_t now = lp::wall_ticks();  // after lookup: a first decision may have been slow
  Frame& f = push_frame(ts, frame, info, -1, now);
  line_event(ts, f, PyFrame_GetLineNumber(frame), now);
  return 0;
}

int legacy_trace(PyObject*, PyFrameObject* frame, int what, PyObject*) {
  Tracer* t = g_active;
  if (!t || foreign_thread(t)) return 0;
  switch (what) {
    case PyTrace_LINE: {
      uint64_t now = lp::wall_ticks();
      ThreadStack* ts = thread_stack();
      ts->events.lines++;
      if (!ts->frames.empty() && ts->frames.back().key == frame) {
        line_event(ts, ts->frames.back(), PyFrame_GetLineNumber(frame), now);
        return 0;
      }
      return lazy_line(t, ts, frame);
    }
    case PyTrace_CALL: {
      ThreadStack* ts = thread_stack();
      CodeInfo* info = lookup(t, frame_code(frame));
      if (is_stale(info)) return 0;
      uint64_t now = lp::wall_ticks();
      if (!info->traced) {
        ts->events.foreign++;
        lines_off(frame);
        return 0;
      }
      ts->events.calls++;
      int line = -1;
      if (info->generator_like) {  // a resumption continues the line that yielded
        int l = PyFrame_GetLineNumber(frame);
        if (l != info->first_line) line = l;
      }
      push_frame(ts, frame, info, line, now);
      return 0;
    }
    case PyTrace_RETURN: {  // also on exit by exception, and on yield
      ThreadStack* ts = thread_stack();
      if (!ts->frames.empty() && ts->frames.back().key == frame) {
        charge(ts, ts->frames.back(), lp::wall_ticks());
        ts->frames.pop_back();
      } else if (!trace_lines_on(frame)) {
        // An out-of-project frame leaves (a generator may resume after the block): lines back on.
        set_trace_lines(frame, true);
      }
      return 0;
    }
    default:
      return 0;
  }
}

PyObject* thread_hook(PyObject*, PyObject* args) {
  // Installed with threading.settrace: runs at the first call event of a new thread, hands the
  // thread to the C trace function and feeds it that call event.
  PyObject* frame = nullptr;
  PyObject* event = nullptr;
  PyObject* arg = nullptr;
  if (!PyArg_UnpackTuple(args, "_thread_hook", 3, 3, &frame, &event, &arg)) return nullptr;
  Tracer* t = g_active;
  if (t && PyFrame_Check(frame)) {
    PyEval_SetTrace(legacy_trace, t->owner);
    if (PyUnicode_Check(event) && PyUnicode_CompareWithASCIIString(event, "call") == 0) {
      legacy_trace(t->owner, reinterpret_cast<PyFrameObject*>(frame), PyTrace_CALL, arg);
    }
  } else {
    PyEval_SetTrace(nullptr, nullptr);
  }
  Py_RETURN_NONE;
}

}  // namespace

PyMethodDef g_thread_hook_def = {"_thread_hook", thread_hook, METH_VARARGS,
                                 "threading.settrace hook: traces a thread started in the block."};

const char* mechanism_name() {
  return "settrace";
}

int find_conflict(PyObject** why) {
  return settrace_conflict(why);
}

int install_hooks(Tracer* t) {
  if (g_mirror_state < 0) g_mirror_state = check_mirror() ? 1 : 0;
  PyThreadState* self = PyThreadState_Get();
  PyEval_SetTrace(legacy_trace, t->owner);
  if (t->only_thread) return 0;  // enable(thread_only=True): this thread alone
  // Threads already running: _PyEval_SetTrace on another thread's state is what 3.12's
  // PyEval_SetTraceAllThreads does (the GIL is held; the thread picks it up at its next event).
  // A thread with a trace function of its own is left alone and counted.
  for (PyThreadState* ts = PyInterpreterState_ThreadHead(self->interp); ts;
       ts = PyThreadState_Next(ts)) {
    if (ts == self) continue;
    if (ts->c_tracefunc != nullptr) {
      t->threads_skipped++;
      continue;
    }
    if (_PyEval_SetTrace(ts, legacy_trace, t->owner) < 0) {  // an audit hook refused
      PyErr_Clear();
      t->threads_skipped++;
    }
  }
  return 0;
}

int remove_hooks(Tracer* t, bool* displaced) {
  PyThreadState* self = PyThreadState_Get();
  *displaced = self->c_tracefunc != legacy_trace;
  PyObject *type = nullptr, *value = nullptr, *tb = nullptr;  // the first failure
  for (PyThreadState* ts = PyInterpreterState_ThreadHead(self->interp); ts;
       ts = PyThreadState_Next(ts)) {
    if (ts->c_tracefunc != legacy_trace) continue;
    if (_PyEval_SetTrace(ts, nullptr, nullptr) < 0) {  // an audit hook refused
      if (type) {
        PyErr_Clear();
      } else {
        PyErr_Fetch(&type, &value, &tb);
      }
    }
  }
  restore_trace_lines(t);
  if (!type) return 0;
  PyErr_Restore(type, value, tb);
  return -1;
}

void reclaim(Tracer* t, bool active, PyObject* frame, PyObject* event, PyObject* arg) {
  SavedError saved;
  if (!active) {  // a stale copy restored after the block: leave no tracer behind
    PyEval_SetTrace(nullptr, nullptr);
    return;
  }
  PyEval_SetTrace(legacy_trace, t->owner);
  t->displacements++;
  // Frames of our stack that returned while we were displaced are gone: drop them uncharged.
  ThreadStack* ts = thread_stack();
  std::vector<const void*> live;
  PyFrameObject* f = PyEval_GetFrame();  // borrowed
  Py_XINCREF(f);
  while (f) {
    live.push_back(f);
    PyFrameObject* back = PyFrame_GetBack(f);  // new reference, or nullptr
    Py_DECREF(f);
    f = back;
  }
  size_t kept = 0;
  for (const Frame& fr : ts->frames) {
    if (std::find(live.begin(), live.end(), fr.key) != live.end()) ts->frames[kept++] = fr;
  }
  ts->frames.resize(kept);
  if (!PyFrame_Check(frame) || !PyUnicode_Check(event)) return;
  int what = -1;
  if (PyUnicode_CompareWithASCIIString(event, "call") == 0) {
    what = PyTrace_CALL;
  } else if (PyUnicode_CompareWithASCIIString(event, "line") == 0) {
    what = PyTrace_LINE;
  } else if (PyUnicode_CompareWithASCIIString(event, "return") == 0) {
    what = PyTrace_RETURN;
  }
  if (what >= 0) legacy_trace(t->owner, reinterpret_cast<PyFrameObject*>(frame), what, arg);
  PyErr_Clear();
}

}  // namespace line
}  // namespace lp_module

#endif
