// module/accounting/phase_args.cpp: the general (any-arguments) paths of phase() and count(), and
// the one keyword parser both use.
#include <cmath>
#include <cstdint>
#include <vector>

#include "module/accounting/recorder_object.h"

namespace lp_module {
namespace {

// ---------------------------------------------------------------------------------------------
// The one keyword parser of phase() and count(): each parameter by position or by keyword.

constexpr int kMaxParams = 4;

struct Params {
  const char* call;                // "phase()" or "count()", for messages
  const char* signature;           // "(name, n=1)", for messages
  int count;                       // parameters; the first (name) is required
  const char* names[kMaxParams];   // their keyword names
  PyObject* interned[kMaxParams];  // the same, interned (init_phase_args)
};

Params g_phase_params = {"phase()",
                         "(name, io=False, sync=False, sample=None)",
                         4,
                         {"name", "io", "sync", "sample"},
                         {}};
Params g_count_params = {"count()", "(name, n=1)", 2, {"name", "n"}, {}};

// The slot of keyword key in p (matched by identity with the interned name, which is what a call
// site's keyword is, else by value), or -1.
int param_slot(const Params& p, PyObject* key) {
  for (int j = 0; j < p.count; ++j) {
    if (key == p.interned[j]) return j;
  }
  for (int j = 0; j < p.count; ++j) {
    if (PyUnicode_Check(key) && PyUnicode_CompareWithASCIIString(key, p.names[j]) == 0) return j;
  }
  return -1;
}

// Fills values[0..p.count) from a METH_FASTCALL | METH_KEYWORDS call (nullptr: not given).
// Returns false with TypeError set on too many arguments, an unknown or repeated keyword, or no
// name.
bool parse_params(const Params& p, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames,
                  PyObject** values) {
  for (int j = 0; j < p.count; ++j) values[j] = nullptr;
  if (nargs > p.count) {
    PyErr_Format(PyExc_TypeError, "%s takes at most %d arguments %s", p.call, p.count, p.signature);
    return false;
  }
  for (Py_ssize_t i = 0; i < nargs; ++i) values[i] = args[i];
  if (kwnames) {
    Py_ssize_t nkw = PyTuple_GET_SIZE(kwnames);
    for (Py_ssize_t k = 0; k < nkw; ++k) {
      PyObject* key = PyTuple_GET_ITEM(kwnames, k);
      int slot = param_slot(p, key);
      if (slot < 0 || values[slot]) {
        PyErr_Format(PyExc_TypeError, "%s got an unexpected or repeated keyword argument %R",
                     p.call, key);
        return false;
      }
      values[slot] = args[nargs + k];
    }
  }
  if (!values[0]) {
    PyErr_Format(PyExc_TypeError, "%s missing required argument '%s'", p.call, p.names[0]);
    return false;
  }
  return true;
}

// Stride of sample=rate: 1 entry in round(1/rate); None or 1.0 measure every entry.
bool parse_sample(PyObject* rate_obj, uint32_t* every) {
  *every = 1;
  if (rate_obj == Py_None) return true;
  double rate =
      PyFloat_CheckExact(rate_obj) ? PyFloat_AS_DOUBLE(rate_obj) : PyFloat_AsDouble(rate_obj);
  if (rate == -1.0 && PyErr_Occurred()) return false;
  if (!(rate > 0.0 && rate <= 1.0)) {
    PyErr_Format(PyExc_ValueError,
                 "phase() sample must be a rate in (0, 1] (0.01 measures 1 entry in 100), got %R",
                 rate_obj);
    return false;
  }
  double n = std::nearbyint(1.0 / rate);
  *every = n >= double(UINT32_MAX) ? UINT32_MAX : n < 1.0 ? 1u : uint32_t(n);
  return true;
}

// Parses phase(name, io=False, sync=False, sample=None) into flags and a sampling stride.
// Returns false with an exception set on a bad call.
bool parse_phase_options(PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames,
                         PyObject** name, uint32_t* flags, uint32_t* sample_every) {
  PyObject* values[kMaxParams];
  if (!parse_params(g_phase_params, args, nargs, kwnames, values)) return false;
  *name = values[0];
  *flags = 0;
  if (values[1] && PyObject_IsTrue(values[1]) == 1) *flags |= kScopeIo;
  if (values[2] && PyObject_IsTrue(values[2]) == 1) *flags |= kScopeSync;
  return !values[3] || parse_sample(values[3], sample_every);
}

// An int's value; false with OverflowError set when it does not fit a 64-bit counter.
inline bool int64_of(PyObject* int_obj, int64_t* n) {
  int overflow = 0;
  long long v = PyLong_AsLongLongAndOverflow(int_obj, &overflow);
  if (overflow) {
    PyErr_Format(PyExc_OverflowError,
                 "count() n=%R does not fit a 64-bit counter (-2**63 <= n < 2**63); a counter "
                 "whose sum leaves that range saturates and is marked in the report",
                 int_obj);
    return false;
  }
  if (v == -1 && PyErr_Occurred()) return false;
  *n = int64_t(v);
  return true;
}

// "torch.Tensor" for a tensor, "float" for a builtin: the type's module-qualified name, or
// nullptr with an exception set.
PyObject* type_label(PyObject* obj) {
  PyObject* type = reinterpret_cast<PyObject*>(Py_TYPE(obj));
  PyObject* qualname = PyObject_GetAttrString(type, "__qualname__");
  if (!qualname) return nullptr;
  PyObject* module = PyObject_GetAttrString(type, "__module__");
  if (!module || !PyUnicode_Check(module) ||
      PyUnicode_CompareWithASCIIString(module, "builtins") == 0) {
    PyErr_Clear();
    Py_XDECREF(module);
    return qualname;
  }
  PyObject* label = PyUnicode_FromFormat("%U.%U", module, qualname);
  Py_DECREF(module);
  Py_DECREF(qualname);
  return label;
}

// Replaces the TypeError of an n that is not one integer (a float, a float tensor or NumPy float,
// anything without __index__) with one that names the counter and says counts are integers.
LP_COLD void refuse_count_n(PyObject* name, PyObject* n_obj) {
  if (PyErr_Occurred() && !PyErr_ExceptionMatches(PyExc_TypeError)) return;  // keep the original
  PyErr_Clear();
  PyObject* label = type_label(n_obj);
  PyObject* repr = label ? PyObject_Repr(n_obj) : nullptr;
  if (repr && PyUnicode_GET_LENGTH(repr) > 80) {  // a big array's repr says nothing more
    PyObject* head = PyUnicode_Substring(repr, 0, 77);
    Py_SETREF(repr, head ? PyUnicode_FromFormat("%U...", head) : nullptr);
    Py_XDECREF(head);
  }
  if (repr) {
    PyErr_Format(PyExc_TypeError,
                 "count(%R, n=%U): counts are integers, and n is a %U; a counter counts events, "
                 "so pass an int (round it yourself if that is what you mean)",
                 name, repr, label);
  }
  Py_XDECREF(repr);
  Py_XDECREF(label);
}

// Converts count()'s n for the counter name; anything but an integer (a float above all) is
// refused with TypeError (the spec's one deliberate raise).
bool parse_count_n(PyObject* name, PyObject* n_obj, int64_t* n) {
  if (PyLong_CheckExact(n_obj)) return int64_of(n_obj, n);
  PyObject* index = PyFloat_Check(n_obj) ? nullptr : PyNumber_Index(n_obj);
  if (!index) {
    refuse_count_n(name, n_obj);
    return false;
  }
  bool ok = int64_of(index, n);
  Py_DECREF(index);
  return ok;
}

// Parses count(name, n=1). Returns false with an exception set on a bad call.
bool parse_count_args(PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames, PyObject** name,
                      int64_t* n) {
  PyObject* values[kMaxParams];
  if (!parse_params(g_count_params, args, nargs, kwnames, values)) return false;
  *name = values[0];
  *n = 1;
  return !values[1] || parse_count_n(*name, values[1], n);
}

}  // namespace

// The entries of one lines= name (accounting/_lines.py Schedule, the same rule): groups of `group`
// entries, the first consecutive, each next at twice the stride, until `left` were chosen.
struct LinesSchedule {
  uint32_t name_id;
  bool by_path;  // a "/" request ends in this name: the Python hook decides every entry
  uint64_t seen = 0, next = 0, stride = 1, taken = 0, group = 0;
  int64_t left = -1;  // entries still to choose; -1: every entry

