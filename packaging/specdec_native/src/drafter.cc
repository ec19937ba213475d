// The hybrid drafter's choices and the confidence table (see drafter.h).
#include "drafter.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace specdec {

int ConfidenceTable::cache_bucket(double prob, int match_len) {
  int level = std::min(std::max(match_len, 1), kCacheMatch) - 1;
  int tenths = std::min(static_cast<int>(static_cast<int64_t>(prob * kCacheProb)), kCacheProb - 1);
  return kOwn + level * kCacheProb + tenths;
}

double ConfidenceTable::best() const {
  double best = confidence(0);
  for (int b = 1; b < kBuckets; ++b) best = std::max(best, confidence(b));
  return best;
}

// The sum over positions of the product of confidences up to it, in order (as the reference).
double ConfidenceTable::expected_accepted(const std::vector<int8_t>& buckets) const {
  double total = 0.0;
  double product = 1.0;
  for (int8_t b : buckets) {
    product = product * confidence(b);
    total = total + product;
  }
  return total;
}

void ConfidenceTable::observe(const std::vector<int8_t>& buckets, int64_t num_drafted, int64_t num_accepted) {
  int64_t judged = std::min<int64_t>(num_drafted, static_cast<int64_t>(buckets.size()));
  int64_t accepted = std::min(num_accepted, judged);
  for (int64_t i = 0; i < accepted; ++i) acc_[buckets[i]] += 1.0;
  if (num_accepted < judged) rej_[buckets[num_accepted]] += 1.0;
}

Drafter::Request& Drafter::request(const std::string& id) {
  auto it = requests_.find(id);
  if (it == requests_.end()) it = requests_.emplace(id, std::make_unique<Request>(cfg_.lookup_max)).first;
  return *it->second;
}

void Drafter::feedback(const std::string& id, int64_t num_drafted, int64_t num_accepted) {
  auto it = requests_.find(id);
  if (it != requests_.end()) feedback(*it->second, num_drafted, num_accepted);
}

void Drafter::feedback(Request& r, int64_t num_drafted, int64_t num_accepted) {
  table_.observe(r.buckets, num_drafted, num_accepted);
  int64_t judged = std::min<int64_t>(num_drafted, static_cast<int64_t>(r.buckets.size()));
  int64_t accepted = std::min(num_accepted, judged);
  for (int64_t i = 0; i < judged; ++i) {
    auto& counts = r.source_counts[ConfidenceTable::source(r.buckets[i])];
    counts[0] += 1;
    counts[1] += i < accepted;
  }
}

namespace {

bool any_counts(const SourceCounts& counts) {
  for (const auto& c : counts)
    if (c[0] || c[1]) return true;
  return false;
}

void add_counts(SourceCounts& to, const SourceCounts& from) {
  for (size_t s = 0; s < to.size(); ++s) {
    to[s][0] += from[s][0];
    to[s][1] += from[s][1];
  }
}

}  // namespace

bool Drafter::take_source_counts(const std::string& id, SourceCounts& out) {
  out = SourceCounts{};
  auto live = requests_.find(id);
  if (live != requests_.end()) {
    add_counts(out, live->second->source_counts);
    live->second->source_counts = SourceCounts{};
  }
  auto finished = finished_counts_.find(id);  // an earlier request of the same id
  if (finished != finished_counts_.end()) {
    add_counts(out, finished->second);
    finished_counts_.erase(finished);
  }
  return any_counts(out);
}

// First sight: the prompt's digest, the request's member sequence (its prompt's last lookup_max
// tokens and what follows) into its prompt group (if its prompt is known) and the live index.
void Drafter::join(Request& r, int64_t prompt_len) {
  const std::vector<int32_t>& toks = r.index.tokens();
  r.seen = true;
  r.serial = next_serial_++;
  if (prompt_len >= 0) {
    size_t p = static_cast<size_t>(prompt_len);
    r.prompt_len = prompt_len;
    r.digest = prompt_digest(toks.data(), p, 1);
    r.member_start = p - std::min<size_t>(p, static_cast<size_t>(cfg_.lookup_max));
  }
  const int32_t* member = toks.data() + r.member_start;
  size_t n = toks.size() - r.member_start;
  if (prompt_len >= 0) {
    size_t tail = static_cast<size_t>(prompt_len) - r.member_start;
    auto [group, slot] = groups_.join(r.digest, member, tail, n, history_);
    r.group = group;
    r.group_slot = slot;
  }
  r.live_slot = live_->add(member, n);
  live_tokens_ += n;
}

