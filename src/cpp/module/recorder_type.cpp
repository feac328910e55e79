// module/recorder_type.cpp: Recorder, PhaseScope and NullScope as METH_FASTCALL CPython types.
//
// These are the hot path (`with profiler.phase("x"):` and `profiler.count("n", k)`), so they are
// written against the C API rather than bound through nanobind's generic dispatch: one call into
// phase() (a scope taken from a free list), then __enter__/__exit__, each a few loads and stores
// into lp_core's per-thread tree. Names are mapped to lp_core ids through a direct-mapped cache
// keyed by the str object's identity (the cache holds a reference, so an address is never reused
// while cached).
#include "module/recorder_type.h"

#include <cmath>
#include <cstdint>
#include <string>

#include "lp_core/name_shapes.h"
#include "lp_core/names.h"
#include "lp_core/worker.h"
#include "module/cached_method.h"
#include "module/cuda_probe.h"
#include "module/py_util.h"
#include "module/ready_awaitable.h"
#include "module/task_stacks.h"

namespace lp_module {
namespace {

// Off the hot path: kept out of line so phase()/count()/__enter__/__exit__ stay small.
#define LP_COLD __attribute__((noinline, cold))

// ---------------------------------------------------------------------------------------------
// Names

struct NameCacheEntry {
  PyObject* obj = nullptr;
  uint32_t id = 0;
  uint64_t shape_checked_by = 0;  // serial of the recorder that checked this name's shape
};
constexpr size_t kNameCacheSize = 1024;
NameCacheEntry g_name_cache[kNameCacheSize];

inline NameCacheEntry& name_cache_slot(PyObject* name) {
  return g_name_cache[(reinterpret_cast<uintptr_t>(name) >> 4) & (kNameCacheSize - 1)];
}

LP_COLD bool name_id_slow(PyObject* name, NameCacheEntry& entry, uint32_t* id) {
  PyObject* text = PyUnicode_Check(name) ? (Py_INCREF(name), name) : PyObject_Str(name);
  if (!text) return false;
  Py_ssize_t len = 0;
  const char* utf8 = PyUnicode_AsUTF8AndSize(text, &len);
  if (utf8) {
    *id = lp::NameTable::instance().intern(std::string_view(utf8, size_t(len)));
  } else {  // lone surrogates: keep the name, escaped, rather than fail the phase
    PyErr_Clear();
    PyObject* bytes = PyUnicode_AsEncodedString(text, "utf-8", "backslashreplace");
    if (!bytes) {
      Py_DECREF(text);
      return false;
    }
    *id = lp::NameTable::instance().intern(
        std::string_view(PyBytes_AS_STRING(bytes), size_t(PyBytes_GET_SIZE(bytes))));
    Py_DECREF(bytes);
  }
  Py_DECREF(text);
  if (PyUnicode_CheckExact(name)) {
    Py_INCREF(name);
    Py_XSETREF(entry.obj, name);
    entry.id = *id;
    entry.shape_checked_by = 0;
  }
  return true;
}

inline bool name_id_of(PyObject* name, uint32_t* id) {
  NameCacheEntry& entry = name_cache_slot(name);
  if (entry.obj == name) {
    *id = entry.id;
    return true;
  }
  return name_id_slow(name, entry, id);
}

PyObject* name_str(uint32_t id) {
  std::string s = lp::NameTable::instance().name(id);
  return PyUnicode_DecodeUTF8(s.data(), Py_ssize_t(s.size()), "replace");
}

// ---------------------------------------------------------------------------------------------
// Types

struct ScopeObject;
constexpr int kSpareScopes = 4;  // reusable scopes per recorder (see take_scope)

struct RecorderObject {
  PyObject_HEAD
  lp::Worker* worker;
  lp::Recorder* recorder;            // worker's recorder (the hot path's one load)
  ScopeObject* spare[kSpareScopes];  // strong references, or nullptr until first needed
  bool closed;
  bool strict_names;
  uint64_t serial;          // unique per recorder of the process (never reused, unlike addresses)
  lp::NameShapes* shapes;   // phase names per shape (checked when a name is first seen)
  PyObject* periodic_hook;  // strong reference, or nullptr: called after each periodic write
  PyObject* phase_wrapper;  // strong reference, or nullptr: what installed phase() calls instead
  PyObject* weakreflist;
};

struct ScopeObject {
  PyObject_HEAD
  // A strong reference, except in a recorder's spare scopes (kScopeSpare), which borrow it and
  // hold nullptr once the recorder is gone (entering or exiting then does nothing).
  RecorderObject* rec;
  uint32_t name_id;
  uint32_t flags;
  uint32_t sample_every;   // 1: every entry measured
  PyObject* parked_enter;  // the cached_method slots of __enter__ and __exit__
  PyObject* parked_exit;
};

constexpr uint32_t kScopeIo = 1u << 0;
constexpr uint32_t kScopeSync = 1u << 1;
constexpr uint32_t kScopeRecorded = 1u << 2;  // set by __enter__ when the entry was recorded
constexpr uint32_t kScopeSpare = 1u << 3;     // one of RecorderObject::spare
constexpr uint32_t kScopeOwnStack = 1u << 4;  // set by __enter__: entered on the thread's own stack

uint64_t g_next_recorder_serial = 1;
PyObject* g_phase_name_warning = nullptr;  // lineprofiler._core.PhaseNameWarning
PyObject* g_phase_name_error = nullptr;    // lineprofiler._core.PhaseNameError
PyObject* g_kw_io = nullptr;               // interned keyword names of phase()
PyObject* g_kw_sync = nullptr;
PyObject* g_kw_sample = nullptr;
PyObject* g_kw_name = nullptr;

// ---------------------------------------------------------------------------------------------
// Phase-name hygiene: checked the first time a recorder sees a name object, never again.

// Warns (once per shape) or, with strict_names, raises. Returns false with an exception set.
LP_COLD bool check_name_shape(RecorderObject* r, uint32_t id) {
  std::string text = lp::NameTable::instance().name(id);
  lp::ShapeVerdict v = r->shapes->note(id, text);
  if (r->strict_names && v.ordinal >= 2) {
    PyErr_Format(g_phase_name_error,
                 "phase name '%s' shares the shape '%s' with an earlier phase name "
                 "(strict_names=True): use a fixed name and count() for the varying part",
                 text.c_str(), v.shape.c_str());
    return false;
  }
  if (v.warn_now) {
    char msg[1024];
    snprintf(msg, sizeof msg,
             "%u distinct phase names share the shape '%s' (most recently '%s').\n"
             "Names built from data grow the phase tree until it folds at %u paths and the report\n"
             "stops being readable \u2014 use a fixed name and count() for the varying part.",
             unsigned(v.shape_count), v.shape.c_str(), text.c_str(), unsigned(lp::kMaxNodes));
    if (PyErr_WarnEx(g_phase_name_warning, msg, 1) < 0) return false;
  }
  return true;
}

// The name id of phase()'s name, its shape checked once per recorder and name object.
// The id of a name object r has seen and checked, with no call into CPython; false otherwise.
inline bool seen_phase_name(RecorderObject* r, PyObject* name, uint32_t* id) {
  const NameCacheEntry& entry = name_cache_slot(name);
  if (entry.obj != name || entry.shape_checked_by != r->serial) return false;
  *id = entry.id;
  return true;
}

inline bool phase_name_id(RecorderObject* r, PyObject* name, uint32_t* id) {
  if (seen_phase_name(r, name, id)) return true;
  if (!name_id_of(name, id)) return false;
  if (!check_name_shape(r, *id)) return false;
  NameCacheEntry& entry = name_cache_slot(name);
  if (entry.obj == name) entry.shape_checked_by = r->serial;
  return true;
}

// ---------------------------------------------------------------------------------------------
// sync=True: torch.cuda.synchronize(), resolved lazily through a Python resolver that returns
// the sync function (torch imported, CUDA available), None (ask again later: torch not imported
// yet) or False (never: torch imported, no CUDA device).

PyObject* g_sync_resolver = nullptr;
PyObject* g_sync_fn = nullptr;
bool g_sync_off = false;

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

extern PyTypeObject RecorderType;
extern PyTypeObject ScopeType;
extern PyTypeObject NullScopeType;

struct NullScopeObject {
  PyObject_HEAD
  PyObject* parked_enter;  // the cached_method slots of __enter__ and __exit__
  PyObject* parked_exit;
};
NullScopeObject g_null_scope_storage;  // the one NullScope instance
PyObject* g_null_scope = nullptr;

// A new reference to the no-op scope of a disabled or closed profiler.
inline PyObject* null_scope() {
  Py_INCREF(g_null_scope);
  return g_null_scope;
}

RecorderObject* g_installed = nullptr;  // strong reference, or nullptr

// A small free list: a scope lives from phase() to the end of its with block, so a handful
// recycled objects cover every nesting depth a program reaches.
constexpr int kScopeFreeMax = 64;
ScopeObject* g_scope_free[kScopeFreeMax];
int g_scope_free_count = 0;

// A scope from the free list (keeping the bound methods parked on it), else a new one.
inline ScopeObject* scope_new() {
  if (g_scope_free_count) {
    ScopeObject* s = g_scope_free[--g_scope_free_count];
    PyObject_Init(reinterpret_cast<PyObject*>(s), &ScopeType);
    return s;
  }
  ScopeObject* s = PyObject_New(ScopeObject, &ScopeType);
  if (s) s->parked_enter = s->parked_exit = nullptr;
  return s;
}

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

PyObject* thread_name_now() {
  PyObject* threading = PyImport_ImportModule("threading");
  if (!threading) return nullptr;
  PyObject* current = PyObject_CallMethod(threading, "current_thread", nullptr);
  Py_DECREF(threading);
  if (!current) return nullptr;
  PyObject* name = PyObject_GetAttrString(current, "name");
  Py_DECREF(current);
  return name;
}

LP_COLD lp::ThreadState* register_thread(RecorderObject* r) {
  std::string name;
  PyObject* py_name = thread_name_now();
  if (py_name && PyUnicode_Check(py_name)) {
    const char* s = PyUnicode_AsUTF8(py_name);
    if (s) name = s;
  }
  Py_XDECREF(py_name);
  PyErr_Clear();
  return r->recorder->register_thread(name);
}

// The calling thread's state on r, found (another recorder was used last) or registered.
LP_COLD lp::ThreadState* find_or_register_thread(RecorderObject* r) {
  lp::ThreadState* ts = r->recorder->find_thread();
  return ts ? ts : register_thread(r);
}

inline lp::ThreadState* thread_state(RecorderObject* r) {
  lp::ThreadState* ts = r->recorder->thread_state();
  return ts ? ts : find_or_register_thread(r);
}

// The calling thread's state on r for an exit (nullptr when it never recorded on r): found when
// another recorder was used since, so that an exit finds its own frame.
LP_COLD lp::ThreadState* find_thread_for_exit(RecorderObject* r) {
  return r->recorder->find_thread();
}

// Chooses ts's active stack for the calling task out of line. That runs Python code, which could
// drop the last reference to r (a spare scope only borrows it), so r is held across it; false when
// r went away meanwhile (then nothing is recorded).
LP_COLD bool resolve_holding(RecorderObject* r, lp::ThreadState* ts, PyThreadState* t) {
  Py_INCREF(r);
  resolve_active_stack(ts, t, r->serial);
  bool alive = Py_REFCNT(r) > 1;
  Py_DECREF(r);
  return alive;
}

// Makes ts's active stack the calling task's (or the thread's own): two loads and a compare unless
// the current context changed since ts last looked. False when r went away (see above).
inline bool sync_active_stack(RecorderObject* r, lp::ThreadState* ts) {
  PyThreadState* t = PyThreadState_Get();
  return __builtin_expect(same_context(ts, t), 1) || resolve_holding(r, ts, t);
}

// The thread's state on r with the active stack set for the calling task; nullptr when r went
// away while it was chosen. The caller holds r.
inline lp::ThreadState* stacked_thread_state(RecorderObject* r) {
  lp::ThreadState* ts = thread_state(r);
  return sync_active_stack(r, ts) ? ts : nullptr;
}

// ---------------------------------------------------------------------------------------------
// Scopes

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

// Closes s's entry on the stack st of ts (or ends its skip, for an entry sampling skipped).
inline void scope_close_on(ScopeObject* s, lp::ThreadState* ts, lp::PhaseStack& st) {
  PyObject* token = reinterpret_cast<PyObject*>(s);
  if (!(s->flags & kScopeRecorded)) {
    ts->exit_skipped_on(st, token);
  } else if (s->flags & kScopeIo) {
    ts->exit_io_on(st, token);
  } else {
    ts->exit_on(st, token);
  }
}

// Closes s's entry on ts's active stack.
inline void scope_close(ScopeObject* s, lp::ThreadState* ts) {
  scope_close_on(s, ts, *ts->active_stack());
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
LP_COLD void scope_exit_synced(ScopeObject* s) {
  RecorderObject* r = s->rec;
  Py_INCREF(r);
  cuda_sync_now();
  lp::ThreadState* ts = r->recorder->find_thread();
  if (ts && sync_active_stack(r, ts)) scope_close(s, ts);
  Py_DECREF(r);
}

PyObject* scope_exit(PyObject* self, PyObject* const*, Py_ssize_t) {
  ScopeObject* s = reinterpret_cast<ScopeObject*>(self);
  RecorderObject* r = s->rec;
  if (!r) Py_RETURN_NONE;
  lp::ThreadState* ts = r->recorder->thread_state();
  if (__builtin_expect(!ts, 0) && !(ts = find_thread_for_exit(r))) Py_RETURN_NONE;
  if (__builtin_expect((s->flags & (kScopeSync | kScopeRecorded)) == (kScopeSync | kScopeRecorded),
                       0)) {
    scope_exit_synced(s);
  } else if (__builtin_expect(s->flags & kScopeOwnStack, 1)) {
    // Entered on the thread's own stack: closed there whatever context is current (no check).
    scope_close_on(s, ts, *ts->own_stack());
  } else if (sync_active_stack(r, ts)) {
    scope_close(s, ts);  // a task's entry: its exit also learns whether the task was suspended
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
    {"__aexit__", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(scope_aexit)),
     METH_FASTCALL, "Close the phase (async with); exceptions propagate."},
    {nullptr, nullptr, 0, nullptr}};

PyMethodDef null_async_methods[] = {
    {"__aenter__", null_aenter, METH_NOARGS, "Do nothing (async with)."},
    {"__aexit__", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(null_aexit)),
     METH_FASTCALL, "Do nothing (async with); exceptions propagate."},
    {nullptr, nullptr, 0, nullptr}};

// The benchmarks' floor: an empty C context manager with ordinary C methods (each `with` binds
// them, allocating two bound-method objects), which the scopes above avoid (cached_method.h).
PyObject* floor_enter(PyObject* self, PyObject*) {
  Py_INCREF(self);
  return self;
}

PyMethodDef floor_scope_methods[] = {
    {"__enter__", floor_enter, METH_NOARGS, "Do nothing."},
    {"__exit__", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(null_exit)),
     METH_FASTCALL, "Do nothing; exceptions propagate."},
    {nullptr, nullptr, 0, nullptr}};

PyObject g_floor_scope_storage;  // the one FloorScope instance (a bare PyObject)

// ---------------------------------------------------------------------------------------------
// phase() and count()

// Stride of sample=rate: 1 entry in round(1/rate); None or 1.0 measure every entry.
bool parse_sample(PyObject* rate_obj, uint32_t* every) {
  *every = 1;
  if (rate_obj == Py_None) return true;
  double rate =
      PyFloat_CheckExact(rate_obj) ? PyFloat_AS_DOUBLE(rate_obj) : PyFloat_AsDouble(rate_obj);
  if (rate == -1.0 && PyErr_Occurred()) return false;
  if (!(rate > 0.0 && rate <= 1.0)) {
    PyErr_Format(PyExc_ValueError,
                 "phase() sample must be a rate in (0, 1] (0.01 measures 1 entry in 100), got %R",
                 rate_obj);
    return false;
  }
  double n = std::nearbyint(1.0 / rate);
  *every = n >= double(UINT32_MAX) ? UINT32_MAX : n < 1.0 ? 1u : uint32_t(n);
  return true;
}

// Parses phase(name, io=False, sync=False, sample=None) into flags and a sampling stride.
// Returns false with an exception set on a bad call.
bool parse_phase_options(PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames,
                         PyObject** name, uint32_t* flags, uint32_t* sample_every) {
  static const char* const kNames[] = {"name", "io", "sync", "sample"};
  PyObject* values[4] = {nullptr, nullptr, nullptr, nullptr};
  if (nargs > 4) {
    PyErr_SetString(PyExc_TypeError, "phase() takes at most 4 arguments");
    return false;
  }
  for (Py_ssize_t i = 0; i < nargs; ++i) values[i] = args[i];
  if (kwnames) {
    Py_ssize_t nkw = PyTuple_GET_SIZE(kwnames);
    for (Py_ssize_t k = 0; k < nkw; ++k) {
      PyObject* key = PyTuple_GET_ITEM(kwnames, k);
      int slot = key == g_kw_sample ? 3 : key == g_kw_io ? 1 : key == g_kw_sync ? 2 : -1;
      for (int j = 0; slot < 0 && j < 4; ++j) {
        if (PyUnicode_CompareWithASCIIString(key, kNames[j]) == 0) slot = j;
      }
      if (slot < 0 || values[slot]) {
        PyErr_Format(PyExc_TypeError, "phase() got an unexpected or repeated keyword argument %R",
                     key);
        return false;
      }
      values[slot] = args[nargs + k];
    }
  }
  if (!values[0]) {
    PyErr_SetString(PyExc_TypeError, "phase() missing required argument 'name'");
    return false;
  }
  *name = values[0];
  *flags = 0;
  if (values[1] && PyObject_IsTrue(values[1]) == 1) *flags |= kScopeIo;
  if (values[2] && PyObject_IsTrue(values[2]) == 1) *flags |= kScopeSync;
  return !values[3] || parse_sample(values[3], sample_every);
}

// A scope of r for phase() to fill in: one of r's spare scopes that nothing else references (so
// no with block can still enter or exit it), else a fresh one. The spares make the common
// `with profiler.phase(...)` allocate and free nothing; a user holding several scopes at once
// gets distinct objects.
inline ScopeObject* take_scope(RecorderObject* r) {
  for (ScopeObject*& spare : r->spare) {
    if (!spare) {
      spare = scope_new();
      if (!spare) return nullptr;
      spare->rec = r;
      spare->flags = kScopeSpare;
    }
    if (Py_REFCNT(spare) == 1) {
      Py_INCREF(spare);
      return spare;
    }
  }
  ScopeObject* s = scope_new();
  if (!s) return nullptr;
  Py_INCREF(r);
  s->rec = r;
  s->flags = 0;
  return s;
}

// A scope of r for the phase name_id.
inline PyObject* fill_scope(RecorderObject* r, uint32_t id, uint32_t flags, uint32_t sample_every) {
  ScopeObject* s = take_scope(r);
  if (!s) return nullptr;
  s->name_id = id;
  s->flags = flags | (s->flags & kScopeSpare);
  s->sample_every = sample_every;
  return reinterpret_cast<PyObject*>(s);
}

// phase() on r, any call. Python code may run here (an option's __float__, a name's __str__, a
// name-shape warning) and drop the reference the caller borrowed r through (a front's, or the
// installed one), so r is held until it is done.
LP_COLD PyObject* make_scope_holding(RecorderObject* r, PyObject* const* args, Py_ssize_t nargs,
                                     PyObject* kwnames) {
  Py_INCREF(r);
  PyObject* out = nullptr;
  uint32_t flags = 0, sample_every = 1, id;
  PyObject* name = nargs ? args[0] : nullptr;
  if ((nargs == 1 && !kwnames) ||
      parse_phase_options(args, nargs, kwnames, &name, &flags, &sample_every)) {
    if (r->closed) {
      out = null_scope();
    } else if (phase_name_id(r, name, &id)) {
      out = fill_scope(r, id, flags, sample_every);
    }
  }
  Py_DECREF(r);
  return out;
}

// phase(): phase(name) with a name this recorder has seen takes the inline path, which runs no
// Python code; anything else the general one.
inline PyObject* make_scope(RecorderObject* r, PyObject* const* args, Py_ssize_t nargs,
                            PyObject* kwnames) {
  uint32_t id;
  if (__builtin_expect(nargs != 1 || kwnames || r->closed || !seen_phase_name(r, args[0], &id),
                       0)) {
    return make_scope_holding(r, args, nargs, kwnames);
  }
  return fill_scope(r, id, 0, 1);
}

// An int's value; false with OverflowError set when it does not fit a 64-bit counter.
inline bool int64_of(PyObject* int_obj, int64_t* n) {
  int overflow = 0;
  long long v = PyLong_AsLongLongAndOverflow(int_obj, &overflow);
  if (overflow) {
    PyErr_Format(PyExc_OverflowError,
                 "count() n=%R does not fit a 64-bit counter (-2**63 <= n < 2**63); a counter "
                 "whose sum leaves that range saturates and is marked in the report",
                 int_obj);
    return false;
  }
  if (v == -1 && PyErr_Occurred()) return false;
  *n = int64_t(v);
  return true;
}

// Converts count()'s n; floats are refused (the spec's one deliberate raise).
bool parse_count_n(PyObject* n_obj, int64_t* n) {
  if (PyLong_CheckExact(n_obj)) return int64_of(n_obj, n);
  if (PyFloat_Check(n_obj)) {
    PyErr_Format(PyExc_TypeError,
                 "count() takes an integer n, got float %R: a counter counts events, so pass an "
                 "int (round it yourself if that is what you mean)",
                 n_obj);
    return false;
  }
  PyObject* index = PyNumber_Index(n_obj);
  if (!index) return false;
  bool ok = int64_of(index, n);
  Py_DECREF(index);
  return ok;
}

bool parse_count_args(PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames, PyObject** name,
                      int64_t* n) {
  PyObject* values[2] = {nullptr, nullptr};
  if (nargs > 2) {
    PyErr_SetString(PyExc_TypeError, "count() takes at most 2 arguments (name, n=1)");
    return false;
  }
  for (Py_ssize_t i = 0; i < nargs; ++i) values[i] = args[i];
  if (kwnames) {
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(kwnames); ++k) {
      PyObject* key = PyTuple_GET_ITEM(kwnames, k);
      int slot = PyUnicode_CompareWithASCIIString(key, "name") == 0 ? 0
                 : PyUnicode_CompareWithASCIIString(key, "n") == 0  ? 1
                                                                    : -1;
      if (slot < 0 || values[slot]) {
        PyErr_Format(PyExc_TypeError, "count() got an unexpected or repeated keyword argument %R",
                     key);
        return false;
      }
      values[slot] = args[nargs + k];
    }
  }
  if (!values[0]) {
    PyErr_SetString(PyExc_TypeError, "count() missing required argument 'name'");
    return false;
  }
  *name = values[0];
  *n = 1;
  return !values[1] || parse_count_n(values[1], n);
}

