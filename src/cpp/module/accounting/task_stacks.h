// module/accounting/task_stacks.h: which phase stack an entry uses: its thread's own, or its
// asyncio task's.
//
// Every asyncio task runs its steps inside its own contextvars.Context, and CPython bumps the
// thread state's context_ver whenever the current context changes (or a variable is set in it).
// So each phase()/count() compares (thread-state id, context_ver) with the pair its ThreadState saw
// last: equal, and the active stack is still right (a few loads); different, and the stack is
// chosen again out of line (resolve_active_stack).
#pragma once

#include <Python.h>

#include <cstdint>

#include "lp_core/recorder.h"

namespace lp_module {

/// Out of line: makes ts's active stack the current task's (created on the task's first phase,
/// nested under the phases its creating task had open, as a contextvar inherits) or, outside a
/// task, the thread's own. recorder_serial identifies the recorder (never reused). Never raises;
/// runs Python code (asyncio's current_task, a ContextVar), so the caller holds the recorder.
void resolve_active_stack(lp::ThreadState* ts, PyThreadState* tstate, uint64_t recorder_serial);

/// Whether ts's active stack was chosen for the calling context (see the header comment).
inline bool same_context(const lp::ThreadState* ts, const PyThreadState* t) {
  return t->context_ver == ts->context_key_b && t->id == ts->context_key_a;
}

/// Readies the holder type. Returns 0, or -1 with a Python exception set.
int init_task_stacks();

}  // namespace lp_module
