// tests/cpp/test_cpu_clock.cpp: each CPU-clock tier against CLOCK_THREAD_CPUTIME_ID over mixed
// phases.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "lp_core/cpu_clock.h"
#include "lp_core/perf_task_clock.h"
#include "lp_core/recorder.h"
#include "skip.h"

namespace {

using lp::CpuClockTier;
using lp::thread_cpu_syscall_ns;
using lp::ThreadCpuClock;

void spin_ns(uint64_t ns) {
  uint64_t t = lp::monotonic_ns();
  while (lp::monotonic_ns() - t < ns) {
  }
}

// Spins until the thread has used ns of CPU time (wall spins get less on a loaded machine).
void spin_cpu_ns(uint64_t ns) {
  uint64_t t = thread_cpu_syscall_ns();
  while (thread_cpu_syscall_ns() - t < ns) {
  }
}

void sleep_ns(uint64_t ns) {
  timespec req{time_t(ns / 1000000000ull), long(ns % 1000000000ull)};
  nanosleep(&req, nullptr);
}

// Hypervisor steal of all CPUs so far, in ns (/proc/stat counts it in USER_HZ ticks).
uint64_t steal_ns() {
  std::ifstream f("/proc/stat");
  std::string name;
  uint64_t v[8] = {};
  f >> name;
  for (auto& x : v) f >> x;
  long hz = sysconf(_SC_CLK_TCK);
  return name == "cpu" && hz > 0 ? v[7] * (1000000000ull / uint64_t(hz)) : 0;
}

// A helper thread that, per request, sleeps the requested ns and then answers through a pipe:
// the main thread's read() is a real blocking I/O wait.
class PipeServer {
 public:
  PipeServer() {
    REQUIRE(pipe(req_) == 0);
    REQUIRE(pipe(resp_) == 0);
    thread_ = std::thread([this] {
      uint64_t ns;
      while (read(req_[0], &ns, sizeof ns) == sizeof ns && ns) {
        sleep_ns(ns);
        char c = 'x';
        if (write(resp_[1], &c, 1) != 1) break;
      }
    });
  }
  ~PipeServer() {
    uint64_t zero = 0;
    if (write(req_[1], &zero, sizeof zero) != sizeof zero) std::abort();
    thread_.join();
    for (int fd : {req_[0], req_[1], resp_[0], resp_[1]}) close(fd);
  }
  void blocking_read_after(uint64_t ns) {
    REQUIRE(write(req_[1], &ns, sizeof ns) == sizeof ns);
    char c;
    REQUIRE(read(resp_[0], &c, 1) == 1);
  }

 private:
  int req_[2], resp_[2];
  std::thread thread_;
};

struct MixedResult {
  int phases = 0;
  uint64_t max_outside_ns = 0;  // the worst phase
  int outside_5us = 0;          // phases whose clock delta lies > 5 us outside the bracket
  uint64_t sum_outside_ns = 0;  // total distance outside the brackets
  uint64_t truth_cpu_ns = 0;    // CLOCK_THREAD_CPUTIME_ID over all phases
  uint64_t off_cpu_ns = 0;      // wall - truth over the sleep/pipe/yield phases
  uint64_t steal_ns = 0;        // /proc/stat steal over the run (all CPUs)
};

// Runs n phases of spin / sleep / yield / blocking pipe read / short spin. Each phase is bracketed
// by system-call reads on both sides of the clock's own read, so the true CPU time of the clock's
// interval lies in [s1a - s0b, s1b - s0a]; a correct clock's delta lies in that bracket.
MixedResult run_mixed(ThreadCpuClock& clock, int n, uint64_t seed) {
  PipeServer server;
  std::mt19937_64 rng(seed);
  MixedResult r;
  uint64_t steal0 = steal_ns();
  for (int i = 0; i < n; ++i) {
    int kind = int(rng() % 5);
    uint64_t d = 20'000 + rng() % 400'000;
    uint64_t w0 = lp::monotonic_ns();
    uint64_t s0a = thread_cpu_syscall_ns();
    uint64_t c0 = clock.now_ns();
    uint64_t s0b = thread_cpu_syscall_ns();
    switch (kind) {
      case 0:
        spin_ns(d);
        break;
      case 1:
        sleep_ns(d);
        break;
      case 2:
        for (int k = 0; k < 10; ++k) sched_yield();
        spin_ns(d / 4);
        break;
      case 3:
        server.blocking_read_after(d);
        spin_ns(d / 8);
        break;
      case 4:
        spin_ns(d / 100);
        break;
    }
    uint64_t s1a = thread_cpu_syscall_ns();
    uint64_t c1 = clock.now_ns();
    uint64_t s1b = thread_cpu_syscall_ns();
    uint64_t w1 = lp::monotonic_ns();
    int64_t got = int64_t(c1 - c0);
    int64_t lo = int64_t(s1a - s0b), hi = int64_t(s1b - s0a);
    uint64_t outside = got < lo ? uint64_t(lo - got) : got > hi ? uint64_t(got - hi) : 0;
    r.phases += 1;
    r.outside_5us += outside > 5'000;
    r.sum_outside_ns += outside;
    if (outside > r.max_outside_ns) r.max_outside_ns = outside;
    r.truth_cpu_ns += s1a - s0b;
    if (kind == 1 || kind == 3) r.off_cpu_ns += (w1 - w0) - (s1b - s0a);
  }
  r.steal_ns = steal_ns() - steal0;
  return r;
}

// The documented bound, asserted: at most 2% of phases fall more than 5 us outside the truth
// bracket, and the total distance outside stays within 2% of the CPU time plus the steal the
// kernel reported meanwhile. A clock that counted wall time (or missed a reschedule) would be off
// by the phases' off-CPU time, which the first CHECK proves is far larger than the tolerance.
void check_bound(const MixedResult& r, const char* tier) {
  INFO("tier=" << std::string(tier) << " phases=" << r.phases << " outside_5us=" << r.outside_5us
               << " sum_outside_ns=" << r.sum_outside_ns << " max_outside_ns=" << r.max_outside_ns
               << " truth_cpu_ns=" << r.truth_cpu_ns << " off_cpu_ns=" << r.off_cpu_ns
               << " steal_ns=" << r.steal_ns);
  uint64_t tolerance_ns = r.truth_cpu_ns / 50 + r.steal_ns;
  CHECK(r.off_cpu_ns > 10 * (r.truth_cpu_ns / 50 + 1'000'000));
  CHECK(r.outside_5us * 50 <= r.phases);
  CHECK(r.sum_outside_ns <= tolerance_ns);
}

bool perf_available() {
  return lp::cpu_clock_probe().perf_errno == 0;
}

}  // namespace

