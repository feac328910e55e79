// module/accounting/ready_awaitable.h: an awaitable that is already done, for `async with` on C
// scopes.
#pragma once

#include <Python.h>

namespace lp_module {

/// A new awaitable whose await returns value at once, without suspending. Steals the reference
/// to value (nullptr: passes the error on, returning nullptr).
PyObject* ready_awaitable(PyObject* value);

/// Readies the awaitable type. Returns 0, or -1 with a Python exception set.
int init_ready_awaitable();

}  // namespace lp_module
