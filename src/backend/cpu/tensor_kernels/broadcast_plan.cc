// Broadcast plans: drop, merge, then split into outer rows and one inner run.
#include "backend/cpu/tensor_kernels/broadcast_plan.h"

namespace kiln::cpu {

BroadcastPlan MakeBroadcastPlan(const std::vector<int64_t>& out,
                                const std::vector<std::vector<int64_t>>& inputs) {
  const size_t rank = out.size();
  const size_t n = inputs.size();
  // Per input, per output dim: the element stride (0 where it repeats).
  std::vector<std::vector<int64_t>> strides(n, std::vector<int64_t>(rank, 0));
  for (size_t k = 0; k < n; ++k) {
    const auto& d = inputs[k];
    int64_t stride = 1;
    for (size_t j = 0; j < d.size() && j < rank; ++j) {
      const size_t in_axis = d.size() - 1 - j;
      const size_t out_axis = rank - 1 - j;
      strides[k][out_axis] = d[in_axis] == 1 ? 0 : stride;
      stride *= d[in_axis];
    }
  }
  // Keep dims of size > 1, merging a dim into the one before it when every
  // input walks the pair as one.
  std::vector<int64_t> dims;
  std::vector<std::vector<int64_t>> merged(n);
  for (size_t i = 0; i < rank; ++i) {
    if (out[i] == 1) continue;
    bool mergeable = !dims.empty();
    for (size_t k = 0; k < n && mergeable; ++k) {
      mergeable = merged[k].back() == strides[k][i] * out[i];
    }
    if (mergeable) {
      dims.back() *= out[i];
      for (size_t k = 0; k < n; ++k) merged[k].back() = strides[k][i];
    } else {
      dims.push_back(out[i]);
      for (size_t k = 0; k < n; ++k) merged[k].push_back(strides[k][i]);
    }
  }
  BroadcastPlan plan;
  plan.step.assign(n, 0);
  plan.outer_stride.resize(n);
  if (dims.empty()) {                      // one element
    for (int64_t d : out) plan.rows *= d;  // 0 when some dim is 0
    plan.rows = plan.rows == 0 ? 0 : 1;
    return plan;
  }
  plan.inner = dims.back();
  for (size_t k = 0; k < n; ++k) plan.step[k] = merged[k].back();
  dims.pop_back();
  for (size_t k = 0; k < n; ++k) {
    merged[k].pop_back();
    plan.outer_stride[k] = merged[k];
  }
  plan.outer = dims;
  for (int64_t d : dims) plan.rows *= d;
  for (int64_t d : out) {
    if (d == 0) plan.rows = 0;
  }
  return plan;
}

BroadcastCursor::BroadcastCursor(const BroadcastPlan& plan, int64_t row)
    : plan_(plan), index_(plan.outer.size(), 0), offsets_(plan.step.size(), 0) {
  if (plan.rows == 0) return;  // an empty tensor: no rows to walk (and a zero dimension to divide by)
  for (size_t d = plan.outer.size(); d-- > 0;) {
    index_[d] = row % plan.outer[d];
    row /= plan.outer[d];
    for (size_t k = 0; k < offsets_.size(); ++k) offsets_[k] += index_[d] * plan.outer_stride[k][d];
  }
}

void BroadcastCursor::Next() {
  for (size_t d = plan_.outer.size(); d-- > 0;) {
    ++index_[d];
    for (size_t k = 0; k < offsets_.size(); ++k) offsets_[k] += plan_.outer_stride[k][d];
    if (index_[d] < plan_.outer[d]) return;
    for (size_t k = 0; k < offsets_.size(); ++k) offsets_[k] -= index_[d] * plan_.outer_stride[k][d];
    index_[d] = 0;
  }
}

}  // namespace kiln::cpu
