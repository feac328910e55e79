// module/accounting/c_api.h: the C++ API's function table (c_api.cpp), seen from the rest of the
// module.
#pragma once

#include <Python.h>

namespace lp_module {

struct RecorderObject;

/// Tells the C++ API which recorder is installed now (nullptr: none). Called with the GIL held by
/// set_installed() whenever the installed recorder changes.
void c_api_installed(RecorderObject* r);

/// Adds the capsule lineprofiler._core._C_API (the table). Returns 0, or -1 with an exception set.
int add_c_api(PyObject* module);

}  // namespace lp_module
