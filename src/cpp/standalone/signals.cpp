// standalone/signals.cpp: the flush-then-chain handlers, their pipes and the flusher thread.
#include "standalone/signals.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <initializer_list>
#include <thread>

namespace lp::standalone {

const int kFlushSignals[kFlushSignalCount] = {SIGTERM, SIGINT, SIGUSR1, SIGHUP};

namespace {

// Process-wide and never freed or closed: a handler that read the owner just before a detach may
// still write to these, and must never write into a descriptor reused for something else.
int g_req[2] = {-1, -1};          // handler -> flusher: one byte per signal (0: quit)
int g_done[2] = {-1, -1};         // flusher -> handler: one byte per flush done
std::atomic<int> g_owner_pid{0};  // the attached process; 0: handlers are inert
struct sigaction g_previous[kFlushSignalCount];
bool g_have_previous[kFlushSignalCount] = {};
SignalFlushFn g_fn = nullptr;
void* g_ctx = nullptr;
std::thread* g_flusher = nullptr;

constexpr unsigned char kQuit = 0;
constexpr unsigned char kFinalBit = 0x80;

int slot_of(int signum) {
  for (int i = 0; i < kFlushSignalCount; ++i) {
    if (kFlushSignals[i] == signum) return i;
  }
  return -1;
}

bool is_default(const struct sigaction& sa) {
  return !(sa.sa_flags & SA_SIGINFO) && sa.sa_handler == SIG_DFL;
}

bool is_ignored(const struct sigaction& sa) {
  return !(sa.sa_flags & SA_SIGINFO) && sa.sa_handler == SIG_IGN;
}

void handler(int signum, siginfo_t* info, void* uctx) {
  int saved_errno = errno;
  int slot = slot_of(signum);
  if (slot < 0) return;
  const struct sigaction& prev = g_previous[slot];
  bool final = is_default(prev);
  if (g_owner_pid.load(std::memory_order_acquire) == int(getpid())) {
    unsigned char msg = static_cast<unsigned char>(signum) | (final ? kFinalBit : 0);
    if (write(g_req[1], &msg, 1) == 1) {
      struct pollfd p = {g_done[0], POLLIN, 0};
      int left_ms = kSignalFlushWaitMs;
      while (left_ms > 0) {  // EINTR (another signal) just waits again, a little less
        int r = poll(&p, 1, left_ms);
        if (r > 0) {
          unsigned char done;
          ssize_t n = read(g_done[0], &done, 1);
          (void)n;
          break;
        }
        if (r == 0 || errno != EINTR) break;
        left_ms -= 100;
      }
    }
  }
  errno = saved_errno;
  if (prev.sa_flags & SA_SIGINFO) {
    if (prev.sa_sigaction) prev.sa_sigaction(signum, info, uctx);
  } else if (prev.sa_handler == SIG_IGN) {
    // ignored before us: still ignored
  } else if (prev.sa_handler == SIG_DFL) {
    // The default action: put it back and re-raise. The signal is blocked while this handler
    // runs, so it is delivered (and ends the process) as soon as the handler returns.
    sigaction(signum, &prev, nullptr);
    raise(signum);
  } else {
    prev.sa_handler(signum);
  }
  errno = saved_errno;
}

bool make_pipes() {
  if (g_req[0] >= 0) return true;
  int req[2], done[2];
  if (pipe2(req, O_CLOEXEC) != 0) return false;
  if (pipe2(done, O_CLOEXEC | O_NONBLOCK) != 0) {
    close(req[0]);
    close(req[1]);
    return false;
  }
  fcntl(req[1], F_SETFL, fcntl(req[1], F_GETFL) | O_NONBLOCK);  // a handler never blocks on it
  g_req[0] = req[0];
  g_req[1] = req[1];
  g_done[0] = done[0];
  g_done[1] = done[1];
  return true;
}

// Drops bytes a handler racing an earlier detach may have left.
void drain(int fd) {
  struct pollfd p = {fd, POLLIN, 0};
  unsigned char buf[64];
  while (poll(&p, 1, 0) > 0 && (p.revents & POLLIN)) {
    if (read(fd, buf, sizeof buf) <= 0) break;
  }
}

void flusher_main() {
  for (;;) {
    unsigned char msg;
    ssize_t n = read(g_req[0], &msg, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n != 1 || msg == kQuit) return;
    g_fn(g_ctx, msg & ~kFinalBit, (msg & kFinalBit) != 0);
    unsigned char done = 1;
    n = write(g_done[1], &done, 1);
    (void)n;
  }
}

}  // namespace

BlockFlushSignals::BlockFlushSignals() {
  sigset_t block;
  sigemptyset(&block);
  for (int s : kFlushSignals) sigaddset(&block, s);
  pthread_sigmask(SIG_BLOCK, &block, &saved_);
}

BlockFlushSignals::~BlockFlushSignals() {
  pthread_sigmask(SIG_SETMASK, &saved_, nullptr);
}

bool signals_attach(SignalFlushFn fn, void* ctx) {
  if (g_owner_pid.load() != 0 || g_flusher != nullptr || !make_pipes()) return false;
  drain(g_req[0]);
  drain(g_done[0]);
  g_fn = fn;
  g_ctx = ctx;
  try {
    BlockFlushSignals blocked;
    g_flusher = new std::thread(flusher_main);
  } catch (...) {
    return false;
  }
  g_owner_pid.store(int(getpid()), std::memory_order_release);
  for (int i = 0; i < kFlushSignalCount; ++i) {
    struct sigaction current;
    if (sigaction(kFlushSignals[i], nullptr, &current) != 0) continue;
    if ((current.sa_flags & SA_SIGINFO) && current.sa_sigaction == handler) {
      continue;  // ours, left inert by an earlier detach under someone else's: active again
    }
    if (kFlushSignals[i] == SIGINT && is_ignored(current)) continue;  // see kFlushSignals
    struct sigaction ours = {};
    ours.sa_sigaction = handler;
    ours.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&ours.sa_mask);
    // g_previous is written before ours is installed, and a handler reads only its own slot.
    g_previous[i] = current;
    g_have_previous[i] = true;
    if (sigaction(kFlushSignals[i], &ours, nullptr) != 0) g_have_previous[i] = false;
  }
  return true;
}