// count() on r (nullptr: none bound or installed, which still checks n), any call. Python code may
// run here (n's __index__, a name's __str__, the thread's name) and drop the reference r was
// borrowed through, so r is held until it is done.
LP_COLD PyObject* do_count_general(RecorderObject* r, PyObject* const* args, Py_ssize_t nargs,
                                   PyObject* kwnames) {
  PyObject* name;
  int64_t n;
  Py_XINCREF(r);
  bool ok = parse_count_args(args, nargs, kwnames, &name, &n);
  uint32_t id;
  if (ok && r && !r->closed && (ok = name_id_of(name, &id))) {
    if (lp::ThreadState* ts = stacked_thread_state(r)) ts->count(id, n);
  }
  Py_XDECREF(r);
  if (!ok) return nullptr;
  Py_RETURN_NONE;
}

// count(): count(name) and count(name, small int) with a name seen before, on a thread that has
// recorded, take the inline path; anything else the general one.
inline PyObject* do_count(RecorderObject* r, PyObject* const* args, Py_ssize_t nargs,
                          PyObject* kwnames) {
  int64_t n = 1;
  if (__builtin_expect(kwnames || (nargs != 1 && !(nargs == 2 && small_int_value(args[1], &n))),
                       0)) {
    return do_count_general(r, args, nargs, kwnames);
  }
  if (!r || r->closed) Py_RETURN_NONE;
  const NameCacheEntry& entry = name_cache_slot(args[0]);
  lp::ThreadState* ts = r->recorder->thread_state();
  if (__builtin_expect(entry.obj != args[0] || !ts, 0)) {
    return do_count_general(r, args, nargs, kwnames);
  }
  // Until a task made a stack on this thread, the thread's own stack is the only one (a task's
  // first stack would nest under its top, so a count lands on the same node either way).
  if (__builtin_expect(ts->has_task_stacks(), 0) && !sync_active_stack(r, ts)) Py_RETURN_NONE;
  ts->count(entry.id, n);
  Py_RETURN_NONE;
}

