// module/accounting/recorder_object.h: the accounting hot path's objects and inline helpers
// (module-internal).
//
// Recorder, PhaseScope and PhaseFront are written against the C API rather than bound through
// nanobind's generic dispatch: one call into phase() (a scope taken from a recorder's spares),
// then __enter__/__exit__, each a few loads and stores into lp_core's per-thread tree. Names are
// mapped to lp_core ids through a direct-mapped cache keyed by the str object's identity (the
// cache holds a reference, so an address is never reused while cached).
//
// Everything the hot path runs is inline here, so that each entry point (recorder_methods.cpp,
// phase_front.cpp, scope_type.cpp, installed.cpp) compiles to one function with no call across
// files; what runs Python code or happens once is out of line (LP_COLD) in the file that owns its
// job:
//   phase_names.cpp       the name cache's slow path, name-shape checks, the hygiene exceptions
//   phase_args.cpp        keyword parsing of phase() and count(), their general paths
//   scope_type.cpp        PhaseScope, NullScope, the benchmarks' floor scope, sync=True
//   recorder_methods.cpp  the Recorder type: lifecycle, flush/snapshot methods, thread states
//   phase_front.cpp       PhaseFront (the base of accounting.Profiler) and its bench methods
//   installed.cpp         installed_phase()/installed_count(), the join hook, add_recorder_types
#pragma once

#include <Python.h>

#include <cstdint>

#include "lp_core/name_shapes.h"
#include "lp_core/recorder.h"
#include "lp_core/worker.h"
#include "module/accounting/task_stacks.h"
#include "module/common/py_util.h"

// Off the hot path: kept out of line so phase()/count()/__enter__/__exit__ stay small.
#define LP_COLD __attribute__((noinline, cold))

// A METH_FASTCALL | METH_KEYWORDS entry of a PyMethodDef table.
#define LP_FASTCALL_KW(f) \
  reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(f)), METH_FASTCALL | METH_KEYWORDS

// A METH_FASTCALL entry's function pointer.
#define LP_FASTCALL(f) reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(f))

