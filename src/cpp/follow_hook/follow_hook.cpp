// follow_hook/follow_hook.cpp: lineprofiler._follow_hook, a followed child's wake-up audit hook.
//
// A process followed by `lineprofiler run` starts no tracer: until code from a file in scope is
// about to run it cannot trace anything, and a tracer installed meanwhile would slow every call
// (3.11) or instrument every code object (3.12+). arm(callback) installs, once per process, a C
// audit hook on the events through which code from a file starts to run:
//   exec              exec()/eval() of a code object: every import, runpy (-m, multiprocessing's
//                     spawn and forkserver main modules), pytest's rewritten modules
//   cpython.run_file  `python script.py` (the main script does not go through exec)
//   code.__new__      a code object built by hand (cloudpickle's functions by value)
// (a code object a C extension runs with PyEval_EvalCode, with no exec, is not seen)
// and calls callback(filename) once per new file name until it returns True (it has started
// the tracer); from then on the hook returns at its first test. Any other audit event costs a
// pointer test and one character comparison. Audit hooks cannot be removed: only followed
// children arm one. This is a module of its own, not part of _core, so that a child that never
// wakes does not pay _core's import (its clock calibration sleeps ~10 ms).
#include <Python.h>

#include <cstring>

#include "module/common/saved_error.h"

namespace {

PyObject* g_callback = nullptr;  // callable(filename) -> bool; nullptr once woken (or unarmed)
PyObject* g_declined = nullptr;  // set of the file names the callback declined
bool g_hook_added = false;
bool g_in_callback = false;  // the callback's own imports do not re-enter it

using lp_module::SavedError;  // keeps the error indicator (none is expected) across the callback

// The file name an event is about (borrowed), or nullptr when it is not one of ours.
PyObject* event_filename(const char* event, PyObject* args) {
  if (!PyTuple_Check(args)) return nullptr;
  Py_ssize_t n = PyTuple_GET_SIZE(args);
  if (std::strcmp(event, "exec") == 0) {
    PyObject* code = n > 0 ? PyTuple_GET_ITEM(args, 0) : nullptr;
    if (!code || !PyCode_Check(code)) return nullptr;
    return reinterpret_cast<PyCodeObject*>(code)->co_filename;
  }
  if (std::strcmp(event, "cpython.run_file") == 0) {
    return n > 0 ? PyTuple_GET_ITEM(args, 0) : nullptr;
  }
  if (std::strcmp(event, "code.__new__") == 0) return n > 1 ? PyTuple_GET_ITEM(args, 1) : nullptr;
  return nullptr;
}

// Calls the callback about filename; true when it answered True. Never leaves an error set.
bool ask(PyObject* filename) {
  g_in_callback = true;
  PyObject* cb = Py_NewRef(g_callback);
  PyObject* r = PyObject_CallOneArg(cb, filename);
  int yes = r ? PyObject_IsTrue(r) : -1;
  Py_XDECREF(r);
  if (yes < 0) PyErr_WriteUnraisable(cb);  // a broken callback never fails the audited operation
  Py_DECREF(cb);
  g_in_callback = false;
  return yes == 1;
}

int wake_hook(const char* event, PyObject* args, void*) {
  // Cheapest tests first: almost every audit event is none of ours.
  if (!g_callback || g_in_callback || (event[0] != 'e' && event[0] != 'c')) return 0;
  PyObject* filename = event_filename(event, args);
  if (!filename || !PyUnicode_Check(filename)) return 0;
  SavedError saved;
  int declined = PySet_Contains(g_declined, filename);
  if (declined == 0) {
    Py_INCREF(filename);
    if (ask(filename)) {
      Py_CLEAR(g_callback);
      PySet_Clear(g_declined);
    } else if (PySet_Add(g_declined, filename) < 0) {
      PyErr_Clear();
    }
    Py_DECREF(filename);
  } else if (declined < 0) {
    PyErr_Clear();
  }
  return 0;
}

PyObject* arm(PyObject*, PyObject* callback) {
  if (callback != Py_None && !PyCallable_Check(callback)) {
    PyErr_SetString(PyExc_TypeError, "arm(callback): callback must be callable(filename) or None");
    return nullptr;
  }
  if (!g_declined) {
    g_declined = PySet_New(nullptr);
    if (!g_declined) return nullptr;
  }
  if (!g_hook_added && callback != Py_None) {
    if (PySys_AddAuditHook(wake_hook, nullptr) < 0) return nullptr;
    g_hook_added = true;
  }
  Py_XSETREF(g_callback, callback == Py_None ? nullptr : Py_NewRef(callback));
  if (PySet_Clear(g_declined) < 0) return nullptr;
  Py_RETURN_NONE;
}

PyObject* armed(PyObject*, PyObject*) {
  return PyBool_FromLong(g_callback != nullptr);
}

PyMethodDef methods[] = {
    {"arm", arm, METH_O,
     "arm(callback): calls callback(filename) -> bool before code from a file not seen before "
     "runs (audit events exec, cpython.run_file, code.__new__), until it returns True; None "
     "disarms. The audit hook stays installed for the life of the process."},
    {"armed", armed, METH_NOARGS, "armed() -> bool: whether a callback is waiting."},
    {nullptr, nullptr, 0, nullptr},
};

PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "_follow_hook",
    "A followed child's wake-up call: an audit hook on code about to run (lineprofiler run).", -1,
    methods};

}  // namespace

PyMODINIT_FUNC PyInit__follow_hook(void) {
  return PyModule_Create(&module_def);
}
