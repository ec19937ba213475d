// Clean decode steps' shapes (see step_shapes.h).
#include "step_shapes.h"

#include <string_view>
#include <unordered_map>

namespace specdec {

bool StepShapes::started(const std::vector<std::string>& present, bool all_decoding, double now, StepShape& out) {
  bool had_end = has_end_;
  has_end_ = false;
  if (!had_end || !all_decoding || present.empty()) return false;
  int64_t tokens = 0, kv = 0, draft_kv = 0;
  if (present == ids_) {  // the usual step: the same rows in the same order
    for (size_t i = 0; i < ids_.size(); ++i) {
      tokens += 1 + drafts_[i];
      kv += contexts_[i];
      if (drafts_[i] > 0) draft_kv += contexts_[i];
    }
  } else {
    std::unordered_map<std::string_view, size_t> index;
    index.reserve(ids_.size());
    for (size_t i = 0; i < ids_.size(); ++i) index.emplace(ids_[i], i);
    for (const std::string& id : present) {
      auto it = index.find(id);
      if (it == index.end()) return false;  // new since the previous call
      tokens += 1 + drafts_[it->second];
      kv += contexts_[it->second];
      if (drafts_[it->second] > 0) draft_kv += contexts_[it->second];
    }
  }
  out = StepShape{static_cast<int64_t>(present.size()), tokens, kv, draft_kv, now - last_end_};
  return true;
}

void StepShapes::finished(const std::vector<std::string>& ids, const std::vector<int64_t>& drafts,
                          const std::vector<int64_t>& contexts, double now) {
  ids_ = ids;  // copy-assigned: the strings' buffers are reused step after step
  drafts_ = drafts;
  contexts_ = contexts;
  has_end_ = true;
  last_end_ = now;
}

void StepShapes::forget() {
  ids_.clear();
  drafts_.clear();
  contexts_.clear();
  has_end_ = false;
}

}  // namespace specdec
