// module/accounting/scope_type.cpp: PhaseScope's __enter__/__exit__, the no-op and floor scopes,
// sync=True.
#include "lp_core/recorder.h"
#include "module/accounting/cached_method.h"
#include "module/accounting/ready_awaitable.h"
#include "module/accounting/recorder_object.h"

namespace lp_module {

PyTypeObject ScopeType = {PyVarObject_HEAD_INIT(nullptr, 0)};
ScopeObject* g_scope_free[kScopeFreeMax];
int g_scope_free_count = 0;
PyObject* g_null_scope = nullptr;
PyObject g_floor_scope;  // the one FloorScope instance (a bare PyObject)

namespace {

// ---------------------------------------------------------------------------------------------
// sync=True: torch.cuda.synchronize(), resolved lazily through a Python resolver that returns
// the sync function (torch imported, CUDA available), None (ask again later: torch not imported
// yet) or False (never: torch imported, no CUDA device).

PyObject* g_sync_resolver = nullptr;
PyObject* g_sync_fn = nullptr;
bool g_sync_off = false;

PyObject* set_sync_resolver(PyObject*, PyObject* arg) {
  if (arg != Py_None && !PyCallable_Check(arg)) {
    PyErr_SetString(PyExc_TypeError, "set_sync_resolver() takes a callable or None");
    return nullptr;
  }
  PyObject* next = arg == Py_None ? nullptr : arg;
  Py_XINCREF(next);
  Py_XSETREF(g_sync_resolver, next);
  Py_CLEAR(g_sync_fn);
  g_sync_off = false;
  Py_RETURN_NONE;
}

}  // namespace

void cuda_sync_now() {
  if (g_sync_off) return;
  if (!g_sync_fn) {
    if (!g_sync_resolver) return;
    PyObject* got = PyObject_CallNoArgs(g_sync_resolver);
    if (!got) {
      PyErr_Clear();
      g_sync_off = true;  // a resolver that fails will fail again: stop asking
      return;
    }
    if (got == Py_None || got == Py_False) {
      g_sync_off = got == Py_False;
      Py_DECREF(got);
      return;
    }
    g_sync_fn = got;
  }
  PyObject* res = PyObject_CallNoArgs(g_sync_fn);
  if (res) {
    Py_DECREF(res);
  } else {
    PyErr_Clear();  // a profiler never raises into user code; a sticky CUDA error resurfaces
  }
}

namespace {

PyTypeObject NullScopeType = {PyVarObject_HEAD_INIT(nullptr, 0)};
PyTypeObject FloorScopeType = {PyVarObject_HEAD_INIT(nullptr, 0)};

struct NullScopeObject {
  PyObject_HEAD
  PyObject* parked_enter;  // the cached_method slots of __enter__ and __exit__
  PyObject* parked_exit;
};
NullScopeObject g_null_scope_storage;  // the one NullScope instance

void scope_dealloc(PyObject* self) {
  ScopeObject* s = reinterpret_cast<ScopeObject*>(self);
  if (s->flags & kScopeSpare) {
    s->rec = nullptr;  // borrowed
  } else {
    Py_CLEAR(s->rec);
  }
  if (g_scope_free_count < kScopeFreeMax) {
    g_scope_free[g_scope_free_count++] = s;
    return;
  }
  release_parked_method(&s->parked_enter);
  release_parked_method(&s->parked_exit);
  PyObject_Free(self);
}

// Opens s's entry on ts; whether it was recorded is kept in s's flags for __exit__.
inline bool scope_open(ScopeObject* s, lp::ThreadState* ts) {
  PyObject* token = reinterpret_cast<PyObject*>(s);
  bool recorded = (s->flags & kScopeIo) ? ts->enter_io(s->name_id, token, s->sample_every)
                                        : ts->enter(s->name_id, token, s->sample_every);
  uint32_t flags = s->flags & ~(kScopeRecorded | kScopeOwnStack);
  if (recorded) flags |= kScopeRecorded;
  if (ts->active_stack() == ts->own_stack()) flags |= kScopeOwnStack;
  s->flags = flags;
  return recorded;
}

// Closes s's entry on the stack st of ts (or ends its skip, for an entry sampling skipped);
// raised: the entry exits by an exception (counted first; a constant false on the normal path).
inline void scope_close_on(ScopeObject* s, lp::ThreadState* ts, lp::PhaseStack& st,
                           bool raised = false) {
  PyObject* token = reinterpret_cast<PyObject*>(s);
  if (raised && (s->flags & kScopeRecorded)) ts->mark_raised_on(st, token);
  if (!(s->flags & kScopeRecorded)) {
    ts->exit_skipped_on(st, token);
  } else if (s->flags & kScopeIo) {
    ts->exit_io_on(st, token);
  } else {
    ts->exit_on(st, token);
  }
}

// Closes s's entry on ts's active stack.
inline void scope_close(ScopeObject* s, lp::ThreadState* ts, bool raised = false) {
  scope_close_on(s, ts, *ts->active_stack(), raised);
}

// The calling thread's state on r for an exit (nullptr when it never recorded on r): found when
// another recorder was used since, so that an exit finds its own frame.
LP_COLD lp::ThreadState* find_thread_for_exit(RecorderObject* r) {
  return r->recorder->find_thread();
}

// __enter__ where Python code runs: the thread's first entry (its name is read through threading)
// or sync=True. That code could drop the last reference to a recorder a spare scope only borrows,
// so the recorder is held until it is done.
LP_COLD void scope_enter_holding(ScopeObject* s) {
  RecorderObject* r = s->rec;
  Py_INCREF(r);
  lp::ThreadState* ts = stacked_thread_state(r);
  if (ts && scope_open(s, ts) && (s->flags & kScopeSync)) {
    cuda_sync_now();  // drain what earlier phases queued, unbilled to this one
    ts->restart_top();
  }
  Py_DECREF(r);
}

PyObject* scope_enter(PyObject* self, PyObject* const*, Py_ssize_t) {
  ScopeObject* s = reinterpret_cast<ScopeObject*>(self);
  RecorderObject* r = s->rec;
  if (r && !r->closed) {
    lp::ThreadState* ts = r->recorder->thread_state();
    if (__builtin_expect(!ts || (s->flags & kScopeSync), 0)) {
      scope_enter_holding(s);
    } else {
      if (sync_active_stack(r, ts)) scope_open(s, ts);
    }
  }
  Py_INCREF(self);
  return self;
}

// __exit__ of a sync=True entry: the recorder is held across the Python sync call (see above).
LP_COLD void scope_exit_synced(ScopeObject* s, bool raised) {
  RecorderObject* r = s->rec;
  Py_INCREF(r);
  cuda_sync_now();
  lp::ThreadState* ts = r->recorder->find_thread();
  if (ts && sync_active_stack(r, ts)) scope_close(s, ts, raised);
  Py_DECREF(r);
}

// Closes s's entry on the stack it was made on; raised: it exits by an exception.
inline void scope_exit_on(ScopeObject* s, RecorderObject* r, lp::ThreadState* ts, bool raised) {
  if (__builtin_expect((s->flags & (kScopeSync | kScopeRecorded)) == (kScopeSync | kScopeRecorded),
                       0)) {
    scope_exit_synced(s, raised);
  } else if (__builtin_expect(s->flags & kScopeOwnStack, 1)) {
    // Entered on the thread's own stack: closed there whatever context is current (no check).
    scope_close_on(s, ts, *ts->own_stack(), raised);
  } else if (sync_active_stack(r, ts)) {
    scope_close(s, ts, raised);  // a task's entry: its exit also learns whether it was suspended
  }
}

// __exit__ given an exception: the entry is counted in its phase's `raised`, then closed.
LP_COLD void scope_exit_raised(ScopeObject* s, RecorderObject* r, lp::ThreadState* ts) {
  scope_exit_on(s, r, ts, true);
}

PyObject* scope_exit(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  ScopeObject* s = reinterpret_cast<ScopeObject*>(self);
  RecorderObject* r = s->rec;
  if (!r) Py_RETURN_NONE;
  lp::ThreadState* ts = r->recorder->thread_state();
  if (__builtin_expect(!ts, 0) && !(ts = find_thread_for_exit(r))) Py_RETURN_NONE;
  if (__builtin_expect(nargs != 0 && args[0] != Py_None, 0)) {
    scope_exit_raised(s, r, ts);  // (exc_type, exc, tb): an exception leaves the block
  } else {
    scope_exit_on(s, r, ts, false);
  }
  Py_RETURN_NONE;
}

PyObject* null_enter(PyObject* self, PyObject* const*, Py_ssize_t) {
  Py_INCREF(self);
  return self;
}

PyObject* null_exit(PyObject*, PyObject* const*, Py_ssize_t) {
  Py_RETURN_NONE;
}

// `async with`: the same entry and exit, returned as awaitables that are already done.
PyObject* scope_aenter(PyObject* self, PyObject*) {
  return ready_awaitable(scope_enter(self, nullptr, 0));
}

PyObject* scope_aexit(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  return ready_awaitable(scope_exit(self, args, nargs));
}

PyObject* null_aenter(PyObject* self, PyObject*) {
  return ready_awaitable(Py_NewRef(self));
}

PyObject* null_aexit(PyObject*, PyObject* const*, Py_ssize_t) {
  return ready_awaitable(Py_NewRef(Py_None));
}

PyMethodDef scope_async_methods[] = {
    {"__aenter__", scope_aenter, METH_NOARGS, "Open the phase (async with)."},
    {"__aexit__", LP_FASTCALL(scope_aexit), METH_FASTCALL,
     "Close the phase (async with); exceptions propagate."},
    {nullptr, nullptr, 0, nullptr}};

PyMethodDef null_async_methods[] = {
    {"__aenter__", null_aenter, METH_NOARGS, "Do nothing (async with)."},
    {"__aexit__", LP_FASTCALL(null_aexit), METH_FASTCALL,
     "Do nothing (async with); exceptions propagate."},
    {nullptr, nullptr, 0, nullptr}};

// The benchmarks' floor: an empty C context manager with ordinary C methods (each `with` binds
// them, allocating two bound-method objects), which the scopes above avoid (cached_method.h).
PyObject* floor_enter(PyObject* self, PyObject*) {
  Py_INCREF(self);
  return self;
}

PyMethodDef floor_scope_methods[] = {
    {"__enter__", floor_enter, METH_NOARGS, "Do nothing."},
    {"__exit__", LP_FASTCALL(null_exit), METH_FASTCALL, "Do nothing; exceptions propagate."},
    {nullptr, nullptr, 0, nullptr}};

PyMethodDef scope_functions[] = {
    {"set_sync_resolver", set_sync_resolver, METH_O,
     "set_sync_resolver(fn or None): fn() gives phase(sync=True) its sync function: a callable, "
     "None (ask again next time) or False (never). Resets the cached answer."},
    {nullptr, nullptr, 0, nullptr}};

}  // namespace

int init_scope_types(PyObject* module) {
  ScopeType.tp_name = "lineprofiler._core.PhaseScope";
  ScopeType.tp_basicsize = sizeof(ScopeObject);
  ScopeType.tp_flags = Py_TPFLAGS_DEFAULT;
  ScopeType.tp_doc = "One phase entry: use it in a with statement.";
  ScopeType.tp_dealloc = scope_dealloc;
  ScopeType.tp_methods = scope_async_methods;

  NullScopeType.tp_name = "lineprofiler._core.NullScope";
  NullScopeType.tp_basicsize = sizeof(NullScopeObject);
  NullScopeType.tp_flags = Py_TPFLAGS_DEFAULT;
  NullScopeType.tp_doc = "The scope of a disabled profiler: does nothing.";
  NullScopeType.tp_methods = null_async_methods;

  FloorScopeType.tp_name = "lineprofiler._core._FloorScope";
  FloorScopeType.tp_basicsize = sizeof(PyObject);
  FloorScopeType.tp_flags = Py_TPFLAGS_DEFAULT;
  FloorScopeType.tp_doc =
      "The benchmarks' floor: an empty context manager with ordinary C methods.";
  FloorScopeType.tp_methods = floor_scope_methods;

  if (init_ready_awaitable() < 0 || PyType_Ready(&ScopeType) < 0 ||
      PyType_Ready(&NullScopeType) < 0 || PyType_Ready(&FloorScopeType) < 0) {
    return -1;
  }
  // __enter__/__exit__ of the scopes: bound methods reused, not allocated per `with`.
  if (add_cached_method(&ScopeType, "__enter__", scope_enter, offsetof(ScopeObject, parked_enter),
                        0, "Open the phase.") < 0 ||
      add_cached_method(&ScopeType, "__exit__", scope_exit, offsetof(ScopeObject, parked_exit), 3,
                        "Close the phase; exceptions propagate.") < 0 ||
      add_cached_method(&NullScopeType, "__enter__", null_enter,
                        offsetof(NullScopeObject, parked_enter), 0, "Do nothing.") < 0 ||
      add_cached_method(&NullScopeType, "__exit__", null_exit,
                        offsetof(NullScopeObject, parked_exit), 3,
                        "Do nothing; exceptions propagate.") < 0) {
    return -1;
  }
  // Both never deallocated (immortal in practice).
  g_null_scope = PyObject_Init(reinterpret_cast<PyObject*>(&g_null_scope_storage), &NullScopeType);
  Py_INCREF(g_null_scope);
  Py_INCREF(PyObject_Init(&g_floor_scope, &FloorScopeType));

  if (PyModule_AddObjectRef(module, "PhaseScope", reinterpret_cast<PyObject*>(&ScopeType)) < 0 ||
      PyModule_AddObjectRef(module, "NullScope", reinterpret_cast<PyObject*>(&NullScopeType)) < 0) {
    return -1;
  }
  return PyModule_AddFunctions(module, scope_functions);
}

}  // namespace lp_module
