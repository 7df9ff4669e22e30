// Which binder each op takes.
#include <array>

#include "backend/cpu/binders/binder.h"

namespace kiln::cpu {
namespace {

std::array<Binder, kNumOpKinds> MakeTable() {
  std::array<Binder, kNumOpKinds> t{};
  auto set = [&t](OpKind op, Binder b) { t[static_cast<size_t>(op)] = b; };
  set(OpKind::kEmbedding, BindEmbedding);
  set(OpKind::kRmsNorm, BindRmsNorm);
  set(OpKind::kAddRmsNorm, BindAddRmsNorm);
  set(OpKind::kLinear, BindLinear);
  set(OpKind::kGateUpSiluMul, BindLinear);
  set(OpKind::kRope, BindRope);
  set(OpKind::kKvWrite, BindKvWrite);
  set(OpKind::kAttention, BindAttention);
  set(OpKind::kSilu, BindUnary);
  set(OpKind::kGelu, BindUnary);
  set(OpKind::kSoftmax, BindUnary);
  set(OpKind::kSoftcap, BindUnary);
  set(OpKind::kSiluMul, BindBinary);
  set(OpKind::kGeluMul, BindBinary);
  set(OpKind::kAdd, BindBinary);
  set(OpKind::kMul, BindBinary);
  set(OpKind::kSelectRows, BindSelectRows);
  set(OpKind::kGatherKv, BindGatherKv);
  set(OpKind::kAttnScores, BindAttnScores);
  set(OpKind::kMaskedSoftmax, BindMaskedSoftmax);
  set(OpKind::kAttnValues, BindAttnValues);
  set(OpKind::kCast, BindCast);
  set(OpKind::kTransfer, BindTransfer);
  set(OpKind::kMoe, BindMoe);
  set(OpKind::kAllReduceSum, BindAllReduceSum);
  set(OpKind::kTensorOp, BindTensorOp);
  return t;
}

}  // namespace

Binder BinderFor(OpKind op) {
  static const std::array<Binder, kNumOpKinds> table = MakeTable();
  const auto i = static_cast<size_t>(op);
  return i < table.size() ? table[i] : nullptr;
}

}  // namespace kiln::cpu
