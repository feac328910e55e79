// module/common/saved_error.h: SavedError, which keeps the error indicator across a call into
// Python.
#pragma once

#include <Python.h>

namespace lp_module {

/// Saves the error indicator for its lifetime and restores it at the end (discarding any error
/// raised meanwhile): around calls into Python from a hook, or cleanup after a failure. Header
/// only and Python C API only, so that _follow_hook (no C++ runtime) shares it with _core.
struct SavedError {
#if PY_VERSION_HEX >= 0x030C0000
  PyObject* exc;
  SavedError() : exc(PyErr_GetRaisedException()) {}
  ~SavedError() {
    PyErr_SetRaisedException(exc);
  }
#else
  PyObject *type, *value, *tb;
  SavedError() {
    PyErr_Fetch(&type, &value, &tb);
  }
  ~SavedError() {
    PyErr_Restore(type, value, tb);
  }
#endif
  SavedError(const SavedError&) = delete;
  SavedError& operator=(const SavedError&) = delete;
};

}  // namespace lp_module
