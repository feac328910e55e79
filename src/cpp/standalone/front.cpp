// standalone/front.cpp: phase entry, exit, count and current() on the calling thread's ThreadState.
#include "standalone/front.h"

#include <pthread.h>

#include <atomic>
#include <cstring>
#include <string>

#include "lp_core/names.h"
#include "lp_core/recorder.h"

namespace lp::standalone {

namespace {

std::atomic<Recorder*> g_recorder{nullptr};

// The calling thread's name as the OS has it (pthread_setname_np; the program name on the main
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

}  // namespace

void install_recorder(Recorder* rec) {
  g_recorder.store(rec, std::memory_order_release);
}

Recorder* installed_recorder() {
  return g_recorder.load(std::memory_order_acquire);
}

uint32_t front_intern(const char* name, size_t len) {
  return NameTable::instance().intern(std::string_view(name, len));
}

bool front_enter(uint32_t name_id, const void* token) {
  Recorder* rec = g_recorder.load(std::memory_order_acquire);
  if (!rec) return false;
  return state_of(rec)->enter(name_id, token);
}

void front_exit(const void* token) {
  Recorder* rec = g_recorder.load(std::memory_order_acquire);
  if (!rec) return;
  ThreadState* ts = rec->thread_state();
  if (!ts && !(ts = rec->find_thread())) return;
  ts->exit(token);
}

void front_count(uint32_t name_id, int64_t n) {
  Recorder* rec = g_recorder.load(std::memory_order_acquire);
  if (!rec) return;
  state_of(rec)->count(name_id, n);
}

size_t front_current(char* buf, size_t cap) {
  std::string name;
  Recorder* rec = g_recorder.load(std::memory_order_acquire);
  ThreadState* ts = rec ? rec->thread_state() : nullptr;
  if (rec && !ts) ts = rec->find_thread();
  if (ts) {
    uint32_t id = ts->current_name();
    if (id != kRootNameId) name = NameTable::instance().name(id);
  }
  if (cap > 0) {
    size_t n = name.size() < cap - 1 ? name.size() : cap - 1;
    std::memcpy(buf, name.data(), n);
    buf[n] = '\0';
  }
  return name.size();
}

}  // namespace lp::standalone
