// standalone/front.cpp: the lp_api table over the calling thread's own ThreadState.
#include "standalone/front.h"

#include <pthread.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include "lp_core/api_parts.h"
#include "lp_core/recorder.h"

#ifndef LP_VERSION
#define LP_VERSION "unknown"
#endif

namespace lp::standalone {

namespace {

std::atomic<Recorder*> g_recorder{nullptr};
std::mutex g_slots_mu;
std::vector<const lp_api**>* g_slots = new std::vector<const lp_api**>();  // attached consumers

// The calling thread's name as the OS has it (pthread_setname_np; the program's name on the main
// thread), registered with rec on the thread's first record.
__attribute__((noinline, cold)) ThreadState* register_calling_thread(Recorder* rec) {
  ThreadState* ts = rec->find_thread();
  if (ts) return ts;
  char name[64] = {0};
  if (pthread_getname_np(pthread_self(), name, sizeof name) != 0) name[0] = '\0';
  return rec->register_thread(name);
}

inline ThreadState* state_of(Recorder* rec) {
  ThreadState* ts = rec->thread_state();
  return ts ? ts : register_calling_thread(rec);
}

uint32_t api_intern(const char* name, size_t len) {
  return api_parts::intern(name, len);
}

// The frame keeps (recorder, thread state) of the entry: exit() closes it there, and only while
// that recorder is still the installed one (closed, replaced or in a forked child: nothing).
int api_enter(uint32_t name, lp_frame* frame) {
  Recorder* rec = g_recorder.load(std::memory_order_acquire);
  if (!rec || name == 0) return 0;
  ThreadState* ts = state_of(rec);
  if (!ts->enter(name, frame)) return 0;
  frame->impl[0] = rec;
  frame->impl[1] = ts;
  return 1;
}

void api_exit(lp_frame* frame) {
  Recorder* rec = g_recorder.load(std::memory_order_acquire);
  if (!rec || frame->impl[0] != rec) return;
  static_cast<ThreadState*>(frame->impl[1])->exit(frame);
}

void api_exit_raised(lp_frame* frame) {
  Recorder* rec = g_recorder.load(std::memory_order_acquire);
  if (!rec || frame->impl[0] != rec) return;
  ThreadState* ts = static_cast<ThreadState*>(frame->impl[1]);
  ts->mark_raised_on(*ts->active_stack(), frame);
  ts->exit(frame);
}

void api_count(uint32_t name, int64_t n) {
  Recorder* rec = g_recorder.load(std::memory_order_acquire);
  if (!rec || name == 0) return;
  state_of(rec)->count(name, n);
}

size_t api_current(char* buf, size_t cap) {
  Recorder* rec = g_recorder.load(std::memory_order_acquire);
  ThreadState* ts = rec ? rec->thread_state() : nullptr;
  if (rec && !ts) ts = rec->find_thread();
  return ts ? api_parts::current_name(*ts, buf, cap) : 0;
}

size_t api_capture(uint32_t* names, size_t cap) {
  Recorder* rec = g_recorder.load(std::memory_order_acquire);
  return rec ? api_parts::capture(*state_of(rec), names, cap) : 0;
}

// As api_enter: the frame keeps (recorder, thread state), and the attached level.
int api_attach_path(const uint32_t* names, size_t n, lp_frame* frame) {
  Recorder* rec = g_recorder.load(std::memory_order_acquire);
  if (!rec || !names || n == 0) return 0;
  ThreadState* ts = state_of(rec);
  uint32_t level = api_parts::attach(*ts, names, n);
  if (!level) return 0;
  frame->impl[0] = rec;
  frame->impl[1] = ts;
  frame->impl[2] = reinterpret_cast<void*>(uintptr_t(level));
  return 1;
}

void api_detach(lp_frame* frame) {
  Recorder* rec = g_recorder.load(std::memory_order_acquire);
  if (!rec || frame->impl[0] != rec) return;
  static_cast<ThreadState*>(frame->impl[1])
      ->detach(uint32_t(reinterpret_cast<uintptr_t>(frame->impl[2])));
}

void api_attach(const lp_api** slot);

const lp_api g_table = {
    LP_API_ABI_VERSION,
    sizeof(lp_api),
    1,  // names_epoch: lp_core's name ids are never reused
    0,
    "liblineprofiler " LP_VERSION,
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

void api_attach(const lp_api** slot) {
  if (!slot) return;
  std::lock_guard<std::mutex> lock(g_slots_mu);
  for (const lp_api** s : *g_slots) {
    if (s == slot) return;
  }
  g_slots->push_back(slot);
  __atomic_store_n(slot, g_recorder.load() ? &g_table : nullptr, __ATOMIC_RELEASE);
}

}  // namespace

const lp_api* standalone_api() {
  return &g_table;
}

void install_recorder(Recorder* rec) {
  std::lock_guard<std::mutex> lock(g_slots_mu);
  g_recorder.store(rec, std::memory_order_release);
  for (const lp_api** s : *g_slots) __atomic_store_n(s, rec ? &g_table : nullptr, __ATOMIC_RELEASE);
}

void forget_after_fork_in_child() {
  new (&g_slots_mu) std::mutex();  // a parent thread may have held it at the fork
  g_recorder.store(nullptr);
  for (const lp_api** s : *g_slots) __atomic_store_n(s, nullptr, __ATOMIC_RELEASE);
}

Recorder* installed_recorder() {
  return g_recorder.load(std::memory_order_acquire);
}

}  // namespace lp::standalone
