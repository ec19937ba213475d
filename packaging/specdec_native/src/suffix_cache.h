// The cross-request draft cache: counts of every substring (up to `max_depth` tokens) of the
// cached sequences, as a compacted suffix tree over a FIFO token store.
//
// Same contract as the Python reference (tests/oracles/suffix_cache.py), draft for draft:
// a node stands for the substring its path spells; count = its occurrences in the cached
// sequences. Edges are labelled by positions in the store (a node's label is read from the
// newest suffix that passed through it, `pos`), nodes exist only where the tree branches or a
// suffix ends, and each node keeps its children in a list whose first entry is its most
// frequent child (ties: the smallest token), re-found lazily after counts drop; a node left
// with one child and no suffix ending at it is merged away. Big fan-outs are also indexed
// in a hash map. Sequences are evicted whole, oldest first, to stay within
// `max_tokens` cached tokens; a sequence removed out of order (replaced by a newer one with
// the same id) keeps its store space until it reaches the front, so that no label dangles.
#pragma once
#include <cstdint>
#include <deque>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "flat_map.h"
#include "node_pool.h"
#include "token_store.h"

namespace specdec {

struct CacheNode {
  uint32_t count;  // occurrences of this node's substring
  uint32_t pos;    // start (store position) of the newest suffix through this node
  uint32_t first;  // first child: the most frequent one unless kDirty
  uint32_t next;   // next sibling (also the free-list link)
  uint32_t prev;   // previous sibling, 0 for the first child
  int32_t tok;     // first token of the edge into this node
  uint8_t depth;   // length of the substring
  uint8_t nchild;  // children while not kHashed
  uint8_t flags;
  uint8_t unused;
};

struct CacheDraft {
  std::vector<int32_t> tokens;
  std::vector<double> probs;
  int match_len = 0;
};

struct CachedSequence {
  std::string id;
  uint32_t start;  // store position of its first token
  uint32_t len;
  bool live;
};

class SuffixCache {
 public:
  SuffixCache(int max_depth, uint64_t max_tokens);
  SuffixCache(const SuffixCache&) = delete;
  SuffixCache& operator=(const SuffixCache&) = delete;

  // Adds a sequence as the newest (replacing one with the same id), then evicts whole
  // sequences, oldest first, while more than max_tokens are cached (the newest stays).
  void insert(const std::string& id, const int32_t* tokens, size_t n);
  bool remove(const std::string& id);
  // Drafts up to max_draft_tokens tokens after the longest cached suffix of context[0..n) (see the Python
  // reference's speculate for the rules and a worked example).
  CacheDraft speculate(const int32_t* context, size_t n, int max_draft_tokens, double min_prob);

  bool contains(const std::string& id) const { return live_.count(id) != 0; }
  size_t num_sequences() const { return live_.size(); }
  uint64_t num_tokens() const { return live_tokens_; }
  uint64_t max_tokens() const { return max_tokens_; }
  int max_depth() const { return max_depth_; }
  uint32_t num_nodes() const { return nodes_.live(); }
  // Live sequences, oldest first.
  std::vector<std::pair<std::string, std::vector<int32_t>>> sequences() const;
  // Every trie point (substring, count), for tests: see suffix_cache_check.cc.
  std::vector<std::pair<std::vector<int32_t>, uint32_t>> dump() const;
  void check_invariants() const;  // throws std::logic_error naming the broken invariant

 private:
  static constexpr uint8_t kDirty = 1;   // `first` may not be the most frequent child
  static constexpr uint8_t kHashed = 2;  // children also indexed in `edges_`
  static constexpr uint8_t kHashAbove = 8;

  CacheNode& n(uint32_t i) { return nodes_[i]; }
  const CacheNode& n(uint32_t i) const { return nodes_[i]; }
  int32_t tok_at(uint32_t pos) const { return store_.at(pos); }

  void insert_suffix(uint32_t p, uint32_t len);
  void remove_suffix(uint32_t p, uint32_t len);
  void remove_sequence(CachedSequence& seq);
  void free_front();
  void rebuild();
  uint32_t find_child(uint32_t node, int32_t tok) const;
  uint32_t new_leaf(uint32_t parent, uint32_t p, uint32_t depth);
  uint32_t split(uint32_t parent, uint32_t c, uint32_t depth);
  void merge_if_unary(uint32_t parent, uint32_t m);
  void replace_in_parent(uint32_t parent, uint32_t to);
  void add_child(uint32_t parent, uint32_t c);
  void unlink_child(uint32_t parent, uint32_t c);
  void move_to_front(uint32_t parent, uint32_t c);
  void note_increment(uint32_t parent, uint32_t c);
  void ensure_best(uint32_t node);
  void hash_children(uint32_t node);
  void free_chain(uint32_t c);
  std::pair<uint32_t, uint32_t> walk(const int32_t* pattern, size_t m) const;
  void check_node(uint32_t node, uint64_t& seen) const;

  int max_depth_;
  uint64_t max_tokens_;
  TokenStore store_;
  Pool<CacheNode> nodes_;  // slot 0 is the root
  std::vector<uint32_t> root_child_;  // by token
  FlatMap edges_;  // (parent, token) -> child, for kHashed parents
  std::deque<CachedSequence> seqs_;  // store order, oldest first; removed ones until freed
  uint64_t first_serial_ = 0;  // serial number of seqs_.front()
  std::unordered_map<std::string, uint64_t> live_;  // id -> serial
  uint64_t live_tokens_ = 0;
  uint64_t dead_tokens_ = 0;
};

}  // namespace specdec
