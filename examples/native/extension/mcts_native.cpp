// examples/native/extension/mcts_native.cpp: a Python extension recording C++ phases and counters.
//
// A toy search in the shape of an MCTS extension: select / expand / backup phases and a counter,
// opened with LP_PHASE and LP_COUNT. Called inside `with profiler.phase("mcts"):`, its phases nest
// as mcts/search/select, mcts/search/expand, ... in the same tree and the same worker file as the
// Python phases. Built by tests/native (CMake, or the compiler with lineprofiler.get_include()).
//
// Build flags the tests use (an ordinary build needs none):
//   LP_EXAMPLE_DEFER_IMPORT  the module init does not call import_api(); import_api() does.
//   LINEPROFILER_API_LEVEL=1 build against the first, smaller function table (version test).
#include <Python.h>
#include <pthread.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

#include "lineprofiler/accounting.hpp"
#include "lineprofiler/python.hpp"

namespace {

// Releases the GIL for its lifetime (Py_BEGIN/END_ALLOW_THREADS as a scope).
class ReleaseGil {
 public:
  ReleaseGil() : saved_(PyEval_SaveThread()) {}
  ~ReleaseGil() { PyEval_RestoreThread(saved_); }
  ReleaseGil(const ReleaseGil&) = delete;
  ReleaseGil& operator=(const ReleaseGil&) = delete;

 private:
  PyThreadState* saved_;
};

volatile uint64_t g_sink = 0;  // keeps the toy work from being optimised away

void work(int units) {
  uint64_t x = g_sink;
  for (int i = 0; i < units; ++i) x = x * 6364136223846793005ull + 1442695040888963407ull;
  g_sink = x;
}

// One simulation: three phases under "search", one count per simulation.
void simulate(int leaves) {
  {
    LP_PHASE("select");
    work(50);
  }
  {
    LP_PHASE("expand");
    for (int i = 0; i < leaves; ++i) {
      LP_PHASE("leaf");
      work(10);
    }
    LP_COUNT("leaves", leaves);
  }
  {
    LP_PHASE("backup");
    work(20);
  }
  LP_COUNT("simulations", 1);
}

// search(simulations, leaves): `simulations` simulations under one "search" phase.
PyObject* search(PyObject*, PyObject* args) {
  int simulations = 0, leaves = 0;
  if (!PyArg_ParseTuple(args, "ii:search", &simulations, &leaves)) return nullptr;
  LP_PHASE("search");
  for (int i = 0; i < simulations; ++i) simulate(leaves);
  Py_RETURN_NONE;
}

// search_without_gil(simulations, leaves): search() with the GIL released around the work; the
// "search" phase is opened before releasing it (in an asyncio task, a phase opened with the GIL
// held is where the task's stack is chosen).
PyObject* search_without_gil(PyObject*, PyObject* args) {
  int simulations = 0, leaves = 0;
  if (!PyArg_ParseTuple(args, "ii:search_without_gil", &simulations, &leaves)) return nullptr;
  {
    LP_PHASE("search");
    ReleaseGil released;
    for (int i = 0; i < simulations; ++i) simulate(leaves);
  }
  Py_RETURN_NONE;
}

// search_all_without_gil(simulations, leaves): search() entirely with the GIL released, "search"
// included.
PyObject* search_all_without_gil(PyObject*, PyObject* args) {
  int simulations = 0, leaves = 0;
  if (!PyArg_ParseTuple(args, "ii:search_all_without_gil", &simulations, &leaves)) return nullptr;
  {
    ReleaseGil released;
    LP_PHASE("search");
    for (int i = 0; i < simulations; ++i) simulate(leaves);
  }
  Py_RETURN_NONE;
}

// search_in_threads(threads, simulations, leaves): each of `threads` C++ threads (no Python
// thread state, named "mcts-worker") runs search(simulations, leaves) under its own "worker" phase;
// returns when all have finished (the GIL is released while waiting).
PyObject* search_in_threads(PyObject*, PyObject* args) {
  int threads = 0, simulations = 0, leaves = 0;
  if (!PyArg_ParseTuple(args, "iii:search_in_threads", &threads, &simulations, &leaves)) {
    return nullptr;
  }
  {
    ReleaseGil released;
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([simulations, leaves] {
        // Its name in the report under Profiler(thread_names=True) (a C++ thread has no
        // threading name): at most 15 bytes.
        pthread_setname_np(pthread_self(), "mcts-worker");
        LP_PHASE("worker");
        LP_PHASE("search");
        for (int i = 0; i < simulations; ++i) simulate(leaves);
      });
    }
    for (std::thread& t : pool) t.join();
  }
  Py_RETURN_NONE;
}