// ---------------------------------------------------------------------------------------------
// Recorder methods

PyObject* recorder_phase(PyObject* self, PyObject* const* args, Py_ssize_t nargs,
                         PyObject* kwnames) {
  return make_scope(reinterpret_cast<RecorderObject*>(self), args, nargs, kwnames);
}

PyObject* recorder_count(PyObject* self, PyObject* const* args, Py_ssize_t nargs,
                         PyObject* kwnames) {
  return do_count(reinterpret_cast<RecorderObject*>(self), args, nargs, kwnames);
}

PyObject* recorder_current(PyObject* self, PyObject*) {
  RecorderObject* r = reinterpret_cast<RecorderObject*>(self);
  lp::ThreadState* ts = r->recorder->find_thread();
  if (ts && !sync_active_stack(r, ts)) ts = nullptr;
  return name_str(ts ? ts->current_name() : lp::kRootNameId);
}

PyObject* recorder_flush(PyObject* self, PyObject* args) {
  int final = 0;
  if (!PyArg_ParseTuple(args, "|p:flush", &final)) return nullptr;
  RecorderObject* r = reinterpret_cast<RecorderObject*>(self);
  int err;
  Py_BEGIN_ALLOW_THREADS err = r->worker->flush(final != 0);
  Py_END_ALLOW_THREADS return PyLong_FromLong(err);
}

