// module/line/line_tracer.h: the C++ line tracer behind lineprofiler.LineProfiler (registration
// only).
#pragma once

#include <Python.h>

namespace lp_module {

/// Adds the LineTracer type, LINE_TRACER_MECHANISM ("settrace" on 3.11, "sys.monitoring" on
/// 3.12+) and line_tracer_active() to module. Returns 0, or -1 with a Python exception set.
int add_line_tracer(PyObject* module);

}  // namespace lp_module
