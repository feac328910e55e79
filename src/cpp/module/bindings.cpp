// module/bindings.cpp: the lineprofiler._core module: declarations only (logic lives in lp_core).
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstdlib>
#include <cstring>

#include "lp_core/clock.h"
#include "lp_core/histogram.h"
#include "lp_core/io_counters.h"
#include "lp_core/worker_file.h"
#include "module/cuda_probe.h"
#include "module/line_tracer.h"
#include "module/recorder_type.h"

namespace nb = nanobind;

NB_MODULE(_core, m) {
  m.doc() = "The C++ core of with-line-profiler.";

  // LINEPROFILER_WALL_CLOCK=monotonic forces the CLOCK_MONOTONIC fallback (tests use it).
  const char* forced = std::getenv("LINEPROFILER_WALL_CLOCK");
  lp::wall_clock_init(!(forced && std::strcmp(forced, "monotonic") == 0));

  m.attr("HIST_BUCKETS") = lp::kHistBuckets;
  m.attr("HIST_MAX_REL_ERROR") = lp::kHistMaxRelError;
  m.attr("WORKER_SCHEMA_VERSION") = lp::kWorkerSchemaVersion;

  m.def("hist_bucket", &lp::hist_bucket, nb::arg("ns"), "Bucket index of a duration in ns.");
  m.def("hist_bucket_lower", &lp::hist_bucket_lower, nb::arg("bucket"),
        "Lower bound of a bucket, in ns.");
  m.def("hist_bucket_upper", &lp::hist_bucket_upper, nb::arg("bucket"),
        "Upper bound (exclusive) of a bucket, in ns.");
  m.def("hist_bucket_value", &lp::hist_bucket_value, nb::arg("bucket"),
        "The value, in ns, a bucket reports for a quantile.");
  m.def(
      "hist_quantile",
      [](const std::vector<uint64_t>& counts, double q) {
        if (counts.size() != size_t(lp::kHistBuckets)) {
          throw nb::value_error("hist_quantile() needs exactly HIST_BUCKETS counts");
        }
        return lp::hist_quantile(counts.data(), q);
      },
      nb::arg("counts"), nb::arg("q"),
      "Quantile q of a dense histogram, in ns; -1.0 when it is empty.");
  m.def("wall_clock_name", &lp::wall_clock_name, "The hot-path wall clock: 'tsc' or 'monotonic'.");
  m.def("wall_ticks", &lp::wall_ticks, "Raw ticks of the hot-path wall clock.");
  m.def("ticks_to_ns", &lp::ticks_to_ns, nb::arg("dticks"), "A tick difference in ns.");

  m.def("_set_io_counter_paths", &lp::set_io_counter_paths, nb::arg("thread_path"),
        nb::arg("process_path"),
        "Tests only: read I/O counters from these files ('' restores /proc) for files opened "
        "from now on.");

  if (lp_module::add_recorder_types(m.ptr()) != 0) throw nb::python_error();
  if (lp_module::add_line_tracer(m.ptr()) != 0) throw nb::python_error();
  if (lp_module::add_cuda_probe_functions(m.ptr()) != 0) throw nb::python_error();
}