PyObject* recorder_start_thread(PyObject* self, PyObject*) {
  reinterpret_cast<RecorderObject*>(self)->worker->start_thread();
  Py_RETURN_NONE;
}

PyObject* recorder_stop_thread(PyObject* self, PyObject*) {
  RecorderObject* r = reinterpret_cast<RecorderObject*>(self);
  Py_BEGIN_ALLOW_THREADS r->worker->stop_thread();
  Py_END_ALLOW_THREADS Py_RETURN_NONE;
}

PyObject* recorder_thread_running(PyObject* self, PyObject*) {
  return PyBool_FromLong(reinterpret_cast<RecorderObject*>(self)->worker->thread_running());
}

PyObject* recorder_reset_after_fork(PyObject* self, PyObject* args) {
  const char* path;
  const char* meta;
  if (!PyArg_ParseTuple(args, "ss:reset_after_fork", &path, &meta)) return nullptr;
  reinterpret_cast<RecorderObject*>(self)->worker->reset_after_fork(path, meta);
  Py_RETURN_NONE;
}

PyObject* recorder_set_meta(PyObject* self, PyObject* args) {
  const char* meta;
  if (!PyArg_ParseTuple(args, "s:set_meta", &meta)) return nullptr;
  reinterpret_cast<RecorderObject*>(self)->worker->set_meta(meta);
  Py_RETURN_NONE;
}

