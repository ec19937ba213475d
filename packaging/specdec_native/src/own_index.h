// A request's own-text index: the longest earlier match of the sequence's last tokens (up to
// lookup_max), and its most recent occurrence, kept up to date as tokens arrive instead of
// rescanning the context every step (the Python reference, tests/oracles/ngram.py, scans).
//
// It is a compacted trie of every position's preceding tokens read backwards (position e
// holds tokens[e], tokens[e-1], ..., at most lookup_max of them). Each node keeps `anchor`, the
// newest position through it; edge labels are read backwards from it. Adding position e walks
// the trie along e's own key: the deepest point shared with earlier positions is the longest
// match, and the anchor there is its most recent earlier end.
#pragma once
#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "flat_map.h"

namespace specdec {

struct OwnMatch {
  int64_t end = -1;  // index of the last token of the chosen earlier occurrence
  int len = 0;       // match length (0: none)
};

class OwnIndex {
 public:
  explicit OwnIndex(int lookup_max) : lookup_max_(lookup_max), anchor_(1, 0), depth_(1, 0) {}

  size_t size() const { return toks_.size(); }
  const std::vector<int32_t>& tokens() const { return toks_; }
  // The longest earlier match of the whole sequence's end (set by the last append).
  OwnMatch match() const { return last_; }

  void append(int32_t tok) {
    toks_.push_back(tok);
    last_ = insert(static_cast<uint32_t>(toks_.size() - 1));
  }

  // The longest match of the end of tokens + extra[0..m) (m >= 1), among the earlier
  // positions of tokens + extra; ties go to the most recent.
  OwnMatch match_extended(const int32_t* extra, size_t m) const;


 private:
  OwnMatch insert(uint32_t e);
  uint32_t new_node(uint32_t anchor, uint32_t depth) {
    anchor_.push_back(anchor);
    depth_.push_back(static_cast<uint8_t>(depth));
    return static_cast<uint32_t>(anchor_.size() - 1);
  }

  int lookup_max_;
  std::vector<int32_t> toks_;
  std::vector<uint32_t> anchor_;  // per node; node 0 is the root
  std::vector<uint8_t> depth_;
  FlatMap edges_;  // (node, token) -> child
  OwnMatch last_;
};

inline OwnMatch OwnIndex::insert(uint32_t e) {
  OwnMatch best;
  uint32_t len = std::min<uint32_t>(lookup_max_, e + 1);
  uint32_t node = 0;
  uint32_t d = 0;
  while (d < len) {
    int32_t t = toks_[e - d];
    uint32_t c = edges_.get(FlatMap::key(node, t));
    if (c == 0) {
      edges_.put(FlatMap::key(node, t), new_node(e, len));
      break;
    }
    uint32_t cd = depth_[c];
    uint32_t lim = std::min(cd, len);
    uint32_t a = anchor_[c];
    uint32_t j = d + 1;
    while (j < lim && toks_[a - j] == toks_[e - j]) ++j;
    best = {static_cast<int64_t>(a), static_cast<int>(j)};
    if (j < cd) {  // split the edge where e's key leaves it (or ends)
      uint32_t m = new_node(a, j);
      edges_.put(FlatMap::key(node, t), m);
      edges_.put(FlatMap::key(m, toks_[a - j]), c);
      c = m;
    }
    anchor_[c] = e;
    node = c;
    d = j;
  }
  return best;
}

inline OwnMatch OwnIndex::match_extended(const int32_t* extra, size_t m) const {
  const size_t n = toks_.size();
  const size_t total = n + m;
  auto at = [&](size_t i) { return i < n ? toks_[i] : extra[i - n]; };
  auto key = [&](size_t j) { return at(total - 1 - j); };
  const uint32_t klen = static_cast<uint32_t>(std::min<size_t>(lookup_max_, total));
  OwnMatch best;
  uint32_t node = 0;
  for (uint32_t d = 0; d < klen;) {  // positions of tokens: the trie
    uint32_t c = edges_.get(FlatMap::key(node, key(d)));
    if (c == 0) break;
    uint32_t cd = depth_[c];
    uint32_t lim = std::min(cd, klen);
    uint32_t a = anchor_[c];
    uint32_t j = d + 1;
    while (j < lim && toks_[a - j] == key(j)) ++j;
    best = {static_cast<int64_t>(a), static_cast<int>(j)};
    if (j < cd) break;
    node = c;
    d = j;
  }
  for (size_t e = n; e + 1 < total; ++e) {  // positions inside extra: by hand (a few)
    size_t cap = std::min<size_t>(lookup_max_, e + 1);
    size_t len = 0;
    while (len < cap && at(e - len) == key(len)) ++len;
    if (len > 0 && static_cast<int>(len) >= best.len) best = {static_cast<int64_t>(e), static_cast<int>(len)};
  }
  return best;
}

}  // namespace specdec
