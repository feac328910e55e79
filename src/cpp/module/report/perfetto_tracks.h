// module/report/perfetto_tracks.h: export --perfetto's per-worker tracks formatted in C++
// (registration only).
#pragma once

#include <Python.h>

namespace lp_module {

/// Adds perfetto_tracks() to module: one worker's phase slices and counter events as the trace's
/// JSON text, byte for byte what report/perfetto.py's Python path writes. Returns 0, or -1 with a
/// Python exception set.
int add_perfetto_tracks(PyObject* module);

}  // namespace lp_module
