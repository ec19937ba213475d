// The compiled controller (see controller.h).
#include "controller.h"

#include <algorithm>
#include <cmath>
#include <ctime>
#include <stdexcept>

namespace specdec {

namespace {

double thread_seconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

}  // namespace

void Acceptance::observe(int64_t num_drafted, int64_t num_accepted, double decay) {
  int64_t rejected_now = num_accepted < num_drafted ? 1 : 0;
  double fade = std::pow(decay, static_cast<double>(num_accepted + rejected_now));  // per token tried
  accepted = accepted * fade + static_cast<double>(num_accepted);
  rejected = rejected * fade + static_cast<double>(rejected_now);
}

Controller::Controller(const ControllerConfig& cfg, Drafter& drafter)
    : cfg_(cfg), drafter_(drafter) {
  if (cfg.k_max < 1) throw std::invalid_argument("k_max must be >= 1");
  if (cfg.k_ceiling < cfg.k_max) throw std::invalid_argument("k_ceiling must be >= k_max");
}

Controller::Live& Controller::observe(const std::string& id, int64_t num_accepted) {
  auto it = live_.find(id);
  if (it == live_.end()) {
    auto live = std::make_unique<Live>();
    live->serial = next_serial_++;
    live->request = &drafter_.request(id);
    it = live_.emplace(id, std::move(live)).first;
  }
  Live& live = *it->second;
  live.verified_drafted = live.pending_draft;
  live.verified_accepted = std::min(num_accepted, live.pending_draft);
  if (live.pending_draft) {
    live.acceptance.observe(live.verified_drafted, live.verified_accepted, cfg_.acceptance_decay);
    overall_.observe(live.verified_drafted, live.verified_accepted, 1.0);
  }
  return live;
}

void Controller::time_lookups(double seconds, int64_t num_looked_up) {
  if (!num_looked_up) {  // not refreshed, the estimate fades
    lookup_s *= cfg_.lookup_decay;
    return;
  }
  double per_row = seconds / static_cast<double>(num_looked_up);
  lookup_s = lookup_s == 0.0 ? per_row : cfg_.lookup_decay * lookup_s + (1 - cfg_.lookup_decay) * per_row;
}

void Controller::step(const std::vector<std::string>& ids, const std::vector<RowTokens>& rows,
                      const int64_t* accepted, const int64_t* prompt_lens, const StepCost* cost, bool tail,
                      int64_t* drafts, int64_t* num_draft_tokens) {
  const size_t n = ids.size();
  const size_t stride = static_cast<size_t>(cfg_.k_ceiling);
  if (rows.size() != n) throw std::invalid_argument("ids and rows differ in length");
  lives_.resize(n);
  for (size_t i = 0; i < n; ++i) lives_[i] = &observe(ids[i], accepted[i]);
  for (size_t i = 0; i < n; ++i)
    if (lives_[i]->verified_drafted)
      drafter_.feedback(*lives_[i]->request, lives_[i]->verified_drafted, lives_[i]->verified_accepted);
  // Free rows, nothing waits: with a budget the rows may go up to the ceiling.
  num_draft_tokens_.assign(n, cost && tail ? cfg_.k_ceiling : cfg_.k_max);
  const double overall = overall_rate();
  if (cost) {
    contexts_.resize(n);
    for (size_t i = 0; i < n; ++i) contexts_[i] = std::max<int64_t>(static_cast<int64_t>(rows[i].n) - 1, 0);
    // Rows whose most confident token could not pay for itself and its lookup draft nothing.
    first_draft_thresholds(*cost, contexts_, lookup_s, thresholds_);
    double ceiling = std::min(drafter_.best_confidence(), cfg_.max_token_gain);
    for (size_t i = 0; i < n; ++i)
      if (!(ceiling * relative_acceptance(*lives_[i], overall) > thresholds_[i])) num_draft_tokens_[i] = 0;
  }
  conf_.resize(n * stride);
  double started = fixed_lookup_s >= 0 ? 0.0 : thread_seconds();
  // Every row's new tokens first, so that each row's lookups see what the whole batch wrote.
  for (size_t i = 0; i < n; ++i)
    drafter_.ingest(*lives_[i]->request, ids[i], rows[i], prompt_lens ? prompt_lens[i] : -1);
  drafter_.maintain();
  for (size_t i = 0; i < n; ++i)
    drafter_.draft(*lives_[i]->request, static_cast<int>(num_draft_tokens_[i]), drafts + i * stride,
                   conf_.data() + i * stride, num_draft_tokens + i);
  if (cost) {
    double elapsed = fixed_lookup_s >= 0 ? fixed_lookup_s : thread_seconds() - started;
    int64_t looked_up = 0;
    for (size_t i = 0; i < n; ++i) looked_up += num_draft_tokens_[i] > 0;
    time_lookups(elapsed, looked_up);
    // Each position's acceptance probability: the drafter's confidence scaled by how this
    // request fares against the run, chained along the draft.
    gains_.clear();
    for (size_t i = 0; i < n; ++i) {
      double relative = relative_acceptance(*lives_[i], overall);
      double product = 1.0;
      const double* conf = conf_.data() + i * stride;
      for (int64_t j = 0; j < num_draft_tokens[i]; ++j) {
        double x = std::min(conf[j] * relative, cfg_.max_token_gain);
        product = j == 0 ? x : product * x;
        gains_.push_back(product);
      }
      num_draft_tokens_[i] = num_draft_tokens[i];  // what the budget chooses from
    }
    allocate_drafts(num_draft_tokens_, gains_, contexts_, *cost, budget_draft_tokens_, order_);
    for (size_t i = 0; i < n; ++i) num_draft_tokens[i] = budget_draft_tokens_[i];
  }
  for (size_t i = 0; i < n; ++i) lives_[i]->pending_draft = num_draft_tokens[i];
}

bool Controller::finish(const std::string& id) {
  bool live = live_.erase(id) > 0;
  drafter_.forget(id);
  return live;
}

void Controller::retire_missing(const std::vector<std::string>& present) {
  size_t seen = 0;
  for (const std::string& id : present) seen += live_.count(id);
  if (seen == live_.size()) return;  // the usual step: nobody left
  std::unordered_map<std::string_view, bool> here;
  for (const std::string& id : present) here.emplace(id, true);
  std::vector<std::pair<uint64_t, std::string>> gone;
  for (const auto& [id, live] : live_)
    if (!here.count(id)) gone.emplace_back(live->serial, id);
  std::sort(gone.begin(), gone.end());
  for (const auto& [serial, id] : gone) finish(id);
}

std::vector<std::string> Controller::active_ids() const {
  std::vector<std::pair<uint64_t, std::string>> all;
  for (const auto& [id, live] : live_) all.emplace_back(live->serial, id);
  std::sort(all.begin(), all.end());
  std::vector<std::string> ids;
  for (auto& [serial, id] : all) ids.push_back(std::move(id));
  return ids;
}

}  // namespace specdec
