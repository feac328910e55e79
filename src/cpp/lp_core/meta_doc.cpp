// lp_core/meta_doc.cpp: the worker file's meta object (meta_doc.h), for both profilers.
#include "lp_core/meta_doc.h"

#include <unistd.h>

#include <algorithm>

#include "lp_core/argv_mask.h"
#include "lp_core/identity.h"
#include "lp_core/json_text.h"

#ifndef LP_VERSION
#define LP_VERSION "unknown"
#endif

namespace lp {

namespace {

// One "key": member, the comma before it unless it is the first.
void key(std::string& out, const char* name) {
  if (out.size() > 1) out.push_back(',');
  append_json_string(out, name);
  out.push_back(':');
}

void text(std::string& out, const std::optional<std::string>& v) {
  if (v) {
    append_json_string(out, *v);
  } else {
    out.append("null");
  }
}

void integer(std::string& out, const std::optional<long long>& v) {
  if (v) {
    append_json_int(out, *v);
  } else {
    out.append("null");
  }
}

void boolean(std::string& out, bool v) {
  out.append(v ? "true" : "false");
}

void interval(std::string& out, double seconds) {
  if (seconds > 0) {
    append_json_double(out, seconds);
  } else {
    out.append("null");
  }
}

void strings(std::string& out, const std::vector<std::string>& list) {
  out.push_back('[');
  for (size_t i = 0; i < list.size(); ++i) {
    if (i) out.push_back(',');
    append_json_string(out, list[i]);
  }
  out.push_back(']');
}

}  // namespace

const char* package_version() {
  return LP_VERSION;
}

std::string meta_json(const MetaDoc& doc) {
  namespace id = lp::identity;
  std::string out = "{";
  key(out, "role");
  append_json_string(out, doc.role);
  key(out, "process_name");
  text(out, doc.process_name);
  key(out, "parent_role");
  text(out, doc.parent_role);
  key(out, "pid");
  append_json_int(out, doc.pid);
  key(out, "process_start");
  std::string start = id::own_process_start();
  text(out, start.empty() ? std::nullopt : std::optional<std::string>(start));
  key(out, "ppid");
  append_json_int(out, int64_t(getppid()));
  key(out, "host");
  append_json_string(out, id::real_host_name());
  key(out, "host_dir");
  append_json_string(out, doc.host_dir);
  key(out, "run_id");
  append_json_string(out, doc.run_id);
  key(out, "uuid");
  append_json_string(out, doc.uuid);
  key(out, "start_unix_ns");
  append_json_uint(out, doc.start_unix_ns);
  key(out, "start_time");
  append_json_double(out, double(doc.start_unix_ns) / 1e9);
  id::LauncherIdentity who = id::launcher_identity();
  key(out, "rank");
  integer(out, who.rank);
  key(out, "rank_source");
  text(out, who.rank ? std::optional<std::string>(who.rank_source) : std::nullopt);
  key(out, "local_rank");
  integer(out, who.local_rank);
  key(out, "job_id");
  text(out, who.job_id);
  key(out, "argv");
  std::vector<std::string> argv(doc.argv.begin(),
                                doc.argv.begin() + std::min(doc.argv.size(), kMetaArgvMax));
  strings(out, masked_argv(argv));
  key(out, "signal_flush");
  boolean(out, doc.signal_flush);
  key(out, "python");
  text(out, doc.python);
  key(out, "runtime");
  append_json_string(out, doc.runtime);
  key(out, "measure_cpu");
  boolean(out, doc.measure_cpu);
  key(out, "snapshot_interval_s");
  interval(out, doc.snapshot_interval_s);
  key(out, "sample_interval_s");
  interval(out, doc.sample_interval_s);
  key(out, "thread_names");
  boolean(out, doc.thread_names);
  key(out, "strict_names");
  boolean(out, doc.strict_names);
  key(out, "annotate");
  boolean(out, doc.annotate);
  key(out, "backend");
  text(out, doc.backend);
  key(out, "lines");
  strings(out, doc.lines);
  key(out, "lines_entries");
  integer(out, doc.lines_entries ? std::optional<long long>(*doc.lines_entries) : std::nullopt);
  key(out, "lineprofiler_version");
  append_json_string(out, package_version());
  if (!doc.exit_signal.empty()) {
    key(out, "exit_signal");
    append_json_string(out, doc.exit_signal);
  }
  out.push_back('}');
  return out;
}

}  // namespace lp
