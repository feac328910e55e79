// module/accounting/c_api.cpp: the C++ API's function table (lineprofiler/accounting.hpp), as
// _core._C_API.
//
// An extension's scopes reach the installed recorder through this table. Its thread may hold the
// GIL (an extension function called from Python), have released it, or be a C++ thread with no
// Python thread state at all, so the hot path touches no Python object: the installed recorder is
// read from an atomic pointer, the thread's lp_core state from its thread-local cache. Only a
// thread that ran asyncio tasks (whose active stack may have to follow the current task) or a
// thread's first record (its threading name) calls into Python, and only when it holds the GIL: a
// scope never takes the GIL.
//
// Lifetime: a thread without the GIL cannot hold a Python reference, so a recorder that C++ scopes
// can reach (installed while an extension is attached) is pinned until the process exits: closing
// or replacing the profiler never frees a thread state a C++ scope is using. A profiler is
// installed a handful of times per process, so the pins cost a few recorders at most.
#include "module/accounting/c_api.h"

#include <pthread.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "lineprofiler/python.hpp"
#include "lp_core/api_parts.h"
#include "module/accounting/recorder_object.h"

namespace lp_module {
namespace {

// The recorder C++ scopes record into: the installed one while an extension is attached, else
// nullptr. Written with the GIL held, read anywhere (atomically).
RecorderObject* g_native = nullptr;
// The attached extensions' table pointers (each extension's lineprofiler::detail::g_api). GIL.
std::vector<const lp_api**>* g_slots = nullptr;
// Recorders C++ scopes could reach: strong references never released (see the header comment).
std::vector<RecorderObject*>* g_pinned = nullptr;

extern const lp_api g_table;

void pin(RecorderObject* r) {
  if (!g_pinned) g_pinned = new std::vector<RecorderObject*>();
  if (std::find(g_pinned->begin(), g_pinned->end(), r) != g_pinned->end()) return;
  Py_INCREF(r);
  g_pinned->push_back(r);
}

// Makes r (or none) the recorder C++ scopes use, and tells every attached extension. GIL held.
void publish(RecorderObject* r) {
  if (r && g_slots && !g_slots->empty()) pin(r);
  RecorderObject* native = g_slots && !g_slots->empty() ? r : nullptr;
  __atomic_store_n(&g_native, native, __ATOMIC_RELEASE);
  if (!g_slots) return;
  const lp_api* table = native ? &g_table : nullptr;
  for (const lp_api** slot : *g_slots) __atomic_store_n(slot, table, __ATOMIC_RELEASE);
}

inline RecorderObject* native_recorder() {
  RecorderObject* r = __atomic_load_n(&g_native, __ATOMIC_ACQUIRE);
  return r && !__atomic_load_n(&r->closed, __ATOMIC_RELAXED) ? r : nullptr;
}

// The calling thread's state on r, found or registered: under its threading name when the thread
// holds the GIL, else under its OS thread name (a C++ thread's, or a Python thread's that released
// the GIL before its first record).
LP_COLD lp::ThreadState* native_register(RecorderObject* r) {
  if (lp::ThreadState* ts = r->recorder->find_thread()) return ts;
  if (PyGILState_Check()) return find_or_register_thread(r);
  char name[64] = "";
  pthread_getname_np(pthread_self(), name, sizeof name);
  return r->recorder->register_thread(name);
}

// Makes ts's active stack the calling asyncio task's, for a thread that has run tasks. With the
// GIL held this is the Python scopes' own check. Without it the thread's current context cannot
// change (no Python code runs on it), so the stack chosen for it still holds when no context switch
// happened since; after one (a task resumed, then released the GIL before any phase) choosing
// needs Python, and taking the GIL here could deadlock an extension whose GIL holder waits on a
// lock this thread holds: the entry is not recorded (false), rather than recorded in the wrong
// task's tree. Opening the outer C++ phase before releasing the GIL avoids it (docs/guide/cpp.md).
LP_COLD bool native_sync(RecorderObject* r, lp::ThreadState* ts) {
  if (PyGILState_Check()) return sync_active_stack(r, ts);
  PyThreadState* t = PyGILState_GetThisThreadState();
  return !t || same_context(ts, t);
}

// The calling thread's state on r with its active stack chosen, or nullptr.
inline lp::ThreadState* native_thread_state(RecorderObject* r) {
  lp::ThreadState* ts = r->recorder->thread_state();
  if (__builtin_expect(!ts, 0) && !(ts = native_register(r))) return nullptr;
  if (__builtin_expect(ts->has_task_stacks(), 0) && !native_sync(r, ts)) return nullptr;
  return ts;
}

uint32_t api_intern(const char* name, size_t len) {
  return lp::api_parts::intern(name, len);
}

// frame->impl: the recorder, the thread state and the stack the entry was made on.
int api_enter(uint32_t name, lp_frame* frame) {
  RecorderObject* r = native_recorder();
  if (!r || !name) return 0;
  lp::ThreadState* ts = native_thread_state(r);
  if (!ts || !ts->enter(name, frame)) return 0;
  frame->impl[0] = r;
  frame->impl[1] = ts;
  frame->impl[2] = ts->active_stack();
  return 1;
}

void api_exit(lp_frame* frame) {
  RecorderObject* r = static_cast<RecorderObject*>(frame->impl[0]);  // pinned: still alive
  lp::ThreadState* ts = static_cast<lp::ThreadState*>(frame->impl[1]);
  // The state is this thread's on r only while r's generation is the entry's: not in a forked
  // child (a reset recorder), where the entry's state is the parent's, leaked.
  lp::ThreadState* now = r->recorder->thread_state();
  if (!now) now = r->recorder->find_thread();
  if (now != ts) return;
  ts->exit_on(*static_cast<lp::PhaseStack*>(frame->impl[2]), frame);
}

void api_exit_raised(lp_frame* frame) {
  RecorderObject* r = static_cast<RecorderObject*>(frame->impl[0]);
  lp::ThreadState* ts = static_cast<lp::ThreadState*>(frame->impl[1]);
  lp::ThreadState* now = r->recorder->thread_state();
  if (!now) now = r->recorder->find_thread();
  if (now != ts) return;  // as api_exit: not this recorder's entry any more
  lp::PhaseStack& st = *static_cast<lp::PhaseStack*>(frame->impl[2]);
  ts->mark_raised_on(st, frame);
  ts->exit_on(st, frame);
}

void api_count(uint32_t name, int64_t n) {
  RecorderObject* r = native_recorder();
  if (!r || !name) return;
  if (lp::ThreadState* ts = native_thread_state(r)) ts->count(name, n);
}

size_t api_current(char* buf, size_t cap) {
  RecorderObject* r = native_recorder();
  if (!r) return 0;
  lp::ThreadState* ts = r->recorder->find_thread();
  if (!ts || (ts->has_task_stacks() && !native_sync(r, ts))) return 0;
  return lp::api_parts::current_name(*ts, buf, cap);
}

size_t api_capture(uint32_t* names, size_t cap) {
  RecorderObject* r = native_recorder();
  if (!r) return 0;
  lp::ThreadState* ts = native_thread_state(r);
  return ts ? lp::api_parts::capture(*ts, names, cap) : 0;
}

// frame->impl: the recorder, the thread state and the attached level (as with api_enter).
int api_attach_path(const uint32_t* names, size_t n, lp_frame* frame) {
  RecorderObject* r = native_recorder();
  if (!r || !names || n == 0) return 0;
  lp::ThreadState* ts = native_thread_state(r);
  if (!ts) return 0;
  uint32_t level = lp::api_parts::attach(*ts, names, n);
  if (!level) return 0;
  frame->impl[0] = r;
  frame->impl[1] = ts;
  frame->impl[2] = reinterpret_cast<void*>(uintptr_t(level));
  return 1;
}

void api_detach(lp_frame* frame) {
  RecorderObject* r = static_cast<RecorderObject*>(frame->impl[0]);  // pinned: still alive
  lp::ThreadState* ts = static_cast<lp::ThreadState*>(frame->impl[1]);
  lp::ThreadState* now = r->recorder->thread_state();
  if (!now) now = r->recorder->find_thread();
  if (now != ts) return;  // as api_exit: not this recorder's thread state any more
  ts->detach(uint32_t(reinterpret_cast<uintptr_t>(frame->impl[2])));
}

// Called by import_api() with the GIL held.
void api_attach(const lp_api** slot) {
  if (!slot) return;
  if (!g_slots) g_slots = new std::vector<const lp_api**>();
  if (std::find(g_slots->begin(), g_slots->end(), slot) == g_slots->end()) g_slots->push_back(slot);
  publish(g_installed);
}

constexpr const char kProvider[] = "lineprofiler._core";

const lp_api g_table = {
    LP_API_ABI_VERSION,
    uint32_t(sizeof(lp_api)),
    1,  // names_epoch: lp_core's name ids are never reused (a forked child inherits them)
    0,
    kProvider,
    api_intern,
    api_enter,
    api_exit,
    api_count,
    api_attach,
    api_current,
    api_exit_raised,
    api_capture,
    api_attach_path,
    api_detach,
};

}  // namespace

void c_api_installed(RecorderObject* r) {
  publish(r);
}

int add_c_api(PyObject* module) {
  PyObject* capsule = PyCapsule_New(const_cast<lp_api*>(&g_table), LP_API_CAPSULE_NAME, nullptr);
  if (!capsule) return -1;
  int rc = PyModule_AddObjectRef(module, "_C_API", capsule);
  Py_DECREF(capsule);
  return rc;
}

}  // namespace lp_module
