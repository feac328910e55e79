// module/recorder_type.h: the hand-written CPython types of the phase()/count() hot path.
#pragma once

#include <Python.h>

namespace lp_module {

/// Adds Recorder, the scope types and the module-level phase/count/install functions to module.
/// Returns 0, or -1 with a Python exception set.
int add_recorder_types(PyObject* module);

}  // namespace lp_module
