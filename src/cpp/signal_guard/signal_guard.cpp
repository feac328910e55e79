// signal_guard/signal_guard.cpp: lineprofiler._signal_guard, Python signal handlers that run.
//
// Python's C handler of a signal only sets a flag; the main thread runs the Python handler when
// it next checks, and a blocking call checks when it returns with EINTR. A signal that lands
// just before the main thread blocks (between the check and the sleep, as in an idle
// multiprocessing Pool worker's SemLock sem_wait) interrupts nothing: the Python handler does
// not run until something else wakes the thread, and Pool.terminate() waits forever for a
// worker whose SIGTERM handler saves its profile. guard(signum) wraps Python's C handler: after
// calling it, ours re-sends the signal to the main thread every 50 ms (a POSIX timer) until the
// Python handler calls seen(signum). A forked child gets timers of its own (pthread_atfork).
//
// A library may put a C handler of its own under Python's (torch's DataLoader worker installs one
// for SIGTERM that exits at once when the parent sends it): Python still reports SIG_DFL there.
// note_foreign() keeps such a handler, ours records each signal's siginfo, and call_foreign()
// runs the library's handler with it after the Python handler has flushed; restore_foreign()
// puts it back when the Python handler goes. A plain C module (no _core): a followed child loads
// it.
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
  bool python_known = false;
  struct sigaction foreign;  // a library's C handler found under Python's SIG_DFL/SIG_IGN
  bool has_foreign = false;
  siginfo_t info;  // the last delivery of the signal that was not one of our nudges
  volatile sig_atomic_t has_info = 0;
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

void on_signal(int sig, siginfo_t* info, void*) {
  int saved = errno;
  Guard& g = g_guards[sig];
  if (info != nullptr && info->si_code != SI_TIMER) {
    g.has_info = 0;
    g.info = *info;
    g.has_info = 1;
  }
  g.python.sa_handler(sig);
  if (!g.nudging && g.timer_pid == getpid()) {
    g.nudging = 1;
    struct itimerspec every = {{0, kNudgeNs}, {0, kNudgeNs}};
    timer_settime(g.timer, 0, &every, nullptr);  // async-signal-safe
  }
  errno = saved;
}

bool is_ours(const struct sigaction& sa) {
  return (sa.sa_flags & SA_SIGINFO) && sa.sa_sigaction == on_signal;
}

bool is_default_or_ignore(const struct sigaction& sa) {
  return !(sa.sa_flags & SA_SIGINFO) && (sa.sa_handler == SIG_DFL || sa.sa_handler == SIG_IGN);
}

bool same_handler(const struct sigaction& a, const struct sigaction& b) {
  if ((a.sa_flags & SA_SIGINFO) != (b.sa_flags & SA_SIGINFO)) return false;
  if (a.sa_flags & SA_SIGINFO) return a.sa_sigaction == b.sa_sigaction;
  return a.sa_handler == b.sa_handler;
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
  if (!is_ours(cur)) {
    if (g.has_foreign && same_handler(cur, g.foreign)) {
      // The library's handler went on top of ours (note_foreign kept it): ours goes back in
      // front of Python's, as it was.
      if (!g.python_known) Py_RETURN_FALSE;
    } else if ((cur.sa_flags & SA_SIGINFO) || is_default_or_ignore(cur)) {
      Py_RETURN_FALSE;  // no Python handler: nothing to guard
    } else {
      g.python = cur;
      g.python_known = true;
    }
  }
  if (!g_atfork_registered) {
    if (pthread_atfork(nullptr, nullptr, after_fork_in_child) != 0) {
      PyErr_SetString(PyExc_OSError, "pthread_atfork failed");
      return nullptr;
    }
    g_atfork_registered = true;
  }
  if (g.timer_pid != getpid() && !make_timer(sig, g)) return PyErr_SetFromErrno(PyExc_OSError);
  if (!is_ours(cur)) {
    struct sigaction ours = g.python;
    ours.sa_sigaction = on_signal;
    ours.sa_flags |= SA_SIGINFO;
    ours.sa_flags &= ~SA_RESTART;  // a blocking call returns EINTR, so Python checks its flags
    if (sigaction(sig, &ours, nullptr) != 0) return PyErr_SetFromErrno(PyExc_OSError);
  }
  Py_RETURN_TRUE;
}

PyObject* note_foreign(PyObject*, PyObject* arg) {
  int sig;
  if (!parse_signum(arg, &sig)) return nullptr;
  Guard& g = g_guards[sig];
  struct sigaction cur;
  if (sigaction(sig, nullptr, &cur) != 0) return PyErr_SetFromErrno(PyExc_OSError);
  if (is_default_or_ignore(cur)) {
    g.has_foreign = false;  // nothing under Python's disposition now
    Py_RETURN_FALSE;
  }
  if (is_ours(cur) || (g.python_known && same_handler(cur, g.python))) {
    return PyBool_FromLong(g.has_foreign);  // ours or Python's in front: what was kept stays
  }
  g.foreign = cur;
  g.has_foreign = true;
  Py_RETURN_TRUE;
}

PyObject* call_foreign(PyObject*, PyObject* arg) {
  int sig;
  if (!parse_signum(arg, &sig)) return nullptr;
  Guard& g = g_guards[sig];
  if (!g.has_foreign) Py_RETURN_FALSE;
  struct sigaction foreign = g.foreign;
  siginfo_t info;
  if (g.has_info) {
    info = g.info;
  } else {
    std::memset(&info, 0, sizeof info);
    info.si_signo = sig;
    info.si_code = SI_USER;
    info.si_pid = getpid();
    info.si_uid = getuid();
  }
  g.has_info = 0;
  if (foreign.sa_flags & SA_SIGINFO) {
    foreign.sa_sigaction(sig, &info, nullptr);
  } else {
    foreign.sa_handler(sig);
  }
  Py_RETURN_TRUE;
}

PyObject* has_foreign(PyObject*, PyObject* arg) {
  int sig;
  if (!parse_signum(arg, &sig)) return nullptr;
  return PyBool_FromLong(g_guards[sig].has_foreign);
}

PyObject* restore_foreign(PyObject*, PyObject* arg) {
  int sig;
  if (!parse_signum(arg, &sig)) return nullptr;
  Guard& g = g_guards[sig];
  if (!g.has_foreign) Py_RETURN_FALSE;
  struct sigaction cur;
  if (sigaction(sig, nullptr, &cur) != 0) return PyErr_SetFromErrno(PyExc_OSError);
  if (!is_default_or_ignore(cur)) Py_RETURN_FALSE;  // someone else's is in place: theirs
  if (sigaction(sig, &g.foreign, nullptr) != 0) return PyErr_SetFromErrno(PyExc_OSError);
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
    {"note_foreign", note_foreign, METH_O,
     "note_foreign(signum) -> bool: before signal.signal() over Python's SIG_DFL/SIG_IGN, or after "
     "a library replaced the handler: keeps the C handler a library installed outside Python "
     "(not Python's, not ours) to chain to; forgets a kept one when SIG_DFL/SIG_IGN is in place. "
     "Whether one is kept."},
    {"call_foreign", call_foreign, METH_O,
     "call_foreign(signum) -> bool: calls the kept library handler with the siginfo of the last "
     "delivery (it may end the process); False when none is kept."},
    {"has_foreign", has_foreign, METH_O,
     "has_foreign(signum) -> bool: whether a library handler is kept for signum."},
    {"restore_foreign", restore_foreign, METH_O,
     "restore_foreign(signum) -> bool: after Python put SIG_DFL/SIG_IGN back, puts the kept "
     "library handler back instead."},
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
