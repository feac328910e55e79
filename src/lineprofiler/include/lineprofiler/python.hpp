// lineprofiler/python.hpp: import_api(), which connects a Python extension to lineprofiler._core.
//
//   PyMODINIT_FUNC PyInit_mcts(void) {
//     if (lineprofiler::import_api() < 0) PyErr_Clear();  // optional: scopes stay no-ops
//     ...
//   }
//
// Include <Python.h> (or your binding library) first. import_api() imports lineprofiler._core,
// takes its function table from the capsule lineprofiler._core._C_API (as NumPy's import_array()
// does) and attaches this extension to it: from then on the scopes of <lineprofiler/accounting.hpp>
// record into the profiler installed in the process (Profiler(..., install=True), or the one a
// worker joins a run with) and do nothing while none is. Nothing of lineprofiler is linked.
#pragma once

#include <Python.h>

#include "lineprofiler/accounting.hpp"

#define LP_API_CAPSULE_NAME "lineprofiler._core._C_API"

namespace lineprofiler {

/// Connects this extension to lineprofiler._core. Call with the GIL held, once (in the module's
/// init function; calling it again is harmless). Returns 0, or -1 with a Python exception set:
/// ImportError when lineprofiler is not installed, RuntimeError when its table has another ABI
/// version than this header. On -1 the scopes stay no-ops; clear the error to carry on without
/// profiling.
inline int import_api() {
  PyObject* module = PyImport_ImportModule("lineprofiler._core");
  if (!module) return -1;
  PyObject* capsule = PyObject_GetAttrString(module, "_C_API");
  Py_DECREF(module);
  if (!capsule) return -1;
  const lp_api* table =
      static_cast<const lp_api*>(PyCapsule_GetPointer(capsule, LP_API_CAPSULE_NAME));
  Py_DECREF(capsule);
  if (!table) return -1;
  if (table->abi_version != LP_API_ABI_VERSION || table->size < LP_API_V1_SIZE) {
    PyErr_Format(PyExc_RuntimeError,
                 "lineprofiler._core's C API has ABI version %u (table of %u bytes); this "
                 "extension was built against ABI version %u: rebuild it against the installed "
                 "lineprofiler (lineprofiler.get_include())",
                 unsigned(table->abi_version), unsigned(table->size), LP_API_ABI_VERSION);
    return -1;
  }
  table->attach(detail::api_slot());
  return 0;
}

}  // namespace lineprofiler
