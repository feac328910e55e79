// module/accounting/task_stacks.cpp: per-asyncio-task phase stacks, found through a private
// ContextVar.
//
// A context that entered a phase inside a task holds, in the ContextVar, a StackHolder: its owner
// (the context's address and a weak reference to the task, so that a new context at a freed one's
// address is never taken for it) and, per recorder and thread, the stack it uses. A task's context
// is a copy of its creator's, so a new task finds its creator's holder there: its first phase makes
// it a holder of its own whose stacks nest under the creator's innermost open phases at that
// moment. Code outside a task (synchronous code, loop callbacks, executor threads) uses the
// thread's stack.
#include "module/accounting/task_stacks.h"

#include <memory>
#include <vector>

namespace lp_module {
namespace {

struct StackEntry {
  uint64_t recorder_serial;
  const lp::ThreadState* ts;  // compared, never dereferenced
  std::shared_ptr<lp::PhaseStack> stack;
  bool own;  // this context's stack, not one inherited from its creator
};

struct StackHolder {
  PyObject_HEAD
  const void* owner_ctx;  // compared, never dereferenced
  PyObject* owner_task;   // a weak reference to the task that made this holder
  std::vector<StackEntry>* entries;
};

PyTypeObject StackHolderType = {PyVarObject_HEAD_INIT(nullptr, 0)};
PyObject* g_stacks_var = nullptr;        // the ContextVar holding a context's StackHolder
PyObject* g_get_running_loop = nullptr;  // asyncio's, once asyncio has been imported
PyObject* g_current_task = nullptr;

void holder_dealloc(PyObject* self) {
  StackHolder* h = reinterpret_cast<StackHolder*>(self);
  delete h->entries;
  Py_XDECREF(h->owner_task);
  Py_TYPE(self)->tp_free(self);
}

// Keeps a pending Python error (if any) aside while the resolver calls into Python.
class ErrorAside {
 public:
  ErrorAside() {
#if PY_VERSION_HEX >= 0x030C0000
    exc_ = PyErr_GetRaisedException();
#else
    PyErr_Fetch(&type_, &exc_, &tb_);
#endif
  }
  ~ErrorAside() {
    PyErr_Clear();
#if PY_VERSION_HEX >= 0x030C0000
    PyErr_SetRaisedException(exc_);
#else
    PyErr_Restore(type_, exc_, tb_);
#endif
  }
  ErrorAside(const ErrorAside&) = delete;
  ErrorAside& operator=(const ErrorAside&) = delete;

