// specdec's drafter, compiled: five candidate sources (own text, siblings of the same prompt,
// that prompt's history, every running request, the cross-request cache), each drafted token
// filed under an evidence bucket whose acceptance rate is learned from verification. Same
// decisions as the Python reference (tests/oracles/hybrid.py + confidence.py), token for
// token and bucket for bucket.
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "multi_index.h"
#include "own_index.h"
#include "prompt_groups.h"
#include "suffix_cache.h"

namespace specdec {

// The drafter's settings, named as in Python (specdec/controller.py CoreSettings, SpecConfig),
// which alone holds their values.
struct DrafterConfig {
  int cache_max_depth;
  uint64_t cache_max_tokens;
  int lookup_min;
  int lookup_max;
  double cache_min_prob;
  int min_cache_match;
  uint64_t group_max_tokens;
  uint64_t history_max_tokens;
  int history_per_prompt;
  uint64_t live_slack_tokens;  // the live index is rebuilt past 2 x live tokens + this
};

// Where a drafted token came from (the order candidates are considered in), and its name
// (the module's DRAFT_SOURCES, which specdec reads).
enum Source : int { kFromOwn, kFromCache, kFromSibling, kFromHistory, kFromLive, kNumSources };
constexpr std::array<const char*, kNumSources> kSourceNames = {"own", "cache", "sibling", "history", "live"};
// (drafted and verified, accepted) tokens per Source
using SourceCounts = std::array<std::array<int64_t, 2>, kNumSources>;

// Acceptance counts per evidence bucket (tests/oracles/confidence.py).
class ConfidenceTable {
 public:
  static constexpr int kOwn = 8, kCacheMatch = 4, kCacheProb = 10, kPerSource = 8;
  static constexpr int kSibling = kOwn + kCacheMatch * kCacheProb;  // first sibling bucket
  static constexpr int kHistory = kSibling + kPerSource, kLive = kHistory + kPerSource;
  static constexpr int kBuckets = kLive + kPerSource;

  ConfidenceTable() { acc_.fill(1.0); rej_.fill(1.0); }
  static int own_bucket(int match_len) { return std::min(std::max(match_len, 1), kOwn) - 1; }
  static int cache_bucket(double prob, int match_len);
  // sibling, history, live: by min(match_len, 8)
  static int match_bucket(int first, int match_len) { return first + std::min(std::max(match_len, 1), kPerSource) - 1; }
  static Source source(int b) {
    return b < kOwn       ? kFromOwn
           : b < kSibling ? kFromCache
           : b < kHistory ? kFromSibling
           : b < kLive    ? kFromHistory
                          : kFromLive;
  }
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
  explicit Drafter(const DrafterConfig& cfg)
      : cfg_(cfg),
        cache_(cfg.cache_max_depth, cfg.cache_max_tokens),
        history_(cfg.history_max_tokens, static_cast<size_t>(cfg.history_per_prompt)),
        groups_(cfg.group_max_tokens, cfg.lookup_max),
        live_(std::make_unique<MultiIndex>(cfg.lookup_max)) {}
  Drafter(const Drafter&) = delete;
  Drafter& operator=(const Drafter&) = delete;

  // One request: its own-text index, its last draft's buckets, where it sits in its prompt
  // group and in the live index.
  struct Request {
    explicit Request(int lookup_max) : index(lookup_max) {}
    OwnIndex index;
    std::vector<int8_t> buckets;  // evidence bucket of each token of the last draft
    SourceCounts source_counts{};  // its verified drafts' tokens, not yet taken
    bool seen = false;            // joined its group and the live index
    int64_t prompt_len = -1;      // -1: unknown (no group, no history)
    uint64_t digest = 0;
    size_t member_start = 0;      // its member sequence: tokens[member_start..]
    PromptGroup* group = nullptr;
    int32_t group_slot = -1;
    int32_t live_slot = -1;
    uint64_t serial = 0;          // order first seen
  };