// search_in_pool(threads, searches, simulations, leaves) -> simulations run: a pool of `threads`
// C++ threads runs `searches` search(simulations, leaves) calls handed out by the calling thread,
// each thread attached (lineprofiler::Attach) to the phases open where search_in_pool was called,
// so they nest there as <open path>/[threads]/search/... The return value is the pool's own count
// (an atomic incremented per simulation), for tests to check the recorded counts against.
PyObject* search_in_pool(PyObject*, PyObject* args) {
  int threads = 0, searches = 0, simulations = 0, leaves = 0;
  if (!PyArg_ParseTuple(args, "iiii:search_in_pool", &threads, &searches, &simulations, &leaves)) {
    return nullptr;
  }
  const lineprofiler::Context ctx = lineprofiler::capture();  // with the GIL: the task's path
  std::atomic<int> next{0};
  std::atomic<long long> done{0};
  {
    ReleaseGil released;
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&] {
        lineprofiler::Attach attached(ctx);
        while (next.fetch_add(1) < searches) {
          LP_PHASE("search");
          for (int i = 0; i < simulations; ++i) {
            simulate(leaves);
            done.fetch_add(1);
          }
        }
      });
    }
    for (std::thread& t : pool) t.join();
  }
  return PyLong_FromLongLong(done.load());
}

// phase_named(name, n): one phase named by a run-time string (the per-thread name cache), with a
// counter of the same name incremented by n inside it.
PyObject* phase_named(PyObject*, PyObject* args) {
  const char* name = nullptr;
  long long n = 0;
  if (!PyArg_ParseTuple(args, "sL:phase_named", &name, &n)) return nullptr;
  std::string text(name);  // a fresh string each call: the cache must confirm the text
  lineprofiler::Phase phase{std::string_view(text)};
  lineprofiler::count(std::string_view(text), int64_t(n));
  Py_RETURN_NONE;
}

// call_in_phase(name, fn) -> fn(), called inside a C++ phase `name` (Python phases fn opens nest
// under it).
PyObject* call_in_phase(PyObject*, PyObject* args) {
  const char* name = nullptr;
  PyObject* fn = nullptr;
  if (!PyArg_ParseTuple(args, "sO:call_in_phase", &name, &fn)) return nullptr;
  std::string text(name);
  lineprofiler::Phase phase{std::string_view(text)};
  return PyObject_CallNoArgs(fn);
}

// search_with_failures(n, failing) -> failures: n entries of the C++ phase "attempt", the first
// `failing` of which throw (a dead end, caught outside the phase): the phase's `raised` counts
// the entries an exception unwound.
PyObject* search_with_failures(PyObject*, PyObject* args) {
  long n = 0, failing = 0;
  if (!PyArg_ParseTuple(args, "ll:search_with_failures", &n, &failing)) return nullptr;
  long failures = 0;
  for (long i = 0; i < n; ++i) {
    try {
      LP_PHASE("attempt");
      if (i < failing) throw std::runtime_error("dead end");
    } catch (const std::runtime_error&) {
      ++failures;
    }
  }
  return PyLong_FromLong(failures);
}

// spin_start(hold_us=0) / spin_stop() -> iterations: a C++ thread entering "spin" (with a count)
// in a loop until stopped, across whatever the profiler does meanwhile (closed, replaced); each
// entry lasts hold_us microseconds (asleep), or a little work when 0.
std::atomic<bool> g_spin_stop{false};
std::atomic<uint64_t> g_spin_iterations{0};
std::thread* g_spinner = nullptr;

