// What the drafter knows across requests besides the cache: prompt digests, per-prompt history
// of earlier completions, and prompt groups (one MultiIndex per prompt: history completions and
// every request of that prompt). The Python reference: tests/oracles/prompt_digest.py,
// tests/oracles/prompt_history.py and the group bookkeeping in hybrid.py.
#pragma once
#include <cstdint>
#include <deque>
#include <list>
#include <memory>
#include <unordered_map>
#include <vector>

#include "multi_index.h"

namespace specdec {

// FNV-1a 64 over the tokens, each fed as the 4 little-endian bytes of its uint32 value.
template <typename T>
uint64_t prompt_digest(const T* tokens, size_t n, int64_t stride) {
  uint64_t h = 14695981039346656037ULL;
  for (size_t i = 0; i < n; ++i) {
    uint32_t v = static_cast<uint32_t>(tokens[i * stride]);
    for (int b = 0; b < 4; ++b) {
      h ^= (v >> (8 * b)) & 0xffu;
      h *= 1099511628211ULL;
    }
  }
  return h;
}

// Completions of earlier finished requests per prompt digest, oldest first; FIFO across prompts
// within max_tokens, at most per_prompt per prompt (a prompt's oldest dropped first).
class PromptHistory {
 public:
  struct Completion {
    uint64_t digest;
    std::vector<int32_t> tokens;
    bool loaded;  // from a file: seeded into its group when the group is created
  };

  PromptHistory(uint64_t max_tokens, size_t per_prompt) : max_tokens_(max_tokens), per_prompt_(per_prompt) {}

  void add(uint64_t digest, std::vector<int32_t> tokens, bool loaded);
  // The live completions, oldest first.
  template <typename F>
  void for_each(F f) const {
    for (const Entry& e : fifo_)
      if (e.alive) f(e.c);
  }
  // The loaded completions of `digest`, oldest first.
  template <typename F>
  void for_each_loaded(uint64_t digest, F f) const {
    auto it = by_prompt_.find(digest);
    if (it == by_prompt_.end()) return;
    for (uint64_t serial : it->second) {
      const Entry& e = fifo_[serial - first_serial_];
      if (e.c.loaded) f(e.c.tokens);
    }
  }
  uint64_t num_tokens() const { return tokens_; }

 private:
  struct Entry {
    Completion c;
    bool alive;
  };
  void kill(uint64_t serial);
  void pop_dead() {
    fifo_.pop_front();
    ++first_serial_;
  }

  uint64_t max_tokens_;
  size_t per_prompt_;
  std::deque<Entry> fifo_;  // in order of adding; dead entries until they reach the front
  uint64_t first_serial_ = 0;  // serial of fifo_.front()
  std::unordered_map<uint64_t, std::deque<uint64_t>> by_prompt_;  // live serials, oldest first
  uint64_t tokens_ = 0;
};

// One prompt's group: its history completions (slots first) and its requests.
struct PromptGroup {
  PromptGroup(uint64_t d, int lookup_max) : digest(d), index(lookup_max) {}
  uint64_t digest;
  MultiIndex index;
  std::vector<uint8_t> from_history;  // per slot
  int num_live = 0;  // members not yet finished
};

// The groups in order of last activity, bounded by max_tokens over all groups (whole groups
// without a live member dropped, least recently active first).
class PromptGroups {
 public:
  PromptGroups(uint64_t max_tokens, int lookup_max) : max_tokens_(max_tokens), lookup_max_(lookup_max) {}

  // The group of `digest`, made if needed (its history members: the history's loaded
  // completions, oldest first, each after the prompt tail member[0..tail)), moved to the end;
  // member[0..n) becomes a new live member: returns (group, slot).
  std::pair<PromptGroup*, int32_t> join(uint64_t digest, const int32_t* member, size_t tail, size_t n,
                                        const PromptHistory& history);
  void extend(PromptGroup* g, int32_t slot, const int32_t* tokens, size_t n) {
    g->index.extend(slot, tokens, n);
    tokens_ += n;
  }
  void leave(PromptGroup* g) { --g->num_live; }
  void evict();  // drop groups without a live member, front first, while over max_tokens

  size_t num_groups() const { return order_.size(); }
  uint64_t num_tokens() const { return tokens_; }
  uint64_t live_group_tokens() const {  // tokens of the groups with a live member (never dropped)
    uint64_t total = 0;
    for (const PromptGroup& g : order_) total += g.num_live > 0 ? g.index.num_tokens() : 0;
    return total;
  }
  std::vector<uint64_t> digests() const {  // least recently active first
    std::vector<uint64_t> out;
    for (const PromptGroup& g : order_) out.push_back(g.digest);
    return out;
  }

 private:
  uint64_t max_tokens_;
  int lookup_max_;
  std::list<PromptGroup> order_;
  std::unordered_map<uint64_t, std::list<PromptGroup>::iterator> by_digest_;
  uint64_t tokens_ = 0;
};

}  // namespace specdec