  // A step for a batch is: `ingest` every row, `maintain` once, `draft` every row (so each
  // row's lookups see what every row of the batch brought in).
  //
  // The request's tokens so far are tokens[0..n) (T: int32_t or int64_t, `stride` apart); those
  // not seen before are added to its own index, its prompt group and the live index. At its
  // first sight, prompt_len (< 0: unknown) makes tokens[0..prompt_len) its prompt.
  template <typename T>
  void ingest(Request& r, const std::string& id, const T* tokens, size_t n, int64_t stride, int64_t prompt_len);
  void ingest(Request& r, const std::string& id, const RowTokens& t, int64_t prompt_len) {
    if (t.wide) {
      ingest(r, id, static_cast<const int64_t*>(t.data), t.n, t.stride, prompt_len);
    } else {
      ingest(r, id, static_cast<const int32_t*>(t.data), t.n, t.stride, prompt_len);
    }
  }
  // The bounds: the live index rebuilt when finished requests dominate it, then idle groups
  // dropped while the groups hold too many tokens.
  void maintain();
  // At most num_draft_tokens tokens continuing the request's tokens, and their confidences.
  void draft(Request& r, int num_draft_tokens, int64_t* draft_out, double* conf_out, int64_t* len_out);
  void feedback(const std::string& id, int64_t num_drafted, int64_t num_accepted);
  void feedback(Request& r, int64_t num_drafted, int64_t num_accepted);
  // Its tokens enter the cache, its completion the history; its record is freed (its source
  // counts, unless all zero, wait in the finished counts until taken).
  void forget(const std::string& id);
  // The request's source counts (live or finished), then zeroed; false: it has none.
  bool take_source_counts(const std::string& id, SourceCounts& out);
  Request& request(const std::string& id);  // the request's record (made on first use)
  double best_confidence() const { return table_.best(); }

  SuffixCache& cache() { return cache_; }
  ConfidenceTable& table() { return table_; }
  PromptHistory& history() { return history_; }
  const PromptGroups& groups() const { return groups_; }
  const MultiIndex& live_index() const { return *live_; }
  uint64_t live_tokens() const { return live_tokens_; }
  size_t num_live_rebuilds() const { return num_live_rebuilds_; }
  const DrafterConfig& config() const { return cfg_; }
  // finished requests whose source counts were not taken yet (an entry leaves only when taken)
  size_t num_finished_counts() const { return finished_counts_.size(); }
  size_t num_requests() const { return requests_.size(); }
  size_t num_members() const {  // requests seen and not forgotten (in the live set)
    size_t n = 0;
    for (const auto& [id, r] : requests_) n += r->seen;
    return n;
  }

 private:
  void join(Request& r, int64_t prompt_len);
  void feed(Request& r, size_t from);  // tokens[from..] of r's sequence into its group and the live index
  void rebuild_live();
  Candidate best_candidate(const Request& r, const std::vector<int32_t>& extra, int num_draft_tokens);
  Candidate own_candidate(const Request& r, const std::vector<int32_t>& extra, int num_draft_tokens,
                          int& own_len) const;

  DrafterConfig cfg_;
  SuffixCache cache_;
  ConfidenceTable table_;
  PromptHistory history_;
  PromptGroups groups_;
  std::unique_ptr<MultiIndex> live_;
  uint64_t live_tokens_ = 0;  // member tokens of the requests not yet forgotten
  size_t num_live_rebuilds_ = 0;
  uint64_t next_serial_ = 0;
  std::unordered_map<std::string, SourceCounts> finished_counts_;
  std::unordered_map<std::string, std::unique_ptr<Request>> requests_;
  std::vector<int32_t> tail_;  // scratch: a context's last cache_max_depth tokens
};

template <typename T>
void Drafter::ingest(Request& r, const std::string& id, const T* tokens, size_t n, int64_t stride,
                     int64_t prompt_len) {
  size_t known = r.index.size();
  if (n < known) throw std::invalid_argument("request " + id + ": fewer tokens than already seen");
  if (known && static_cast<int64_t>(tokens[(known - 1) * stride]) != r.index.tokens()[known - 1])
    throw std::invalid_argument("request " + id + ": its earlier tokens changed");
  if (!r.seen && prompt_len > static_cast<int64_t>(n))
    throw std::invalid_argument("request " + id + ": prompt length " + std::to_string(prompt_len) + " outside [0, " +
                                std::to_string(n) + "]");
  for (size_t i = known; i < n; ++i) {
    int64_t tok = static_cast<int64_t>(tokens[i * stride]);
    if (tok < 0 || tok >= (int64_t{1} << 31)) throw std::invalid_argument("request " + id + ": token id out of range");
    r.index.append(static_cast<int32_t>(tok));
  }
  if (!r.seen) {
    join(r, prompt_len);
  } else if (n > known) {
    feed(r, known);
  }
}

}  // namespace specdec
