// standalone/front.h: the recording entry points of a standalone process, over lp_core's
// ThreadState.
//
// The public header's scopes reach these through the function table the standalone Profiler
// installs. They record into the installed recorder on the calling OS thread's own stack (one per
// thread, registered on its first record); with none installed every call is a no-op.
#pragma once

#include <cstddef>
#include <cstdint>

namespace lp {
class Recorder;
}

namespace lp::standalone {

/// Makes rec the recorder every front call records into (nullptr: none). The recorder must stay
/// alive for the rest of the process once installed: a thread may still be inside a call.
void install_recorder(Recorder* rec);
/// The installed recorder, or nullptr.
Recorder* installed_recorder();

/// The process-wide id of a name (interned once; callers cache it). len bytes at name.
uint32_t front_intern(const char* name, size_t len);
/// Opens phase name_id on the calling thread; token (unique among open scopes: the scope's
/// address) identifies it at exit. Returns whether it was recorded (and must be exited).
bool front_enter(uint32_t name_id, const void* token);
/// Closes the phase opened with token on the calling thread.
void front_exit(const void* token);
/// Adds n to counter name_id of the innermost open phase of the calling thread.
void front_count(uint32_t name_id, int64_t n);
/// The innermost open phase's name on the calling thread ("" at the root or with nothing
/// installed), copied into buf (at most cap - 1 bytes, NUL-terminated when cap > 0). Returns the
/// name's full length in bytes.
size_t front_current(char* buf, size_t cap);

}  // namespace lp::standalone
