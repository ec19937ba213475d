// The batch budget's allocation (see budget.h and specdec/budget.py).
#include "budget.h"

#include <algorithm>

namespace specdec {

double first_draft_threshold(int64_t num_rows, const StepCost& cost, int64_t num_kv_tokens, double lookup_s) {
  double base = cost.seconds(num_rows, num_rows, num_kv_tokens);
  double extra = cost.seconds(num_rows, num_rows + 1, num_kv_tokens) - base;
  return static_cast<double>(num_rows) * (extra + lookup_s) / std::max(base, 1e-12);
}

void allocate_drafts(const std::vector<int64_t>& lengths, const std::vector<double>& gains, const StepCost& cost,
                     int64_t num_kv_tokens, std::vector<int64_t>& out, std::vector<uint32_t>& order) {
  const int64_t num_rows = static_cast<int64_t>(lengths.size());
  out.assign(lengths.size(), 0);
  const size_t total = gains.size();
  if (total == 0) return;
  // Positions best first; equal gains by position within the draft, then by row (the
  // reference's stable lexsort on (-gain, position)).
  std::vector<uint32_t> row_of(total), pos_of(total);
  for (size_t i = 0, at = 0; i < lengths.size(); ++i)
    for (int64_t j = 0; j < lengths[i]; ++j, ++at) {
      row_of[at] = static_cast<uint32_t>(i);
      pos_of[at] = static_cast<uint32_t>(j);
    }
  order.resize(total);
  for (size_t i = 0; i < total; ++i) order[i] = static_cast<uint32_t>(i);
  std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    if (gains[a] != gains[b]) return gains[a] > gains[b];
    if (pos_of[a] != pos_of[b]) return pos_of[a] < pos_of[b];
    return a < b;
  });
  // expected / seconds after taking the first j positions; the first maximum (fewest drafts).
  const double rows = static_cast<double>(num_rows);
  double taken = 0.0;
  size_t best = 0;
  double best_value = (rows + taken) / std::max(cost.seconds(num_rows, num_rows, num_kv_tokens), 1e-12);
  for (size_t j = 1; j <= total; ++j) {
    taken = taken + gains[order[j - 1]];
    double value = (rows + taken) /
                   std::max(cost.seconds(num_rows, num_rows + static_cast<int64_t>(j), num_kv_tokens), 1e-12);
    if (value > best_value) {
      best_value = value;
      best = j;
    }
  }
  for (size_t j = 0; j < best; ++j) ++out[row_of[order[j]]];
}

}  // namespace specdec
