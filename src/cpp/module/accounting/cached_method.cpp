// module/accounting/cached_method.cpp: method descriptors whose bound methods are parked on the
// instance.
#include "module/accounting/cached_method.h"

#include <structmember.h>

#include <cstddef>

namespace lp_module {
namespace {

struct CachedMethodDescr {
  PyObject_HEAD
  vectorcallfunc vectorcall;  // the unbound call: args[0] is the instance
  PyTypeObject* owner;        // a static type: lives for the process
  PyObject* name;             // str
  CachedMethodFn fn;
  Py_ssize_t slot_offset;
  int nargs_required;  // -1: any
  const char* doc;
};

struct BoundMethod {
  PyObject_HEAD
  vectorcallfunc vectorcall;
  PyObject* self;            // strong while the bound method is alive; nullptr while parked
  CachedMethodDescr* descr;  // strong
};

PyTypeObject DescrType = {PyVarObject_HEAD_INIT(nullptr, 0)};
PyTypeObject BoundType = {PyVarObject_HEAD_INIT(nullptr, 0)};

inline PyObject** slot_of(PyObject* instance, const CachedMethodDescr* d) {
  return reinterpret_cast<PyObject**>(reinterpret_cast<char*>(instance) + d->slot_offset);
}

void free_bound(PyObject* parked) {
  Py_DECREF(reinterpret_cast<BoundMethod*>(parked)->descr);
  PyObject_Free(parked);
}

// A call with keywords or the wrong number of arguments: the TypeError a C method would raise.
__attribute__((noinline, cold)) PyObject* bad_call(const CachedMethodDescr* d, Py_ssize_t nargs,
                                                   PyObject* kwnames) {
  if (kwnames && PyTuple_GET_SIZE(kwnames)) {
    PyErr_Format(PyExc_TypeError, "%s.%U() takes no keyword arguments", d->owner->tp_name, d->name);
  } else {
    PyErr_Format(PyExc_TypeError, "%s.%U() takes exactly %d argument%s (%zd given)",
                 d->owner->tp_name, d->name, d->nargs_required, d->nargs_required == 1 ? "" : "s",
                 nargs);
  }
  return nullptr;
}

inline bool call_fits(const CachedMethodDescr* d, Py_ssize_t nargs, PyObject* kwnames) {
  return (!kwnames || PyTuple_GET_SIZE(kwnames) == 0) &&
         (d->nargs_required < 0 || nargs == d->nargs_required);
}

PyObject* bound_vectorcall(PyObject* callable, PyObject* const* args, size_t nargsf,
                           PyObject* kwnames) {
  BoundMethod* b = reinterpret_cast<BoundMethod*>(callable);
  Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
  if (__builtin_expect(!call_fits(b->descr, nargs, kwnames), 0)) {
    return bad_call(b->descr, nargs, kwnames);
  }
  return b->descr->fn(b->self, args, nargs);
}

void bound_dealloc(PyObject* obj) {
  BoundMethod* b = reinterpret_cast<BoundMethod*>(obj);
  PyObject* self = b->self;
  b->self = nullptr;
  PyObject** slot = slot_of(self, b->descr);
  if (!*slot) {
    *slot = obj;  // parked: dead memory until the next binding on this instance
  } else {
    free_bound(obj);  // another bound method of this instance is parked already
  }
  Py_DECREF(self);  // last: it may free the instance, and with it what was just parked
}

PyObject* bound_repr(PyObject* obj) {
  BoundMethod* b = reinterpret_cast<BoundMethod*>(obj);
  return PyUnicode_FromFormat("<bound method %s.%U of %R>", b->descr->owner->tp_name,
                              b->descr->name, b->self);
}

// Two bound methods are equal when they bind the same method to the same instance (as for
// ordinary bound methods: `s.__exit__ == s.__exit__`, though the two objects may differ).
PyObject* bound_richcompare(PyObject* a, PyObject* b, int op) {
  if ((op != Py_EQ && op != Py_NE) || !Py_IS_TYPE(b, &BoundType)) Py_RETURN_NOTIMPLEMENTED;
  BoundMethod* x = reinterpret_cast<BoundMethod*>(a);
  BoundMethod* y = reinterpret_cast<BoundMethod*>(b);
  bool same = x->self == y->self && x->descr == y->descr;
  return Py_NewRef(same == (op == Py_EQ) ? Py_True : Py_False);
}

Py_hash_t bound_hash(PyObject* obj) {
  BoundMethod* b = reinterpret_cast<BoundMethod*>(obj);
  Py_hash_t h = Py_hash_t(reinterpret_cast<uintptr_t>(b->self) >> 4) ^
                Py_hash_t(reinterpret_cast<uintptr_t>(b->descr) >> 4) * 1000003;
  return h == -1 ? -2 : h;
}

PyMemberDef bound_members[] = {
    {"__self__", T_OBJECT, offsetof(BoundMethod, self), READONLY, "The instance bound."},
    {"__func__", T_OBJECT, offsetof(BoundMethod, descr), READONLY, "The unbound method."},
    {nullptr, 0, 0, 0, nullptr}};

PyObject* bound_get_name(PyObject* obj, void*) {
  return Py_NewRef(reinterpret_cast<BoundMethod*>(obj)->descr->name);
}

PyGetSetDef bound_getset[] = {{"__name__", bound_get_name, nullptr, nullptr, nullptr},
                              {nullptr, nullptr, nullptr, nullptr, nullptr}};

// Binding: the instance's parked bound method if it has one, else a new one.
PyObject* descr_get(PyObject* self, PyObject* instance, PyObject*) {
  CachedMethodDescr* d = reinterpret_cast<CachedMethodDescr*>(self);
  if (!instance) return Py_NewRef(self);
  if (__builtin_expect(!PyObject_TypeCheck(instance, d->owner), 0)) {
    PyErr_Format(PyExc_TypeError, "descriptor '%U' for '%s' objects doesn't apply to a '%s' object",
                 d->name, d->owner->tp_name, Py_TYPE(instance)->tp_name);
    return nullptr;
  }
  PyObject** slot = slot_of(instance, d);
  BoundMethod* b;
  if (*slot) {
    b = reinterpret_cast<BoundMethod*>(*slot);
    *slot = nullptr;
    PyObject_Init(reinterpret_cast<PyObject*>(b), &BoundType);
  } else {
    b = PyObject_New(BoundMethod, &BoundType);
    if (!b) return nullptr;
    b->vectorcall = bound_vectorcall;
    b->descr = reinterpret_cast<CachedMethodDescr*>(Py_NewRef(self));
  }
  b->self = Py_NewRef(instance);
  return reinterpret_cast<PyObject*>(b);
}

// The unbound call, Type.name(instance, *args).
PyObject* descr_vectorcall(PyObject* self, PyObject* const* args, size_t nargsf,
                           PyObject* kwnames) {
  CachedMethodDescr* d = reinterpret_cast<CachedMethodDescr*>(self);
  Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
  if (nargs < 1 || !PyObject_TypeCheck(args[0], d->owner)) {
    PyErr_Format(PyExc_TypeError,
                 "unbound method %s.%U() needs a '%s' object as its first argument",
                 d->owner->tp_name, d->name, d->owner->tp_name);
    return nullptr;
  }
  if (!call_fits(d, nargs - 1, kwnames)) return bad_call(d, nargs - 1, kwnames);
  return d->fn(args[0], args + 1, nargs - 1);
}

void descr_dealloc(PyObject* self) {
  Py_XDECREF(reinterpret_cast<CachedMethodDescr*>(self)->name);
  PyObject_Free(self);
}

PyObject* descr_repr(PyObject* self) {
  CachedMethodDescr* d = reinterpret_cast<CachedMethodDescr*>(self);
  return PyUnicode_FromFormat("<method '%U' of '%s' objects>", d->name, d->owner->tp_name);
}

PyObject* descr_get_doc(PyObject* self, void*) {
  const char* doc = reinterpret_cast<CachedMethodDescr*>(self)->doc;
  if (!doc) Py_RETURN_NONE;
  return PyUnicode_FromString(doc);
}

PyObject* descr_get_objclass(PyObject* self, void*) {
  return Py_NewRef(reinterpret_cast<PyObject*>(reinterpret_cast<CachedMethodDescr*>(self)->owner));
}

PyMemberDef descr_members[] = {
    {"__name__", T_OBJECT, offsetof(CachedMethodDescr, name), READONLY, nullptr},
    {nullptr, 0, 0, 0, nullptr}};

PyGetSetDef descr_getset[] = {{"__doc__", descr_get_doc, nullptr, nullptr, nullptr},
                              {"__objclass__", descr_get_objclass, nullptr, nullptr, nullptr},
                              {nullptr, nullptr, nullptr, nullptr, nullptr}};

int ready_types() {
  if (DescrType.tp_flags & Py_TPFLAGS_READY) return 0;
  DescrType.tp_name = "lineprofiler._core.cached_method_descriptor";
  DescrType.tp_basicsize = sizeof(CachedMethodDescr);
  // METHOD_DESCRIPTOR: `obj.name(...)` calls the descriptor with obj first and binds nothing.
  DescrType.tp_flags =
      Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_METHOD_DESCRIPTOR;
  DescrType.tp_doc = "A method whose bound methods are reused rather than allocated per binding.";
  DescrType.tp_vectorcall_offset = offsetof(CachedMethodDescr, vectorcall);
  DescrType.tp_call = PyVectorcall_Call;
  DescrType.tp_descr_get = descr_get;
  DescrType.tp_repr = descr_repr;
  DescrType.tp_dealloc = descr_dealloc;
  DescrType.tp_members = descr_members;
  DescrType.tp_getset = descr_getset;

  BoundType.tp_name = "lineprofiler._core.cached_bound_method";
  BoundType.tp_basicsize = sizeof(BoundMethod);
  BoundType.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL;
  BoundType.tp_doc = "A bound cached method: parks itself on its instance when released.";
  BoundType.tp_vectorcall_offset = offsetof(BoundMethod, vectorcall);
  BoundType.tp_call = PyVectorcall_Call;
  BoundType.tp_dealloc = bound_dealloc;
  BoundType.tp_repr = bound_repr;
  BoundType.tp_richcompare = bound_richcompare;
  BoundType.tp_hash = bound_hash;
  BoundType.tp_members = bound_members;
  BoundType.tp_getset = bound_getset;
  return PyType_Ready(&DescrType) < 0 || PyType_Ready(&BoundType) < 0 ? -1 : 0;
}

}  // namespace

int add_cached_method(PyTypeObject* type, const char* name, CachedMethodFn fn,
                      Py_ssize_t slot_offset, int nargs_required, const char* doc) {
  if (ready_types() < 0) return -1;
  CachedMethodDescr* d = PyObject_New(CachedMethodDescr, &DescrType);
  if (!d) return -1;
  d->name = nullptr;
  d->vectorcall = descr_vectorcall;
  d->owner = type;
  d->fn = fn;
  d->slot_offset = slot_offset;
  d->nargs_required = nargs_required;
  d->doc = doc;
  d->name = PyUnicode_InternFromString(name);
  int rc = d->name ? PyDict_SetItem(type->tp_dict, d->name, reinterpret_cast<PyObject*>(d)) : -1;
  if (rc == 0) PyType_Modified(type);
  Py_DECREF(d);  // from here the type's dict holds it (for the life of the process)
  return rc;
}

void release_parked_method(PyObject** slot) {
  if (*slot) {
    free_bound(*slot);
    *slot = nullptr;
  }
}

}  // namespace lp_module