PyObject* spin_start(PyObject*, PyObject* args) {
  long hold_us = 0;
  if (!PyArg_ParseTuple(args, "|l:spin_start", &hold_us)) return nullptr;
  if (g_spinner) {
    PyErr_SetString(PyExc_RuntimeError, "spin_start(): already spinning");
    return nullptr;
  }
  g_spin_stop = false;
  g_spin_iterations = 0;
  g_spinner = new std::thread([hold_us] {
    while (!g_spin_stop.load(std::memory_order_relaxed)) {
      {
        LP_PHASE("spin");
        LP_COUNT("spins", 1);
        if (hold_us > 0) {
          std::this_thread::sleep_for(std::chrono::microseconds(hold_us));
        } else {
          work(100);
        }
      }
      g_spin_iterations.fetch_add(1, std::memory_order_relaxed);
    }
  });
  Py_RETURN_NONE;
}

PyObject* spin_stop(PyObject*, PyObject*) {
  if (!g_spinner) Py_RETURN_NONE;
  g_spin_stop = true;
  {
    ReleaseGil released;
    g_spinner->join();
  }
  delete g_spinner;
  g_spinner = nullptr;
  return PyLong_FromUnsignedLongLong(g_spin_iterations.load());
}

// current() -> the innermost open phase as the C++ API sees it ("" when none).
PyObject* current(PyObject*, PyObject*) {
  std::string name = lineprofiler::current();
  return PyUnicode_FromStringAndSize(name.data(), Py_ssize_t(name.size()));
}

// current_inside(name) -> current() read inside a C++ phase `name`.
PyObject* current_inside(PyObject*, PyObject* args) {
  const char* name = nullptr;
  if (!PyArg_ParseTuple(args, "s:current_inside", &name)) return nullptr;
  std::string text(name);
  lineprofiler::Phase phase{std::string_view(text)};
  return current(nullptr, nullptr);
}

// enabled() -> whether C++ scopes record right now.
PyObject* enabled(PyObject*, PyObject*) {
  return PyBool_FromLong(lineprofiler::enabled());
}

// api_level() -> the LINEPROFILER_API_LEVEL this module was built with.
PyObject* api_level(PyObject*, PyObject*) {
  return PyLong_FromLong(LINEPROFILER_API_LEVEL);
}

// import_api() -> None: lineprofiler::import_api(), raising what it raises.
PyObject* import_api(PyObject*, PyObject*) {
  if (lineprofiler::import_api() < 0) return nullptr;
  Py_RETURN_NONE;
}

// ---- benchmarks (benchmarks/bench_native.py): ns per iteration of a loop timed here ----

using Clock = std::chrono::steady_clock;

template <typename Body>
double ns_per_iteration(long long n, Body body) {
  Clock::time_point t0 = Clock::now();
  for (long long i = 0; i < n; ++i) {
    body();
    __asm__ volatile("" ::: "memory");  // one real iteration each, not folded
  }
  return double(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count()) /
         double(n);
}

// The recorder's wall clock where it uses the TSC (x86 with a TSC clocksource), else the
// steady clock: what a scope's two clock reads cost, to tell them from the bookkeeping.
inline uint64_t read_clock() {
#if defined(__x86_64__) || defined(__i386__)
  return __rdtsc();
#else
  return uint64_t(Clock::now().time_since_epoch().count());
#endif
}

// ns per iteration of a loop of kind: "empty" (the loop alone), "clock_pair" (two clock reads),
// "phase" (LP_PHASE), "count" (LP_COUNT), "phase_view" (Phase(std::string_view)); -1 for an unknown
// kind.
double run_bench(const std::string& kind, long long n) {
  static constexpr std::string_view kViewName = "bench_view";
  if (kind == "empty") return ns_per_iteration(n, [] {});
  if (kind == "clock_pair") {  // the two wall-clock reads an enabled scope makes (the TSC here)
    return ns_per_iteration(n, [] {
      uint64_t t0 = read_clock();
      uint64_t t1 = read_clock();
      __asm__ volatile("" : : "r"(t1 - t0));
    });
  }
  if (kind == "phase") return ns_per_iteration(n, [] { LP_PHASE("bench_phase"); });
  if (kind == "count") return ns_per_iteration(n, [] { LP_COUNT("bench_count", 1); });
  if (kind == "phase_view") {
    return ns_per_iteration(n, [] { lineprofiler::Phase p(kViewName); });
  }
  return -1.0;
}

