// lp_core/name_shapes.cpp: name shapes and the per-shape count of distinct phase names.
#include "lp_core/name_shapes.h"

namespace lp {

namespace {
bool is_digit(char c) {
  return c >= '0' && c <= '9';
}
bool is_alnum(char c) {
  return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}
bool is_hex(char c) {
  return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}
}  // namespace

std::string name_shape(std::string_view name) {
  std::string out;
  out.reserve(name.size());
  size_t i = 0;
  while (i < name.size()) {
    if (!is_alnum(name[i])) {
      out.push_back(name[i++]);
      continue;
    }
    size_t end = i;
    bool all_hex = true, any_digit = false;
    while (end < name.size() && is_alnum(name[end])) {
      all_hex = all_hex && is_hex(name[end]);
      any_digit = any_digit || is_digit(name[end]);
      ++end;
    }
    if (all_hex && any_digit && end - i >= 8) {
      out.push_back('#');
    } else {
      for (size_t k = i; k < end;) {
        if (is_digit(name[k])) {
          while (k < end && is_digit(name[k])) ++k;
          out.push_back('#');
        } else {
          out.push_back(name[k++]);
        }
      }
    }
    i = end;
  }
  return out;
}

ShapeVerdict NameShapes::note(uint32_t name_id, std::string_view name) {
  ShapeVerdict v;
  std::lock_guard<std::mutex> lock(mu_);
  if (name_id >= names_.size()) names_.resize(size_t(name_id) + 1);
  NameInfo& info = names_[name_id];
  if (info.ordinal == 0) {
    v.is_new = true;
    std::string shape = name_shape(name);
    if (shape == name) {  // nothing data-like: a name of its own shape
      info.ordinal = 1;
      return v;
    }
    auto it = shape_index_.find(shape);
    if (it == shape_index_.end()) {
      it = shape_index_.emplace(shape, uint32_t(shape_keys_.size())).first;
      shape_keys_.push_back(shape);
      shapes_.emplace_back();
    }
    info.shape_index = it->second;
    ShapeInfo& s = shapes_[info.shape_index];
    s.count += 1;
    info.ordinal = s.count;
    if (s.count == kShapeWarnAt && !s.warned) {
      s.warned = true;
      v.warn_now = true;
    }
  }
  v.ordinal = info.ordinal;
  if (info.shape_index != UINT32_MAX) {
    v.shape = shape_keys_[info.shape_index];
    v.shape_count = shapes_[info.shape_index].count;
  }
  return v;
}

}  // namespace lp
