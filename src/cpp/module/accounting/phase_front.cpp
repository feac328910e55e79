// module/accounting/phase_front.cpp: PhaseFront, the C base class of accounting.Profiler, and its
// bench methods.
//
// Its phase/count are method descriptors of a C type, so `profiler.phase("x")` is a specialised
// method call with no bound-method object; an unbound front (a disabled profiler, or the
// benchmarks' floor) returns the no-op scope.
#include "lp_core/clock.h"
#include "module/accounting/recorder_object.h"

namespace lp_module {
namespace {

PyTypeObject FrontType = {PyVarObject_HEAD_INIT(nullptr, 0)};

struct FrontObject {
  PyObject_HEAD
  RecorderObject* rec;  // strong reference, or nullptr while unbound
};

PyObject* front_phase(PyObject* self, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  return phase_on(reinterpret_cast<FrontObject*>(self)->rec, args, nargs, kwnames);
}

PyObject* front_count(PyObject* self, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  return do_count(reinterpret_cast<FrontObject*>(self)->rec, args, nargs, kwnames);
}

PyObject* front_bind(PyObject* self, PyObject* arg) {
  if (arg != Py_None && !PyObject_TypeCheck(arg, &RecorderType)) {
    PyErr_SetString(PyExc_TypeError, "_bind() takes a Recorder or None");
    return nullptr;
  }
  RecorderObject* next = arg == Py_None ? nullptr : reinterpret_cast<RecorderObject*>(arg);
  Py_XINCREF(next);
  Py_XSETREF(reinterpret_cast<FrontObject*>(self)->rec, next);
  Py_RETURN_NONE;
}

// A Profiler (a Python subclass) holds its recorder here, and the recorder's callbacks hold the
// Profiler's bound methods: the collector must see this reference to break that cycle.
int front_traverse(PyObject* self, visitproc visit, void* arg) {
  Py_VISIT(reinterpret_cast<FrontObject*>(self)->rec);
  return 0;
}

int front_clear(PyObject* self) {
  Py_CLEAR(reinterpret_cast<FrontObject*>(self)->rec);  // unbound: phase()/count() are no-ops
  return 0;
}

void front_dealloc(PyObject* self) {
  PyObject_GC_UnTrack(self);
  Py_CLEAR(reinterpret_cast<FrontObject*>(self)->rec);
  Py_TYPE(self)->tp_free(self);
}

PyObject* bench_noop(PyObject*, PyObject* const*, Py_ssize_t) {
  Py_RETURN_NONE;
}

// Does nothing, taking keywords as count() does: the floor of its calling convention.
PyObject* bench_noop_kw(PyObject*, PyObject* const*, Py_ssize_t, PyObject*) {
  Py_RETURN_NONE;
}

// phase() of the benchmarks' floor: the empty C context manager with ordinary C methods.
PyObject* bench_floor(PyObject*, PyObject* const*, Py_ssize_t) {
  return floor_scope();
}

// _bench_noop plus the two wall-clock reads an enabled phase entry makes (its difference from
// _bench_noop is what the clock itself costs on this machine).
PyObject* bench_clock_pair(PyObject*, PyObject* const*, Py_ssize_t) {
  uint64_t t0 = lp::wall_ticks();
  uint64_t dt_ns = lp::ticks_to_ns(lp::wall_ticks() - t0);
  __asm__ volatile("" : : "r"(dt_ns));  // keep both reads
  Py_RETURN_NONE;
}

PyObject* front_init_subclass(PyObject* cls, PyObject* args, PyObject* kwds);

PyMethodDef front_methods[] = {
    {"phase", LP_FASTCALL_KW(front_phase),
     "phase(name, io=False, sync=False, sample=None) -> a context manager timing one entry into "
     "the phase `name`, nested under the phases open on this thread (in an asyncio task: in this "
     "task, under those open where it was created)."},
    {"count", LP_FASTCALL_KW(front_count),
     "count(name, n=1): add n (an int; a float raises TypeError) to a counter on the innermost "
     "open phase, or the root when none is open."},
    {"_bind", front_bind, METH_O, "_bind(recorder or None): the recorder phase()/count() use."},
    {"_bench_noop", LP_FASTCALL(bench_noop), METH_FASTCALL,
     "Does nothing: the benchmarks' floor for a C method call."},
    {"_bench_noop_kw", LP_FASTCALL_KW(bench_noop_kw),
     "Does nothing, taking keywords as count() does: the floor of its calling convention."},
    {"_bench_floor", LP_FASTCALL(bench_floor), METH_FASTCALL,
     "_bench_floor(name) -> an empty C context manager with ordinary C methods: the benchmarks' "
     "floor for a with statement."},
    {"_bench_clock_pair", LP_FASTCALL(bench_clock_pair), METH_FASTCALL,
     "_bench_noop plus two wall-clock reads: the benchmarks' cost of the clock."},
    {"__init_subclass__", LP_FASTCALL(front_init_subclass),
     METH_VARARGS | METH_KEYWORDS | METH_CLASS,
     "Gives each subclass its own phase/count descriptors (see front_init_subclass)."},
    {nullptr, nullptr, 0, nullptr}};

// Indices into front_methods of the methods re-declared per subclass.
constexpr int kFrontPhase = 0;
constexpr int kFrontCount = 1;

// Whether the first definition of `name` along cls's MRO after cls itself is one of ours: the base
// type's own descriptor, or one this function installed on an intermediate subclass. A subclass
// that overrides phase/count in Python keeps its override, and so do its subclasses.
bool inherits_front_method(PyTypeObject* cls, PyObject* name, PyMethodDef* def) {
  PyObject* mro = cls->tp_mro;
  for (Py_ssize_t i = 1; mro && i < PyTuple_GET_SIZE(mro); ++i) {
    PyObject* dict = reinterpret_cast<PyTypeObject*>(PyTuple_GET_ITEM(mro, i))->tp_dict;
    PyObject* found = dict ? PyDict_GetItemWithError(dict, name) : nullptr;
    if (found) {
      return Py_IS_TYPE(found, &PyMethodDescr_Type) &&
             reinterpret_cast<PyMethodDescrObject*>(found)->d_method == def;
    }
    if (PyErr_Occurred()) return false;
  }
  return false;
}

// PhaseFront.__init_subclass__: re-declares phase() and count() on each subclass as method
// descriptors of that subclass. CPython's specialised call of a C method (3.11's PRECALL_*_METHOD_
// DESCRIPTOR_*, 3.12's CALL_*_METHOD_DESCRIPTOR_*) requires the instance's type to be exactly the
// descriptor's type and falls back to the generic call otherwise (~10-20 ns per call here), so a
// Profiler (a Python subclass) would pay that on every phase() and count(). The C functions only
// touch the PhaseFront part of the object, which every subclass shares.
PyObject* front_init_subclass(PyObject* cls, PyObject* args, PyObject* kwds) {
  if (PyTuple_GET_SIZE(args) || (kwds && PyDict_GET_SIZE(kwds))) {
    PyErr_SetString(PyExc_TypeError, "PhaseFront.__init_subclass__() takes no arguments");
    return nullptr;
  }
  PyTypeObject* type = reinterpret_cast<PyTypeObject*>(cls);
  for (int i : {kFrontPhase, kFrontCount}) {
    PyMethodDef* def = &front_methods[i];
    PyObject* name = PyUnicode_InternFromString(def->ml_name);
    if (!name) return nullptr;
    int own = PyDict_Contains(type->tp_dict, name);
    bool install = own == 0 && inherits_front_method(type, name, def);
    PyObject* descr = install ? PyDescr_NewMethod(type, def) : nullptr;
    int rc = own < 0 || PyErr_Occurred() ? -1 : descr ? PyObject_SetAttr(cls, name, descr) : 0;
    Py_XDECREF(descr);
    Py_DECREF(name);
    if (rc < 0) return nullptr;
  }
  Py_RETURN_NONE;
}

}  // namespace

int init_front_type(PyObject* module) {
  FrontType.tp_name = "lineprofiler._core.PhaseFront";
  FrontType.tp_basicsize = sizeof(FrontObject);
  FrontType.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC;
  FrontType.tp_doc = "Base of accounting.Profiler: phase()/count() on a bound Recorder, or no-ops.";
  // object.__new__ itself, not PyType_GenericNew: it gives a Python subclass's instances their
  // inline attribute values. Without them CPython 3.12 cannot specialise `profiler.phase` /
  // `profiler.count` once the instance has any attribute (~+30 ns a call). The zero-filled
  // allocation leaves rec unbound.
  FrontType.tp_new = PyBaseObject_Type.tp_new;
  FrontType.tp_dealloc = front_dealloc;
  FrontType.tp_traverse = front_traverse;
  FrontType.tp_clear = front_clear;
  FrontType.tp_free = PyObject_GC_Del;
  FrontType.tp_methods = front_methods;
  if (PyType_Ready(&FrontType) < 0) return -1;
  return PyModule_AddObjectRef(module, "PhaseFront", reinterpret_cast<PyObject*>(&FrontType));
}

}  // namespace lp_module
