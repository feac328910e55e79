// lp_core/name_shapes.h: counting distinct phase names per shape, to catch names built from data.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace lp {

/// The shape of a name: its data-like parts folded to '#'. A run of digits is one '#'
/// ("episode_127" -> "episode_#", "conv2d" -> "conv#d"), and so is a whole alphanumeric token of
/// 8 or more hex digits that holds a digit (hashes, uuid parts: "ckpt_9f86d081e5" -> "ckpt_#").
std::string name_shape(std::string_view name);

/// What NameShapes::note found out about a phase name.
struct ShapeVerdict {
  bool is_new = false;       // first time this name was noted
  uint32_t ordinal = 1;      // 1 for the first name of its shape, 2 for the second, ...
  uint32_t shape_count = 1;  // distinct names of that shape so far
  bool warn_now = false;     // this name brought the shape to kShapeWarnAt (reported once a shape)
  std::string shape;         // the shape (only filled when the name has a data-like part)
};

/// Names per shape of one profiler. Only called when a name is not yet known to be checked (the
/// caller caches that), so it is off the hot path; thread-safe (one mutex).
class NameShapes {
 public:
  /// Distinct names of one shape at which the one warning is due.
  static constexpr uint32_t kShapeWarnAt = 128;

  /// Records that name (with its interned id) was used as a phase name.
  ShapeVerdict note(uint32_t name_id, std::string_view name);

 private:
  struct ShapeInfo {
    uint32_t count = 0;
    bool warned = false;
  };
  struct NameInfo {
    uint32_t ordinal = 0;               // 0: not noted yet
    uint32_t shape_index = UINT32_MAX;  // into shape_keys_, UINT32_MAX: no data-like part
  };
  std::mutex mu_;
  std::vector<NameInfo> names_;  // by name id
  std::unordered_map<std::string, uint32_t> shape_index_;
  std::vector<std::string> shape_keys_;
  std::vector<ShapeInfo> shapes_;
};

}  // namespace lp
