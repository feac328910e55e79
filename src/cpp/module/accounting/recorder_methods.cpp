// module/accounting/recorder_methods.cpp: the Recorder type: lifecycle, thread registration, the
// methods the Python side calls off the hot path (flush, snapshot, sampler, hooks).
#include <string>
#include <string_view>
#include <vector>

#include "lp_core/names.h"
#include "module/accounting/cuda_probe.h"
#include "module/accounting/recorder_object.h"

namespace lp_module {

PyTypeObject RecorderType = {PyVarObject_HEAD_INIT(nullptr, 0)};

namespace {

uint64_t g_next_recorder_serial = 1;

PyObject* thread_name_now() {
  PyObject* threading = PyImport_ImportModule("threading");
  if (!threading) return nullptr;
  PyObject* current = PyObject_CallMethod(threading, "current_thread", nullptr);
  Py_DECREF(threading);
  if (!current) return nullptr;
  PyObject* name = PyObject_GetAttrString(current, "name");
  Py_DECREF(current);
  return name;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Thread states

LP_COLD lp::ThreadState* register_thread(RecorderObject* r) {
  std::string name;
  PyObject* py_name = thread_name_now();
  if (py_name && PyUnicode_Check(py_name)) {
    const char* s = PyUnicode_AsUTF8(py_name);
    if (s) name = s;
  }
  Py_XDECREF(py_name);
  PyErr_Clear();
  return r->recorder->register_thread(name);
}

LP_COLD lp::ThreadState* find_or_register_thread(RecorderObject* r) {
  lp::ThreadState* ts = r->recorder->find_thread();
  return ts ? ts : register_thread(r);
}

LP_COLD bool resolve_holding(RecorderObject* r, lp::ThreadState* ts, PyThreadState* t) {
  Py_INCREF(r);
  resolve_active_stack(ts, t, r->serial);
  bool alive = Py_REFCNT(r) > 1;
  Py_DECREF(r);
  return alive;
}

// ---------------------------------------------------------------------------------------------
// Recorder methods

PyObject* recorder_current(PyObject* self, PyObject*) {
  RecorderObject* r = reinterpret_cast<RecorderObject*>(self);
  lp::ThreadState* ts = r->recorder->find_thread();
  if (ts && !sync_active_stack(r, ts)) ts = nullptr;
  return name_str(ts ? ts->current_name() : lp::kRootNameId);
}

namespace {

// _open_path(): the calling thread's (or task's) open phase path, names outermost first.
PyObject* recorder_open_path(PyObject* self, PyObject*) {
  RecorderObject* r = reinterpret_cast<RecorderObject*>(self);
  lp::ThreadState* ts = r->closed ? nullptr : r->recorder->find_thread();
  if (ts && !sync_active_stack(r, ts)) ts = nullptr;
  std::vector<uint32_t> ids;
  if (ts) ids = ts->open_path();
  PyObject* out = PyTuple_New(Py_ssize_t(ids.size()));
  if (!out) return nullptr;
  for (size_t i = 0; i < ids.size(); ++i) {
    PyObject* name = name_str(ids[i]);
    if (!name) {
      Py_DECREF(out);
      return nullptr;
    }
    PyTuple_SET_ITEM(out, Py_ssize_t(i), name);
  }
  return out;
}

// _attach(names): nests the calling thread's next phases under names + "[threads]"; the level.
PyObject* recorder_attach(PyObject* self, PyObject* names) {
  RecorderObject* r = reinterpret_cast<RecorderObject*>(self);
  if (!PyTuple_Check(names)) {
    PyErr_SetString(PyExc_TypeError, "_attach expects a tuple of names");
    return nullptr;
  }
  std::vector<uint32_t> ids;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(names); ++i) {
    Py_ssize_t n = 0;
    const char* s = PyUnicode_Check(PyTuple_GET_ITEM(names, i))
                        ? PyUnicode_AsUTF8AndSize(PyTuple_GET_ITEM(names, i), &n)
                        : nullptr;
    if (!s) {
      PyErr_Clear();
      return PyLong_FromLong(0);  // not a path this module made: attach nothing
    }
    ids.push_back(lp::NameTable::instance().intern(std::string_view(s, size_t(n))));
  }
  if (r->closed) return PyLong_FromLong(0);
  lp::ThreadState* ts = stacked_thread_state(r);
  return PyLong_FromUnsignedLong(ts ? ts->attach(ids) : 0);
}

// _detach(level): ends what _attach returned level for.
PyObject* recorder_detach(PyObject* self, PyObject* arg) {
  RecorderObject* r = reinterpret_cast<RecorderObject*>(self);
  unsigned long level = PyLong_AsUnsignedLong(arg);
  if (level == (unsigned long)-1 && PyErr_Occurred()) {
    PyErr_Clear();
    Py_RETURN_NONE;
  }
  lp::ThreadState* ts = r->recorder->find_thread();
  if (ts && level) ts->detach(uint32_t(level));
  Py_RETURN_NONE;
}

PyObject* recorder_phase(PyObject* self, PyObject* const* args, Py_ssize_t nargs,
                         PyObject* kwnames) {
  return make_scope(reinterpret_cast<RecorderObject*>(self), args, nargs, kwnames);
}

PyObject* recorder_count(PyObject* self, PyObject* const* args, Py_ssize_t nargs,
                         PyObject* kwnames) {
  return do_count(reinterpret_cast<RecorderObject*>(self), args, nargs, kwnames);
}

PyObject* recorder_flush(PyObject* self, PyObject* args) {
  int final = 0;
  if (!PyArg_ParseTuple(args, "|p:flush", &final)) return nullptr;
  RecorderObject* r = reinterpret_cast<RecorderObject*>(self);
  int err;
  Py_BEGIN_ALLOW_THREADS err = r->worker->flush(final != 0);
  Py_END_ALLOW_THREADS return PyLong_FromLong(err);
}

PyObject* recorder_start_thread(PyObject* self, PyObject*) {
  reinterpret_cast<RecorderObject*>(self)->worker->start_thread();
  Py_RETURN_NONE;
}

PyObject* recorder_stop_thread(PyObject* self, PyObject*) {
  RecorderObject* r = reinterpret_cast<RecorderObject*>(self);
  Py_BEGIN_ALLOW_THREADS r->worker->stop_thread();
  Py_END_ALLOW_THREADS Py_RETURN_NONE;
}

PyObject* recorder_thread_running(PyObject* self, PyObject*) {
  return PyBool_FromLong(reinterpret_cast<RecorderObject*>(self)->worker->thread_running());
}

PyObject* recorder_reset_after_fork(PyObject* self, PyObject* args) {
  const char* path;
  const char* meta;
  if (!PyArg_ParseTuple(args, "ss:reset_after_fork", &path, &meta)) return nullptr;
  reinterpret_cast<RecorderObject*>(self)->worker->reset_after_fork(path, meta);
  Py_RETURN_NONE;
}

PyObject* recorder_set_meta(PyObject* self, PyObject* args) {
  const char* meta;
  if (!PyArg_ParseTuple(args, "s:set_meta", &meta)) return nullptr;
  reinterpret_cast<RecorderObject*>(self)->worker->set_meta(meta);
  Py_RETURN_NONE;
}

PyObject* recorder_snapshot_json(PyObject* self, PyObject*) {
  RecorderObject* r = reinterpret_cast<RecorderObject*>(self);
  std::string text;
  Py_BEGIN_ALLOW_THREADS text = r->worker->snapshot_json();
  Py_END_ALLOW_THREADS return PyUnicode_DecodeUTF8(text.data(), Py_ssize_t(text.size()), "replace");
}

PyObject* recorder_stats(PyObject* self, PyObject*) {
  lp::FlushStats st = reinterpret_cast<RecorderObject*>(self)->worker->stats();
  return Py_BuildValue("{s:K,s:K,s:s,s:K}", "writes", (unsigned long long)st.writes, "errors",
                       (unsigned long long)st.errors, "last_error", st.last_error.c_str(),
                       "own_write_bytes", (unsigned long long)st.own_write_bytes);
}

PyObject* recorder_sample_now(PyObject* self, PyObject*) {
  RecorderObject* r = reinterpret_cast<RecorderObject*>(self);
  if (!r->worker->has_sampler()) Py_RETURN_FALSE;
  Py_BEGIN_ALLOW_THREADS r->worker->sampler().sample_now();
  Py_END_ALLOW_THREADS Py_RETURN_TRUE;
}

PyObject* recorder_sampler_status(PyObject* self, PyObject*) {
  RecorderObject* r = reinterpret_cast<RecorderObject*>(self);
  if (!r->worker->has_sampler()) Py_RETURN_NONE;
  std::string text;
  Py_BEGIN_ALLOW_THREADS text = r->worker->sampler().status_json();
  Py_END_ALLOW_THREADS return PyUnicode_DecodeUTF8(text.data(), Py_ssize_t(text.size()), "replace");
}

// Runs on the snapshot thread after a periodic write: takes the GIL only for the call, and not
// at all while finalising (atexit stops the thread first; that check is a backstop). The hook is
// read under the GIL, since the cycle collector may have cleared it (recorder_clear); r itself
// outlives the thread (recorder_dealloc joins it first). An error is cleared: the Python
// dispatcher counts its callbacks' errors itself.
void run_periodic_hook(RecorderObject* r) {
  call_with_gil([r] {
    PyObject* hook = Py_XNewRef(r->periodic_hook);
    if (!hook) return;
    Py_XDECREF(PyObject_CallNoArgs(hook));
    Py_DECREF(hook);
  });
}

PyObject* recorder_set_periodic_hook(PyObject* self, PyObject* hook) {
  RecorderObject* r = reinterpret_cast<RecorderObject*>(self);
  if (!PyCallable_Check(hook)) {
    PyErr_SetString(PyExc_TypeError, "set_periodic_hook() takes a callable");
    return nullptr;
  }
  if (r->periodic_hook) {  // replacing it would free a callable the thread may be calling
    PyErr_SetString(PyExc_RuntimeError, "set_periodic_hook() may be called once per Recorder");
    return nullptr;
  }
  Py_INCREF(hook);
  r->periodic_hook = hook;
  r->worker->set_periodic_hook([r] { run_periodic_hook(r); });
  Py_RETURN_NONE;
}

PyObject* recorder_set_phase_wrapper(PyObject* self, PyObject* fn) {
  RecorderObject* r = reinterpret_cast<RecorderObject*>(self);
  if (fn != Py_None && !PyCallable_Check(fn)) {
    PyErr_SetString(PyExc_TypeError, "set_phase_wrapper() takes a callable or None");
    return nullptr;
  }
  PyObject* next = fn == Py_None ? nullptr : fn;
  Py_XINCREF(next);
  Py_XSETREF(r->phase_wrapper, next);
  Py_RETURN_NONE;
}

PyObject* recorder_set_lines_hook(PyObject* self, PyObject* args) {
  RecorderObject* r = reinterpret_cast<RecorderObject*>(self);
  PyObject *fn = nullptr, *names = nullptr;
  long long limit = 0;
  if (!PyArg_ParseTuple(args, "OO|L:set_lines_hook", &fn, &names, &limit)) return nullptr;
  if (fn == Py_None) {
    Py_CLEAR(r->lines_hook);
    Py_CLEAR(r->lines_names);
    delete_lines_state(r->lines_state);
    r->lines_state = nullptr;
    Py_RETURN_NONE;
  }
  if (!PyCallable_Check(fn) || !PyDict_Check(names) || limit < 0) {
    PyErr_SetString(PyExc_TypeError,
                    "set_lines_hook(fn, names, limit=0): a callable, a dict {name: by_path} and "
                    "the entries to trace per name (0: every one); or (None, None)");
    return nullptr;
  }
  delete_lines_state(r->lines_state);  // a fork's fresh start: every schedule from the top
  r->lines_state = new_lines_state(limit);
  Py_INCREF(names);
  Py_XSETREF(r->lines_names, names);
  Py_INCREF(fn);
  Py_XSETREF(r->lines_hook, fn);
  // Set before the recorder's first phase(): a name it has already seen keeps the inline path.
  Py_RETURN_NONE;
}

PyObject* recorder_mark_closed(PyObject* self, PyObject*) {
  reinterpret_cast<RecorderObject*>(self)->closed = true;
  Py_RETURN_NONE;
}

PyObject* recorder_get_path(PyObject* self, void*) {
  std::string p = reinterpret_cast<RecorderObject*>(self)->worker->path();
  return PyUnicode_DecodeFSDefaultAndSize(p.data(), Py_ssize_t(p.size()));
}

PyObject* recorder_get_closed(PyObject* self, void*) {
  return PyBool_FromLong(reinterpret_cast<RecorderObject*>(self)->closed);
}

PyObject* recorder_get_cpu_clock(PyObject* self, void*) {
  RecorderObject* r = reinterpret_cast<RecorderObject*>(self);
  if (!r->worker->recorder().measure_cpu()) Py_RETURN_NONE;
  return PyUnicode_FromString(lp::cpu_clock_tier_name(r->worker->recorder().cpu_tier()));
}

PyMethodDef recorder_methods[] = {
    {"phase", LP_FASTCALL_KW(recorder_phase),
     "phase(name, io=False, sync=False, sample=None) -> a context manager timing one entry."},
    {"count", LP_FASTCALL_KW(recorder_count),
     "count(name, n=1): add n (an int) to a counter on the innermost open phase."},
    {"current", recorder_current, METH_NOARGS, "Name of the innermost open phase, or ''."},
    {"_open_path", recorder_open_path, METH_NOARGS,
     "The calling thread's (or task's) open phase names, outermost first (threads markers left "
     "out): what accounting.context() captures."},
    {"_attach", recorder_attach, METH_O,
     "_attach(names) -> level: the calling thread's next phases nest under names + '[threads]' "
     "(0: nothing attached)."},
    {"_detach", recorder_detach, METH_O, "_detach(level): ends an _attach."},
    {"flush", recorder_flush, METH_VARARGS,
     "flush(final=False) -> 0 or errno: write the worker file now (the GIL is released)."},
    {"start_thread", recorder_start_thread, METH_NOARGS, "Start the snapshot thread."},
    {"stop_thread", recorder_stop_thread, METH_NOARGS, "Stop and join the snapshot thread."},
    {"thread_running", recorder_thread_running, METH_NOARGS, "Whether the snapshot thread runs."},
    {"reset_after_fork", recorder_reset_after_fork, METH_VARARGS,
     "reset_after_fork(path, meta_json): in a forked child, start empty with a new file."},
    {"set_meta", recorder_set_meta, METH_VARARGS, "set_meta(meta_json): replace the file's meta."},
    {"snapshot_json", recorder_snapshot_json, METH_NOARGS,
     "The worker-file text a flush would write now."},
    {"stats", recorder_stats, METH_NOARGS, "Flush statistics: writes, errors, last_error."},
    {"sample_now", recorder_sample_now, METH_NOARGS,
     "Take one resource sample now (the first sets the baseline); False without a sampler."},
    {"sampler_status", recorder_sampler_status, METH_NOARGS,
     "The sampler's status as JSON text (the worker file's \"samples\"), or None."},
    {"set_periodic_hook", recorder_set_periodic_hook, METH_O,
     "set_periodic_hook(fn): call fn() (holding the GIL) after each periodic write of the "
     "snapshot thread; never after flush(). Once per Recorder."},
    {"set_lines_hook", recorder_set_lines_hook, METH_VARARGS,
     "set_lines_hook(fn, names, limit=0) / set_lines_hook(None, None): phase(name) with str(name) "
     "a key of the dict names returns fn(name, scope) instead of scope for the entries its "
     "schedule chooses (limit per name, 0: all), or for every entry when names[name] is true "
     "(fn decides: a '/' path ends in it) (lines=, issue 32)."},
    {"set_phase_wrapper", recorder_set_phase_wrapper, METH_O,
     "set_phase_wrapper(fn or None): PhaseFront.phase and the installed accounting.phase() call "
     "fn instead of the C phase (annotate=/backend= need a Python-level scope). Recorder.phase "
     "itself is unchanged."},
    {"mark_closed", recorder_mark_closed, METH_NOARGS, "Make phase()/count() no-ops from now on."},
    {nullptr, nullptr, 0, nullptr}};

PyGetSetDef recorder_getset[] = {
    {"path", recorder_get_path, nullptr, "The worker file path.", nullptr},
    {"closed", recorder_get_closed, nullptr, "Whether mark_closed() was called.", nullptr},
    {"cpu_clock", recorder_get_cpu_clock, nullptr,
     "The thread-CPU clock tier, or None when measure_cpu is off.", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr}};

// ---------------------------------------------------------------------------------------------
// Lifecycle

PyObject* recorder_new(PyTypeObject* type, PyObject* args, PyObject* kwds) {
  static const char* kw[] = {
      "path",         "meta_json",    "measure_cpu",        "snapshot_interval_ns",
      "strict_names", "samples_path", "sample_interval_ns", "sample_gpu",
      nullptr};
  const char* path;
  const char* meta = "{}";
  int measure_cpu = 1;
  unsigned long long interval_ns = 0;
  int strict_names = 0;
  const char* samples_path = "";
  unsigned long long sample_interval_ns = 0;
  int sample_gpu = 1;
  if (!PyArg_ParseTupleAndKeywords(args, kwds, "s|spKpsKp:Recorder", const_cast<char**>(kw), &path,
                                   &meta, &measure_cpu, &interval_ns, &strict_names, &samples_path,
                                   &sample_interval_ns, &sample_gpu)) {
    return nullptr;
  }
  RecorderObject* self = reinterpret_cast<RecorderObject*>(type->tp_alloc(type, 0));
  if (!self) return nullptr;
  lp::WorkerConfig config;
  config.path = path;
  config.meta_json = meta;
  config.measure_cpu = measure_cpu != 0;
  config.snapshot_interval_ns = interval_ns;
  config.samples_path = samples_path;
  config.sample_interval_ns = sample_interval_ns;
  config.sample_gpu = sample_gpu != 0;
  self->worker = new lp::Worker(std::move(config));
  self->recorder = &self->worker->recorder();
  for (ScopeObject*& spare : self->spare) spare = nullptr;
  self->closed = false;
  self->strict_names = strict_names != 0;
  self->serial = g_next_recorder_serial++;
  self->shapes = new lp::NameShapes();
  self->periodic_hook = nullptr;
  self->phase_wrapper = nullptr;
  self->lines_hook = nullptr;
  self->lines_names = nullptr;
  self->lines_state = nullptr;
  self->weakreflist = nullptr;
  if (self->worker->has_sampler()) {
    self->worker->sampler().set_cuda_probe(&cuda_probe);
    // The sampler tags intervals with the phase open on the recorder's first thread: make that
    // the constructing thread (normally the main one), not whichever thread records first.
    register_thread(self);
  }
  return reinterpret_cast<PyObject*>(self);
}

// The two callbacks are the Python references a recorder holds that can lead back to it (a
// Profiler's bound method, a closure over the recorder): the cycle collector sees and breaks
// them. Its spare scopes only borrow it back and are not collected objects.
int recorder_traverse(PyObject* self, visitproc visit, void* arg) {
  RecorderObject* r = reinterpret_cast<RecorderObject*>(self);
  Py_VISIT(r->periodic_hook);
  Py_VISIT(r->phase_wrapper);
  Py_VISIT(r->lines_hook);
  return 0;
}

int recorder_clear(PyObject* self) {
  RecorderObject* r = reinterpret_cast<RecorderObject*>(self);
  Py_CLEAR(r->phase_wrapper);  // phase_on holds it across its call
  Py_CLEAR(r->periodic_hook);  // the snapshot thread reads it under the GIL (run_periodic_hook)
  Py_CLEAR(r->lines_hook);
  Py_CLEAR(r->lines_names);
  return 0;
}

void recorder_dealloc(PyObject* self) {
  RecorderObject* r = reinterpret_cast<RecorderObject*>(self);
  PyObject_GC_UnTrack(self);  // before the GIL is released below
  if (r->weakreflist) PyObject_ClearWeakRefs(self);
  for (ScopeObject*& spare : r->spare) {  // a spare a user still holds now does nothing
    if (spare) {
      spare->rec = nullptr;
      Py_CLEAR(spare);
    }
  }
  if (r->worker) {
    Py_BEGIN_ALLOW_THREADS r->worker->stop_thread();
    Py_END_ALLOW_THREADS delete r->worker;
    r->worker = nullptr;
  }
  delete r->shapes;
  r->shapes = nullptr;
  Py_CLEAR(r->periodic_hook);  // the thread is joined: nothing can be calling it
  Py_CLEAR(r->phase_wrapper);
  Py_CLEAR(r->lines_hook);
  Py_CLEAR(r->lines_names);
  delete_lines_state(r->lines_state);
  r->lines_state = nullptr;
  Py_TYPE(self)->tp_free(self);
}

}  // namespace

int init_recorder_type(PyObject* module) {
  RecorderType.tp_name = "lineprofiler._core.Recorder";
  RecorderType.tp_basicsize = sizeof(RecorderObject);
  RecorderType.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC;
  RecorderType.tp_doc = "One process's phase recorder, its worker file and snapshot thread.";
  RecorderType.tp_new = recorder_new;
  RecorderType.tp_dealloc = recorder_dealloc;
  RecorderType.tp_traverse = recorder_traverse;
  RecorderType.tp_clear = recorder_clear;
  RecorderType.tp_free = PyObject_GC_Del;  // tp_alloc (PyType_GenericAlloc) allocates and tracks
  RecorderType.tp_methods = recorder_methods;
  RecorderType.tp_getset = recorder_getset;
  RecorderType.tp_weaklistoffset = offsetof(RecorderObject, weakreflist);
  if (PyType_Ready(&RecorderType) < 0) return -1;
  return PyModule_AddObjectRef(module, "Recorder", reinterpret_cast<PyObject*>(&RecorderType));
}

}  // namespace lp_module