void Drafter::feed(Request& r, size_t from) {
  const std::vector<int32_t>& toks = r.index.tokens();
  size_t n = toks.size() - from;
  if (r.group) groups_.extend(r.group, r.group_slot, toks.data() + from, n);
  live_->extend(r.live_slot, toks.data() + from, n);
  live_tokens_ += n;
}

void Drafter::maintain() {
  if (live_->num_tokens() > 2 * live_tokens_ + cfg_.live_slack_tokens) rebuild_live();
  groups_.evict();
}

// A new live index holding the live requests only, in the order they were first seen.
void Drafter::rebuild_live() {
  std::vector<Request*> live;
  for (auto& [id, r] : requests_)
    if (r->seen) live.push_back(r.get());
  std::sort(live.begin(), live.end(), [](const Request* a, const Request* b) { return a->serial < b->serial; });
  live_ = std::make_unique<MultiIndex>(cfg_.lookup_max);
  for (Request* r : live) {
    const std::vector<int32_t>& toks = r->index.tokens();
    r->live_slot = live_->add(toks.data() + r->member_start, toks.size() - r->member_start);
  }
  ++num_live_rebuilds_;
}

void Drafter::forget(const std::string& id) {
  auto it = requests_.find(id);
  if (it == requests_.end()) return;
  Request& r = *it->second;
  if (any_counts(r.source_counts)) add_counts(finished_counts_[id], r.source_counts);
  const std::vector<int32_t>& toks = r.index.tokens();
  if (!toks.empty()) cache_.insert(id, toks.data(), toks.size());
  bool seen = r.seen;
  if (seen) {
    if (r.group) {
      groups_.leave(r.group);
      if (toks.size() > static_cast<size_t>(r.prompt_len))
        history_.add(r.digest, std::vector<int32_t>(toks.begin() + r.prompt_len, toks.end()), false);
    }
    live_tokens_ -= toks.size() - r.member_start;
  }
  requests_.erase(it);
  if (seen) maintain();
}

void Drafter::draft(Request& r, int num_draft_tokens, int64_t* draft_out, double* conf_out, int64_t* len_out) {
  std::vector<int32_t> draft;
  r.buckets.clear();
  if (num_draft_tokens > 0) {
    Candidate got = best_candidate(r, draft, num_draft_tokens);
    draft = std::move(got.tokens);
    r.buckets = std::move(got.buckets);
    // A draft cut short (its match sat near the end of its source) is continued from the
    // context extended with it.
    while (!draft.empty() && static_cast<int>(draft.size()) < num_draft_tokens) {
      Candidate more = best_candidate(r, draft, num_draft_tokens - static_cast<int>(draft.size()));
      if (more.tokens.empty()) break;
      draft.insert(draft.end(), more.tokens.begin(), more.tokens.end());
      r.buckets.insert(r.buckets.end(), more.buckets.begin(), more.buckets.end());
    }
  }
  for (size_t i = 0; i < draft.size(); ++i) {
    draft_out[i] = draft[i];
    conf_out[i] = table_.confidence(r.buckets[i]);
  }
  *len_out = static_cast<int64_t>(draft.size());
}

