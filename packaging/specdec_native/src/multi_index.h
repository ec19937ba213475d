// An index over several member sequences (a prompt group's siblings and history completions,
// or every running request): for a context, the most recent earlier occurrence of its longest
// suffix (up to lookup_max tokens) in any member, optionally not in one excluded member. The Python
// reference (tests/oracles/multi_index.py) keys a dict by token tuples; this is the same
// contract as a compacted trie like own_index.h.
//
// Position p of member s is indexed once token p+1 of s exists; its key of length d is the d
// tokens ending at p (d <= lookup_max). The trie holds every indexed position's tokens read
// backwards; a node stands for every key length on the edge into it, and keeps two anchors:
// `newest`, the last indexed position through it, and `other`, the last one whose member is
// not newest's. A lookup excluding member x takes newest, or other when newest is x's.
#pragma once
#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "flat_map.h"

namespace specdec {

struct MultiMatch {
  int32_t slot = -1;  // -1: none
  int64_t end = -1;   // index of the last token of the match in that member
  int len = 0;
};

class MultiIndex {
 public:
  explicit MultiIndex(int lookup_max) : lookup_max_(lookup_max), nodes_(1) {
    if (lookup_max < 1 || lookup_max > 255) throw std::invalid_argument("lookup_max must lie in [1, 255]");
  }

  // A new member with tokens[0..n): its slot (0, 1, ... in order of adding).
  int32_t add(const int32_t* tokens, size_t n) {
    seqs_.emplace_back();
    int32_t slot = static_cast<int32_t>(seqs_.size() - 1);
    extend(slot, tokens, n);
    return slot;
  }
  // Appends tokens to member `slot`, indexing each position whose successor now exists.
  void extend(int32_t slot, const int32_t* tokens, size_t n) {
    for (size_t i = 0; i < n; ++i) append(slot, tokens[i]);
  }
  void append(int32_t slot, int32_t tok) {
    std::vector<int32_t>& seq = seqs_[slot];
    seq.push_back(tok);
    ++num_tokens_;
    if (seq.size() >= 2) insert(slot, static_cast<uint32_t>(seq.size() - 2));
  }

  // The most recent position (not in member `exclude`; -1 excludes nothing) whose key is the
  // longest suffix of the context, at least lookup_min long. `at(i)` is context token i of n.
  template <typename At>
  MultiMatch lookup(const At& at, size_t n, int32_t exclude, int lookup_min) const;

  const std::vector<int32_t>& tokens(int32_t slot) const { return seqs_[slot]; }
  size_t num_slots() const { return seqs_.size(); }
  uint64_t num_tokens() const { return num_tokens_; }
  size_t num_nodes() const { return nodes_.size(); }

 private:
  struct Anchor {
    int32_t slot = -1;
    uint32_t pos = 0;
  };
  struct Node {
    Anchor newest, other;
    uint8_t depth = 0;
  };

  static void note(Node& node, int32_t slot, uint32_t pos) {
    if (node.newest.slot >= 0 && node.newest.slot != slot) node.other = node.newest;
    node.newest = Anchor{slot, pos};
  }
  uint32_t new_node(Node like, uint32_t depth) {  // by value: `like` may be an element
    nodes_.push_back(like);
    nodes_.back().depth = static_cast<uint8_t>(depth);
    return static_cast<uint32_t>(nodes_.size() - 1);
  }
  int32_t label(uint32_t c, uint32_t j) const {  // token j of node c's key (read backwards)
    return *(key_end(c) - j);
  }
  const int32_t* key_end(uint32_t c) const {  // node c's key read backwards from here
    const Anchor& a = nodes_[c].newest;
    return seqs_[a.slot].data() + a.pos;
  }
  void insert(int32_t slot, uint32_t p);

  int lookup_max_;
  std::vector<Node> nodes_;  // node 0 is the root
  FlatMap edges_;            // (node, token) -> child
  std::vector<std::vector<int32_t>> seqs_;
  uint64_t num_tokens_ = 0;
};

inline void MultiIndex::insert(int32_t slot, uint32_t p) {
  const std::vector<int32_t>& seq = seqs_[slot];
  const uint32_t len = std::min<uint32_t>(lookup_max_, p + 1);
  uint32_t node = 0;
  uint32_t d = 0;
  while (d < len) {
    int32_t t = seq[p - d];
    uint32_t c = edges_.get(FlatMap::key(node, t));
    if (c == 0) {
      uint32_t leaf = new_node(Node{}, len);
      note(nodes_[leaf], slot, p);
      edges_.put(FlatMap::key(node, t), leaf);
      return;
    }
    uint32_t cd = nodes_[c].depth;
    uint32_t lim = std::min(cd, len);
    uint32_t j = d + 1;
    const int32_t* lab = key_end(c);
    while (j < lim && *(lab - j) == seq[p - j]) ++j;
    if (j < cd) {  // split the edge where p's key leaves it (or ends): the same positions
      uint32_t m = new_node(nodes_[c], j);
      edges_.put(FlatMap::key(node, t), m);
      edges_.put(FlatMap::key(m, label(c, j)), c);
      c = m;
    }
    note(nodes_[c], slot, p);
    node = c;
    d = j;
  }
}

template <typename At>
MultiMatch MultiIndex::lookup(const At& at, size_t n, int32_t exclude, int lookup_min) const {
  const uint32_t klen = static_cast<uint32_t>(std::min<size_t>(lookup_max_, n));
  auto key = [&](uint32_t j) { return at(n - 1 - j); };
  uint32_t path_node[256];
  uint32_t path_len[256];
  int depth = 0;
  uint32_t node = 0;
  for (uint32_t d = 0; d < klen;) {
    uint32_t c = edges_.get(FlatMap::key(node, key(d)));
    if (c == 0) break;
    uint32_t cd = nodes_[c].depth;
    uint32_t lim = std::min(cd, klen);
    uint32_t j = d + 1;
    const int32_t* lab = key_end(c);
    while (j < lim && *(lab - j) == key(j)) ++j;
    path_node[depth] = c;
    path_len[depth++] = j;
    if (j < cd) break;
    node = c;
    d = j;
  }
  // The longest key first; a node's anchors answer for every key length on its edge.
  for (int i = depth - 1; i >= 0; --i) {
    if (static_cast<int>(path_len[i]) < lookup_min) break;
    const Node& nd = nodes_[path_node[i]];
    const Anchor& a = nd.newest.slot != exclude ? nd.newest : nd.other;
    if (a.slot >= 0) return MultiMatch{a.slot, static_cast<int64_t>(a.pos), static_cast<int>(path_len[i])};
  }
  return MultiMatch{};
}

}  // namespace specdec
