// The hybrid drafter's choices and the confidence table (see drafter.h).
#include "drafter.h"

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
  if (it == requests_.end()) it = requests_.emplace(id, std::make_unique<Request>(cfg_.n_max)).first;
  return *it->second;
}

void Drafter::feedback(const std::string& id, int64_t num_drafted, int64_t num_accepted) {
  auto it = requests_.find(id);
  if (it != requests_.end()) feedback(*it->second, num_drafted, num_accepted);
}

void Drafter::forget(const std::string& id) {
  auto it = requests_.find(id);
  if (it == requests_.end()) return;
  const std::vector<int32_t>& toks = it->second->index.tokens();
  if (!toks.empty()) cache_.insert(id, toks.data(), toks.size());
  requests_.erase(it);
}

size_t Drafter::memory_bytes() const {
  size_t total = cache_.memory_bytes();
  for (const auto& [id, r] : requests_) total += r->index.memory_bytes() + id.capacity() + 64;
  return total;
}

// The continuation of the longest earlier match in the request's own text (+ `extra`).
Candidate Drafter::own_candidate(const Request& r, const std::vector<int32_t>& extra, int k, int& own_len) const {
  OwnMatch m = extra.empty() ? r.index.match() : r.index.match_extended(extra.data(), extra.size());
  own_len = m.len >= cfg_.n_min ? m.len : 0;
  Candidate own;
  if (own_len == 0) return own;
  const std::vector<int32_t>& toks = r.index.tokens();
  size_t total = toks.size() + extra.size();
  for (size_t i = static_cast<size_t>(m.end) + 1; i < total && static_cast<int>(own.tokens.size()) < k; ++i)
    own.tokens.push_back(i < toks.size() ? toks[i] : extra[i - toks.size()]);
  own.buckets.assign(own.tokens.size(), static_cast<int8_t>(ConfidenceTable::own_bucket(own_len)));
  return own;
}

// Own text against the cache: more expected accepted tokens wins; a tie, the longer match
// (own text when equal).
Candidate Drafter::best_candidate(const Request& r, const std::vector<int32_t>& extra, int k) {
  int own_len = 0;
  Candidate own = own_candidate(r, extra, k, own_len);
  if (cache_.num_sequences() == 0) return own;
  const std::vector<int32_t>& toks = r.index.tokens();
  std::vector<int32_t> tail;  // the last max_depth tokens of tokens + extra
  size_t total = toks.size() + extra.size();
  for (size_t i = total - std::min<size_t>(total, cfg_.max_depth); i < total; ++i)
    tail.push_back(i < toks.size() ? toks[i] : extra[i - toks.size()]);
  CacheDraft cached = cache_.speculate(tail.data(), tail.size(), k, cfg_.min_prob);
  if (cached.tokens.empty() || cached.match_len < cfg_.min_cache_match) return own;
  Candidate from_cache{cached.tokens, {}};
  for (double p : cached.probs)
    from_cache.buckets.push_back(static_cast<int8_t>(ConfidenceTable::cache_bucket(p, cached.match_len)));
  if (own_len == 0) return from_cache;
  double own_value = table_.expected_accepted(own.buckets);
  double cache_value = table_.expected_accepted(from_cache.buckets);
  if (std::fabs(own_value - cache_value) > 1e-9) return own_value > cache_value ? own : from_cache;
  return own_len >= cached.match_len ? own : from_cache;
}

}  // namespace specdec
