// module/line/line_tracer_hooks.cpp: what both hook mechanisms share (the no-op floor, conflicts).
//
// The hooks themselves: line_tracer_settrace.cpp (3.11), line_tracer_monitoring.cpp (3.12+).
#include "module/line/line_tracer_state.h"

namespace lp_module {
namespace line {

namespace {
int noop_trace(PyObject*, PyFrameObject*, int, PyObject*) {
  return 0;
}

PyObject* noop_trace_switch(PyObject*, PyObject* on) {
  int yes = PyObject_IsTrue(on);
  if (yes < 0) return nullptr;
  PyEval_SetTrace(yes ? noop_trace : nullptr, nullptr);
  Py_RETURN_NONE;
}
}  // namespace

namespace {
PyObject* call_unprofiled(PyObject*, PyObject* fn) {
  PyThreadState* ts = PyThreadState_Get();
  Py_tracefunc func = ts->c_profilefunc;
  PyObject* obj = Py_XNewRef(ts->c_profileobj);
  if (func) PyEval_SetProfile(nullptr, nullptr);
  PyObject* result = PyObject_CallNoArgs(fn);
  if (func) {
    SavedError saved;  // keep fn's error, if any
    PyEval_SetProfile(func, obj);
  }
  Py_XDECREF(obj);
  return result;
}
}  // namespace

PyMethodDef g_call_unprofiled_def = {
    "_call_unprofiled", call_unprofiled, METH_O,
    "_call_unprofiled(fn): fn() with the calling thread's profile function (PyEval_SetProfile: "
    "cProfile, ...) removed for the call and put back after it."};

PyMethodDef g_noop_trace_def = {
    "_noop_trace", noop_trace_switch, METH_O,
    "_noop_trace(on): installs/removes a C trace function that does nothing (benchmark floor)."};

int settrace_conflict(PyObject** why) {
  PyThreadState* ts = PyThreadState_Get();
  if (ts->c_tracefunc == nullptr) return 0;
  *why = PyUnicode_FromFormat(
      "a trace function is already installed (sys.gettrace() = %R): LineProfiler cannot run "
      "under another tracer (a debugger, coverage, line_profiler, a profiler's backend window); "
      "remove it first",
      ts->c_traceobj ? ts->c_traceobj : Py_None);
  return *why ? 1 : -1;
}

}  // namespace line
}  // namespace lp_module
