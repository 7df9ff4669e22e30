// Parameters of the shape family's kernels.
#include "backend/cpu/tensor_kernels/shape_kernel_params.h"

namespace kiln::cpu::shape_kernels {

using namespace ::kiln::shape_ops;  // the parameters these kernels share with shape inference

KernelParams::KernelParams(const TensorKernelArgs& args)
    : op_type_(args.op_type),
      node_(args.node),
      attrs_(*args.attrs),
      inputs_(args.inputs),
      present_(args.present) {
  for (size_t i = 0; i < inputs_.size(); ++i) {
    const TensorData* c = i < args.constants.size() ? args.constants[i] : nullptr;
    // The constant outlives the kernel (it is the graph's), but its data
    // is also passed to run(), so only the bind-time reads use it.
    constants_.push_back(c != nullptr && !c->empty() ? c->data() : nullptr);
  }
}

OpParamSource KernelParams::AtBind() const {
  OpParamSource src;
  src.op_type = op_type_;
  src.node = node_;
  src.attrs = &attrs_;
  for (size_t i = 0; i < inputs_.size(); ++i) {
    const bool has = i < present_.size() && present_[i];
    src.types.push_back(has ? &inputs_[i] : nullptr);
    src.values.push_back(has ? constants_[i] : nullptr);
  }
  return src;
}

OpParamSource KernelParams::AtRun(const void* const* inputs) const {
  OpParamSource src = AtBind();
  for (size_t i = 0; i < inputs_.size(); ++i) {
    if (src.types[i] != nullptr) src.values[i] = inputs[i];
  }
  return src;
}

bool KernelParams::Known(std::initializer_list<size_t> which) const {
  for (size_t i : which) {
    const bool has = i < present_.size() && present_[i];
    if (has && constants_[i] == nullptr) return false;
  }
  return true;
}

Expected<size_t> MovableElementBytes(DType dtype) {
  if (IsQuantized(dtype)) return Unsupported("dtype {} is not supported", DTypeName(dtype));
  const size_t n = ElementBytes(dtype);
  if (n != 1 && n != 2 && n != 4 && n != 8) return Unsupported("dtype {} is not supported", DTypeName(dtype));
  return n;
}

const std::vector<DType>& MovableDTypes() {
  static const std::vector<DType> all = {DType::kF32, DType::kF16, DType::kBF16, DType::kF64, DType::kI64,
                                         DType::kI32, DType::kI16, DType::kI8,   DType::kU8,  DType::kBool};
  return all;
}

}  // namespace kiln::cpu::shape_kernels
