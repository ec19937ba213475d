// Per-request adaptive K (the reference: specdec/policy.py), decision for decision.
#pragma once
#include <algorithm>
#include <cstdint>

namespace specdec {

struct PolicyConfig {
  bool adaptive = false;
  int k_init = 4;  // already resolved (k_init or min(4, k_max))
  int window = 4;
  double raise_above = 0.8;
  double lower_below = 0.5;
  int max_consecutive_rejects = 3;
  int reprobe_after = 8;
};

struct KState {
  int k = 0;
  int64_t window_drafted = 0;
  int64_t window_accepted = 0;
  int window_steps = 0;
  int consecutive_rejects = 0;
  int paused_steps_left = 0;
};

class AdaptiveK {
 public:
  AdaptiveK(const PolicyConfig& cfg, int k_max) : cfg_(cfg), k_max_(k_max) {}

  KState new_state() const {
    KState s;
    s.k = cfg_.adaptive ? cfg_.k_init : k_max_;
    return s;
  }

  // K to draft this step; 0 while paused (counts the pause down).
  int next_k(KState& s) const {
    if (s.paused_steps_left > 0) {
      if (--s.paused_steps_left == 0) s.k = 1;  // re-probe cautiously
      return 0;
    }
    return s.k;
  }

  void observe(KState& s, int64_t num_drafted, int64_t num_accepted) const {
    if (num_drafted == 0 || !cfg_.adaptive) return;
    s.consecutive_rejects = num_accepted == 0 ? s.consecutive_rejects + 1 : 0;
    if (s.consecutive_rejects >= cfg_.max_consecutive_rejects) {
      s.paused_steps_left = cfg_.reprobe_after;
      s.consecutive_rejects = 0;
      reset_window(s);
      return;
    }
    s.window_drafted += num_drafted;
    s.window_accepted += num_accepted;
    s.window_steps += 1;
    if (s.window_steps < cfg_.window) return;
    double rate = static_cast<double>(s.window_accepted) / static_cast<double>(s.window_drafted);
    if (rate > cfg_.raise_above) {
      s.k = std::min(s.k + 1, k_max_);
    } else if (rate < cfg_.lower_below) {
      s.k = std::max(s.k - 1, 1);
    }
    reset_window(s);
  }

 private:
  static void reset_window(KState& s) { s.window_drafted = s.window_accepted = s.window_steps = 0; }

  PolicyConfig cfg_;
  int k_max_;
};

}  // namespace specdec