 private:
#if PY_VERSION_HEX < 0x030C0000
  PyObject* type_ = nullptr;
  PyObject* tb_ = nullptr;
#endif
  PyObject* exc_ = nullptr;
};

// A new reference to the task running on this thread, or nullptr (asyncio not imported, no loop
// running, or a loop callback rather than a task). Errors are cleared.
PyObject* running_task() {
  if (!g_current_task) {
    PyObject* name = PyUnicode_FromString("asyncio");
    PyObject* asyncio = name ? PyImport_GetModule(name) : nullptr;
    Py_XDECREF(name);
    if (!asyncio) {
      PyErr_Clear();
      return nullptr;
    }
    g_get_running_loop = PyObject_GetAttrString(asyncio, "_get_running_loop");
    g_current_task = PyObject_GetAttrString(asyncio, "current_task");
    Py_DECREF(asyncio);
    if (!g_get_running_loop || !g_current_task) {
      Py_CLEAR(g_get_running_loop);
      Py_CLEAR(g_current_task);
      PyErr_Clear();
      return nullptr;
    }
  }
  PyObject* loop = PyObject_CallNoArgs(g_get_running_loop);
  if (!loop || loop == Py_None) {
    Py_XDECREF(loop);
    PyErr_Clear();
    return nullptr;
  }
  PyObject* task = PyObject_CallOneArg(g_current_task, loop);
  Py_DECREF(loop);
  if (!task || task == Py_None) {
    Py_XDECREF(task);
    PyErr_Clear();
    return nullptr;
  }
  return task;
}

// Whether h's task is alive (a holder made without a weak reference counts as alive).
bool owner_alive(const StackHolder* h) {
  if (!h->owner_task) return true;
#if PY_VERSION_HEX >= 0x030D0000
  PyObject* obj = nullptr;
  int alive = PyWeakref_GetRef(h->owner_task, &obj);
  Py_XDECREF(obj);
  if (alive < 0) PyErr_Clear();
  return alive > 0;
#else
  return PyWeakref_GET_OBJECT(h->owner_task) != Py_None;
#endif
}

// A holder owned by ctx and task, inheriting (as not its own) every stack of from (may be null).
StackHolder* holder_new(PyObject* ctx, PyObject* task, const StackHolder* from) {
  StackHolder* h = PyObject_New(StackHolder, &StackHolderType);
  if (!h) return nullptr;
  h->owner_ctx = ctx;
  h->owner_task = PyWeakref_NewRef(task, nullptr);
  if (!h->owner_task) PyErr_Clear();  // a task type without weak references: trusted as alive
  h->entries = new std::vector<StackEntry>();
  if (from) {
    for (const StackEntry& e : *from->entries) {
      h->entries->push_back({e.recorder_serial, e.ts, e.stack, false});
    }
  }
  return h;
}

// The stack h gives (serial, ts): its own, else a new one nested under the inherited one.
std::shared_ptr<lp::PhaseStack> stack_of(StackHolder* h, lp::ThreadState* ts, uint64_t serial) {
  StackEntry* inherited = nullptr;
  for (StackEntry& e : *h->entries) {
    if (e.recorder_serial != serial || e.ts != ts) continue;
    if (e.own) return e.stack;
    inherited = &e;
  }
  std::shared_ptr<lp::PhaseStack> stack =
      ts->new_task_stack(inherited ? inherited->stack.get() : nullptr);
  if (inherited) {
    inherited->stack = stack;
    inherited->own = true;
  } else {
    h->entries->push_back({serial, ts, stack, true});
  }
  return stack;
}

}  // namespace

void resolve_active_stack(lp::ThreadState* ts, PyThreadState* tstate, uint64_t recorder_serial) {
  std::shared_ptr<lp::PhaseStack> chosen;  // null: the thread's own stack
  PyObject* ctx = tstate->context;
  if (ctx && g_stacks_var) {
    ErrorAside aside;
    PyObject* value = nullptr;
    if (PyContextVar_Get(g_stacks_var, nullptr, &value) < 0) {
      PyErr_Clear();
      value = nullptr;
    }
    StackHolder* h = value && Py_IS_TYPE(value, &StackHolderType)
                         ? reinterpret_cast<StackHolder*>(value)
                         : nullptr;
    if (h && !(h->owner_ctx == ctx && owner_alive(h))) {
      // Inherited from the creating context: a task's first phase makes a holder of its own.
      StackHolder* mine = nullptr;
      if (PyObject* task = running_task()) {
        mine = holder_new(ctx, task, h);
        Py_DECREF(task);
      }
      h = mine;
    } else if (!h) {
      StackHolder* mine = nullptr;
      if (PyObject* task = running_task()) {
        mine = holder_new(ctx, task, nullptr);
        Py_DECREF(task);
      }
      h = mine;
    } else {
      Py_INCREF(h);  // (value is released below)
    }
    if (h && reinterpret_cast<PyObject*>(h) != value) {
      PyObject* token = PyContextVar_Set(g_stacks_var, reinterpret_cast<PyObject*>(h));
      if (token) {
        Py_DECREF(token);
      } else {
        PyErr_Clear();
        Py_CLEAR(h);
      }
    }
    if (h) {
      chosen = stack_of(h, ts, recorder_serial);
      Py_DECREF(h);
    }
    Py_XDECREF(value);
  }
  ts->use_stack(std::move(chosen));
  ts->context_key_a = tstate->id;  // after any set above (which bumps context_ver)
  ts->context_key_b = tstate->context_ver;
}

int init_task_stacks() {
  StackHolderType.tp_name = "lineprofiler._core._TaskStacks";
  StackHolderType.tp_basicsize = sizeof(StackHolder);
  StackHolderType.tp_flags = Py_TPFLAGS_DEFAULT;
  StackHolderType.tp_doc = "The phase stacks of one asyncio task's context (private).";
  StackHolderType.tp_dealloc = holder_dealloc;
  if (PyType_Ready(&StackHolderType) < 0) return -1;
  g_stacks_var = PyContextVar_New("lineprofiler_phase_stacks", nullptr);
  return g_stacks_var ? 0 : -1;
}

}  // namespace lp_module
