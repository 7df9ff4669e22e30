// Matching and checking the C API's tensors against an ONNX model's
// inputs and outputs.
#include "capi/onnx_tensor_binding.h"

#include <cstdint>
#include <string>

#include <fmt/format.h>

#include "capi/c_boundary.h"

namespace kiln::capi {
namespace {

// Ranks beyond this are a caller's mistake (an uninitialized field), not a
// tensor: refused before `dims` is read.
constexpr size_t kMaxRank = 64;

struct DTypePair {
  kiln_dtype c;
  DType kiln;
};

constexpr DTypePair kDTypes[] = {
    {KILN_DTYPE_F32, DType::kF32},   {KILN_DTYPE_F16, DType::kF16}, {KILN_DTYPE_BF16, DType::kBF16},
    {KILN_DTYPE_F64, DType::kF64},   {KILN_DTYPE_I64, DType::kI64}, {KILN_DTYPE_I32, DType::kI32},
    {KILN_DTYPE_I16, DType::kI16},   {KILN_DTYPE_I8, DType::kI8},   {KILN_DTYPE_U8, DType::kU8},
    {KILN_DTYPE_BOOL, DType::kBool},
};

std::string SlotNames(const std::vector<OnnxTensorInfo>& slots) {
  std::string names;
  for (const OnnxTensorInfo& s : slots) names += (names.empty() ? "" : ", ") + s.name;
  return names;
}

// The dims of `t` (named `label` in messages), checked: a readable array of
// non-negative sizes whose byte count does not overflow.
Expected<std::vector<int64_t>> DimsOf(const kiln_tensor& t, const std::string& label) {
  if (t.rank > kMaxRank) return InvalidArgument("{}: rank {} beyond {}", label, t.rank, kMaxRank);
  if (t.rank > 0 && t.dims == nullptr)
    return InvalidArgument("{}: dims is NULL but rank is {}", label, t.rank);
  std::vector<int64_t> dims(t.dims, t.dims + t.rank);
  for (size_t d = 0; d < dims.size(); ++d) {
    if (dims[d] < 0) return InvalidArgument("{}: dims[{}] is {}", label, d, dims[d]);
  }
  return dims;
}

// Bytes of a tensor of these dims and dtype, or an error when they overflow.
Expected<uint64_t> BytesOf(DType dtype, const std::vector<int64_t>& dims, const std::string& label) {
  uint64_t bytes = ElementBytes(dtype);
  for (int64_t d : dims) {
    if (__builtin_mul_overflow(bytes, static_cast<uint64_t>(d), &bytes)) {
      return OutOfRange("{}: [{}] is too large to address", label, DimsToString(dims));
    }
  }
  return bytes;
}

}  // namespace

Expected<DType> FromCDType(const kiln_dtype& dtype, const char* what) {
  const int raw = RawEnum(dtype);
  for (const DTypePair& p : kDTypes) {
    if (static_cast<int>(p.c) == raw) return p.kiln;
  }
  return InvalidArgument("{}: dtype {} is not a kiln_dtype", what, raw);
}

std::optional<kiln_dtype> ToCDType(DType dtype) {
  for (const DTypePair& p : kDTypes) {
    if (p.kiln == dtype) return p.c;
  }
  return std::nullopt;
}

Expected<std::vector<TensorRef>> BindTensors(const kiln_tensor* tensors, size_t count,
                                             const std::vector<OnnxTensorInfo>& slots, const char* what,
                                             BufferUse use) {
  if (tensors == nullptr && count > 0)
    return InvalidArgument("{}s is NULL but num_{}s is {}", what, what, count);
  if (count != slots.size()) {
    return InvalidArgument("the model has {} {}s ({}); {} given", slots.size(), what, SlotNames(slots),
                           count);
  }
  std::vector<TensorRef> bound(slots.size());
  std::vector<bool> given(slots.size(), false);
  for (size_t i = 0; i < count; ++i) {
    const kiln_tensor& t = tensors[i];
    size_t slot = i;
    if (t.name != nullptr) {
      slot = slots.size();
      for (size_t s = 0; s < slots.size(); ++s) {
        if (slots[s].name == t.name) slot = s;
      }
      if (slot == slots.size()) {
        return InvalidArgument("{}s[{}]: the model has no {} named \"{}\" (its {}s: {})", what, i, what,
                               t.name, what, SlotNames(slots));
      }
    }
    const OnnxTensorInfo& info = slots[slot];
    const std::string label = fmt::format("{}s[{}] ({})", what, i, info.name);
    if (given[slot]) return InvalidArgument("{}: given twice", label);
    given[slot] = true;
    KILN_ASSIGN_OR_RETURN(bound[slot], CheckedTensor(t, label, use));
    if (bound[slot].type.dtype != info.dtype) {
      return InvalidArgument("{}: dtype {} given, the model's is {}", label,
                             DTypeName(bound[slot].type.dtype), DTypeName(info.dtype));
    }
  }
  return bound;
}

Expected<TensorRef> CheckedTensor(const kiln_tensor& t, const std::string& label, BufferUse use) {
  KILN_ASSIGN_OR_RETURN(DType dtype, FromCDType(t.dtype, label.c_str()));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> dims, DimsOf(t, label));
  KILN_ASSIGN_OR_RETURN(uint64_t bytes, BytesOf(dtype, dims, label));
  if (use != BufferUse::kTypesOnly) {
    if (t.data == nullptr) return InvalidArgument("{}: data is NULL", label);
    if (t.size_bytes < bytes) {
      return OutOfRange("{}: size_bytes is {}; {}[{}] needs {}", label, t.size_bytes, DTypeName(dtype),
                        DimsToString(dims), bytes);
    }
  }
  return TensorRef{TensorType{dtype, std::move(dims)}, t.data};
}

Status CheckNoOverlap(const std::vector<TensorRef>& inputs, const std::vector<TensorRef>& outputs,
                      const std::vector<OnnxTensorInfo>& input_info,
                      const std::vector<OnnxTensorInfo>& output_info) {
  auto overlap = [](const TensorRef& a, const TensorRef& b) {
    const auto a0 = reinterpret_cast<uintptr_t>(a.data), b0 = reinterpret_cast<uintptr_t>(b.data);
    const size_t an = a.type.Bytes(), bn = b.type.Bytes();
    return an > 0 && bn > 0 && a0 < b0 + bn && b0 < a0 + an;
  };
  for (size_t j = 0; j < outputs.size(); ++j) {
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (overlap(outputs[j], inputs[i])) {
        return InvalidArgument("output {}'s buffer overlaps input {}'s", output_info[j].name,
                               input_info[i].name);
      }
    }
    for (size_t k = 0; k < j; ++k) {
      if (overlap(outputs[j], outputs[k])) {
        return InvalidArgument("output {}'s buffer overlaps output {}'s", output_info[j].name,
                               output_info[k].name);
      }
    }
  }
  return Status::Ok();
}

}  // namespace kiln::capi