void signals_detach() {
  if (g_flusher == nullptr) return;
  g_owner_pid.store(0, std::memory_order_release);
  for (int i = 0; i < kFlushSignalCount; ++i) {
    struct sigaction current;
    if (!g_have_previous[i] || sigaction(kFlushSignals[i], nullptr, &current) != 0) continue;
    if ((current.sa_flags & SA_SIGINFO) && current.sa_sigaction == handler) {
      sigaction(kFlushSignals[i], &g_previous[i], nullptr);
      g_have_previous[i] = false;
    }
    // else a host installed its own on top of ours: ours stays, inert, chaining to g_previous
  }
  unsigned char quit = kQuit;
  ssize_t n;
  do {
    n = write(g_req[1], &quit, 1);
  } while (n < 0 && errno == EINTR);
  g_flusher->join();
  delete g_flusher;
  g_flusher = nullptr;
  g_fn = nullptr;
  g_ctx = nullptr;
}

void signals_forget_after_fork() {
  // The flusher thread is the parent's; its std::thread object is leaked, never joined here.
  // g_owner_pid still names the parent, so every handler in this process is inert already, and
  // none writes to the pipes: this process's copies of them are closed, so that a profiler the
  // child builds makes its own rather than share the parent's.
  for (int* fd : {&g_req[0], &g_req[1], &g_done[0], &g_done[1]}) {
    if (*fd >= 0) close(*fd);
    *fd = -1;
  }
  g_flusher = nullptr;
  g_fn = nullptr;
  g_ctx = nullptr;
  g_owner_pid.store(0);
}

}  // namespace lp::standalone