// bench(kind, n) -> ns per iteration of run_bench(kind, n), timed with the GIL released.
PyObject* bench(PyObject*, PyObject* args) {
  const char* kind = nullptr;
  long long n = 0;
  if (!PyArg_ParseTuple(args, "sL:bench", &kind, &n)) return nullptr;
  std::string k(kind);
  double ns;
  {
    ReleaseGil released;
    ns = run_bench(k, n);
  }
  if (ns < 0) {
    PyErr_Format(PyExc_ValueError, "bench(): unknown kind '%s'", kind);
    return nullptr;
  }
  return PyFloat_FromDouble(ns);
}

// noop() -> None: the native call a Python phase wraps in the benchmark.
PyObject* noop(PyObject*, PyObject*) {
  Py_RETURN_NONE;
}

PyMethodDef methods[] = {
    {"search", search, METH_VARARGS, "search(simulations, leaves): the toy search."},
    {"search_without_gil", search_without_gil, METH_VARARGS,
     "search_without_gil(simulations, leaves): search() with the GIL released."},
    {"search_all_without_gil", search_all_without_gil, METH_VARARGS,
     "search_all_without_gil(simulations, leaves): search() with no GIL, its phase included."},
    {"search_in_threads", search_in_threads, METH_VARARGS,
     "search_in_threads(threads, simulations, leaves): search() on C++ threads."},
    {"search_in_pool", search_in_pool, METH_VARARGS,
     "search_in_pool(threads, searches, simulations, leaves) -> simulations: a pool attached to "
     "the caller's phases."},
    {"phase_named", phase_named, METH_VARARGS,
     "phase_named(name, n): a phase and a counter named by a run-time string."},
    {"call_in_phase", call_in_phase, METH_VARARGS,
     "call_in_phase(name, fn) -> fn() called inside a C++ phase."},
    {"search_with_failures", search_with_failures, METH_VARARGS,
     "search_with_failures(n, failing) -> failures: the first `failing` of n entries throw."},
    {"spin_start", spin_start, METH_VARARGS,
     "spin_start(hold_us=0): a C++ thread entering 'spin' in a loop."},
    {"spin_stop", spin_stop, METH_NOARGS, "spin_stop() -> iterations the spinning thread made."},
    {"current", current, METH_NOARGS, "current() -> the innermost open phase, or ''."},
    {"current_inside", current_inside, METH_VARARGS,
     "current_inside(name) -> current() inside a C++ phase name."},
    {"enabled", enabled, METH_NOARGS, "enabled() -> whether C++ scopes record now."},
    {"api_level", api_level, METH_NOARGS, "api_level() -> LINEPROFILER_API_LEVEL of this build."},
    {"import_api", import_api, METH_NOARGS, "import_api(): connect to lineprofiler._core."},
    {"bench", bench, METH_VARARGS, "bench(kind, n) -> ns per iteration of a native loop."},
    {"noop", noop, METH_NOARGS, "noop(): does nothing."},
    {nullptr, nullptr, 0, nullptr}};

PyModuleDef module_def = {PyModuleDef_HEAD_INIT,
                          "mcts_native",
                          "A toy MCTS recording C++ phases.",
                          -1,
                          methods,
                          nullptr,
                          nullptr,
                          nullptr,
                          nullptr};

}  // namespace

PyMODINIT_FUNC PyInit_mcts_native(void) {
#ifndef LP_EXAMPLE_DEFER_IMPORT
  // Where lineprofiler is not installed, carry on: every scope stays a no-op.
  if (lineprofiler::import_api() < 0) PyErr_Clear();
#endif
  return PyModule_Create(&module_def);
}
