// module/accounting/installed.cpp: the module-level phase()/count() on the installed recorder, the
// join hook, and add_recorder_types (which readies every accounting type of the module).
#include "module/accounting/c_api.h"
#include "module/accounting/recorder_object.h"
#include "module/accounting/recorder_type.h"

namespace lp_module {

RecorderObject* g_installed = nullptr;

namespace {

// One-shot hook the module-level phase()/count() call when nothing is installed (set only in a
// process whose environment names an active run): it may install a profiler that joins the run.
PyObject* g_join_hook = nullptr;  // strong reference, or nullptr

// Calls and drops the join hook (once); its errors are reported as unraisable, never raised.
LP_COLD void run_join_hook() {
  PyObject* hook = g_join_hook;
  g_join_hook = nullptr;
  PyObject* res = PyObject_CallNoArgs(hook);
  if (!res) PyErr_WriteUnraisable(hook);
  Py_XDECREF(res);
  Py_DECREF(hook);
}

PyObject* installed_phase(PyObject*, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  if (!g_installed && g_join_hook) run_join_hook();
  return phase_on(g_installed, args, nargs, kwnames);
}

PyObject* installed_count(PyObject*, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  if (!g_installed && g_join_hook) run_join_hook();
  return do_count(g_installed, args, nargs, kwnames);
}

// Does nothing: the benchmarks' floor for a module-level C function taking keywords, as
// accounting.count() is (its calling convention, apart from what count() does).
PyObject* bench_noop_kw(PyObject*, PyObject* const*, Py_ssize_t, PyObject*) {
  Py_RETURN_NONE;
}

PyObject* set_join_hook(PyObject*, PyObject* arg) {
  if (arg != Py_None && !PyCallable_Check(arg)) {
    PyErr_SetString(PyExc_TypeError, "set_join_hook() takes a callable or None");
    return nullptr;
  }
  PyObject* next = arg == Py_None ? nullptr : Py_NewRef(arg);
  Py_XSETREF(g_join_hook, next);
  Py_RETURN_NONE;
}

PyObject* installed_current(PyObject*, PyObject*) {
  if (!g_installed) return PyUnicode_FromString("");
  return recorder_current(reinterpret_cast<PyObject*>(g_installed), nullptr);
}

PyObject* set_installed(PyObject*, PyObject* arg) {
  if (arg != Py_None && !PyObject_TypeCheck(arg, &RecorderType)) {
    PyErr_SetString(PyExc_TypeError, "set_installed() takes a Recorder or None");
    return nullptr;
  }
  RecorderObject* next = arg == Py_None ? nullptr : reinterpret_cast<RecorderObject*>(arg);
  Py_XINCREF(next);
  Py_XSETREF(g_installed, next);
  c_api_installed(g_installed);  // C++ scopes (lineprofiler/accounting.hpp) follow
  Py_RETURN_NONE;
}

PyObject* get_installed(PyObject*, PyObject*) {
  PyObject* r = g_installed ? reinterpret_cast<PyObject*>(g_installed) : Py_None;
  Py_INCREF(r);
  return r;
}

PyMethodDef installed_functions[] = {
    {"installed_phase", LP_FASTCALL_KW(installed_phase),
     "phase() on the installed recorder, or a no-op scope when none is installed."},
    {"installed_count", LP_FASTCALL_KW(installed_count),
     "count() on the installed recorder, or a no-op when none is installed."},
    {"installed_current", installed_current, METH_NOARGS,
     "The installed recorder's innermost open phase on this thread (in an asyncio task: in this "
     "task), or ''."},
    {"set_installed", set_installed, METH_O, "set_installed(recorder or None)."},
    {"_bench_noop_kw", LP_FASTCALL_KW(bench_noop_kw),
     "Does nothing: the benchmarks' floor for a module-level C function taking keywords."},
    {"get_installed", get_installed, METH_NOARGS, "The installed recorder, or None."},
    {"set_join_hook", set_join_hook, METH_O,
     "set_join_hook(fn or None): fn() runs once, at the first installed_phase()/installed_count() "
     "with nothing installed (it may install a profiler)."},
    {nullptr, nullptr, 0, nullptr}};

}  // namespace

int add_recorder_types(PyObject* module) {
  if (init_task_stacks() < 0 || init_phase_args() < 0 || init_phase_names(module) < 0 ||
      init_scope_types(module) < 0 || init_recorder_type(module) < 0 ||
      init_front_type(module) < 0 || add_c_api(module) < 0) {
    return -1;
  }
  return PyModule_AddFunctions(module, installed_functions);
}

}  // namespace lp_module