PyObject* recorder_snapshot_json(PyObject* self, PyObject*) {
  RecorderObject* r = reinterpret_cast<RecorderObject*>(self);
  std::string text;
  Py_BEGIN_ALLOW_THREADS text = r->worker->snapshot_json();
  Py_END_ALLOW_THREADS return PyUnicode_DecodeUTF8(text.data(), Py_ssize_t(text.size()), "replace");
}

PyObject* recorder_stats(PyObject* self, PyObject*) {
  lp::FlushStats st = reinterpret_cast<RecorderObject*>(self)->worker->stats();
  return Py_BuildValue("{s:K,s:K,s:s,s:K}", "writes", (unsigned long long)st.writes, "errors",
                       (unsigned long long)st.errors, "last_error", st.last_error.c_str(),
                       "own_write_bytes", (unsigned long long)st.own_write_bytes);
}

PyObject* recorder_sample_now(PyObject* self, PyObject*) {
  RecorderObject* r = reinterpret_cast<RecorderObject*>(self);
  if (!r->worker->has_sampler()) Py_RETURN_FALSE;
  Py_BEGIN_ALLOW_THREADS r->worker->sampler().sample_now();
  Py_END_ALLOW_THREADS Py_RETURN_TRUE;
}

PyObject* recorder_sampler_status(PyObject* self, PyObject*) {
  RecorderObject* r = reinterpret_cast<RecorderObject*>(self);
  if (!r->worker->has_sampler()) Py_RETURN_NONE;
  std::string text;
  Py_BEGIN_ALLOW_THREADS text = r->worker->sampler().status_json();
  Py_END_ALLOW_THREADS return PyUnicode_DecodeUTF8(text.data(), Py_ssize_t(text.size()), "replace");
}

// Runs on the snapshot thread after a periodic write: takes the GIL only for the call, and not
// at all while finalising (atexit stops the thread first; that check is a backstop). An error is
// cleared: the Python dispatcher counts its callbacks' errors itself.
void run_periodic_hook(PyObject* hook) {
  call_with_gil([hook] { Py_XDECREF(PyObject_CallNoArgs(hook)); });
}

PyObject* recorder_set_periodic_hook(PyObject* self, PyObject* hook) {
  RecorderObject* r = reinterpret_cast<RecorderObject*>(self);
  if (!PyCallable_Check(hook)) {
    PyErr_SetString(PyExc_TypeError, "set_periodic_hook() takes a callable");
    return nullptr;
  }
  if (r->periodic_hook) {  // replacing it would free a callable the thread may be calling
    PyErr_SetString(PyExc_RuntimeError, "set_periodic_hook() may be called once per Recorder");
    return nullptr;
  }
  Py_INCREF(hook);
  r->periodic_hook = hook;
  r->worker->set_periodic_hook([hook] { run_periodic_hook(hook); });
  Py_RETURN_NONE;
}

