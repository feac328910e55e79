// lp_core/perf_task_clock.cpp: opening per-thread task-clock events and closing them in a forked
// child.
#include "lp_core/perf_task_clock.h"

#include <errno.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <utility>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#define LP_PERF_HAVE_RDTSC 1
#else
#define LP_PERF_HAVE_RDTSC 0
#endif

namespace lp {
namespace detail {
std::atomic<uint32_t> g_fork_generation{0};
}

namespace {

// Every open event of this process: (fd, page). A forked child closes and unmaps all of them (they
// measure the parent's threads) before anything in the child can read one.
struct Registry {
  std::mutex mu;
  std::vector<std::pair<int, void*>> open;
};

Registry& registry() {
  static Registry* r = new Registry();  // leaked: used by at-fork handlers until process exit
  return *r;
}

void at_fork_prepare() {
  registry().mu.lock();
}
void at_fork_parent() {
  registry().mu.unlock();
}
void at_fork_child() {
  Registry& r = registry();
  long page = sysconf(_SC_PAGESIZE);
  for (auto& e : r.open) {
    munmap(e.second, size_t(page));
    ::close(e.first);
  }
  r.open.clear();
  detail::g_fork_generation.fetch_add(1, std::memory_order_relaxed);
  r.mu.unlock();
}

void install_fork_handlers() {
  static std::once_flag once;
  std::call_once(once, [] { pthread_atfork(at_fork_prepare, at_fork_parent, at_fork_child); });
}

}  // namespace

uint32_t fork_generation() {
  return detail::g_fork_generation.load(std::memory_order_relaxed);
}

int PerfTaskEvent::open() {
  close();
  install_fork_handlers();
  perf_event_attr attr;
  std::memset(&attr, 0, sizeof(attr));
  attr.type = PERF_TYPE_SOFTWARE;
  attr.size = sizeof(attr);
  attr.config = PERF_COUNT_SW_TASK_CLOCK;
  attr.exclude_kernel = 1;  // required at perf_event_paranoid 2; task-clock still counts all time
  attr.exclude_hv = 1;
  long fd = syscall(SYS_perf_event_open, &attr, 0 /* this thread */, -1 /* any cpu */,
                    -1 /* no group */, PERF_FLAG_FD_CLOEXEC);
  if (fd < 0) return errno ? errno : EINVAL;
  long page_size = sysconf(_SC_PAGESIZE);
  void* page = mmap(nullptr, size_t(page_size), PROT_READ, MAP_SHARED, int(fd), 0);
  if (page == MAP_FAILED) {
    int err = errno ? errno : EINVAL;
    ::close(int(fd));
    return err;
  }
  {
    std::lock_guard<std::mutex> lock(registry().mu);
    registry().open.emplace_back(int(fd), page);
  }
  fd_ = int(fd);
  page_ = static_cast<const volatile perf_event_mmap_page*>(page);
  gen_ = fork_generation();
  return 0;
}

void PerfTaskEvent::close() {
  if (!page_) return;
  if (current()) {
    void* page = const_cast<perf_event_mmap_page*>(page_);
    {
      std::lock_guard<std::mutex> lock(registry().mu);
      auto& open = registry().open;
      for (size_t i = 0; i < open.size(); ++i) {
        if (open[i].first == fd_) {
          open[i] = open.back();
          open.pop_back();
          break;
        }
      }
    }
    munmap(page, size_t(sysconf(_SC_PAGESIZE)));
    ::close(fd_);
  }  // else: opened in a parent process; the at-fork child handler already closed this copy
  page_ = nullptr;
  fd_ = -1;
}

bool PerfTaskEvent::cap_user_time() const {
  return page_ && page_->cap_user_time;
}

uint64_t PerfTaskEvent::user_time_from(uint64_t running_ns, uint64_t cyc, uint64_t time_offset,
                                       uint32_t time_mult, uint16_t time_shift, bool cap_short,
                                       uint64_t time_cycles, uint64_t time_mask) {
  // include/uapi/linux/perf_event.h, "If cap_usr_time the time since the last update".
  if (cap_short) cyc = time_cycles + ((cyc - time_cycles) & time_mask);
  uint64_t quot = cyc >> time_shift;
  uint64_t rem = cyc & ((uint64_t(1) << time_shift) - 1);
  uint64_t delta = time_offset + quot * time_mult + ((rem * time_mult) >> time_shift);
  return running_ns + delta;
}

uint64_t PerfTaskEvent::user_time_ns() const {
#if LP_PERF_HAVE_RDTSC
  const volatile perf_event_mmap_page* p = page_;
  uint32_t seq;
  uint64_t running, cyc, offset, cycles, mask;
  uint32_t mult;
  uint16_t shift;
  bool cap_short;
  do {
    seq = p->lock;
    std::atomic_signal_fence(std::memory_order_seq_cst);
    running = p->time_running;
    offset = p->time_offset;
    mult = p->time_mult;
    shift = p->time_shift;
    cap_short = p->cap_user_time_short;
    cycles = p->time_cycles;
    mask = p->time_mask;
    cyc = __rdtsc();
    std::atomic_signal_fence(std::memory_order_seq_cst);
  } while ((seq & 1) || p->lock != seq);
  return user_time_from(running, cyc, offset, mult, shift, cap_short, cycles, mask);
#else
  return 0;
#endif
}

}  // namespace lp
