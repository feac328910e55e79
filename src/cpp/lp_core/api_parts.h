// lp_core/api_parts.h: what both providers of the C++ API's function table (the module's _C_API
// and liblineprofiler's) do alike once they hold the calling thread's state.
#pragma once

#include <cstddef>
#include <cstdint>

#include "lp_core/recorder.h"

namespace lp::api_parts {

/// The name's id, interned; 0 (the root's: no handle) for a null or empty name.
uint32_t intern(const char* name, size_t len);

/// Copies the name of ts's innermost open phase into buf (at most cap bytes, no NUL) and returns
/// its whole length in bytes (0 at the root). Owner thread only.
size_t current_name(const ThreadState& ts, char* buf, size_t cap);

/// Copies the name ids of ts's open path into names (at most cap) and returns the path's whole
/// length. Owner thread only.
size_t capture(const ThreadState& ts, uint32_t* names, size_t cap);

/// Attaches the n name ids under ts (ThreadState::attach): the attached level, 0 when refused.
uint32_t attach(ThreadState& ts, const uint32_t* names, size_t n);

}  // namespace lp::api_parts