PyObject* recorder_set_phase_wrapper(PyObject* self, PyObject* fn) {
  RecorderObject* r = reinterpret_cast<RecorderObject*>(self);
  if (fn != Py_None && !PyCallable_Check(fn)) {
    PyErr_SetString(PyExc_TypeError, "set_phase_wrapper() takes a callable or None");
    return nullptr;
  }
  PyObject* next = fn == Py_None ? nullptr : fn;
  Py_XINCREF(next);
  Py_XSETREF(r->phase_wrapper, next);
  Py_RETURN_NONE;
}

PyObject* recorder_mark_closed(PyObject* self, PyObject*) {
  reinterpret_cast<RecorderObject*>(self)->closed = true;
  Py_RETURN_NONE;
}

PyObject* recorder_get_path(PyObject* self, void*) {
  std::string p = reinterpret_cast<RecorderObject*>(self)->worker->path();
  return PyUnicode_DecodeFSDefaultAndSize(p.data(), Py_ssize_t(p.size()));
}

PyObject* recorder_get_closed(PyObject* self, void*) {
  return PyBool_FromLong(reinterpret_cast<RecorderObject*>(self)->closed);
}

PyObject* recorder_get_cpu_clock(PyObject* self, void*) {
  RecorderObject* r = reinterpret_cast<RecorderObject*>(self);
  if (!r->worker->recorder().measure_cpu()) Py_RETURN_NONE;
  return PyUnicode_FromString(lp::cpu_clock_tier_name(r->worker->recorder().cpu_tier()));
}

#define LP_FASTCALL_KW(f) \
  reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(f)), METH_FASTCALL | METH_KEYWORDS

PyMethodDef recorder_methods[] = {
    {"phase", LP_FASTCALL_KW(recorder_phase),
     "phase(name, io=False, sync=False, sample=None) -> a context manager timing one entry."},
    {"count", LP_FASTCALL_KW(recorder_count),
     "count(name, n=1): add n (an int) to a counter on the innermost open phase."},
    {"current", recorder_current, METH_NOARGS, "Name of the innermost open phase, or ''."},
    {"flush", recorder_flush, METH_VARARGS,
     "flush(final=False) -> 0 or errno: write the worker file now (the GIL is released)."},
    {"start_thread", recorder_start_thread, METH_NOARGS, "Start the snapshot thread."},
    {"stop_thread", recorder_stop_thread, METH_NOARGS, "Stop and join the snapshot thread."},
    {"thread_running", recorder_thread_running, METH_NOARGS, "Whether the snapshot thread runs."},
    {"reset_after_fork", recorder_reset_after_fork, METH_VARARGS,
     "reset_after_fork(path, meta_json): in a forked child, start empty with a new file."},
    {"set_meta", recorder_set_meta, METH_VARARGS, "set_meta(meta_json): replace the file's meta."},
    {"snapshot_json", recorder_snapshot_json, METH_NOARGS,
     "The worker-file text a flush would write now."},
    {"stats", recorder_stats, METH_NOARGS, "Flush statistics: writes, errors, last_error."},
    {"sample_now", recorder_sample_now, METH_NOARGS,
     "Take one resource sample now (the first sets the baseline); False without a sampler."},
    {"sampler_status", recorder_sampler_status, METH_NOARGS,
     "The sampler's status as JSON text (the worker file's \"samples\"), or None."},
    {"set_periodic_hook", recorder_set_periodic_hook, METH_O,
     "set_periodic_hook(fn): call fn() (holding the GIL) after each periodic write of the "
     "snapshot thread; never after flush(). Once per Recorder."},
    {"set_phase_wrapper", recorder_set_phase_wrapper, METH_O,
     "set_phase_wrapper(fn or None): PhaseFront.phase and the installed accounting.phase() call "
     "fn instead of the C phase (annotate=/backend= need a Python-level scope). Recorder.phase "
     "itself is unchanged."},
    {"mark_closed", recorder_mark_closed, METH_NOARGS, "Make phase()/count() no-ops from now on."},
    {nullptr, nullptr, 0, nullptr}};

PyGetSetDef recorder_getset[] = {
    {"path", recorder_get_path, nullptr, "The worker file path.", nullptr},
    {"closed", recorder_get_closed, nullptr, "Whether mark_closed() was called.", nullptr},
    {"cpu_clock", recorder_get_cpu_clock, nullptr,
     "The thread-CPU clock tier, or None when measure_cpu is off.", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr}};

PyObject* recorder_new(PyTypeObject* type, PyObject* args, PyObject* kwds) {
  static const char* kw[] = {
      "path",         "meta_json",    "measure_cpu",        "snapshot_interval_ns",
      "strict_names", "samples_path", "sample_interval_ns", "sample_gpu",
      nullptr};
  const char* path;
  const char* meta = "{}";
  int measure_cpu = 1;
  unsigned long long interval_ns = 0;
  int strict_names = 0;
  const char* samples_path = "";
  unsigned long long sample_interval_ns = 0;
  int sample_gpu = 1;
  if (!PyArg_ParseTupleAndKeywords(args, kwds, "s|spKpsKp:Recorder", const_cast<char**>(kw), &path,
                                   &meta, &measure_cpu, &interval_ns, &strict_names, &samples_path,
                                   &sample_interval_ns, &sample_gpu)) {
    return nullptr;
  }
  RecorderObject* self = reinterpret_cast<RecorderObject*>(type->tp_alloc(type, 0));
  if (!self) return nullptr;
  lp::WorkerConfig config;
  config.path = path;
  config.meta_json = meta;
  config.measure_cpu = measure_cpu != 0;
  config.snapshot_interval_ns = interval_ns;
  config.samples_path = samples_path;
  config.sample_interval_ns = sample_interval_ns;
  config.sample_gpu = sample_gpu != 0;
  self->worker = new lp::Worker(std::move(config));
  self->recorder = &self->worker->recorder();
  for (ScopeObject*& spare : self->spare) spare = nullptr;
  self->closed = false;
  self->strict_names = strict_names != 0;
  self->serial = g_next_recorder_serial++;
  self->shapes = new lp::NameShapes();
  self->periodic_hook = nullptr;
  self->phase_wrapper = nullptr;
  self->weakreflist = nullptr;
  if (self->worker->has_sampler()) {
    self->worker->sampler().set_cuda_probe(&cuda_probe);
    // The sampler tags intervals with the phase open on the recorder's first thread: make that
    // the constructing thread (normally the main one), not whichever thread records first.
    register_thread(self);
  }
  return reinterpret_cast<PyObject*>(self);
}

