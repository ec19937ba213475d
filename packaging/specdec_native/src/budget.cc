// The batch budget's allocation (see budget.h and tests/oracles/budget.py).
#include "budget.h"

#include <algorithm>

namespace specdec {

namespace {

constexpr double kMinTokenSeconds = 1e-30;  // budget.py's MIN_TOKEN_SECONDS

int64_t sum(const std::vector<int64_t>& values) {
  int64_t total = 0;
  for (int64_t v : values) total += v;
  return total;
}

// What one drafted token adds to a step without drafts, per row (draft_token_seconds).
void draft_token_seconds(const StepCost& cost, const std::vector<int64_t>& contexts, int64_t num_kv,
                         std::vector<double>& out) {
  const int64_t num_rows = static_cast<int64_t>(contexts.size());
  const double base = cost.seconds(num_rows, num_rows, num_kv, 0);
  out.resize(contexts.size());
  for (size_t i = 0; i < contexts.size(); ++i) out[i] = cost.seconds(num_rows, num_rows + 1, num_kv, contexts[i]) - base;
}

}  // namespace

void first_draft_thresholds(const StepCost& cost, const std::vector<int64_t>& contexts, double lookup_s,
                            std::vector<double>& out) {
  const int64_t num_rows = static_cast<int64_t>(contexts.size());
  const int64_t num_kv = sum(contexts);
  const double base = std::max(cost.seconds(num_rows, num_rows, num_kv, 0), 1e-12);
  draft_token_seconds(cost, contexts, num_kv, out);
  for (double& t : out) t = static_cast<double>(num_rows) * (t + lookup_s) / base;
}

void allocate_drafts(const std::vector<int64_t>& num_draft_tokens, const std::vector<double>& gains,
                     const std::vector<int64_t>& contexts, const StepCost& cost, std::vector<int64_t>& out,
                     std::vector<uint32_t>& order) {
  const int64_t num_rows = static_cast<int64_t>(num_draft_tokens.size());
  out.assign(num_draft_tokens.size(), 0);
  const size_t total = gains.size();
  if (total == 0) return;
  const int64_t num_kv = sum(contexts);
  std::vector<double> unit;
  draft_token_seconds(cost, contexts, num_kv, unit);
  for (double& u : unit) u = std::max(u, kMinTokenSeconds);
  // Positions best gain per second first; equal keys by position within the draft, then by
  // row (the reference's stable lexsort on (-key, position)).
  std::vector<uint32_t> row_of(total), pos_of(total);
  std::vector<double> key(total);
  for (size_t i = 0, at = 0; i < num_draft_tokens.size(); ++i)
    for (int64_t j = 0; j < num_draft_tokens[i]; ++j, ++at) {
      row_of[at] = static_cast<uint32_t>(i);
      pos_of[at] = static_cast<uint32_t>(j);
      key[at] = gains[at] / unit[i];
    }
  order.resize(total);
  for (size_t i = 0; i < total; ++i) order[i] = static_cast<uint32_t>(i);
  std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    if (key[a] != key[b]) return key[a] > key[b];
    if (pos_of[a] != pos_of[b]) return pos_of[a] < pos_of[b];
    return a < b;
  });
  // expected / seconds after taking the first j positions; the first maximum (fewest drafts).
  const double rows = static_cast<double>(num_rows);
  double taken = 0.0;
  int64_t draft_kv = 0;
  size_t best = 0;
  double best_value = (rows + taken) / std::max(cost.seconds(num_rows, num_rows, num_kv, 0), 1e-12);
  for (size_t j = 1; j <= total; ++j) {
    taken = taken + gains[order[j - 1]];
    if (pos_of[order[j - 1]] == 0) draft_kv += contexts[row_of[order[j - 1]]];  // a row's first drafted token
    double value = (rows + taken) /
                   std::max(cost.seconds(num_rows, num_rows + static_cast<int64_t>(j), num_kv, draft_kv), 1e-12);
    if (value > best_value) {
      best_value = value;
      best = j;
    }
  }
  for (size_t j = 0; j < best; ++j) ++out[row_of[order[j]]];
}

}  // namespace specdec
