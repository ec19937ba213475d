// The batch budget (the reference: specdec/budget.py), with the same floating-point
// operations in the same order, so both allocate identical drafts.
#pragma once
#include <cstdint>
#include <vector>

namespace specdec {

// t = fixed + per_seq * rows + per_token * tokens + per_kv_token * KV tokens (seconds).
struct StepCost {
  double fixed_s = 0.0;
  double per_seq_s = 0.0;
  double per_token_s = 0.0;
  double per_kv_token_s = 0.0;

  double seconds(int64_t num_seqs, int64_t num_tokens, int64_t num_kv_tokens) const {
    return fixed_s + per_seq_s * static_cast<double>(num_seqs) + per_token_s * static_cast<double>(num_tokens) +
           per_kv_token_s * static_cast<double>(num_kv_tokens);
  }
};

// The acceptance probability a row's first draft token needs to pay for itself and for
// `lookup_s`, its lookup.
double first_draft_threshold(int64_t num_rows, const StepCost& cost, int64_t num_kv_tokens, double lookup_s);

// Draft length per row maximising the step's expected tokens per second. Row i's gains are
// gains[offsets[i] .. offsets[i] + lengths[i]) (non-increasing); `order` is scratch space.
void allocate_drafts(const std::vector<int64_t>& lengths, const std::vector<double>& gains, const StepCost& cost,
                     int64_t num_kv_tokens, std::vector<int64_t>& out, std::vector<uint32_t>& order);

}  // namespace specdec
