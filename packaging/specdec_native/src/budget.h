// The batch budget (the reference: tests/oracles/budget.py), with the same floating-point
// operations in the same order, so both allocate identical drafts.
#pragma once
#include <cstdint>
#include <vector>

namespace specdec {

// t = fixed + per_seq * rows + per_token * tokens + per_kv_token * KV tokens
//     + per_draft_kv_token * the context of each row that drafts (seconds).
struct StepCost {  // specdec.step_cost.StepCost's coefficients
  double fixed_s;
  double per_seq_s;
  double per_token_s;
  double per_kv_token_s;
  double per_draft_kv_token_s;

  double seconds(int64_t num_seqs, int64_t num_tokens, int64_t num_kv_tokens, int64_t num_draft_kv_tokens) const {
    return fixed_s + per_seq_s * static_cast<double>(num_seqs) + per_token_s * static_cast<double>(num_tokens) +
           per_kv_token_s * static_cast<double>(num_kv_tokens) +
           per_draft_kv_token_s * static_cast<double>(num_draft_kv_tokens);
  }
};

// Per row, the acceptance probability its first draft token needs to pay for itself and
// for `lookup_s`, its lookup; `contexts[i]` is the context row i holds in the KV cache.
void first_draft_thresholds(const StepCost& cost, const std::vector<int64_t>& contexts, double lookup_s,
                            std::vector<double>& out);

// Draft length per row maximising the step's expected tokens per second. Row i's gains are
// the next num_draft_tokens[i] of `gains` (non-increasing), its context contexts[i];
// `order` is scratch space.
void allocate_drafts(const std::vector<int64_t>& num_draft_tokens, const std::vector<double>& gains,
                     const std::vector<int64_t>& contexts, const StepCost& cost, std::vector<int64_t>& out,
                     std::vector<uint32_t>& order);

}  // namespace specdec
