// lp_core/api_parts.cpp: the C++ API's table entries shared by both providers (api_parts.h).
#include "lp_core/api_parts.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "lp_core/names.h"

namespace lp::api_parts {

uint32_t intern(const char* name, size_t len) {
  if (!name || len == 0) return kRootNameId;
  return NameTable::instance().intern(std::string_view(name, len));
}

size_t current_name(const ThreadState& ts, char* buf, size_t cap) {
  uint32_t id = ts.current_name();
  if (id == kRootNameId) return 0;
  std::string name = NameTable::instance().name(id);
  std::memcpy(buf, name.data(), std::min(cap, name.size()));
  return name.size();
}

size_t capture(const ThreadState& ts, uint32_t* names, size_t cap) {
  std::vector<uint32_t> path = ts.open_path();
  std::memcpy(names, path.data(), std::min(cap, path.size()) * sizeof(uint32_t));
  return path.size();
}

uint32_t attach(ThreadState& ts, const uint32_t* names, size_t n) {
  if (!names || n == 0) return 0;
  return ts.attach(std::vector<uint32_t>(names, names + n));
}

}  // namespace lp::api_parts