namespace lp_module {

// ---------------------------------------------------------------------------------------------
// Objects

struct ScopeObject;
struct LinesState;
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
  // lines= (issue 32): the phase names whose entries go through lines_hook(name, scope) -> the
  // context manager to return. Such a name is never marked seen (seen_phase_name), so its every
  // phase() takes the general path; every other name's inline path is unchanged.
  PyObject* lines_hook;     // strong reference, or nullptr
  PyObject* lines_names;    // a dict: name -> whether a "/" path ends in it; or nullptr
  LinesState* lines_state;  // which entries of each name are traced (phase_args.cpp), or nullptr
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

extern PyTypeObject RecorderType;  // recorder_methods.cpp
extern PyTypeObject ScopeType;     // scope_type.cpp

extern RecorderObject* g_installed;  // the installed recorder: strong reference, or nullptr
extern PyObject* g_null_scope;       // the one NullScope instance (never deallocated)
extern PyObject g_floor_scope;       // the benchmarks' floor scope (scope_type.cpp)

/// A new reference to the no-op scope of a disabled or closed profiler.
inline PyObject* null_scope() {
  Py_INCREF(g_null_scope);
  return g_null_scope;
}

/// A new reference to the benchmarks' floor: an empty C context manager with ordinary C methods.
inline PyObject* floor_scope() {
  return Py_NewRef(&g_floor_scope);
}

// ---------------------------------------------------------------------------------------------
// Names (phase_names.cpp)

struct NameCacheEntry {
  PyObject* obj = nullptr;
  uint32_t id = 0;
  uint64_t shape_checked_by = 0;  // serial of the recorder that checked this name's shape
};
constexpr size_t kNameCacheSize = 1024;
extern NameCacheEntry g_name_cache[kNameCacheSize];

inline NameCacheEntry& name_cache_slot(PyObject* name) {
  return g_name_cache[(reinterpret_cast<uintptr_t>(name) >> 4) & (kNameCacheSize - 1)];
}

/// name_id_of() on a cache miss: interns str(name) (lone surrogates escaped) and caches an exact
/// str. False with an exception set (str() failed).
bool name_id_slow(PyObject* name, NameCacheEntry& entry, uint32_t* id);

/// The lp_core name id of a name object (a str, or anything str() accepts). Runs Python code only
/// on a cache miss. False with an exception set.
inline bool name_id_of(PyObject* name, uint32_t* id) {
  NameCacheEntry& entry = name_cache_slot(name);
  if (entry.obj == name) {
    *id = entry.id;
    return true;
  }
  return name_id_slow(name, entry, id);
}

/// A new str of the name id (a new reference, or nullptr with an exception set).
PyObject* name_str(uint32_t id);

/// Notes a phase name's shape on r: warns once per shape or, with strict_names, raises. False with
/// an exception set.
bool check_name_shape(RecorderObject* r, uint32_t id);

/// The id of a name object r has seen and checked, with no call into CPython; false otherwise.
inline bool seen_phase_name(RecorderObject* r, PyObject* name, uint32_t* id) {
  const NameCacheEntry& entry = name_cache_slot(name);
  if (entry.obj != name || entry.shape_checked_by != r->serial) return false;
  *id = entry.id;
  return true;
}

/// The name id of phase()'s name, its shape checked once per recorder and name object. False with
/// an exception set.
inline bool phase_name_id(RecorderObject* r, PyObject* name, uint32_t* id) {
  if (seen_phase_name(r, name, id)) return true;
  if (!name_id_of(name, id)) return false;
  if (!check_name_shape(r, *id)) return false;
  NameCacheEntry& entry = name_cache_slot(name);
  if (entry.obj == name) entry.shape_checked_by = r->serial;
  return true;
}

// ---------------------------------------------------------------------------------------------
// Thread states and the active stack (recorder_methods.cpp)

/// Registers the calling thread on r under its threading name. Never raises.
lp::ThreadState* register_thread(RecorderObject* r);

/// The calling thread's state on r, found (another recorder was used last) or registered.
lp::ThreadState* find_or_register_thread(RecorderObject* r);

/// The calling thread's state on r (registered on first use). Never nullptr.
inline lp::ThreadState* thread_state(RecorderObject* r) {
  lp::ThreadState* ts = r->recorder->thread_state();
  return ts ? ts : find_or_register_thread(r);
}

/// Chooses ts's active stack for the calling task out of line. That runs Python code, which could
/// drop the last reference to r (a spare scope only borrows it), so r is held across it; false
/// when r went away meanwhile (then nothing is recorded).
bool resolve_holding(RecorderObject* r, lp::ThreadState* ts, PyThreadState* t);

/// Makes ts's active stack the calling task's (or the thread's own): two loads and a compare
/// unless the current context changed since ts last looked. False when r went away (see above).
inline bool sync_active_stack(RecorderObject* r, lp::ThreadState* ts) {
  PyThreadState* t = PyThreadState_Get();
  return __builtin_expect(same_context(ts, t), 1) || resolve_holding(r, ts, t);
}

/// The thread's state on r with the active stack set for the calling task; nullptr when r went
/// away while it was chosen. The caller holds r.
inline lp::ThreadState* stacked_thread_state(RecorderObject* r) {
  lp::ThreadState* ts = thread_state(r);
  return sync_active_stack(r, ts) ? ts : nullptr;
}

// ---------------------------------------------------------------------------------------------
// Scopes (scope_type.cpp)

// A small free list: a scope lives from phase() to the end of its with block, so a handful of
// recycled objects cover every nesting depth a program reaches.
constexpr int kScopeFreeMax = 64;
extern ScopeObject* g_scope_free[kScopeFreeMax];
extern int g_scope_free_count;

/// A scope from the free list (keeping the bound methods parked on it), else a new one.
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

/// A scope of r for phase() to fill in: one of r's spare scopes that nothing else references (so
/// no with block can still enter or exit it), else a fresh one. The spares make the common
/// `with profiler.phase(...)` allocate and free nothing; a user holding several scopes at once
/// gets distinct objects.
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

/// A scope of r for the phase id (a new reference, or nullptr with an exception set).
inline PyObject* fill_scope(RecorderObject* r, uint32_t id, uint32_t flags, uint32_t sample_every) {
  ScopeObject* s = take_scope(r);
  if (!s) return nullptr;
  s->name_id = id;
  s->flags = flags | (s->flags & kScopeSpare);
  s->sample_every = sample_every;
  return reinterpret_cast<PyObject*>(s);
}

/// torch.cuda.synchronize() for sync=True, resolved lazily (set_sync_resolver). Never raises.
void cuda_sync_now();

// ---------------------------------------------------------------------------------------------
// phase() and count(): the inline paths, and the general ones they fall back to (phase_args.cpp)

/// phase() on r, any call (the general path: parses options, checks a new name). Returns a new
/// reference, or nullptr with an exception set.
PyObject* make_scope_holding(RecorderObject* r, PyObject* const* args, Py_ssize_t nargs,
                             PyObject* kwnames);

/// phase(): phase(name) with a name this recorder has seen takes the inline path, which runs no
/// Python code; anything else the general one.
inline PyObject* make_scope(RecorderObject* r, PyObject* const* args, Py_ssize_t nargs,
                            PyObject* kwnames) {
  uint32_t id;
  if (__builtin_expect(nargs != 1 || kwnames || r->closed || !seen_phase_name(r, args[0], &id),
                       0)) {
    return make_scope_holding(r, args, nargs, kwnames);
  }
  return fill_scope(r, id, 0, 1);
}

/// phase() on r (nullptr: none bound or installed, the no-op scope); with annotate=/backend= the
/// recorder's Python-level wrapper instead.
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

/// count() of n on name_id on a thread where an asyncio task made a stack: the calling task's
/// stack is made active first (out of line). Returns None (a new reference).
PyObject* count_on_task_stack(RecorderObject* r, lp::ThreadState* ts, uint32_t name_id, int64_t n);

/// count() on r (nullptr: none bound or installed, which still checks n), any call. Returns None
/// (a new reference), or nullptr with an exception set.
PyObject* do_count_general(RecorderObject* r, PyObject* const* args, Py_ssize_t nargs,
                           PyObject* kwnames);

/// count(): count(name) and count(name, small int) with a name seen before, on a thread that has
/// recorded, take the inline path; anything else the general one.
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
  // While no task stack is in use on this thread, the thread's own stack is the only one (a task's
  // first stack would nest under its top, so a count lands on the same node either way): counted
  // there with no context check; otherwise the calling task's stack is found out of line. (Once
  // every task that made a stack has finished, the thread is back on this path: see
  // lp::ThreadState::use_stack.)
  if (__builtin_expect(ts->has_task_stacks(), 0)) {
    return count_on_task_stack(r, ts, entry.id, n);
  }
  ts->count_own(entry.id, n);
  Py_RETURN_NONE;
}

// ---------------------------------------------------------------------------------------------
// Per-file initialisation, called by add_recorder_types (installed.cpp). Each returns 0,
// or -1 with a Python exception set.

int init_phase_names(PyObject* module);    // PhaseNameWarning, PhaseNameError, name_shape()
int init_phase_args();                     // interned keyword names
int init_scope_types(PyObject* module);    // PhaseScope, NullScope, _FloorScope, sync resolver
int init_recorder_type(PyObject* module);  // Recorder
int init_front_type(PyObject* module);     // PhaseFront

/// set_lines_hook's schedules: a new LinesState (limit 0: every entry), and its deletion.
LinesState* new_lines_state(int64_t limit);
void delete_lines_state(LinesState* s);

/// Recorder.current() of r: the innermost open phase's name on this thread (task), or ''.
PyObject* recorder_current(PyObject* self, PyObject*);

}  // namespace lp_module
