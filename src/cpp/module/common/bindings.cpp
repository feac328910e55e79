// module/common/bindings.cpp: the lineprofiler._core module: declarations, and the conversions of
// Python values they need (logic lives in lp_core).
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstdlib>
#include <cstring>

#include "lp_core/argv_mask.h"
#include "lp_core/clock.h"
#include "lp_core/cpu_clock.h"
#include "lp_core/histogram.h"
#include "lp_core/identity.h"
#include "lp_core/io_counters.h"
#include "lp_core/meta_doc.h"
#include "lp_core/nvml.h"
#include "lp_core/phase_fields.h"
#include "lp_core/recorder.h"
#include "lp_core/sampler.h"
#include "lp_core/worker_file.h"
#include "module/accounting/cuda_probe.h"
#include "module/accounting/recorder_type.h"
#include "module/line/line_tracer.h"
#include "module/report/perfetto_tracks.h"

namespace nb = nanobind;

namespace {

// str(v) as UTF-8, never raising: what UTF-8 cannot encode (a byte the environment's
// surrogateescape decoding kept, a lone surrogate) is backslash-escaped ("\\udcff"); a str() that
// fails gives "".
std::string utf8_of(nb::handle v) {
  PyObject* s = PyObject_Str(v.ptr());
  PyObject* b = s ? PyUnicode_AsEncodedString(s, "utf-8", "backslashreplace") : nullptr;
  Py_XDECREF(s);
  if (!b) {
    PyErr_Clear();
    return "";
  }
  std::string out(PyBytes_AS_STRING(b), size_t(PyBytes_GET_SIZE(b)));
  Py_DECREF(b);
  return out;
}

std::optional<std::string> optional_utf8(nb::handle v) {
  if (v.is_none()) return std::nullopt;
  return utf8_of(v);
}

// The items of an iterable, each as utf8_of (at most max_items; a failing iteration stops).
std::vector<std::string> utf8_list(nb::handle v, size_t max_items) {
  std::vector<std::string> out;
  PyObject* it = v.is_none() ? nullptr : PyObject_GetIter(v.ptr());
  while (it != nullptr && out.size() < max_items) {
    PyObject* item = PyIter_Next(it);
    if (item == nullptr) break;
    out.push_back(utf8_of(item));
    Py_DECREF(item);
  }
  Py_XDECREF(it);
  PyErr_Clear();
  return out;
}

// Seconds as a double; None (or what is not a number) gives 0, written as null.
double seconds_of(nb::handle v) {
  if (v.is_none()) return 0;
  double d = PyFloat_AsDouble(v.ptr());
  if (d == -1.0 && PyErr_Occurred()) {
    PyErr_Clear();
    return 0;
  }
  return d;
}

std::optional<int64_t> optional_int(nb::handle v) {
  if (v.is_none()) return std::nullopt;
  long long n = PyLong_AsLongLong(v.ptr());
  if (n == -1 && PyErr_Occurred()) {
    PyErr_Clear();
    return std::nullopt;
  }
  return int64_t(n);
}

// The meta object of a Python profiler's worker file (lp_core/meta_doc.h builds it, as for the
// standalone profiler); runtime and python are this interpreter's.
std::string python_meta_json(nb::handle role, nb::handle process_name, nb::handle parent_role,
                             int64_t pid, nb::handle host_dir, nb::handle run_id, nb::handle uuid,
                             uint64_t start_unix_ns, nb::handle argv, bool signal_flush,
                             bool measure_cpu, nb::handle snapshot_interval_s,
                             nb::handle sample_interval_s, bool thread_names, bool strict_names,
                             bool annotate, nb::handle backend, nb::handle lines,
                             nb::handle lines_entries, nb::handle exit_signal) {
  lp::MetaDoc doc;
  doc.role = utf8_of(role);
  doc.process_name = optional_utf8(process_name);
  doc.parent_role = optional_utf8(parent_role);
  doc.pid = pid;
  doc.host_dir = utf8_of(host_dir);
  doc.run_id = utf8_of(run_id);
  doc.uuid = utf8_of(uuid);
  doc.start_unix_ns = start_unix_ns;
  doc.argv = utf8_list(argv, lp::kMetaArgvMax);
  doc.signal_flush = signal_flush;
  doc.runtime = "python";
  std::string version = Py_GetVersion();  // "3.11.7 (main, ...) [GCC ...]"
  doc.python = version.substr(0, version.find(' '));
  doc.measure_cpu = measure_cpu;
  doc.snapshot_interval_s = seconds_of(snapshot_interval_s);
  doc.sample_interval_s = seconds_of(sample_interval_s);
  doc.thread_names = thread_names;
  doc.strict_names = strict_names;
  doc.annotate = annotate;
  doc.backend = optional_utf8(backend);
  doc.lines = utf8_list(lines, size_t(-1));
  doc.lines_entries = optional_int(lines_entries);
  doc.exit_signal = exit_signal.is_none() ? std::string() : utf8_of(exit_signal);
  return lp::meta_json(doc);
}

}  // namespace

