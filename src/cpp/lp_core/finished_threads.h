// lp_core/finished_threads.h: the folded trees of a recorder's exited threads.
//
// A thread's state holds fds (its perf event, its /proc io file) and ~30 KB; a process that
// starts thousands of short-lived threads must not keep them all. When a thread exits its tree is
// added, path by path, into one record per thread name (so thread_names=True still nests it
// under its name); past kMaxFinishedNames names every further exited thread shares the record
// named kFinishedThreadsName. Each record is bounded like a live tree (kMaxNodes paths, then
// "(folded)"), so memory grows with live threads and distinct names, not with threads ever run.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "lp_core/recorder.h"

namespace lp {

constexpr size_t kMaxFinishedNames = 64;
constexpr const char* kFinishedThreadsName = "(exited threads)";

/// The folded records of exited threads. Not synchronised (the recorder's retire lock guards it).
class FinishedThreads {
 public:
  /// Adds an exited thread's snapshot (its open entries count as they stood at exit) into the
  /// record of its name.
  void fold(const ThreadSnapshot& t);

  /// Appends a copy of every record to out (exited_threads > 0 marks them).
  void append_to(std::vector<ThreadSnapshot>* out) const;

 private:
  struct Record {
    ThreadSnapshot snap;
    std::map<std::pair<uint32_t, uint32_t>, uint32_t> child;  // (parent, name id) -> node index
    uint32_t folded_node = 0;                                 // "(folded)", created when needed
  };
  uint32_t node_for(Record& r, uint32_t parent, uint32_t name_id, uint64_t calls);
  uint32_t folded_node(Record& r);  // the record's "(folded)" node, made on first use

  std::vector<Record> records_;
  std::map<std::string, size_t> by_name_;
};

}  // namespace lp
