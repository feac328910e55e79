// lp_core/stable_array.h: an append-only array of chunks whose elements never move (two loads per
// index).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <utility>

namespace lp {

/// Append-only storage for non-movable elements (atomics): elements live in fixed-size chunks
/// allocated on demand, so a reference stays valid for the array's lifetime and indexing is
/// chunk[i >> ChunkBits][i & mask] — cheaper than std::deque's general iterator arithmetic.
/// Not synchronised: the owner appends under its own lock; readers of size() hold the same lock.
template <typename T, unsigned ChunkBits, size_t MaxChunks>
class StableArray {
 public:
  static constexpr size_t kChunk = size_t(1) << ChunkBits;
  static constexpr size_t kCapacity = kChunk * MaxChunks;

  StableArray() = default;
  StableArray(const StableArray&) = delete;
  StableArray& operator=(const StableArray&) = delete;
  ~StableArray() {
    for (size_t i = 0; i < size_; ++i) (*this)[i].~T();
    for (size_t c = 0; c < MaxChunks && chunks_[c]; ++c) ::operator delete(chunks_[c]);
  }

  T& operator[](size_t i) {
    return reinterpret_cast<T*>(chunks_[i >> ChunkBits])[i & (kChunk - 1)];
  }
  const T& operator[](size_t i) const {
    return reinterpret_cast<const T*>(chunks_[i >> ChunkBits])[i & (kChunk - 1)];
  }
  size_t size() const { return size_; }
  bool full() const { return size_ >= kCapacity; }
  T& back() { return (*this)[size_ - 1]; }

  /// Constructs an element at the end. The caller checks full() first.
  template <typename... Args>
  T& emplace_back(Args&&... args) {
    size_t c = size_ >> ChunkBits;
    if (!chunks_[c]) chunks_[c] = ::operator new(sizeof(T) * kChunk);
    T* slot = reinterpret_cast<T*>(chunks_[c]) + (size_ & (kChunk - 1));
    new (slot) T(std::forward<Args>(args)...);
    ++size_;
    return *slot;
  }

 private:
  void* chunks_[MaxChunks] = {};
  size_t size_ = 0;
};

}  // namespace lp
