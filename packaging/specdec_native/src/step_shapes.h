// The shape of each clean decode step, for the batch budget's step timer (the reference:
// tests/oracles/step_shapes.py): the time from the end of one proposer call to
// the start of the next is one forward over the rows and drafts the first call handed out.
// A step is clean when every row decodes and each was a decoding row of the previous call.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace specdec {

struct StepShape {
  int64_t num_seqs = 0;
  int64_t num_tokens = 0;     // rows + their draft tokens
  int64_t num_kv_tokens = 0;  // context the rows held before the forward
  int64_t num_draft_kv_tokens = 0;  // the context of each row that drafted
  double seconds = 0.0;
};

class StepShapes {
 public:
  // Start of a call at `now` (monotonic seconds) with `present` rows: the step that just
  // ran, when it was clean.
  bool started(const std::vector<std::string>& present, bool all_decoding, double now, StepShape& out);
  // End of a call: its decoding rows, their draft lengths and KV-cache contexts.
  void finished(const std::vector<std::string>& ids, const std::vector<int64_t>& drafts,
                const std::vector<int64_t>& contexts, double now);
  void forget();  // the batch emptied: the next step is no clean sample
  size_t num_rows() const { return ids_.size(); }

 private:
  std::vector<std::string> ids_;
  std::vector<int64_t> drafts_, contexts_;
  bool has_end_ = false;
  double last_end_ = 0.0;
};

}  // namespace specdec
