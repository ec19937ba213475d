// The cross-request cache's tokens: a FIFO ring addressed by 32-bit positions that only grow
// (modulo 2^32). Sequences are appended at the back and freed from the front, oldest first,
// so every position between `front` and `back` is stored; the ring doubles when full.
#pragma once
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <vector>

namespace specdec {

class TokenStore {
 public:
  TokenStore() : ring_(1024), mask_(1023) {}

  int32_t at(uint32_t pos) const { return ring_[pos & mask_]; }
  uint32_t front() const { return front_; }
  uint32_t back() const { return back_; }
  size_t size() const { return static_cast<uint32_t>(back_ - front_); }

  // Appends `n` tokens; returns the position of the first.
  uint32_t append(const int32_t* tokens, size_t n) {
    if (size() + n >= (size_t{1} << 31)) throw std::length_error("cache holds 2^31 tokens");
    while (size() + n > ring_.size()) grow();
    uint32_t start = back_;
    for (size_t i = 0; i < n; ++i) ring_[(start + i) & mask_] = tokens[i];
    back_ = start + static_cast<uint32_t>(n);
    return start;
  }

  void pop_front(size_t n) { front_ += static_cast<uint32_t>(n); }

  void clear() {
    ring_.assign(1024, 0);
    ring_.shrink_to_fit();
    mask_ = 1023;
    front_ = back_ = 0;
  }


 private:
  void grow() {
    std::vector<int32_t> bigger(ring_.size() * 2);
    size_t new_mask = bigger.size() - 1;
    for (uint32_t p = front_; p != back_; ++p) bigger[p & new_mask] = ring_[p & mask_];
    ring_.swap(bigger);
    mask_ = new_mask;
  }

  std::vector<int32_t> ring_;
  size_t mask_;
  uint32_t front_ = 0;
  uint32_t back_ = 0;
};

}  // namespace specdec
