// module/accounting/cuda_probe.h: the sampler's CUDA allocator probe (calls a Python function, with
// the GIL).
#pragma once

#include <Python.h>

#include <cstdint>

namespace lp_module {

/// Reads (allocated, reserved) CUDA allocator bytes through the Python callable registered with
/// _core.set_cuda_probe(). Takes the GIL only when libc10_cuda is already loaded in the process
/// (so a process that never imported torch with CUDA never pays for it), and never during
/// interpreter finalisation. Returns false when unavailable. Safe from any thread.
bool cuda_probe(int64_t* allocated, int64_t* reserved);

/// Adds set_cuda_probe(callable_or_None) to the module. Returns 0 or -1 with an exception set.
int add_cuda_probe_functions(PyObject* module);

}  // namespace lp_module
