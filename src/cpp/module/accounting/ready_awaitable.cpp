// module/accounting/ready_awaitable.cpp: an awaitable that is already done, for `async with` on C
// scopes.
#include "module/accounting/ready_awaitable.h"

namespace lp_module {
namespace {

struct ReadyObject {
  PyObject_HEAD
  PyObject* value;  // strong reference; nullptr once returned
};

PyTypeObject ReadyType = {PyVarObject_HEAD_INIT(nullptr, 0)};
PyAsyncMethods ready_async = {};

void ready_dealloc(PyObject* self) {
  Py_CLEAR(reinterpret_cast<ReadyObject*>(self)->value);
  Py_TYPE(self)->tp_free(self);
}

PyObject* ready_self(PyObject* self) {
  return Py_NewRef(self);
}

// __next__: finishes at once with the value (StopIteration(value); None ends without one).
PyObject* ready_next(PyObject* self) {
  ReadyObject* r = reinterpret_cast<ReadyObject*>(self);
  PyObject* value = r->value;
  r->value = nullptr;
  if (value && value != Py_None) {
    PyObject* stop = PyObject_CallOneArg(PyExc_StopIteration, value);
    if (stop) {
      PyErr_SetObject(PyExc_StopIteration, stop);
      Py_DECREF(stop);
    }
  }
  Py_XDECREF(value);
  return nullptr;
}

}  // namespace

PyObject* ready_awaitable(PyObject* value) {
  if (!value) return nullptr;
  ReadyObject* r = PyObject_New(ReadyObject, &ReadyType);
  if (!r) {
    Py_DECREF(value);
    return nullptr;
  }
  r->value = value;
  return reinterpret_cast<PyObject*>(r);
}

int init_ready_awaitable() {
  ready_async.am_await = ready_self;
  ReadyType.tp_name = "lineprofiler._core._Ready";
  ReadyType.tp_basicsize = sizeof(ReadyObject);
  ReadyType.tp_flags = Py_TPFLAGS_DEFAULT;
  ReadyType.tp_doc = "An awaitable that is already done (async with on a phase scope).";
  ReadyType.tp_dealloc = ready_dealloc;
  ReadyType.tp_as_async = &ready_async;
  ReadyType.tp_iter = ready_self;
  ReadyType.tp_iternext = ready_next;
  return PyType_Ready(&ReadyType);
}

}  // namespace lp_module