  bool choose() {
    uint64_t n = seen++;
    if (n != next || left == 0) return false;
    ++taken;
    if (left > 0) {
      --left;
      if (taken % group == 0) stride *= 2;
    }
    next = n + stride;
    return true;
  }
};

struct LinesState {
  int64_t limit;  // 0: every entry
  std::vector<LinesSchedule> names;
};

LinesState* new_lines_state(int64_t limit) {
  return new LinesState{limit, {}};
}

void delete_lines_state(LinesState* s) {
  delete s;
}

namespace {

// The schedule of name id (made at its first entry), or nullptr when str(name) is no lines= name.
// False with an exception set.
bool lines_schedule(RecorderObject* r, uint32_t id, LinesSchedule** out) {
  *out = nullptr;
  for (LinesSchedule& s : r->lines_state->names) {
    if (s.name_id == id) {
      *out = &s;
      return true;
    }
  }
  PyObject* text = name_str(id);
  if (!text) return false;
  PyObject* by_path = PyDict_GetItemWithError(r->lines_names, text);  // borrowed
  Py_DECREF(text);
  if (!by_path) return !PyErr_Occurred();  // (seen once more, it takes the inline path)
  LinesSchedule s;
  s.name_id = id;
  s.by_path = PyObject_IsTrue(by_path) == 1;
  int64_t limit = r->lines_state->limit;
  if (limit > 0) {
    s.left = limit;
    s.group = uint64_t((limit + 4) / 5);  // ceil(limit / 5)
  }
  r->lines_state->names.push_back(s);
  *out = &r->lines_state->names.back();
  return true;
}

// A phase named in lines= (issue 32). The name is unmarked as seen, so that its next phase() comes
// here again; an entry the schedule does not choose is the scope itself, a chosen one (or, for a
// name a "/" path ends in, every one) is lines_hook(name, scope, chosen). Steals scope; returns a
// new reference, or nullptr with an exception set.
PyObject* lines_scope(RecorderObject* r, PyObject* name, uint32_t id, PyObject* scope) {
  if (!r->lines_state || !r->lines_names) return scope;
  LinesSchedule* sched;
  if (!lines_schedule(r, id, &sched)) {
    Py_DECREF(scope);
    return nullptr;
  }
  if (!sched) return scope;
  NameCacheEntry& entry = name_cache_slot(name);
  if (entry.obj == name) entry.shape_checked_by = 0;
  if (!sched->by_path && !sched->choose()) return scope;  // the one branch of an untraced entry
  PyObject* text = name_str(id);
  if (!text) {
    Py_DECREF(scope);
    return nullptr;
  }
  PyObject* hook = Py_NewRef(r->lines_hook);  // the call may drop r's reference to it
  PyObject* out = PyObject_CallFunctionObjArgs(hook, text, scope, nullptr);
  Py_DECREF(hook);
  Py_DECREF(text);
  Py_DECREF(scope);
  return out;
}

}  // namespace

// Python code may run here (an option's __float__, a name's __str__, a name-shape warning) and
// drop the reference the caller borrowed r through (a front's, or the installed one), so r is held
// until it is done.
LP_COLD PyObject* make_scope_holding(RecorderObject* r, PyObject* const* args, Py_ssize_t nargs,
                                     PyObject* kwnames) {
  Py_INCREF(r);
  PyObject* out = nullptr;
  uint32_t flags = 0, sample_every = 1, id;
  PyObject* name = nargs ? args[0] : nullptr;
  if ((nargs == 1 && !kwnames) ||
      parse_phase_options(args, nargs, kwnames, &name, &flags, &sample_every)) {
    if (r->closed) {
      out = null_scope();
    } else if (phase_name_id(r, name, &id)) {
      out = fill_scope(r, id, flags, sample_every);
      if (out && r->lines_hook) out = lines_scope(r, name, id, out);
    }
  }
  Py_DECREF(r);
  return out;
}

// Python code may run here (n's __index__, a name's __str__, the thread's name) and drop the
// reference r was borrowed through, so r is held until it is done.
LP_COLD PyObject* do_count_general(RecorderObject* r, PyObject* const* args, Py_ssize_t nargs,
                                   PyObject* kwnames) {
  PyObject* name;
  int64_t n;
  Py_XINCREF(r);
  bool ok = parse_count_args(args, nargs, kwnames, &name, &n);
  uint32_t id;
  if (ok && r && !r->closed && (ok = name_id_of(name, &id))) {
    if (lp::ThreadState* ts = stacked_thread_state(r)) ts->count(id, n);
  }
  Py_XDECREF(r);
  if (!ok) return nullptr;
  Py_RETURN_NONE;
}

LP_COLD PyObject* count_on_task_stack(RecorderObject* r, lp::ThreadState* ts, uint32_t name_id,
                                      int64_t n) {
  if (sync_active_stack(r, ts)) {
    // Outside a task, the tasks that made stacks may have been freed since the stack was chosen
    // (a finished task in a reference cycle goes at a later collection): then the check stops.
    if (ts->active_stack() == ts->own_stack()) ts->forget_task_stacks_if_unused();
    ts->count(name_id, n);
  }
  Py_RETURN_NONE;
}

int init_phase_args() {
  for (Params* p : {&g_phase_params, &g_count_params}) {
    for (int j = 0; j < p->count; ++j) {
      p->interned[j] = PyUnicode_InternFromString(p->names[j]);
      if (!p->interned[j]) return -1;
    }
  }
  return 0;
}

}  // namespace lp_module
