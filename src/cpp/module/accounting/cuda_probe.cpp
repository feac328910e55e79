// module/accounting/cuda_probe.cpp: calling torch's CUDA allocator stats from the sampler thread,
// guarded.
#include "module/accounting/cuda_probe.h"

#include <dlfcn.h>

#include <atomic>

#include "module/common/py_util.h"

namespace lp_module {
namespace {

std::atomic<PyObject*> g_probe{nullptr};  // strong reference, owned by the module

bool cuda_runtime_loaded() {
  // RTLD_NOLOAD returns a handle only when the library is already mapped: no GIL, no import.
  void* h = dlopen("libc10_cuda.so", RTLD_LAZY | RTLD_NOLOAD);
  if (!h) return false;
  dlclose(h);
  return true;
}

PyObject* set_cuda_probe(PyObject*, PyObject* arg) {
  if (arg != Py_None && !PyCallable_Check(arg)) {
    PyErr_SetString(PyExc_TypeError, "set_cuda_probe() takes a callable or None");
    return nullptr;
  }
  PyObject* next = arg == Py_None ? nullptr : (Py_INCREF(arg), arg);
  PyObject* old = g_probe.exchange(next);
  Py_XDECREF(old);  // callers hold the GIL here
  Py_RETURN_NONE;
}

PyMethodDef functions[] = {
    {"set_cuda_probe", set_cuda_probe, METH_O,
     "set_cuda_probe(fn or None): fn() -> (allocated, reserved) bytes or None, called by the "
     "sampler thread with the GIL, only once libc10_cuda is loaded."},
    {nullptr, nullptr, 0, nullptr}};

}  // namespace

bool cuda_probe(int64_t* allocated, int64_t* reserved) {
  if (!g_probe.load() || !cuda_runtime_loaded()) return false;
  bool ok = false;
  // A failing probe is "unavailable": call_with_gil clears its error.
  call_with_gil([&] {
    PyObject* fn = g_probe.load();
    if (!fn) return;
    Py_INCREF(fn);
    PyObject* r = PyObject_CallNoArgs(fn);
    Py_DECREF(fn);
    if (r && PyTuple_Check(r) && PyTuple_GET_SIZE(r) == 2) {
      long long a = PyLong_AsLongLong(PyTuple_GET_ITEM(r, 0));
      long long b = PyLong_AsLongLong(PyTuple_GET_ITEM(r, 1));
      if (!PyErr_Occurred() && a >= 0 && b >= 0) {
        *allocated = a;
        *reserved = b;
        ok = true;
      }
    }
    Py_XDECREF(r);
  });
  return ok;
}

int add_cuda_probe_functions(PyObject* module) {
  return PyModule_AddFunctions(module, functions);
}

}  // namespace lp_module
