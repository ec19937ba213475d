// Fixed-size nodes in blocks that never move (a Node& stays valid while others are
// allocated), with a free list. Index 0 is reserved (the root or "none").
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace specdec {

template <typename T>
class Pool {
 public:
  static constexpr uint32_t kBlockBits = 16;
  static constexpr uint32_t kBlock = uint32_t{1} << kBlockBits;

  Pool() { clear(); }

  T& operator[](uint32_t i) { return blocks_[i >> kBlockBits][i & (kBlock - 1)]; }
  const T& operator[](uint32_t i) const { return blocks_[i >> kBlockBits][i & (kBlock - 1)]; }

  // A zeroed slot. Freed slots are reused first; their `next` field links the free list.
  uint32_t alloc() {
    uint32_t i = free_;
    if (i != 0) {
      free_ = (*this)[i].next;
    } else {
      if (high_ == blocks_.size() * kBlock) blocks_.emplace_back(new T[kBlock]);
      i = high_++;
    }
    (*this)[i] = T{};
    ++live_;
    return i;
  }

  void free(uint32_t i) {
    (*this)[i].next = free_;
    free_ = i;
    --live_;
  }

  void clear() {
    blocks_.clear();
    blocks_.emplace_back(new T[kBlock]);
    (*this)[0] = T{};
    high_ = 1;  // slot 0 reserved
    free_ = 0;
    live_ = 0;
  }

  uint32_t live() const { return live_; }

 private:
  std::vector<std::unique_ptr<T[]>> blocks_;
  uint32_t high_ = 1;
  uint32_t free_ = 0;
  uint32_t live_ = 0;
};

}  // namespace specdec
