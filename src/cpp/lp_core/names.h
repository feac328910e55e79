// lp_core/names.h: the process-wide table of phase and counter names, interned to small ids.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace lp {

/// Interns names to dense ids shared by every recorder of the process. Ids are never reused,
/// so a cached id stays valid for the life of the process (a forked child inherits the table).
class NameTable {
 public:
  /// The process-wide table.
  static NameTable& instance();

  /// Id of a name, adding it on first sight. Thread-safe; takes a mutex (off the hot path: callers
  /// cache ids by name object).
  uint32_t intern(std::string_view name);

  /// Copy of the name of an id ("" for an unknown id). Thread-safe.
  std::string name(uint32_t id) const;

  /// Copies every name, indexed by id. Thread-safe.
  std::vector<std::string> all() const;

 private:
  NameTable();
  mutable std::mutex mu_;
  std::vector<std::string> names_;
  std::unordered_map<std::string, uint32_t> ids_;
};

/// Id 0 is the empty name of every tree's root.
constexpr uint32_t kRootNameId = 0;

}  // namespace lp