void recorder_dealloc(PyObject* self) {
  RecorderObject* r = reinterpret_cast<RecorderObject*>(self);
  if (r->weakreflist) PyObject_ClearWeakRefs(self);
  for (ScopeObject*& spare : r->spare) {  // a spare a user still holds now does nothing
    if (spare) {
      spare->rec = nullptr;
      Py_CLEAR(spare);
    }
  }
  if (r->worker) {
    Py_BEGIN_ALLOW_THREADS r->worker->stop_thread();
    Py_END_ALLOW_THREADS delete r->worker;
    r->worker = nullptr;
  }
  delete r->shapes;
  r->shapes = nullptr;
  Py_CLEAR(r->periodic_hook);  // the thread is joined: nothing can be calling it
  Py_CLEAR(r->phase_wrapper);
  Py_TYPE(self)->tp_free(self);
}

// ---------------------------------------------------------------------------------------------
// Module-level functions: the no-op scope, and dispatch to the installed recorder.

PyObject* null_phase(PyObject*, PyObject* const*, Py_ssize_t, PyObject*) {
  return null_scope();
}

PyObject* null_count(PyObject*, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  return do_count(nullptr, args, nargs, kwnames);
}

// ---------------------------------------------------------------------------------------------
// PhaseFront: the base class of accounting.Profiler. Its phase/count are method descriptors of a C
// type, so `profiler.phase("x")` is a specialised method call with no bound-method object; an
// unbound front (a disabled profiler, or the benchmarks' floor) returns the no-op scope.

struct FrontObject {
  PyObject_HEAD
  RecorderObject* rec;  // strong reference, or nullptr while unbound
};

// phase() on r (nullptr: none bound or installed, the no-op scope); with annotate=/backend= the
// recorder's Python-level wrapper instead.
inline PyObject* phase_on(RecorderObject* r, PyObject* const* args, Py_ssize_t nargs,
                          PyObject* kwnames) {
  if (!r) return null_scope();
  if (r->phase_wrapper && !r->closed) {  // held: the call may drop r, and r's reference to it
    PyObject* wrapper = Py_NewRef(r->phase_wrapper);
    PyObject* scope = PyObject_Vectorcall(wrapper, args, size_t(nargs), kwnames);
    Py_DECREF(wrapper);
    return scope;
  }
  return make_scope(r, args, nargs, kwnames);
}

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

void front_dealloc(PyObject* self) {
  Py_CLEAR(reinterpret_cast<FrontObject*>(self)->rec);
  Py_TYPE(self)->tp_free(self);
}

PyObject* bench_noop(PyObject*, PyObject* const*, Py_ssize_t) {
  Py_RETURN_NONE;
}

// phase() of the benchmarks' floor: the empty C context manager with ordinary C methods.
PyObject* bench_floor(PyObject*, PyObject* const*, Py_ssize_t) {
  return Py_NewRef(&g_floor_scope_storage);
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
    {"_bench_noop", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(bench_noop)),
     METH_FASTCALL, "Does nothing: the benchmarks' floor for a C method call."},
    {"_bench_floor", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(bench_floor)),
     METH_FASTCALL,
     "_bench_floor(name) -> an empty C context manager with ordinary C methods: the benchmarks' "
     "floor for a with statement."},
    {"_bench_clock_pair",
     reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(bench_clock_pair)),
     METH_FASTCALL, "_bench_noop plus two wall-clock reads: the benchmarks' cost of the clock."},
    {"__init_subclass__",
     reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(front_init_subclass)),
     METH_VARARGS | METH_KEYWORDS | METH_CLASS,
     "Gives each subclass its own phase/count descriptors (see front_init_subclass)."},
    {nullptr, nullptr, 0, nullptr}};

constexpr int kFrontPhase =
    0;  // indices into front_methods of the methods re-declared per subclass
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

// One-shot hook the module-level phase()/count() call when nothing is installed (set only in a
// process whose environment names an active run): it may install a profiler that joins the run.
PyObject* g_join_hook = nullptr;  // strong reference, or nullptr

// Calls and drops the join hook (once); its errors are reported as unraisable, never raised.
void run_join_hook() {
  PyObject* hook = g_join_hook;
  g_join_hook = nullptr;
  PyObject* res = PyObject_CallNoArgs(hook);
  if (!res) PyErr_WriteUnraisable(hook);
  Py_XDECREF(res);
  Py_DECREF(hook);
}

PyObject* installed_phase(PyObject*, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  if (!g_installed && g_join_hook) run_join_hook();
  return phase_on(g_installed, args, nargs, kwnames);
}

PyObject* installed_count(PyObject*, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  if (!g_installed && g_join_hook) run_join_hook();
  return do_count(g_installed, args, nargs, kwnames);
}

PyObject* set_join_hook(PyObject*, PyObject* arg) {
  if (arg != Py_None && !PyCallable_Check(arg)) {
    PyErr_SetString(PyExc_TypeError, "set_join_hook() takes a callable or None");
    return nullptr;
  }
  PyObject* next = arg == Py_None ? nullptr : Py_NewRef(arg);
  Py_XSETREF(g_join_hook, next);
  Py_RETURN_NONE;
}

PyObject* installed_current(PyObject*, PyObject*) {
  if (!g_installed) return PyUnicode_FromString("");
  return recorder_current(reinterpret_cast<PyObject*>(g_installed), nullptr);
}

PyObject* set_installed(PyObject*, PyObject* arg) {
  if (arg != Py_None && !PyObject_TypeCheck(arg, &RecorderType)) {
    PyErr_SetString(PyExc_TypeError, "set_installed() takes a Recorder or None");
    return nullptr;
  }
  RecorderObject* next = arg == Py_None ? nullptr : reinterpret_cast<RecorderObject*>(arg);
  Py_XINCREF(next);
  Py_XSETREF(g_installed, next);
  Py_RETURN_NONE;
}

PyObject* get_installed(PyObject*, PyObject*) {
  PyObject* r = g_installed ? reinterpret_cast<PyObject*>(g_installed) : Py_None;
  Py_INCREF(r);
  return r;
}

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