NB_MODULE(_core, m) {
  m.doc() = "The C++ core of with-line-profiler.";

  // LINEPROFILER_WALL_CLOCK=monotonic forces the CLOCK_MONOTONIC fallback (tests use it).
  const char* forced = std::getenv("LINEPROFILER_WALL_CLOCK");
  lp::wall_clock_init(!(forced && std::strcmp(forced, "monotonic") == 0));

  m.attr("HIST_BUCKETS") = lp::kHistBuckets;
  m.attr("HIST_MAX_REL_ERROR") = lp::kHistMaxRelError;
  m.attr("HIST_EXACT_BUCKETS") = lp::kHistExactBuckets;
  {  // hist_bucket's sub-bucket thresholds (0.64 fixed point), for the pure-Python bucket_of
    nb::list thresholds;
    for (int j = 0; j <= lp::kHistSubBuckets; ++j) {
      thresholds.append(lp::detail::g_hist_tables.threshold[j]);
    }
    m.attr("HIST_THRESHOLDS") = nb::tuple(thresholds);
  }
  m.attr("WORKER_SCHEMA_VERSION") = lp::kWorkerSchemaVersion;
  m.attr("MAX_PATHS") = lp::kMaxNodes;
  m.attr("MAX_DEPTH") = lp::kMaxDepth;
  {  // the per-phase record's field table (lp_core/phase_fields.h), for runfile/phase_fields.py
    nb::list fields;
    for (const lp::PhaseField& f : lp::kPhaseFields) {
      fields.append(nb::make_tuple(f.name, f.type, f.combine, f.unit, f.json, f.doc));
    }
    m.attr("PHASE_FIELDS") = nb::tuple(fields);
  }
  // The sampler's sidecar layout (lp_core/sampler.h), read by lineprofiler.runfile.samples.
  m.attr("SAMPLES_MAGIC") = nb::bytes(lp::kSamplesMagic, sizeof(lp::kSamplesMagic));
  m.attr("SAMPLES_VERSION") = lp::kSamplesVersion;
  m.attr("SAMPLES_HEADER_BYTES") = lp::kSamplesHeaderBytes;
  m.attr("SAMPLE_BASE_WORDS") = lp::kSampleBaseWords;
  m.attr("GPU_PID_ABSENT") = lp::kGpuPidAbsent;
  {
    nb::dict words;
    words["time_unix_ns"] = int(lp::kSwTimeUnixNs);
    words["dt_ns"] = int(lp::kSwDtNs);
    words["tag"] = int(lp::kSwTag);
    words["flags"] = int(lp::kSwFlags);
    words["read_bytes"] = int(lp::kSwReadBytes);
    words["write_bytes"] = int(lp::kSwWriteBytes);
    words["read_chars"] = int(lp::kSwReadChars);
    words["write_chars"] = int(lp::kSwWriteChars);
    words["rss_bytes"] = int(lp::kSwRssBytes);
    words["cuda_alloc"] = int(lp::kSwCudaAlloc);
    words["cuda_reserved"] = int(lp::kSwCudaReserved);
    words["own_write_bytes"] = int(lp::kSwOwnWriteBytes);
    m.attr("SAMPLE_WORDS") = words;
    nb::dict flags;
    flags["io"] = int64_t(lp::kSfIo);
    flags["rss"] = int64_t(lp::kSfRss);
    flags["cuda"] = int64_t(lp::kSfCuda);
    flags["gpu"] = int64_t(lp::kSfGpu);
    m.attr("SAMPLE_FLAGS") = flags;
  }

  m.attr("MASKED") = lp::kMasked;
  // Who and where a worker is (lp_core/identity.h): the rules of the standalone profiler too.
  // Text from the environment or the kernel comes back as bytes (os.fsdecode'd by the caller).
  namespace id = lp::identity;
  m.attr("WORKER_FORMAT") = id::kWorkerFormat;
  m.attr("WORKERS_DIR") = id::kWorkersDir;
  m.attr("ENV_PROFILE") = id::kEnvProfile;
  m.attr("ENV_RUN_DIR") = id::kEnvRunDir;
  m.attr("ENV_RUN_ID") = id::kEnvRunId;
  m.attr("ENV_ROLE") = id::kEnvRole;
  m.attr("ENV_PARENT_ROLE") = id::kEnvParentRole;
  m.def("new_run_id", &id::new_run_id, "A fresh attempt id: UTC minute plus 6 random hex digits.");
  m.def(
      "resolve_run_id",
      [](nb::bytes run_dir) {
        return id::resolve_run_id(std::string(run_dir.c_str(), run_dir.size()));
      },
      nb::arg("run_dir"), "The attempt this process belongs to for run_dir (absolute, bytes).");
  m.def(
      "launcher_run_id",
      []() -> nb::object {
        std::optional<std::string> got = id::launcher_run_id();
        return got ? nb::object(nb::str(got->c_str())) : nb::none();
      },
      "An attempt id shared by every rank of one launch, or None.");
  m.def("host_name", &id::host_name, "This node's name, safe as one directory name.");
  m.def(
      "real_host_name",
      [] {
        std::string name = id::real_host_name();
        return nb::bytes(name.data(), name.size());
      },
      "This node's UTS name (bytes).");
  m.def(
      "short_hash", [](const std::vector<std::string>& parts) { return id::short_hash(parts); },
      nb::arg("parts"), "sha1 of the parts joined by NUL, as 8 lowercase hex digits.");
  m.def("process_start", &id::process_start, nb::arg("pid"),
        "The start time of pid in clock ticks since boot, or ''.");
  m.def(
      "launcher_identity",
      [] {
        id::LauncherIdentity who = id::launcher_identity();
        nb::dict out;
        out["rank"] = who.rank ? nb::object(nb::int_(*who.rank)) : nb::none();
        out["rank_source"] = who.rank ? nb::object(nb::str(who.rank_source.c_str())) : nb::none();
        out["local_rank"] = who.local_rank ? nb::object(nb::int_(*who.local_rank)) : nb::none();
        out["job_id"] =
            who.job_id ? nb::object(nb::bytes(who.job_id->data(), who.job_id->size())) : nb::none();
        return out;
      },
      "Rank, local rank and job id from whichever launcher set them (job_id as bytes).");
  m.def("meta_json", &python_meta_json, nb::kw_only(), nb::arg("role"),
        nb::arg("process_name").none(), nb::arg("parent_role").none(), nb::arg("pid"),
        nb::arg("host_dir"), nb::arg("run_id"), nb::arg("uuid"), nb::arg("start_unix_ns"),
        nb::arg("argv"), nb::arg("signal_flush"), nb::arg("measure_cpu"),
        nb::arg("snapshot_interval_s").none(), nb::arg("sample_interval_s").none(),
        nb::arg("thread_names"), nb::arg("strict_names"), nb::arg("annotate"),
        nb::arg("backend").none(), nb::arg("lines"), nb::arg("lines_entries").none(),
        nb::arg("exit_signal").none() = nb::none(),
        "The worker file's meta object as JSON text (lp_core/meta_doc.h: the standalone "
        "profiler's builder too). Strings are str()'d and never raise: what UTF-8 cannot encode "
        "is backslash-escaped; argv's first 8 are written, secrets masked.");
  m.def("mask_argv", &lp::masked_argv, nb::arg("argv"),
        "argv with every secret value replaced by MASKED (lp_core/argv_mask.h: the rule).");
  m.def("names_a_secret", &lp::names_a_secret, nb::arg("key"),
        "Whether an option or variable name names a secret (lp_core/argv_mask.h).");
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

  // Thread-CPU clock tiers (LINEPROFILER_CPU_CLOCK=auto|exact|anchored|syscall, read at the probe).
  auto probe_dict = [](const lp::CpuClockProbe& p) {
    nb::dict d;
    d["mode"] = lp::cpu_clock_mode_name(p.mode);
    d["tier"] = lp::cpu_clock_tier_name(p.tier);
    d["perf_errno"] = p.perf_errno;
    d["cap_user_time"] = p.cap_user_time;
    d["lock_tracks_switches"] = p.lock_tracks_switches;
    d["exact_validated"] = p.exact_validated;
    d["detail"] = p.detail;
    return d;
  };
  m.def(
      "cpu_clock_probe", [probe_dict]() { return probe_dict(lp::cpu_clock_probe()); },
      "The process's thread-CPU clock probe (runs it on first call): a dict with mode, tier, "
      "perf_errno, cap_user_time, lock_tracks_switches, exact_validated, detail.");
  m.def(
      "cpu_clock_reprobe",
      [probe_dict](const std::string& mode) {
        lp::CpuClockMode parsed;
        if (!lp::parse_cpu_clock_mode(mode.c_str(), &parsed)) {
          throw nb::value_error("mode must be 'auto', 'exact', 'anchored' or 'syscall'");
        }
        return probe_dict(lp::cpu_clock_reprobe(parsed));
      },
      nb::arg("mode"),
      "Probe again with mode; recorders made afterwards use the new tier (tests, benchmarks).");
  nb::class_<lp::ThreadCpuClock>(
      m, "ThreadCpuClock", "A thread-CPU clock of one tier; use it on the thread that made it.")
      .def(
          "__init__",
          [](lp::ThreadCpuClock* self, const std::string& tier) {
            lp::CpuClockTier parsed;
            if (!lp::parse_cpu_clock_tier(tier.c_str(), &parsed)) {
              throw nb::value_error("tier must be 'auto', 'exact', 'anchored' or 'syscall'");
            }
            new (self) lp::ThreadCpuClock(parsed);
          },
          nb::arg("tier") = "auto")
      .def("now_ns", &lp::ThreadCpuClock::now_ns, "The calling thread's CPU time, in ns.")
      .def_prop_ro("tier",
                   [](const lp::ThreadCpuClock& c) { return lp::cpu_clock_tier_name(c.tier()); })
      .def_prop_ro("slow_reads", &lp::ThreadCpuClock::slow_reads,
                   "System calls the anchored tier made.")
      .def_prop_ro("audited_ns", &lp::ThreadCpuClock::audited_ns,
                   "Wall ns over which the anchored tier checked its extrapolation.")
      .def_prop_ro("unbilled_ns", &lp::ThreadCpuClock::unbilled_ns,
                   "CPU ns the anchored extrapolation claimed beyond the kernel's (signed).")
      .def("read_cost_ns", &lp::cpu_clock_read_cost_ns, nb::arg("n"),
           "Average ns of one now_ns() over n reads in a C++ loop.");

  m.def("_set_io_counter_paths", &lp::set_io_counter_paths, nb::arg("thread_path"),
        nb::arg("process_path"),
        "Tests only: read I/O counters from these files ('' restores /proc) for files opened "
        "from now on.");

  if (lp_module::add_recorder_types(m.ptr()) != 0) throw nb::python_error();
  if (lp_module::add_line_tracer(m.ptr()) != 0) throw nb::python_error();
  if (lp_module::add_cuda_probe_functions(m.ptr()) != 0) throw nb::python_error();
  if (lp_module::add_perfetto_tracks(m.ptr()) != 0) throw nb::python_error();
}
