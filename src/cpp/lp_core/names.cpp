// lp_core/names.cpp: the process-wide name table.
#include "lp_core/names.h"

#include <pthread.h>

#include <new>

namespace lp {

NameTable& NameTable::instance() {
  static NameTable* table = new NameTable();  // leaked: outlives every recorder and thread
  return *table;
}

NameTable::NameTable() {
  intern("");
  // A thread of the parent (a snapshot, or a GIL-released flush) may hold mu_ at fork(); the
  // table itself is only ever modified with the GIL held, so the child's copy is consistent and
  // just needs a lock nobody holds.
  pthread_atfork(nullptr, nullptr, [] { new (&instance().mu_) std::mutex(); });
}

uint32_t NameTable::intern(std::string_view name) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = ids_.find(std::string(name));
  if (it != ids_.end()) return it->second;
  uint32_t id = uint32_t(names_.size());
  names_.emplace_back(name);
  ids_.emplace(names_.back(), id);
  return id;
}

std::string NameTable::name(uint32_t id) const {
  std::lock_guard<std::mutex> lock(mu_);
  return id < names_.size() ? names_[id] : std::string();
}

std::vector<std::string> NameTable::all() const {
  std::lock_guard<std::mutex> lock(mu_);
  return names_;
}

}  // namespace lp
