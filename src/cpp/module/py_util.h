// module/py_util.h: small CPython helpers shared by the module's files (finalisation, the GIL).
#pragma once

#include <Python.h>

namespace lp_module {

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
