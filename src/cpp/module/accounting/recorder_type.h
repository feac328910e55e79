// module/accounting/recorder_type.h: add_recorder_types, which adds the accounting types to _core.
#pragma once

#include <Python.h>

namespace lp_module {

/// Adds Recorder, the scope types and the module-level phase/count/install functions to module.
/// Returns 0, or -1 with a Python exception set.
int add_recorder_types(PyObject* module);

}  // namespace lp_module
