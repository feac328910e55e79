// lp_core/cpu_clock.cpp: the start-up probe that picks a CPU-clock tier, and each tier's slow path.
#include "lp_core/cpu_clock.h"

#include <errno.h>
#include <sys/resource.h>

#include <cstdlib>
#include <cstring>
#include <mutex>

namespace lp {

const char* cpu_clock_tier_name(CpuClockTier tier) {
  switch (tier) {
    case CpuClockTier::kExact:
      return "exact";
    case CpuClockTier::kAnchored:
      return "anchored";
    case CpuClockTier::kSyscall:
      return "syscall";
  }
  return "unknown";
}

const char* cpu_clock_mode_name(CpuClockMode mode) {
  switch (mode) {
    case CpuClockMode::kAuto:
      return "auto";
    case CpuClockMode::kExact:
      return "exact";
    case CpuClockMode::kAnchored:
      return "anchored";
    case CpuClockMode::kSyscall:
      return "syscall";
  }
  return "unknown";
}

bool parse_cpu_clock_mode(const char* text, CpuClockMode* mode) {
  if (!text) return false;
  static const CpuClockMode kModes[] = {CpuClockMode::kAuto, CpuClockMode::kExact,
                                        CpuClockMode::kAnchored, CpuClockMode::kSyscall};
  for (CpuClockMode m : kModes) {
    if (std::strcmp(text, cpu_clock_mode_name(m)) == 0) {
      *mode = m;
      return true;
    }
  }
  return false;
}

bool parse_cpu_clock_tier(const char* text, CpuClockTier* tier) {
  CpuClockMode mode;
  if (!parse_cpu_clock_mode(text, &mode)) return false;
  switch (mode) {
    case CpuClockMode::kAuto:
      *tier = cpu_clock_probe().tier;
      break;
    case CpuClockMode::kExact:
      *tier = CpuClockTier::kExact;
      break;
    case CpuClockMode::kAnchored:
      *tier = CpuClockTier::kAnchored;
      break;
    case CpuClockMode::kSyscall:
      *tier = CpuClockTier::kSyscall;
      break;
  }
  return true;
}

namespace {

void sleep_ns(long ns) {
  timespec req{0, ns};
  nanosleep(&req, nullptr);
}

// Voluntary plus involuntary context switches of the calling thread so far.
uint64_t context_switches() {
  rusage ru;
  if (getrusage(RUSAGE_THREAD, &ru) != 0) return 0;
  return uint64_t(ru.ru_nvcsw) + uint64_t(ru.ru_nivcsw);
}

// Whether the page's user-space time tracks CLOCK_THREAD_CPUTIME_ID over a 200 us spin.
bool exact_agrees(const PerfTaskEvent& ev) {
  for (int attempt = 0; attempt < 3; ++attempt) {
    uint64_t u0 = ev.user_time_ns();
    uint64_t c0 = thread_cpu_syscall_ns();
    while (thread_cpu_syscall_ns() - c0 < 200'000) {
    }
    uint64_t u1 = ev.user_time_ns();
    uint64_t c1 = thread_cpu_syscall_ns();
    int64_t diff = int64_t(u1 - u0) - int64_t(c1 - c0);
    if (diff < 0) diff = -diff;
    if (u1 > u0 && diff < 10'000) return true;  // 5% of the spin
  }
  return false;
}

CpuClockProbe run_probe(CpuClockMode mode) {
  CpuClockProbe p;
  p.mode = mode;
  if (mode == CpuClockMode::kSyscall) {
    p.detail = "LINEPROFILER_CPU_CLOCK=syscall";
    return p;
  }
  PerfTaskEvent ev;
  p.perf_errno = ev.open();
  if (p.perf_errno) {
    p.detail = std::string("perf_event_open(task-clock) failed: ") + std::strerror(p.perf_errno);
    return p;
  }
  p.cap_user_time = ev.cap_user_time();
  // Across every sleep that switched the thread out (the kernel's own context-switch counts say
  // so; a sleep whose timer expired before the thread blocked switches nothing) the lock must
  // move. Three such sleeps are required.
  int switched = 0;
  bool missed = false;
  for (int i = 0; i < 20 && switched < 3; ++i) {
    uint32_t before = ev.lock();
    uint64_t switches = context_switches();
    sleep_ns(20'000);
    bool switched_out = context_switches() != switches;
    uint32_t after = ev.lock();  // read last: any switch counted above precedes it
    if (!switched_out) continue;
    ++switched;
    if (after == before || (after & 1)) missed = true;
  }
  p.lock_tracks_switches = switched == 3 && !missed;
  p.exact_validated = p.cap_user_time && exact_agrees(ev);
  bool want_exact = mode == CpuClockMode::kAuto || mode == CpuClockMode::kExact;
  if (want_exact && p.exact_validated) {
    p.tier = CpuClockTier::kExact;
    p.detail = "perf task-clock page with cap_user_time";
  } else if (mode == CpuClockMode::kExact) {
    p.detail = p.cap_user_time ? "cap_user_time is set but its time disagreed with the syscall"
                               : "the perf page has no cap_user_time";
  } else if (!p.lock_tracks_switches) {
    p.detail = "the perf page's lock did not move when the thread slept";
  } else {
    p.tier = CpuClockTier::kAnchored;
    p.detail = "perf page without cap_user_time; its lock moves at each reschedule";
  }
  return p;
}

std::mutex g_probe_mu;
bool g_probed = false;
CpuClockProbe g_probe;

}  // namespace

CpuClockProbe cpu_clock_probe() {
  std::lock_guard<std::mutex> lock(g_probe_mu);
  if (!g_probed) {
    CpuClockMode mode = CpuClockMode::kAuto;
    parse_cpu_clock_mode(std::getenv("LINEPROFILER_CPU_CLOCK"), &mode);
    g_probe = run_probe(mode);
    g_probed = true;
  }
  return g_probe;
}

CpuClockProbe cpu_clock_reprobe(CpuClockMode mode) {
  std::lock_guard<std::mutex> lock(g_probe_mu);
  g_probe = run_probe(mode);
  g_probed = true;
  return g_probe;
}

ThreadCpuClock::ThreadCpuClock(CpuClockTier want) {
  open_event(want);
}

bool ThreadCpuClock::open_event(CpuClockTier want) {
  tier_ = CpuClockTier::kSyscall;
  anchor_lock_ = 1;
  if (want == CpuClockTier::kSyscall) return true;
  if (ev_.open() != 0) return false;
  gen_ = fork_generation();
  if (want == CpuClockTier::kExact) {
    if (!ev_.cap_user_time()) {
      ev_.close();
      return false;
    }
    // Place the page's time on the CLOCK_THREAD_CPUTIME_ID scale: the system call's value against
    // the midpoint of two page reads around it.
    uint64_t u0 = ev_.user_time_ns();
    uint64_t c = thread_cpu_syscall_ns();
    uint64_t u1 = ev_.user_time_ns();
    exact_base_ns_ = c - (u0 + (u1 - u0) / 2);
  }
  tier_ = want;
  return true;
}

uint64_t ThreadCpuClock::anchor() {
  if (gen_ != detail::g_fork_generation.load(std::memory_order_relaxed)) return after_fork();
  ++slow_reads_;
  uint64_t c = 0;
  for (int attempt = 0; attempt < 4; ++attempt) {
    uint32_t l0 = ev_.lock();
    std::atomic_signal_fence(std::memory_order_seq_cst);
    uint64_t ta = wall_ticks();
    c = thread_cpu_syscall_ns();
    uint64_t tb = wall_ticks();
    std::atomic_signal_fence(std::memory_order_seq_cst);
    uint32_t l1 = ev_.lock();
    if (l0 == l1 && !(l0 & 1) && ticks_to_ns(tb - ta) <= kAnchorMaxCallNs) {
      // The kernel sampled c somewhere inside the call: place it at the call's midpoint.
      uint64_t mid = ta + (tb - ta) / 2;
      if (l0 == anchor_lock_) {
        // Never switched out since the previous anchor: audit the extrapolation.
        uint64_t window_ns = ticks_to_ns(mid - anchor_ticks_);
        audited_ns_ += window_ns;
        unbilled_ns_ += int64_t(anchor_cpu_ns_ + window_ns - c);
      }
      anchor_lock_ = l0;
      anchor_ticks_ = mid;
      anchor_cpu_ns_ = c;
      // The wall clock's scale, refreshed at each anchor (wall_clock_init may re-probe).
      double ns_per_tick = detail::g_wall.use_tsc ? detail::g_wall.ns_per_tick : 1.0;
      anchor_ns_per_tick_q32_ = uint64_t(ns_per_tick * 4294967296.0 + 0.5);
      anchor_max_ticks_ = uint64_t(double(kAnchorMaxAgeNs) / ns_per_tick);
      return c;
    }
  }
  anchor_lock_ = 1;  // switched out or paused during every attempt: no anchor; c is still exact
  return c;
}

uint64_t ThreadCpuClock::after_fork() {
  // A clock inherited by a forked child: its event measured the parent's thread and the at-fork
  // handler closed it. This thread owns the clock, so it opens its own.
  CpuClockTier want = tier_;
  ev_.close();
  open_event(want);
  return tier_ == CpuClockTier::kAnchored ? anchor()
         : tier_ == CpuClockTier::kExact  ? exact_base_ns_ + ev_.user_time_ns()
                                          : thread_cpu_syscall_ns();
}

double cpu_clock_read_cost_ns(ThreadCpuClock& clock, uint64_t n) {
  if (n == 0) return 0.0;
  uint64_t sink = 0;
  uint64_t t0 = monotonic_ns();
  for (uint64_t i = 0; i < n; ++i) sink += clock.now_ns();
  uint64_t t1 = monotonic_ns();
  asm volatile("" : : "r"(sink));
  return double(t1 - t0) / double(n);
}

}  // namespace lp
