// The per-step controller (specdec/controller.py, DraftController, is its facade; the oracle:
// tests/oracles/controller.py): acceptance estimates, the batch budget and the drafter, for
// the whole batch in one call, with no Python per row.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "budget.h"
#include "drafter.h"

namespace specdec {

// The controller's settings, named as in Python (SpecConfig, CoreSettings), which alone holds
// their values.
struct ControllerConfig {
  int k_max;
  int k_ceiling;  // with a budget, in a wave's tail: the rows at k_max may draft this many
  double acceptance_decay;
  double prior_weight;
  double max_token_gain;
  double lookup_decay;
};

// Per-token acceptance of one request's drafts, shrunk towards the run's: each verified draft
// is a run of accepted tokens ended by one rejection (unless all were accepted); counts decay
// per token tried, so a request whose text changes character is re-learned.
struct Acceptance {
  double accepted = 0.0;
  double rejected = 0.0;
  void observe(int64_t num_drafted, int64_t num_accepted, double decay);
  double rate(double prior, double prior_weight) const {
    double total = accepted + rejected + prior_weight;
    return (accepted + prior * prior_weight) / total;
  }
};

class Controller {
 public:
  Controller(const ControllerConfig& cfg, Drafter& drafter);
  Controller(const Controller&) = delete;
  Controller& operator=(const Controller&) = delete;

  // One engine step: row i is request ids[i] with tokens rows[i], of whose last draft
  // accepted[i] tokens were accepted, its prompt prompt_lens[i] tokens long (< 0 or no array:
  // unknown); with a cost model the batch budget sizes the drafts (in a wave's `tail`, rows at
  // k_max may draft up to k_ceiling).
  // Row i's draft goes to drafts[i * k_ceiling ..], its length to num_draft_tokens[i].
  void step(const std::vector<std::string>& ids, const std::vector<RowTokens>& rows, const int64_t* accepted,
            const int64_t* prompt_lens, const StepCost* cost, bool tail, int64_t* drafts, int64_t* num_draft_tokens);
  // The request left the batch: its tokens enter the cache. False: it was not live.
  bool finish(const std::string& id);
  // `finish` every live request not among `present`, oldest first (the engine noticed they
  // left the batch).
  void retire_missing(const std::vector<std::string>& present);
  std::vector<std::string> active_ids() const;  // in the order they started
  size_t num_live() const { return live_.size(); }
  const ControllerConfig& config() const { return cfg_; }

  double lookup_s = 0.0;  // the drafter's thread CPU seconds per row looked up (moving average)
  double fixed_lookup_s = -1.0;  // >= 0: every lookup call counts as this long (tests)

 private:
  struct Live {
    Acceptance acceptance;
    int64_t pending_draft = 0;
    int64_t verified_drafted = 0;
    int64_t verified_accepted = 0;
    uint64_t serial = 0;  // order of arrival
    Drafter::Request* request = nullptr;  // the drafter's record (the controller alone forgets it)
  };

  Live& observe(const std::string& id, int64_t num_accepted);
  double overall_rate() const { return overall_.rate(0.5, 1.0); }
  double relative_acceptance(const Live& live, double overall) const {
    return live.acceptance.rate(overall, cfg_.prior_weight) / overall;
  }
  void time_lookups(double seconds, int64_t num_looked_up);

  ControllerConfig cfg_;
  Drafter& drafter_;
  Acceptance overall_;
  std::unordered_map<std::string, std::unique_ptr<Live>> live_;
  uint64_t next_serial_ = 0;
  // per-step scratch, kept to avoid allocations
  std::vector<Live*> lives_;
  std::vector<int64_t> num_draft_tokens_, budget_draft_tokens_, contexts_;
  std::vector<double> conf_, gains_, thresholds_;
  std::vector<uint32_t> order_;
};

}  // namespace specdec