TEST_CASE("cpu clock: tier and mode names round-trip") {
  lp::CpuClockMode mode;
  for (const char* name : {"auto", "exact", "anchored", "syscall"}) {
    REQUIRE(lp::parse_cpu_clock_mode(name, &mode));
    CHECK(std::string(lp::cpu_clock_mode_name(mode)) == name);
  }
  CHECK_FALSE(lp::parse_cpu_clock_mode("fast", &mode));
  CHECK_FALSE(lp::parse_cpu_clock_mode(nullptr, &mode));
  CHECK(std::string(lp::cpu_clock_tier_name(CpuClockTier::kExact)) == "exact");
  CHECK(std::string(lp::cpu_clock_tier_name(CpuClockTier::kAnchored)) == "anchored");
  CHECK(std::string(lp::cpu_clock_tier_name(CpuClockTier::kSyscall)) == "syscall");
}

TEST_CASE("cpu clock: user-space time arithmetic is the kernel's documented formula") {
  // delta = time_offset + (cyc >> shift) * mult + (((cyc & mask) * mult) >> shift), against a
  // 128-bit reference of time_offset + cyc * mult / 2^shift.
  std::mt19937_64 rng(7);
  for (int i = 0; i < 1000; ++i) {
    uint64_t cyc = rng() >> 14;  // a TSC of a few days (2^50 cycles)
    uint32_t mult = uint32_t(rng() % (1u << 24)) + 1;
    uint16_t shift = uint16_t(16 + rng() % 16);
    uint64_t offset = uint64_t(-int64_t(rng() % (1ull << 50)));
    unsigned __int128 ref = ((unsigned __int128)cyc * mult) >> shift;
    uint64_t want = 1234 + offset + uint64_t(ref);
    uint64_t got = lp::PerfTaskEvent::user_time_from(1234, cyc, offset, mult, shift, false, 0, 0);
    CHECK(got == want);
  }
  // cap_user_time_short: only the low bits of the counter are valid; they extend time_cycles.
  uint64_t got =
      lp::PerfTaskEvent::user_time_from(0, 0xABCD0000'00000123ull, 0, 1, 0, true, 0x100, 0xFFFF);
  CHECK(got == 0x123);
}

TEST_CASE("cpu clock: the syscall tier lies in the truth bracket over mixed phases" *
          doctest::test_suite("timing")) {
  ThreadCpuClock clock(CpuClockTier::kSyscall);
  REQUIRE(clock.tier() == CpuClockTier::kSyscall);
  MixedResult r = run_mixed(clock, 200, 1);
  check_bound(r, "syscall");
  CHECK(r.sum_outside_ns == 0);  // the same clock, read between the bracket's reads
}

TEST_CASE("cpu clock: the anchored tier holds its error bound over mixed phases" *
          doctest::test_suite("may skip: anchored tier")) {
  LP_SKIP_IF(!perf_available() || !lp::cpu_clock_probe().lock_tracks_switches,
             "anchored tier: " + std::string(lp::cpu_clock_probe().detail));
  ThreadCpuClock clock(CpuClockTier::kAnchored);
  REQUIRE(clock.tier() == CpuClockTier::kAnchored);
  MixedResult r = run_mixed(clock, 600, 2);
  check_bound(r, "anchored");
  // The hard per-phase bound: each end is high by less than one anchor age of unbilled time.
  CHECK(r.max_outside_ns <= lp::kAnchorMaxAgeNs + lp::kAnchorMaxCallNs / 2);
  // It is a fast tier: most reads did not make the system call.
  CHECK(clock.slow_reads() < uint64_t(r.phases) * 2 * 3 / 4);
}

TEST_CASE("cpu clock: the exact tier holds its error bound over mixed phases" *
          doctest::test_suite("may skip: exact tier")) {
  LP_SKIP_IF(!lp::cpu_clock_probe().exact_validated,
             "exact tier (no cap_user_time here): " + std::string(lp::cpu_clock_probe().detail));
  ThreadCpuClock clock(CpuClockTier::kExact);
  REQUIRE(clock.tier() == CpuClockTier::kExact);
  check_bound(run_mixed(clock, 600, 3), "exact");
}

TEST_CASE("cpu clock: the page's lock moves at every context switch" *
          doctest::test_suite("may skip: perf event")) {
  LP_SKIP_IF(!perf_available(), "the page's lock: no perf task-clock event here");
  lp::PerfTaskEvent ev;
  REQUIRE(ev.open() == 0);
  auto switches = [] {
    rusage ru;
    REQUIRE(getrusage(RUSAGE_THREAD, &ru) == 0);
    return uint64_t(ru.ru_nvcsw) + uint64_t(ru.ru_nivcsw);
  };
  int switched = 0;
  for (int i = 0; i < 40; ++i) {
    uint32_t before = ev.lock();
    uint64_t s0 = switches();
    CHECK(before % 2 == 0);
    if (i % 2) {
      sleep_ns(10'000);
    } else {
      sched_yield();
    }
    bool switched_out = switches() != s0;
    uint32_t after = ev.lock();  // read last: any switch counted above precedes it
    if (switched_out) {
      ++switched;
      CHECK(after != before);  // switched out and back in: the kernel rewrote the page
    }
  }
  CHECK(switched >= 10);  // the sleeps do switch (a few may expire before blocking)
}

TEST_CASE("cpu clock: a tier this machine lacks falls back to the system call" *
          doctest::test_suite("may skip: no exact tier")) {
  LP_SKIP_IF(lp::cpu_clock_probe().cap_user_time,
             "fallback from the exact tier: exact is real here, nothing to fall back from");
  ThreadCpuClock clock(CpuClockTier::kExact);
  CHECK(clock.tier() == CpuClockTier::kSyscall);
  uint64_t c0 = clock.now_ns();
  uint64_t t0 = thread_cpu_syscall_ns();
  CHECK(c0 <= t0);
}

TEST_CASE("cpu clock: each thread measures itself with its own event" *
          doctest::test_suite("timing")) {
  CpuClockTier tier = lp::cpu_clock_probe().tier;
  std::atomic<int> ready{0};
  int64_t err[2] = {0, 0};
  uint64_t got[2] = {0, 0};
  auto body = [&](int i) {
    ThreadCpuClock clock(tier);
    ready.fetch_add(1);
    while (ready.load() < 2) {
    }
    uint64_t s0 = thread_cpu_syscall_ns();
    uint64_t c0 = clock.now_ns();
    if (i == 0) {
      spin_cpu_ns(30'000'000);
    } else {
      for (int k = 0; k < 30; ++k) sleep_ns(1'000'000);
    }
    uint64_t c1 = clock.now_ns();
    uint64_t s1 = thread_cpu_syscall_ns();
    got[i] = c1 - c0;
    err[i] = int64_t(c1 - c0) - int64_t(s1 - s0);
  };
  std::thread a(body, 0), b(body, 1);
  a.join();
  b.join();
  INFO("spinner got " << got[0] << " err " << err[0] << "; sleeper got " << got[1] << " err "
                      << err[1]);
  CHECK(got[0] > 25'000'000);
  CHECK(got[1] < 5'000'000);
  CHECK(std::llabs(err[0]) < 300'000);  // 1% of the spin
  CHECK(std::llabs(err[1]) < 300'000);
}

TEST_CASE("cpu clock: a forked child closes the parent's events and reopens its own" *
          doctest::test_suite("may skip: perf event")) {
  LP_SKIP_IF(!perf_available(), "events across fork: no perf task-clock event here");
  ThreadCpuClock clock(CpuClockTier::kAnchored);
  REQUIRE(clock.tier() == CpuClockTier::kAnchored);
  lp::PerfTaskEvent probe;
  REQUIRE(probe.open() == 0);
  int parent_fd = probe.fd();
  clock.now_ns();
  uint32_t gen = lp::fork_generation();
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    int bad = 0;
    if (fcntl(parent_fd, F_GETFD) != -1) bad |= 1;  // the parent's event is closed in the child
    if (lp::fork_generation() != gen + 1) bad |= 2;
    uint64_t slow0 = clock.slow_reads();
    uint64_t s0 = thread_cpu_syscall_ns();
    uint64_t c0 = clock.now_ns();  // reopens this (the child's) thread's event
    spin_cpu_ns(20'000'000);
    uint64_t c1 = clock.now_ns();
    uint64_t s1 = thread_cpu_syscall_ns();
    if (clock.tier() != CpuClockTier::kAnchored) bad |= 4;
    if (clock.slow_reads() == slow0) bad |= 8;
    if (std::llabs(int64_t(c1 - c0) - int64_t(s1 - s0)) > 200'000) bad |= 16;
    _exit(bad);
  }
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(fcntl(parent_fd, F_GETFD) != -1);  // still open in the parent
  CHECK(lp::fork_generation() == gen);
}

TEST_CASE("cpu clock: the recorder bills each phase the CPU time of its probed tier" *
          doctest::test_suite("timing")) {
  lp::Recorder rec(lp::RecorderOptions{true});
  CHECK(rec.cpu_tier() == lp::cpu_clock_probe().tier);
  lp::ThreadState* ts = rec.register_thread("main");
  CHECK(ts->cpu_tier() == rec.cpu_tier());
  const uint32_t ids[2] = {1001, 1002};  // spin, sleep
  uint64_t inner[2] = {0, 0}, outer[2] = {0, 0};
  int token;
  for (int i = 0; i < 20; ++i) {
    for (int k = 0; k < 2; ++k) {
      uint64_t o0 = thread_cpu_syscall_ns();
      ts->enter(ids[k], &token);
      uint64_t i0 = thread_cpu_syscall_ns();
      if (k == 0) {
        spin_cpu_ns(1'000'000);
      } else {
        sleep_ns(1'000'000);
      }
      uint64_t i1 = thread_cpu_syscall_ns();
      ts->exit(&token);
      uint64_t o1 = thread_cpu_syscall_ns();
      inner[k] += i1 - i0;
      outer[k] += o1 - o0;
    }
  }
  auto snap = rec.snapshot();
  REQUIRE(snap.size() == 1);
  uint64_t cpu[2] = {0, 0}, wall[2] = {0, 0};
  for (auto& n : snap[0].nodes) {
    for (int k = 0; k < 2; ++k) {
      if (n.name_id == ids[k]) {
        cpu[k] = n.cpu_ns;
        wall[k] = n.wall_ns;
      }
    }
  }
  for (int k = 0; k < 2; ++k) {
    INFO("phase " << k << " cpu " << cpu[k] << " inner " << inner[k] << " outer " << outer[k]
                  << " wall " << wall[k]);
    // The recorder's interval lies between the inner and outer reads; the tolerance is the tier's
    // aggregate bound (2% of the CPU time) plus 10 us a call.
    uint64_t tol = outer[k] / 50 + 20 * 10'000;
    CHECK(cpu[k] + tol >= inner[k]);
    CHECK(cpu[k] <= outer[k] + tol);
  }
  CHECK(cpu[0] >= 20'000'000 - 20 * 10'000);
  // The sleeping phase is mostly waiting: a clock that counted wall time fails this. Not 10x: under
  // ASan on a loaded host a 1 ms sleep's wake-up and the boundary reads cost ~0.2 ms of CPU.
  CHECK(wall[1] > 4 * cpu[1]);
}

TEST_CASE("cpu clock: an unprivileged user opens the event at perf_event_paranoid <= 2" *
          doctest::test_suite("may skip: root and perf event")) {
  // exclude_kernel=1 is what makes the task clock available without privileges at paranoid 2.
  LP_SKIP_IF(geteuid() != 0 || !perf_available(),
             "unprivileged perf event: needs root (to drop to another user) and a perf event");
  int paranoid = 99;
  std::ifstream("/proc/sys/kernel/perf_event_paranoid") >> paranoid;
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    if (setgid(65534) != 0 || setuid(65534) != 0) _exit(100);
    lp::PerfTaskEvent ev;
    int err = ev.open();
    if (paranoid <= 2) _exit(err == 0 ? 0 : 1);
    _exit(err != 0 ? 0 : 2);  // paranoid >= 3: refused, and the probe falls back
  }
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  INFO("perf_event_paranoid=" << paranoid);
  CHECK(WEXITSTATUS(status) == 0);
}
