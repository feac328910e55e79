// module/common/py_util.h: small CPython helpers shared by the module's files (finalisation, the
// GIL, small ints).
#pragma once

#include <Python.h>

#include <cstdint>

namespace lp_module {

/// The value of an exact int that fits in one internal digit (|v| < 2^30), without a call into
/// CPython; false for anything else (a subclass, a bigger int), which takes the general path.
inline bool small_int_value(PyObject* obj, int64_t* v) {
  if (!PyLong_CheckExact(obj)) return false;
  PyLongObject* l = reinterpret_cast<PyLongObject*>(obj);
#if PY_VERSION_HEX >= 0x030C0000
  if (!PyUnstable_Long_IsCompact(l)) return false;
  *v = int64_t(PyUnstable_Long_CompactValue(l));
#else
  Py_ssize_t size = Py_SIZE(l);
  if (size < -1 || size > 1) return false;
  *v = int64_t(size) * int64_t(l->ob_digit[0]);
#endif
  return true;
}

/// Whether the interpreter is finalising (no Python code may run from other threads then).
inline bool interpreter_finalizing() {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsFinalizing();
#else
  return _Py_IsFinalizing();
#endif
}

/// Runs call() holding the GIL, from any thread (a C++ thread of lp_core): skipped, returning
/// false, while the interpreter finalises. Any Python error call() leaves is cleared: a callback
/// failing on a profiler thread never raises into the user's process.
template <typename F>
bool call_with_gil(F&& call) {
  if (interpreter_finalizing()) return false;
  PyGILState_STATE gil = PyGILState_Ensure();
  call();
  PyErr_Clear();
  PyGILState_Release(gil);
  return true;
}

}  // namespace lp_module