PyObject* name_shape_py(PyObject*, PyObject* arg) {
  Py_ssize_t len = 0;
  const char* utf8 = PyUnicode_AsUTF8AndSize(arg, &len);
  if (!utf8) return nullptr;
  std::string shape = lp::name_shape(std::string_view(utf8, size_t(len)));
  return PyUnicode_DecodeUTF8(shape.data(), Py_ssize_t(shape.size()), "replace");
}

PyMethodDef module_functions[] = {
    {"set_sync_resolver", set_sync_resolver, METH_O,
     "set_sync_resolver(fn or None): fn() gives phase(sync=True) its sync function: a callable, "
     "None (ask again next time) or False (never). Resets the cached answer."},
    {"name_shape", name_shape_py, METH_O,
     "name_shape(name) -> the name with its data-like parts (digit runs, hex ids) folded to '#'."},
    {"null_phase", LP_FASTCALL_KW(null_phase), "phase() of a disabled profiler: a no-op scope."},
    {"null_count", LP_FASTCALL_KW(null_count),
     "count() of a disabled profiler: checks n, records nothing."},
    {"installed_phase", LP_FASTCALL_KW(installed_phase),
     "phase() on the installed recorder, or a no-op scope when none is installed."},
    {"installed_count", LP_FASTCALL_KW(installed_count),
     "count() on the installed recorder, or a no-op when none is installed."},
    {"installed_current", installed_current, METH_NOARGS,
     "The installed recorder's innermost open phase on this thread (in an asyncio task: in this "
     "task), or ''."},
    {"set_installed", set_installed, METH_O, "set_installed(recorder or None)."},
    {"get_installed", get_installed, METH_NOARGS, "The installed recorder, or None."},
    {"set_join_hook", set_join_hook, METH_O,
     "set_join_hook(fn or None): fn() runs once, at the first installed_phase()/installed_count() "
     "with nothing installed (it may install a profiler)."},
    {nullptr, nullptr, 0, nullptr}};

}  // namespace

namespace {
PyTypeObject RecorderType = {PyVarObject_HEAD_INIT(nullptr, 0)};
PyTypeObject ScopeType = {PyVarObject_HEAD_INIT(nullptr, 0)};
PyTypeObject NullScopeType = {PyVarObject_HEAD_INIT(nullptr, 0)};
PyTypeObject FloorScopeType = {PyVarObject_HEAD_INIT(nullptr, 0)};
PyTypeObject FrontType = {PyVarObject_HEAD_INIT(nullptr, 0)};
}  // namespace

int add_recorder_types(PyObject* module) {
  RecorderType.tp_name = "lineprofiler._core.Recorder";
  RecorderType.tp_basicsize = sizeof(RecorderObject);
  RecorderType.tp_flags = Py_TPFLAGS_DEFAULT;
  RecorderType.tp_doc = "One process's phase recorder, its worker file and snapshot thread.";
  RecorderType.tp_new = recorder_new;
  RecorderType.tp_dealloc = recorder_dealloc;
  RecorderType.tp_methods = recorder_methods;
  RecorderType.tp_getset = recorder_getset;
  RecorderType.tp_weaklistoffset = offsetof(RecorderObject, weakreflist);

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

  FrontType.tp_name = "lineprofiler._core.PhaseFront";
  FrontType.tp_basicsize = sizeof(FrontObject);
  FrontType.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE;
  FrontType.tp_doc = "Base of accounting.Profiler: phase()/count() on a bound Recorder, or no-ops.";
  // object.__new__ itself, not PyType_GenericNew: it gives a Python subclass's instances their
  // inline attribute values. Without them CPython 3.12 cannot specialise `profiler.phase` /
  // `profiler.count` once the instance has any attribute (~+30 ns a call). The zero-filled
  // allocation leaves rec unbound.
  FrontType.tp_new = PyBaseObject_Type.tp_new;
  FrontType.tp_dealloc = front_dealloc;
  FrontType.tp_methods = front_methods;

  if (init_task_stacks() < 0 || init_ready_awaitable() < 0 || PyType_Ready(&RecorderType) < 0 ||
      PyType_Ready(&ScopeType) < 0 || PyType_Ready(&NullScopeType) < 0 ||
      PyType_Ready(&FloorScopeType) < 0 || PyType_Ready(&FrontType) < 0) {
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
  Py_INCREF(PyObject_Init(&g_floor_scope_storage, &FloorScopeType));

  g_kw_io = PyUnicode_InternFromString("io");
  g_kw_sync = PyUnicode_InternFromString("sync");
  g_kw_sample = PyUnicode_InternFromString("sample");
  g_kw_name = PyUnicode_InternFromString("name");
  g_phase_name_warning = PyErr_NewExceptionWithDoc(
      "lineprofiler._core.PhaseNameWarning",
      "Many distinct phase names share one shape: names are being built from data.",
      PyExc_UserWarning, nullptr);
  g_phase_name_error = PyErr_NewExceptionWithDoc(
      "lineprofiler._core.PhaseNameError",
      "strict_names=True: a second phase name shares the shape of an earlier one.",
      PyExc_ValueError, nullptr);
  if (!g_kw_io || !g_kw_sync || !g_kw_sample || !g_kw_name || !g_phase_name_warning ||
      !g_phase_name_error ||
      PyModule_AddObjectRef(module, "PhaseNameWarning", g_phase_name_warning) < 0 ||
      PyModule_AddObjectRef(module, "PhaseNameError", g_phase_name_error) < 0) {
    return -1;
  }

  if (PyModule_AddObjectRef(module, "Recorder", reinterpret_cast<PyObject*>(&RecorderType)) < 0 ||
      PyModule_AddObjectRef(module, "PhaseScope", reinterpret_cast<PyObject*>(&ScopeType)) < 0 ||
      PyModule_AddObjectRef(module, "PhaseFront", reinterpret_cast<PyObject*>(&FrontType)) < 0 ||
      PyModule_AddObjectRef(module, "NullScope", reinterpret_cast<PyObject*>(&NullScopeType)) < 0) {
    return -1;
  }
  return PyModule_AddFunctions(module, module_functions);
}

}  // namespace lp_module
