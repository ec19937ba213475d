// Read-only views of the cache: its sequences, memory, every trie point (tests compare them
// with the Python reference's trie) and the invariants tests check after every operation.
#include <algorithm>
#include <stdexcept>
#include <string>

#include "suffix_cache.h"

namespace specdec {

namespace {
void require(bool ok, const char* what) {
  if (!ok) throw std::logic_error(std::string("suffix cache invariant broken: ") + what);
}
}  // namespace

std::vector<std::pair<std::string, std::vector<int32_t>>> SuffixCache::sequences() const {
  std::vector<std::pair<std::string, std::vector<int32_t>>> out;
  for (const CachedSequence& seq : seqs_) {
    if (!seq.live) continue;
    std::vector<int32_t> toks(seq.len);
    for (uint32_t i = 0; i < seq.len; ++i) toks[i] = tok_at(seq.start + i);
    out.emplace_back(seq.id, std::move(toks));
  }
  return out;
}

std::vector<std::pair<std::vector<int32_t>, uint32_t>> SuffixCache::dump() const {
  std::vector<std::pair<std::vector<int32_t>, uint32_t>> out;
  std::vector<std::pair<uint32_t, std::vector<int32_t>>> stack;
  for (uint32_t c : root_child_)
    if (c != 0) stack.push_back({c, {}});
  while (!stack.empty()) {
    auto [c, path] = stack.back();
    stack.pop_back();
    const CacheNode& node = n(c);
    for (uint32_t d = static_cast<uint32_t>(path.size()); d < node.depth; ++d) {
      path.push_back(tok_at(node.pos + d));
      out.emplace_back(path, node.count);
    }
    for (uint32_t ch = node.first; ch != 0; ch = n(ch).next) stack.push_back({ch, path});
  }
  std::sort(out.begin(), out.end());
  return out;
}

void SuffixCache::check_node(uint32_t node, uint64_t& seen) const {
  const CacheNode& p = n(node);
  uint64_t total = 0;
  uint32_t listed = 0;
  uint32_t prev = 0;
  for (uint32_t c = p.first; c != 0; prev = c, c = n(c).next) {
    const CacheNode& ch = n(c);
    require(ch.prev == prev, "sibling links");
    require(ch.count >= 1, "empty node left in the tree");
    require(ch.depth > p.depth && ch.depth <= max_depth_, "depths grow along a path");
    require(ch.tok == tok_at(ch.pos + p.depth), "edge token matches its label");
    for (uint32_t j = 0; j < p.depth; ++j) require(tok_at(ch.pos + j) == tok_at(p.pos + j), "child extends parent");
    if (p.flags & kHashed) require(edges_.get(FlatMap::key(node, ch.tok)) == c, "hashed child indexed");
    if (!(p.flags & kDirty) && c != p.first) {
      const CacheNode& head = n(p.first);
      require(head.count > ch.count || (head.count == ch.count && head.tok < ch.tok), "first child is the best");
    }
    total += ch.count;
    ++listed;
    ++seen;
    check_node(c, seen);
  }
  require(total <= p.count, "children count no more than their parent");
  require(node == 0 || listed != 1 || total < p.count, "no node with one child and no suffix ending at it");
  require((p.flags & kHashed) || listed == p.nchild, "child count");
}

void SuffixCache::check_invariants() const {
  uint64_t seen = 0;
  for (size_t t = 0; t < root_child_.size(); ++t) {
    uint32_t c = root_child_[t];
    if (c == 0) continue;
    require(n(c).tok == static_cast<int32_t>(t) && n(c).count >= 1 && n(c).depth >= 1, "root child");
    ++seen;
    check_node(c, seen);
  }
  require(seen == nodes_.live(), "every allocated node is in the tree");
  uint64_t live_tokens = 0;
  for (const CachedSequence& seq : seqs_) live_tokens += seq.live ? seq.len : 0;
  require(live_tokens == live_tokens_ && live_.size() <= seqs_.size(), "token count");
  require(seqs_.empty() || seqs_.front().live, "removed sequences at the front are freed");
  require(live_tokens_ <= max_tokens_ || live_.size() <= 1, "token budget");
  SuffixCache rebuilt(max_depth_, ~uint64_t{0} >> 1);
  for (auto& [id, toks] : sequences()) rebuilt.insert(id, toks.data(), toks.size());
  require(rebuilt.dump() == dump(), "counts equal a rebuild from the cached sequences");
}

}  // namespace specdec
