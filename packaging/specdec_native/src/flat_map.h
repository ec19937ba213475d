// Open-addressing hash map from a 64-bit key to a 32-bit value (linear probing, backward
// shift deletion, no tombstones). Keys are (node << 32 | token) edge keys; the all-ones key
// marks an empty slot and is never stored (node ids stay below 2^32 - 1).
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace specdec {

class FlatMap {
 public:
  static constexpr uint64_t kEmpty = ~uint64_t{0};

  FlatMap() { rehash(16); }

  static uint64_t key(uint32_t node, int32_t token) {
    return (uint64_t{node} << 32) | static_cast<uint32_t>(token);
  }

  // The value stored under `k`, or 0 when there is none (0 is never stored: it is the root).
  uint32_t get(uint64_t k) const {
    for (size_t i = slot(k);; i = (i + 1) & mask_) {
      if (keys_[i] == k) return vals_[i];
      if (keys_[i] == kEmpty) return 0;
    }
  }

  void put(uint64_t k, uint32_t v) {
    if ((size_ + 1) * 10 > keys_.size() * 7) rehash(keys_.size() * 2);
    size_t i = slot(k);
    while (keys_[i] != kEmpty && keys_[i] != k) i = (i + 1) & mask_;
    if (keys_[i] == kEmpty) ++size_;
    keys_[i] = k;
    vals_[i] = v;
  }

  void erase(uint64_t k) {
    size_t i = slot(k);
    while (keys_[i] != k) {
      if (keys_[i] == kEmpty) return;
      i = (i + 1) & mask_;
    }
    // Backward shift: move later entries of the probe run into the hole.
    for (size_t j = (i + 1) & mask_; keys_[j] != kEmpty; j = (j + 1) & mask_) {
      size_t home = slot(keys_[j]);
      bool movable = (j > i) ? (home <= i || home > j) : (home <= i && home > j);
      if (movable) {
        keys_[i] = keys_[j];
        vals_[i] = vals_[j];
        i = j;
      }
    }
    keys_[i] = kEmpty;
    --size_;
  }

  void clear() {
    keys_.assign(16, kEmpty);
    vals_.assign(16, 0);
    mask_ = 15;
    size_ = 0;
  }
  size_t size() const { return size_; }
  size_t memory_bytes() const { return keys_.capacity() * 8 + vals_.capacity() * 4; }

 private:
  size_t slot(uint64_t k) const {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    return static_cast<size_t>(k) & mask_;
  }

  void rehash(size_t capacity) {
    std::vector<uint64_t> old_keys(capacity, kEmpty);
    std::vector<uint32_t> old_vals(capacity, 0);
    old_keys.swap(keys_);  // keys_ is now the new, empty table; old_keys the old entries
    old_vals.swap(vals_);
    mask_ = capacity - 1;
    size_ = 0;
    for (size_t i = 0; i < old_keys.size(); ++i)
      if (old_keys[i] != kEmpty) put(old_keys[i], old_vals[i]);
  }

  std::vector<uint64_t> keys_;
  std::vector<uint32_t> vals_;
  size_t mask_ = 0;
  size_t size_ = 0;
};

}  // namespace specdec
