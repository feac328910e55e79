// lp_core/worker_file.cpp: worker-file JSON and the temporary-file-then-rename write.
#include "lp_core/worker_file.h"

#include <unistd.h>

#include "lp_core/clock.h"
#include "lp_core/identity.h"
#include "lp_core/json_text.h"
#include "lp_core/names.h"
#include "lp_core/worker_dir.h"

namespace lp {

namespace {

void append_path(std::string& out, const ThreadSnapshot& t, uint32_t index,
                 const std::vector<std::string>& names) {
  std::vector<uint32_t> chain;
  for (uint32_t i = index; i != kRootNode; i = t.nodes[i].parent) chain.push_back(i);
  out.push_back('[');
  for (size_t k = chain.size(); k-- > 0;) {
    uint32_t name_id = t.nodes[chain[k]].name_id;
    append_json_string(out, name_id < names.size() ? names[name_id] : std::string("?"));
    if (k) out.push_back(',');
  }
  out.push_back(']');
}

// "io" of a phase entered with io=True: byte sums of the entries whose boundary reads succeeded.
void append_io(std::string& out, const NodeSnapshot& n) {
  out.append(",\"io\":{\"calls\":");
  append_json_uint(out, n.io_calls);
  out.append(",\"failed\":");
  append_json_uint(out, n.io_failed);
  if (n.io_async) {  // entries in an asyncio task that spanned an await: no bytes recorded
    out.append(",\"async\":");
    append_json_uint(out, n.io_async);
  }
  out.append(",\"read_bytes\":");
  append_json_uint(out, n.io_read_bytes);
  out.append(",\"write_bytes\":");
  append_json_uint(out, n.io_write_bytes);
  out.append(",\"read_chars\":");
  append_json_uint(out, n.io_rchar);
  out.append(",\"write_chars\":");
  append_json_uint(out, n.io_wchar);
  out.push_back('}');
}

void append_thread(std::string& out, const ThreadSnapshot& t, const std::vector<std::string>& names,
                   bool measure_cpu) {
  // self = (wall + open) minus the children's (wall + open): open time of a parent already
  // contains whatever its children completed inside the still-open entry.
  std::vector<uint64_t> child_total(t.nodes.size(), 0);
  for (size_t i = 1; i < t.nodes.size(); ++i) {
    child_total[t.nodes[i].parent] += t.nodes[i].wall_ns + t.nodes[i].open_ns;
  }
  out.append("{\"tid\":");
  append_json_uint(out, t.os_tid);
  out.append(",\"name\":");
  append_json_string(out, t.thread_name);
  out.append(",\"depth_overflow\":");
  append_json_uint(out, t.depth_overflow);
  out.append(",\"folded_entries\":");
  append_json_uint(out, t.folded_entries);
  if (t.counters_refused) {
    out.append(",\"counters_refused\":");
    append_json_uint(out, t.counters_refused);
  }
  if (t.exited_threads) {
    out.append(",\"exited_threads\":");
    append_json_uint(out, t.exited_threads);
  }
  if (t.task_stacks_made) {  // asyncio tasks recorded here: their entries may overlap in time
    out.append(",\"tasks\":");
    append_json_uint(out, t.task_stacks_made);
  }
  if (t.out_of_order_exits) {
    out.append(",\"out_of_order_exits\":");
    append_json_uint(out, t.out_of_order_exits);
  }
  out.append(",\"phases\":[");
  bool first = true;
  for (size_t i = 0; i < t.nodes.size(); ++i) {
    const NodeSnapshot& n = t.nodes[i];
    if (n.calls == 0 && n.open_count == 0 && n.counters.empty()) continue;
    if (!first) out.push_back(',');
    first = false;
    uint64_t total = n.wall_ns + n.open_ns;
    out.append("\n{\"path\":");
    append_path(out, t, uint32_t(i), names);
    out.append(",\"calls\":");
    append_json_uint(out, n.calls);
    out.append(",\"wall_ns\":");
    append_json_uint(out, n.wall_ns);
    out.append(",\"self_ns\":");
    append_json_uint(out, total > child_total[i] ? total - child_total[i] : 0);
    out.append(",\"cpu_ns\":");
    if (measure_cpu) {
      append_json_uint(out, n.cpu_ns);
    } else {
      out.append("null");
    }
    if (n.min_wall_ns <= n.max_wall_ns) {  // exact extremes of the measured entries
      out.append(",\"min_wall_ns\":");
      append_json_uint(out, n.min_wall_ns);
      out.append(",\"max_wall_ns\":");
      append_json_uint(out, n.max_wall_ns);
    }
    if (n.synthetic) out.append(",\"synthetic\":true");  // the recorder's own "(folded)" node
    if (n.async_calls) {  // entries that spanned an await: wall in wall_ns, CPU in no cpu_ns
      out.append(",\"async_calls\":");
      append_json_uint(out, n.async_calls);
      out.append(",\"async_wall_ns\":");
      append_json_uint(out, n.async_wall_ns);
    }
    if (n.raised) {  // entries that exited by an exception
      out.append(",\"raised\":");
      append_json_uint(out, n.raised);
    }
    if (n.sample_every > 1) {  // values above are already scaled: an estimate, not a measurement
      out.append(",\"sample_every\":");
      append_json_uint(out, n.sample_every);
    }
    out.append(",\"open\":");
    append_json_uint(out, n.open_count);
    out.append(",\"open_ns\":");
    append_json_uint(out, n.open_ns);
    out.append(",\"hist\":[");
    for (size_t k = 0; k < n.hist.size(); ++k) {
      if (k) out.push_back(',');
      out.push_back('[');
      append_json_uint(out, n.hist[k].first);
      out.push_back(',');
      append_json_uint(out, n.hist[k].second);
      out.push_back(']');
    }
    out.append("],\"counters\":{");
    for (size_t k = 0; k < n.counters.size(); ++k) {
      if (k) out.push_back(',');
      uint32_t name_id = n.counters[k].first;
      append_json_string(out, name_id < names.size() ? names[name_id] : std::string("?"));
      out.push_back(':');
      append_json_int(out, n.counters[k].second);
    }
    out.push_back('}');
    if (!n.saturated.empty()) {  // these counters hit the int64 range: their values are bounds
      out.append(",\"counters_saturated\":[");
      for (size_t k = 0; k < n.saturated.size(); ++k) {
        if (k) out.push_back(',');
        uint32_t name_id = n.saturated[k];
        append_json_string(out, name_id < names.size() ? names[name_id] : std::string("?"));
      }
      out.push_back(']');
    }
    if (n.io_calls || n.io_failed || n.io_async) append_io(out, n);
    out.push_back('}');
  }
  out.append("]}");
}

}  // namespace

std::string worker_file_json(const std::vector<ThreadSnapshot>& threads,
                             const WorkerFileHeader& header) {
  std::vector<std::string> names = NameTable::instance().all();
  uint64_t now_ns = unix_ns();
  std::string out;
  out.reserve(4096);
  out.append("{\"format\":");
  append_json_string(out, identity::kWorkerFormat);
  out.append(",\"schema_version\":");
  append_json_int(out, kWorkerSchemaVersion);
  out.append(",\n\"meta\":");
  out.append(header.meta_json.empty() ? std::string("{}") : header.meta_json);
  out.append(",\n\"written_at\":");
  append_json_double(out, double(now_ns) / 1e9);
  out.append(",\"written_at_ns\":");
  append_json_uint(out, now_ns);
  out.append(",\"snapshot_seq\":");
  append_json_uint(out, header.snapshot_seq);
  out.append(",\"final\":");
  out.append(header.final ? "true" : "false");
  out.append(",\"clock\":{\"wall\":");
  append_json_string(out, header.wall_clock);
  out.append(",\"cpu\":");
  if (header.measure_cpu) {
    append_json_string(out, header.cpu_clock);
  } else {
    out.append("null");
  }
  out.append("},\"flush_errors\":");
  append_json_uint(out, header.flush_errors);
  out.append(",\"last_flush_error\":");
  append_json_string(out, header.last_flush_error);
  out.append(",\"own_write_bytes\":");
  append_json_uint(out, header.own_write_bytes);
  out.append(",\n\"");
  out.append(kLateFlushErrorKey);
  out.append("\":\"");
  out.append(kLateFlushErrorWidth, ' ');
  out.push_back('"');
  out.append(",\n\"samples\":");
  out.append(header.samples_json.empty() ? std::string("null") : header.samples_json);
  out.append(",\n\"threads\":[");
  for (size_t i = 0; i < threads.size(); ++i) {
    if (i) out.append(",\n");
    append_thread(out, threads[i], names, header.measure_cpu);
  }
  out.append("]}\n");
  return out;
}

std::string with_suffix(const std::string& path, const std::string& old_ext,
                        const std::string& new_ext) {
  bool has_old = path.size() > old_ext.size() &&
                 path.compare(path.size() - old_ext.size(), old_ext.size(), old_ext) == 0;
  return (has_old ? path.substr(0, path.size() - old_ext.size()) : path) + new_ext;
}

int write_file_atomically(const std::string& path, const std::string& text) {
  int err = 0;
  std::string why;
  int dir_fd = open_worker_dir(dir_of(path), &err, &why);
  if (dir_fd < 0) return err;
  err = write_file_at(dir_fd, base_of(path), text);
  close(dir_fd);
  return err;
}

}  // namespace lp
