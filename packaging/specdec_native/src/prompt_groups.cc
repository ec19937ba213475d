// Per-prompt history and prompt groups (see prompt_groups.h).
#include "prompt_groups.h"

namespace specdec {

void PromptHistory::add(uint64_t digest, std::vector<int32_t> tokens, bool loaded) {
  uint64_t serial = first_serial_ + fifo_.size();
  tokens_ += tokens.size();
  fifo_.push_back(Entry{Completion{digest, std::move(tokens), loaded}, true});
  by_prompt_[digest].push_back(serial);
  for (auto it = by_prompt_.find(digest); it != by_prompt_.end() && it->second.size() > per_prompt_;
       it = by_prompt_.find(digest))
    kill(it->second.front());
  while (tokens_ > max_tokens_) {
    while (!fifo_.front().alive) pop_dead();
    kill(first_serial_);
  }
  while (!fifo_.empty() && !fifo_.front().alive) pop_dead();
}

// The entry `serial` goes: it is the oldest of its prompt (per prompt or globally oldest).
void PromptHistory::kill(uint64_t serial) {
  Entry& e = fifo_[serial - first_serial_];
  e.alive = false;
  tokens_ -= e.c.tokens.size();
  auto it = by_prompt_.find(e.c.digest);
  it->second.pop_front();
  if (it->second.empty()) by_prompt_.erase(it);
  std::vector<int32_t>().swap(e.c.tokens);
}

std::pair<PromptGroup*, int32_t> PromptGroups::join(uint64_t digest, const int32_t* member, size_t tail, size_t n,
                                                    const PromptHistory& history) {
  auto it = by_digest_.find(digest);
  std::list<PromptGroup>::iterator g;
  if (it == by_digest_.end()) {
    order_.emplace_back(digest, lookup_max_);
    g = std::prev(order_.end());
    by_digest_.emplace(digest, g);
    history.for_each_loaded(digest, [&](const std::vector<int32_t>& c) {
      int32_t slot = g->index.add(member, tail);
      g->index.extend(slot, c.data(), c.size());
      g->from_history.push_back(1);
      tokens_ += tail + c.size();
    });
  } else {
    g = it->second;
    order_.splice(order_.end(), order_, g);
  }
  int32_t slot = g->index.add(member, n);
  g->from_history.push_back(0);
  tokens_ += n;
  ++g->num_live;
  return {&*g, slot};
}

void PromptGroups::evict() {
  for (auto g = order_.begin(); tokens_ > max_tokens_ && g != order_.end();) {
    if (g->num_live > 0) {
      ++g;
      continue;
    }
    tokens_ -= g->index.num_tokens();
    by_digest_.erase(g->digest);
    g = order_.erase(g);
  }
}


}  // namespace specdec
