// Insert, evict and speculate on the compacted suffix tree (see suffix_cache.h).
#include "suffix_cache.h"

#include <algorithm>
#include <stdexcept>

namespace specdec {

SuffixCache::SuffixCache(int max_depth, uint64_t max_tokens)
    : max_depth_(max_depth), max_tokens_(max_tokens) {
  if (max_depth < 2 || max_depth > 255) throw std::invalid_argument("max_depth must be within [2, 255]");
  if (max_tokens < 1) throw std::invalid_argument("max_tokens must be >= 1");
}

void SuffixCache::insert(const std::string& id, const int32_t* tokens, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (tokens[i] < 0) throw std::invalid_argument("token ids must be >= 0");
  remove(id);
  uint32_t start = store_.append(tokens, n);
  for (size_t s = 0; s < n; ++s)
    insert_suffix(start + static_cast<uint32_t>(s), static_cast<uint32_t>(std::min<size_t>(max_depth_, n - s)));
  live_[id] = first_serial_ + seqs_.size();
  seqs_.push_back({id, start, static_cast<uint32_t>(n), true});
  live_tokens_ += n;
  while (live_tokens_ > max_tokens_ && live_.size() > 1) {
    std::string oldest = seqs_.front().id;  // the front is live: removed ones are freed at once
    remove(oldest);
  }
  if (dead_tokens_ > live_tokens_ + (uint64_t{1} << 20)) rebuild();
}

bool SuffixCache::remove(const std::string& id) {
  auto it = live_.find(id);
  if (it == live_.end()) return false;
  CachedSequence& seq = seqs_[it->second - first_serial_];
  live_.erase(it);
  remove_sequence(seq);
  free_front();
  return true;
}

void SuffixCache::remove_sequence(CachedSequence& seq) {
  for (uint32_t s = 0; s < seq.len; ++s)
    remove_suffix(seq.start + s, std::min<uint32_t>(max_depth_, seq.len - s));
  seq.live = false;
  live_tokens_ -= seq.len;
  dead_tokens_ += seq.len;
}

// Removed sequences at the front give their store space back (none is referenced any more:
// a node's `pos` is its newest occurrence, and everything older than it is gone).
void SuffixCache::free_front() {
  while (!seqs_.empty() && !seqs_.front().live) {
    store_.pop_front(seqs_.front().len);
    dead_tokens_ -= seqs_.front().len;
    seqs_.pop_front();
    ++first_serial_;
  }
}

// Too much store held by sequences removed out of order: build everything again.
void SuffixCache::rebuild() {
  auto live = sequences();
  nodes_.clear();
  root_child_.clear();
  edges_.clear();
  store_.clear();
  seqs_.clear();
  live_.clear();
  first_serial_ = live_tokens_ = dead_tokens_ = 0;
  for (auto& [id, toks] : live) insert(id, toks.data(), toks.size());
}

void SuffixCache::insert_suffix(uint32_t p, uint32_t len) {
  uint32_t node = 0;
  uint32_t d = 0;
  while (d < len) {
    uint32_t c = find_child(node, tok_at(p + d));
    if (c == 0) {
      add_child(node, new_leaf(node, p, len));
      return;
    }
    uint32_t cd = n(c).depth;
    uint32_t end = std::min(cd, len);
    uint32_t cp = n(c).pos;
    uint32_t j = d + 1;
    while (j < end && tok_at(cp + j) == tok_at(p + j)) ++j;
    if (j < cd) c = split(node, c, j);  // diverges, or the suffix ends, inside the edge
    ++n(c).count;
    n(c).pos = p;
    note_increment(node, c);
    node = c;
    d = j;
  }
}

void SuffixCache::remove_suffix(uint32_t p, uint32_t len) {
  uint32_t above = 0;  // parent of node
  uint32_t node = 0;
  uint32_t d = 0;
  while (d < len) {
    uint32_t c = find_child(node, tok_at(p + d));
    if (c == 0) throw std::logic_error("removing a suffix that is not in the tree");
    if (--n(c).count == 0) {  // only this suffix went through c: drop its path
      unlink_child(node, c);
      free_chain(c);
      merge_if_unary(above, node);  // node lost a child
      return;
    }
    if (node != 0 && n(node).first == c) n(node).flags |= kDirty;
    above = node;
    node = c;
    d = n(c).depth;
  }
  merge_if_unary(above, node);  // the suffix ended at node
}

// A node no suffix ends at with a single child is no longer needed: the child takes its
// place (its `pos`, the newest suffix through it, also spells the node's part of the edge).
void SuffixCache::merge_if_unary(uint32_t parent, uint32_t m) {
  if (m == 0) return;
  CacheNode& mid = n(m);
  uint32_t c = mid.first;
  if (c == 0 || n(c).next != 0 || n(c).count != mid.count) return;
  CacheNode& low = n(c);
  if (mid.flags & kHashed) edges_.erase(FlatMap::key(m, low.tok));
  low.tok = mid.tok;
  low.prev = mid.prev;
  low.next = mid.next;
  replace_in_parent(parent, c);
  nodes_.free(m);
}

// `to` takes the place of a child of parent with the same first token (its sibling links set).
void SuffixCache::replace_in_parent(uint32_t parent, uint32_t to) {
  CacheNode& node = n(to);
  if (parent == 0) {
    root_child_[node.tok] = to;
    return;
  }
  if (node.prev) n(node.prev).next = to; else n(parent).first = to;
  if (node.next) n(node.next).prev = to;
  if (n(parent).flags & kHashed) edges_.put(FlatMap::key(parent, node.tok), to);
}

uint32_t SuffixCache::find_child(uint32_t node, int32_t tok) const {
  if (node == 0) return static_cast<size_t>(tok) < root_child_.size() ? root_child_[tok] : 0;
  const CacheNode& parent = n(node);
  if (parent.flags & kHashed) return edges_.get(FlatMap::key(node, tok));
  for (uint32_t c = parent.first; c != 0; c = n(c).next)
    if (n(c).tok == tok) return c;
  return 0;
}

uint32_t SuffixCache::new_leaf(uint32_t parent, uint32_t p, uint32_t depth) {
  uint32_t c = nodes_.alloc();
  CacheNode& leaf = n(c);
  leaf.count = 1;
  leaf.pos = p;
  leaf.tok = tok_at(p + n(parent).depth);
  leaf.depth = static_cast<uint8_t>(depth);
  return c;
}

// A new node at `depth` on the edge into c; it takes c's place under parent.
uint32_t SuffixCache::split(uint32_t parent, uint32_t c, uint32_t depth) {
  uint32_t m = nodes_.alloc();
  CacheNode& mid = n(m);
  CacheNode& low = n(c);
  mid.count = low.count;
  mid.pos = low.pos;
  mid.tok = low.tok;
  mid.depth = static_cast<uint8_t>(depth);
  mid.prev = low.prev;
  mid.next = low.next;
  replace_in_parent(parent, m);
  low.tok = tok_at(low.pos + depth);
  low.prev = low.next = 0;
  mid.first = c;
  mid.nchild = 1;
  return m;
}

void SuffixCache::add_child(uint32_t parent, uint32_t c) {
  if (parent == 0) {
    int32_t tok = n(c).tok;
    if (static_cast<size_t>(tok) >= root_child_.size()) root_child_.resize(static_cast<size_t>(tok) + 1, 0);
    root_child_[tok] = c;
    return;
  }
  CacheNode& p = n(parent);
  CacheNode& child = n(c);
  if (p.first == 0) {
    p.first = c;
  } else {  // second place: it has count 1 and only beats the first on a tie
    CacheNode& head = n(p.first);
    child.prev = p.first;
    child.next = head.next;
    if (head.next) n(head.next).prev = c;
    head.next = c;
  }
  if (p.flags & kHashed) {
    edges_.put(FlatMap::key(parent, child.tok), c);
  } else if (++p.nchild > kHashAbove) {
    hash_children(parent);
  }
  note_increment(parent, c);
}

void SuffixCache::hash_children(uint32_t node) {
  n(node).flags |= kHashed;
  for (uint32_t c = n(node).first; c != 0; c = n(c).next) edges_.put(FlatMap::key(node, n(c).tok), c);
}

void SuffixCache::unlink_child(uint32_t parent, uint32_t c) {
  CacheNode& child = n(c);
  if (parent == 0) {
    root_child_[child.tok] = 0;
    return;
  }
  CacheNode& p = n(parent);
  if (child.prev) {
    n(child.prev).next = child.next;
  } else {
    p.first = child.next;
    p.flags |= kDirty;
  }
  if (child.next) n(child.next).prev = child.prev;
  if (p.flags & kHashed) edges_.erase(FlatMap::key(parent, child.tok)); else --p.nchild;
}

void SuffixCache::move_to_front(uint32_t parent, uint32_t c) {
  CacheNode& p = n(parent);
  if (p.first == c) return;
  CacheNode& child = n(c);
  n(child.prev).next = child.next;  // not first, so it has a previous sibling
  if (child.next) n(child.next).prev = child.prev;
  child.prev = 0;
  child.next = p.first;
  n(p.first).prev = c;
  p.first = c;
}

// c's count just rose by one: it becomes the first child if it now beats the first.
void SuffixCache::note_increment(uint32_t parent, uint32_t c) {
  if (parent == 0) return;  // drafts never start at the root: no best child kept there
  uint32_t f = n(parent).first;
  if (f == c) return;
  const CacheNode& child = n(c);
  const CacheNode& head = n(f);
  if (child.count > head.count || (child.count == head.count && child.tok < head.tok)) move_to_front(parent, c);
}

void SuffixCache::ensure_best(uint32_t node) {
  CacheNode& p = n(node);
  if (!(p.flags & kDirty)) return;
  uint32_t best = p.first;
  for (uint32_t c = p.first; c != 0; c = n(c).next) {
    const CacheNode& cand = n(c);
    if (cand.count > n(best).count || (cand.count == n(best).count && cand.tok < n(best).tok)) best = c;
  }
  if (best != 0) move_to_front(node, best);
  p.flags &= static_cast<uint8_t>(~kDirty);
}

// c's count reached 0: it and the nodes below it (a single path, each with count 1) go.
void SuffixCache::free_chain(uint32_t c) {
  while (c != 0) {
    uint32_t below = n(c).first;
    if (below != 0 && (n(c).flags & kHashed)) edges_.erase(FlatMap::key(c, n(below).tok));
    nodes_.free(c);
    c = below;
  }
}

// Follows `pattern` from the root: (node whose edge holds the end, depth reached), or
// (0, 0) when the pattern does not occur.
std::pair<uint32_t, uint32_t> SuffixCache::walk(const int32_t* pattern, size_t m) const {
  uint32_t node = 0;
  uint32_t d = 0;
  for (size_t i = 0; i < m; ++i, ++d) {
    if (d == n(node).depth) {
      node = find_child(node, pattern[i]);
      if (node == 0) return {0, 0};
    } else if (tok_at(n(node).pos + d) != pattern[i]) {
      return {0, 0};
    }
  }
  return {node, d};
}

CacheDraft SuffixCache::speculate(const int32_t* context, size_t num, int max_draft_tokens, double min_prob) {
  CacheDraft out;
  size_t len = std::min<size_t>(std::max(max_depth_ - 1 - max_draft_tokens, 1), num);
  const int32_t* tail = context + (num - len);
  // The longest suffix of the tail that occurs: if one does, so do all shorter ones, so a
  // binary search finds it in a few walks (the reference tries every length, longest first).
  size_t lo = 0, hi = len;
  while (lo < hi) {
    size_t mid = (lo + hi + 1) / 2;
    if (walk(tail + len - mid, mid).first != 0) lo = mid; else hi = mid - 1;
  }
  uint32_t node = 0;
  uint32_t d = 0;
  for (size_t m = lo; m >= 1 && out.match_len == 0; --m) {  // the longest seen with something after it
    auto [c, depth] = walk(tail + len - m, m);
    if (depth < n(c).depth || n(c).first != 0) {
      node = c;
      d = depth;
      out.match_len = static_cast<int>(m);
    }
  }
  if (out.match_len == 0 || max_draft_tokens <= 0) return CacheDraft{};
  double cumulative = 1.0;
  while (static_cast<int>(out.tokens.size()) < max_draft_tokens) {
    uint32_t next = node;
    int32_t tok;
    double prob;
    if (d < n(node).depth) {  // inside an edge: one continuation, as frequent as the node
      tok = tok_at(n(node).pos + d);
      prob = static_cast<double>(n(node).count) / static_cast<double>(n(node).count);
    } else {
      if (n(node).first == 0) break;
      ensure_best(node);
      next = n(node).first;
      tok = n(next).tok;
      prob = static_cast<double>(n(next).count) / static_cast<double>(n(node).count);
    }
    if (cumulative * prob < min_prob) break;
    cumulative *= prob;
    out.tokens.push_back(tok);
    out.probs.push_back(prob);
    node = next;
    ++d;
  }
  return out;
}

}  // namespace specdec