// The continuation of the longest earlier match in the request's own text (+ `extra`).
Candidate Drafter::own_candidate(const Request& r, const std::vector<int32_t>& extra, int num_draft_tokens,
                                 int& own_len) const {
  OwnMatch m = extra.empty() ? r.index.match() : r.index.match_extended(extra.data(), extra.size());
  own_len = m.len >= cfg_.lookup_min ? m.len : 0;
  Candidate own;
  if (own_len == 0) return own;
  const std::vector<int32_t>& toks = r.index.tokens();
  size_t total = toks.size() + extra.size();
  const size_t stop = std::min(total, static_cast<size_t>(m.end) + 1 + static_cast<size_t>(num_draft_tokens));
  for (size_t i = static_cast<size_t>(m.end) + 1; i < stop; ++i)
    own.tokens.push_back(i < toks.size() ? toks[i] : extra[i - toks.size()]);
  own.buckets.assign(own.tokens.size(), static_cast<int8_t>(ConfidenceTable::own_bucket(own_len)));
  return own;
}

namespace {

// Up to num_draft_tokens tokens after a MultiIndex match, filed under its source's bucket.
Candidate continuation(const MultiIndex& index, const MultiMatch& m, int first_bucket, int num_draft_tokens) {
  Candidate c;
  const std::vector<int32_t>& seq = index.tokens(m.slot);
  size_t stop = std::min(seq.size(), static_cast<size_t>(m.end) + 1 + static_cast<size_t>(num_draft_tokens));
  c.tokens.assign(seq.begin() + m.end + 1, seq.begin() + stop);
  c.buckets.assign(c.tokens.size(), static_cast<int8_t>(ConfidenceTable::match_bucket(first_bucket, m.len)));
  return c;
}

}  // namespace

// Own text, siblings, history, running requests, cache, in that order: a later candidate wins
// with more expected accepted tokens or, where the table cannot tell them apart, a strictly
// longer match (counting at most lookup_max tokens).
Candidate Drafter::best_candidate(const Request& r, const std::vector<int32_t>& extra, int num_draft_tokens) {
  const std::vector<int32_t>& toks = r.index.tokens();
  const size_t total = toks.size() + extra.size();
  auto at = [&](size_t i) { return i < toks.size() ? toks[i] : extra[i - toks.size()]; };
  Candidate best;
  int best_len = 0;
  double best_value = 0.0;
  bool have = false;
  // A tie counts at most lookup_max matched tokens: a longer cache match is no more specific.
  auto consider = [&](Candidate&& c, int full_match_len) {
    if (c.tokens.empty()) return;
    int match_len = std::min(full_match_len, cfg_.lookup_max);
    double value = table_.expected_accepted(c.buckets);
    bool take = !have || (std::fabs(value - best_value) > 1e-9 ? value > best_value : match_len > best_len);
    if (!take) return;
    best = std::move(c);
    best_len = match_len;
    best_value = value;
    have = true;
  };
  int own_len = 0;
  Candidate own = own_candidate(r, extra, num_draft_tokens, own_len);
  if (own_len) consider(std::move(own), own_len);
  if (r.group) {
    MultiMatch m = r.group->index.lookup(at, total, r.group_slot, cfg_.lookup_min);
    if (m.slot >= 0) {
      int first = r.group->from_history[m.slot] ? ConfidenceTable::kHistory : ConfidenceTable::kSibling;
      consider(continuation(r.group->index, m, first, num_draft_tokens), m.len);
    }
  }
  MultiMatch m = live_->lookup(at, total, r.live_slot, cfg_.lookup_min);
  if (m.slot >= 0) consider(continuation(*live_, m, ConfidenceTable::kLive, num_draft_tokens), m.len);
  if (cache_.num_sequences() > 0) {
    std::vector<int32_t>& tail = tail_;  // the last cache_max_depth tokens of tokens + extra
    tail.clear();
    for (size_t i = total - std::min<size_t>(total, cfg_.cache_max_depth); i < total; ++i) tail.push_back(at(i));
    CacheDraft cached = cache_.speculate(tail.data(), tail.size(), num_draft_tokens, cfg_.cache_min_prob);
    if (!cached.tokens.empty() && cached.match_len >= cfg_.min_cache_match) {
      Candidate from_cache{cached.tokens, {}};
      for (double p : cached.probs)
        from_cache.buckets.push_back(static_cast<int8_t>(ConfidenceTable::cache_bucket(p, cached.match_len)));
      consider(std::move(from_cache), cached.match_len);
    }
  }
  return best;
}

}  // namespace specdec
