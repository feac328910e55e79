// standalone/front.h: the lp_api function table of a standalone process, over lp_core.
//
// <lineprofiler/accounting.hpp>'s scopes reach these through the table (one per process, valid
// until it exits). They record into the installed recorder on the calling OS thread's own stack
// (one per thread, registered on its first record); with none installed every call is a no-op.
#pragma once

#include <cstddef>
#include <cstdint>

#include "lineprofiler/accounting.hpp"

namespace lp {
class Recorder;
}

namespace lp::standalone {

/// The standalone provider's table (abi_version LP_API_ABI_VERSION, names_epoch 1: lp_core's
/// names live as long as the process).
const lp_api* standalone_api();

/// Makes rec the recorder the table records into (nullptr: none), and stores the table (or
/// nullptr) into every attached slot. The recorder must stay alive for the rest of the process
/// once installed: a thread may still be inside a call, or hold a frame it opened.
void install_recorder(Recorder* rec);
/// In a forked child: nothing installed (the parent's recorder is not this process's worker).
void forget_after_fork_in_child();
/// The installed recorder, or nullptr.
Recorder* installed_recorder();

}  // namespace lp::standalone
