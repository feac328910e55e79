// module/accounting/cached_method.h: __enter__/__exit__ descriptors whose bound methods are reused,
// not made.
//
// A `with` statement on CPython 3.11-3.13 looks __enter__ and __exit__ up on the manager's type
// and binds each (`_PyObject_LookupSpecial`): for an ordinary C method that allocates a GC-tracked
// bound-method object, and frees it again, twice per `with` — the largest single cost of a `with`
// on a C context manager. A cached method's descriptor instead hands out a bound method parked in
// a slot of the instance: binding takes it from the slot (or allocates one the first time) and
// holds a strong reference to the instance, exactly like a bound method; when the last reference
// to it goes, it parks itself back in the slot and releases the instance. A parked bound method is
// dead memory (a free list of one), so there is no reference cycle.
#pragma once

#include <Python.h>

namespace lp_module {

/// The C function behind a cached method: self, then the call's positional arguments.
/// Returns a new reference, or nullptr with an exception set.
using CachedMethodFn = PyObject* (*)(PyObject* self, PyObject* const* args, Py_ssize_t nargs);

/// Adds a method `name` to the ready static type `type`: fn(self, args, nargs), called through a
/// reused bound method (see above). slot_offset is the offset in each instance of a PyObject*
/// that holds the parked bound method; it must be nullptr in a new instance, and the instance's
/// dealloc must call release_parked_method() on it (or keep it, for an instance kept on a free
/// list). nargs_required >= 0 refuses calls with another number of arguments; -1 takes any.
/// Calling the descriptor unbound, `Type.name(instance, *args)`, works too (contextlib.ExitStack
/// does that). Returns 0, or -1 with an exception set.
int add_cached_method(PyTypeObject* type, const char* name, CachedMethodFn fn,
                      Py_ssize_t slot_offset, int nargs_required, const char* doc);

/// Frees a parked bound method (an instance's dealloc, for the instance's own slot) and clears
/// the slot. A slot holding nothing is left as it is.
void release_parked_method(PyObject** slot);

}  // namespace lp_module
