// Open-addressing hash map from an edge (node, token) to a node (linear probing, backward
// shift deletion, no tombstones). Key and value share one 12-byte slot, so a lookup usually
// costs one cache miss. A node id of all ones marks an empty slot (ids stay below 2^32 - 1);
// a value of 0 means "none" (node 0 is the root, never a child).
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace specdec {

class FlatMap {
 public:
  static constexpr uint32_t kEmpty = ~uint32_t{0};

  struct Key {
    uint32_t node;
    int32_t tok;
  };

  FlatMap() { clear(); }

  static Key key(uint32_t node, int32_t token) { return Key{node, token}; }

  // The value stored under `k`, or 0 when there is none.
  uint32_t get(Key k) const {
    for (size_t i = slot(k);; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.node == k.node && s.tok == k.tok) return s.val;
      if (s.node == kEmpty) return 0;
    }
  }

  void put(Key k, uint32_t v) {
    if ((size_ + 1) * 10 > slots_.size() * 7) rehash(slots_.size() * 2);
    size_t i = slot(k);
    while (slots_[i].node != kEmpty && !(slots_[i].node == k.node && slots_[i].tok == k.tok)) i = (i + 1) & mask_;
    if (slots_[i].node == kEmpty) ++size_;
    slots_[i] = Slot{k.node, k.tok, v};
  }

  void erase(Key k) {
    size_t i = slot(k);
    while (!(slots_[i].node == k.node && slots_[i].tok == k.tok)) {
      if (slots_[i].node == kEmpty) return;
      i = (i + 1) & mask_;
    }
    // Backward shift: move later entries of the probe run into the hole.
    for (size_t j = (i + 1) & mask_; slots_[j].node != kEmpty; j = (j + 1) & mask_) {
      size_t home = slot(Key{slots_[j].node, slots_[j].tok});
      bool movable = (j > i) ? (home <= i || home > j) : (home <= i && home > j);
      if (movable) {
        slots_[i] = slots_[j];
        i = j;
      }
    }
    slots_[i].node = kEmpty;
    --size_;
  }

  void clear() {
    slots_.assign(16, Slot{kEmpty, 0, 0});
    slots_.shrink_to_fit();
    mask_ = 15;
    size_ = 0;
  }

  size_t size() const { return size_; }

 private:
  struct Slot {
    uint32_t node;
    int32_t tok;
    uint32_t val;
  };

  size_t slot(Key k) const {
    uint64_t h = (uint64_t{k.node} << 32) | static_cast<uint32_t>(k.tok);
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    return static_cast<size_t>(h) & mask_;
  }

  void rehash(size_t capacity) {
    std::vector<Slot> old(capacity, Slot{kEmpty, 0, 0});
    old.swap(slots_);  // slots_ is now the new, empty table; old the entries
    mask_ = capacity - 1;
    size_ = 0;
    for (const Slot& s : old)
      if (s.node != kEmpty) put(Key{s.node, s.tok}, s.val);
  }

  std::vector<Slot> slots_;
  size_t mask_ = 15;
  size_t size_ = 0;
};

}  // namespace specdec
