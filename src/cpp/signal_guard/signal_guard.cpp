// signal_guard/signal_guard.cpp: lineprofiler._signal_guard, Python signal handlers that run.
//
// Python's C handler of a signal only sets a flag; the main thread runs the Python handler when
// it next checks, and a blocking call checks when it returns with EINTR. A signal that lands
// just before the main thread blocks (between the check and the sleep, as in an idle
// multiprocessing Pool worker's SemLock sem_wait) interrupts nothing: the Python handler does
// not run until something else wakes the thread, and Pool.terminate() waits forever for a
// worker whose SIGTERM handler saves its profile. guard(signum) wraps Python's C handler: after
// calling it, ours re-sends the signal to the main thread every 50 ms (a POSIX timer) until the
// Python handler calls seen(signum). A forked child gets timers of its own (pthread_atfork). A
// plain C module (no _core): a followed child loads it.
#include <Python.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cstring>

#ifndef sigev_notify_thread_id
#define sigev_notify_thread_id _sigev_un._tid
#endif

namespace {

constexpr long kNudgeNs = 50'000'000;
constexpr int kSignals = 65;  // 1..64 on Linux

struct Guard {
  struct sigaction python;  // Python's own C handler (it flags the Python-level one)
  timer_t timer;
  pid_t timer_pid = 0;  // the process the timer belongs to: timers do not survive fork
  volatile sig_atomic_t nudging = 0;
};
Guard g_guards[kSignals];
bool g_atfork_registered = false;

// A timer re-sending sig to the calling thread; false (errno set) when none could be made.
bool make_timer(int sig, Guard& g) {
  struct sigevent ev;
  std::memset(&ev, 0, sizeof ev);
  ev.sigev_notify = SIGEV_THREAD_ID;  // the calling (main) thread: the one Python wakes
  ev.sigev_signo = sig;
  ev.sigev_notify_thread_id = static_cast<pid_t>(syscall(SYS_gettid));
  if (timer_create(CLOCK_MONOTONIC, &ev, &g.timer) != 0) return false;
  g.timer_pid = getpid();
  g.nudging = 0;
  return true;
}

// A forked child inherits the handlers but not the timers: each guarded signal gets its own,
// aimed at the forking thread (the child's only one, which Python makes its main thread).
void after_fork_in_child() {
  for (int sig = 1; sig < kSignals; ++sig) {
    Guard& g = g_guards[sig];
    if (g.timer_pid != 0 && !make_timer(sig, g)) g.timer_pid = 0;
  }
}

void on_signal(int sig) {
  int saved = errno;
  Guard& g = g_guards[sig];
  g.python.sa_handler(sig);
  if (!g.nudging && g.timer_pid == getpid()) {
    g.nudging = 1;
    struct itimerspec every = {{0, kNudgeNs}, {0, kNudgeNs}};
    timer_settime(g.timer, 0, &every, nullptr);  // async-signal-safe
  }
  errno = saved;
}

bool parse_signum(PyObject* arg, int* sig) {
  long v = PyLong_AsLong(arg);
  if (v == -1 && PyErr_Occurred()) return false;
  if (v < 1 || v >= kSignals) {
    PyErr_SetString(PyExc_ValueError, "signal number out of range");
    return false;
  }
  *sig = static_cast<int>(v);
  return true;
}

PyObject* guard(PyObject*, PyObject* arg) {
  int sig;
  if (!parse_signum(arg, &sig)) return nullptr;
  Guard& g = g_guards[sig];
  struct sigaction cur;
  if (sigaction(sig, nullptr, &cur) != 0) return PyErr_SetFromErrno(PyExc_OSError);
  if (cur.sa_handler != on_signal) {
    if ((cur.sa_flags & SA_SIGINFO) || cur.sa_handler == SIG_DFL || cur.sa_handler == SIG_IGN) {
      Py_RETURN_FALSE;  // no Python handler: nothing to guard
    }
    g.python = cur;
  }
  if (!g_atfork_registered) {
    if (pthread_atfork(nullptr, nullptr, after_fork_in_child) != 0) {
      PyErr_SetString(PyExc_OSError, "pthread_atfork failed");
      return nullptr;
    }
    g_atfork_registered = true;
  }
  if (g.timer_pid != getpid() && !make_timer(sig, g)) return PyErr_SetFromErrno(PyExc_OSError);
  if (cur.sa_handler != on_signal) {
    struct sigaction ours = cur;
    ours.sa_handler = on_signal;
    ours.sa_flags &= ~SA_RESTART;  // a blocking call returns EINTR, so Python checks its flags
    if (sigaction(sig, &ours, nullptr) != 0) return PyErr_SetFromErrno(PyExc_OSError);
  }
  Py_RETURN_TRUE;
}

PyObject* seen(PyObject*, PyObject* arg) {
  int sig;
  if (!parse_signum(arg, &sig)) return nullptr;
  Guard& g = g_guards[sig];
  if (g.nudging && g.timer_pid == getpid()) {
    struct itimerspec off = {{0, 0}, {0, 0}};
    timer_settime(g.timer, 0, &off, nullptr);
  }
  g.nudging = 0;
  Py_RETURN_NONE;
}

PyMethodDef methods[] = {
    {"guard", guard, METH_O,
     "guard(signum) -> bool: from the main thread, after signal.signal(signum, handler): once the "
     "signal arrives it is re-sent to this thread every 50 ms until seen(signum), so that the "
     "Python handler runs even if the thread was about to block. False: no Python handler."},
    {"seen", seen, METH_O, "seen(signum): the Python handler of signum ran; stops the re-sending."},
    {nullptr, nullptr, 0, nullptr},
};

PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "_signal_guard",
                          "Python signal handlers that run even when the signal lands just "
                          "before the main thread blocks.",
                          -1, methods};

}  // namespace

PyMODINIT_FUNC PyInit__signal_guard(void) {
  return PyModule_Create(&module_def);
}
