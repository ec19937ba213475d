// specdec's drafter, compiled: own-text lookup (OwnIndex) against the cross-request cache
// (SuffixCache), each drafted token filed under an evidence bucket whose acceptance rate is
// learned from verification. Same decisions as the Python reference
// (specdec/drafting/hybrid.py + confidence.py), token for token and bucket for bucket.
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "own_index.h"
#include "suffix_cache.h"

namespace specdec {

struct DrafterConfig {
  int max_depth = 24;
  uint64_t max_tokens = 4000000;
  int n_min = 1;
  int n_max = 16;
  double min_prob = 0.1;
  int min_cache_match = 1;
};

// Acceptance counts per evidence bucket (specdec/drafting/confidence.py).
class ConfidenceTable {
 public:
  static constexpr int kOwn = 8, kCacheMatch = 4, kCacheProb = 10;
  static constexpr int kBuckets = kOwn + kCacheMatch * kCacheProb;

  ConfidenceTable() { acc_.fill(1.0); rej_.fill(1.0); }
  static int own_bucket(int match_len) { return std::min(std::max(match_len, 1), kOwn) - 1; }
  static int cache_bucket(double prob, int match_len);
  double confidence(int b) const { return acc_[b] / (acc_[b] + rej_[b]); }
  double best() const;
  double expected_accepted(const std::vector<int8_t>& buckets) const;
  void observe(const std::vector<int8_t>& buckets, int64_t num_drafted, int64_t num_accepted);
  std::array<double, kBuckets>& accepted() { return acc_; }
  std::array<double, kBuckets>& rejected() { return rej_; }

 private:
  std::array<double, kBuckets> acc_, rej_;
};

// A request's tokens so far: n of them at `data`, `stride` elements apart.
struct RowTokens {
  const void* data = nullptr;
  bool wide = false;  // int64 (else int32)
  size_t n = 0;
  int64_t stride = 1;
};

struct Candidate {
  std::vector<int32_t> tokens;
  std::vector<int8_t> buckets;
};

class Drafter {
 public:
  explicit Drafter(const DrafterConfig& cfg) : cfg_(cfg), cache_(cfg.max_depth, cfg.max_tokens) {}
  Drafter(const Drafter&) = delete;
  Drafter& operator=(const Drafter&) = delete;

  // One request's own-text index and its last draft's buckets.
  struct Request {
    explicit Request(int n_max) : index(n_max) {}
    OwnIndex index;
    std::vector<int8_t> buckets;  // evidence bucket of each token of the last draft
  };

  // The request's tokens so far are tokens[0..n) (T: int32_t or int64_t); those not seen
  // before are added to its index. Writes at most k draft tokens and their confidences.
  template <typename T>
  void propose(const std::string& id, const T* tokens, size_t n, int k, int64_t stride,
               int64_t* draft_out, double* conf_out, int64_t* len_out) {
    propose(request(id), id, tokens, n, k, stride, draft_out, conf_out, len_out);
  }
  // The same for a record from `request(id)` (a caller that keeps it skips the lookup).
  template <typename T>
  void propose(Request& r, const std::string& id, const T* tokens, size_t n, int k, int64_t stride,
               int64_t* draft_out, double* conf_out, int64_t* len_out);
  void propose(Request& r, const std::string& id, const RowTokens& t, int k, int64_t* draft_out, double* conf_out,
               int64_t* len_out) {
    if (t.wide) {
      propose(r, id, static_cast<const int64_t*>(t.data), t.n, k, t.stride, draft_out, conf_out, len_out);
    } else {
      propose(r, id, static_cast<const int32_t*>(t.data), t.n, k, t.stride, draft_out, conf_out, len_out);
    }
  }
  void feedback(const std::string& id, int64_t num_drafted, int64_t num_accepted);
  void feedback(const Request& r, int64_t num_drafted, int64_t num_accepted) {
    table_.observe(r.buckets, num_drafted, num_accepted);
  }
  void forget(const std::string& id);  // its tokens enter the cache; its record is freed
  Request& request(const std::string& id);  // the request's record (made on first use)
  double best_confidence() const { return table_.best(); }

  SuffixCache& cache() { return cache_; }
  ConfidenceTable& table() { return table_; }
  size_t num_requests() const { return requests_.size(); }
  size_t memory_bytes() const;

 private:
  Candidate best_candidate(const Request& r, const std::vector<int32_t>& extra, int k);
  Candidate own_candidate(const Request& r, const std::vector<int32_t>& extra, int k, int& own_len) const;

  DrafterConfig cfg_;
  SuffixCache cache_;
  ConfidenceTable table_;
  std::unordered_map<std::string, std::unique_ptr<Request>> requests_;
};

template <typename T>
void Drafter::propose(Request& r, const std::string& id, const T* tokens, size_t n, int k, int64_t stride,
                      int64_t* draft_out, double* conf_out, int64_t* len_out) {
  size_t known = r.index.size();
  if (n < known) throw std::invalid_argument("request " + id + ": fewer tokens than already seen");
  if (known && static_cast<int64_t>(tokens[(known - 1) * stride]) != r.index.tokens()[known - 1])
    throw std::invalid_argument("request " + id + ": its earlier tokens changed");
  for (size_t i = known; i < n; ++i) {
    int64_t tok = static_cast<int64_t>(tokens[i * stride]);
    if (tok < 0 || tok >= (int64_t{1} << 31)) throw std::invalid_argument("request " + id + ": token id out of range");
    r.index.append(static_cast<int32_t>(tok));
  }
  std::vector<int32_t> draft;
  r.buckets.clear();
  if (k > 0) {
    Candidate got = best_candidate(r, draft, k);
    draft = std::move(got.tokens);
    r.buckets = std::move(got.buckets);
    // A draft cut short (its match sat near the end of its source) is continued from the
    // context extended with it.
    while (!draft.empty() && static_cast<int>(draft.size()) < k) {
      Candidate more = best_candidate(r, draft, k - static_cast<int>(draft.size()));
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

}  // namespace specdec
