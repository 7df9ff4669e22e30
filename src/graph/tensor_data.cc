// Compile-time tensors.
#include "graph/tensor_data.h"

#include <cstring>

#include "core/half.h"

namespace kiln {

TensorData::TensorData(TensorType type, std::shared_ptr<const std::string> bytes)
    : type_(std::move(type)) {
  if (bytes != nullptr) {
    const auto* data = reinterpret_cast<const uint8_t*>(bytes->data());
    const size_t size = bytes->size();
    bytes_ = SharedBytes(std::move(bytes), data, size);
  }
}

TensorData TensorData::Zeros(TensorType type) {
  auto bytes = std::make_shared<std::string>(type.Bytes(), '\0');
  return TensorData(std::move(type), std::move(bytes));
}

namespace {

template <typename T, typename Out>
void Widen(const uint8_t* p, int64_t n, std::vector<Out>* out) {
  out->resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    T v;
    std::memcpy(&v, p + i * static_cast<int64_t>(sizeof(T)), sizeof(T));
    (*out)[static_cast<size_t>(i)] = static_cast<Out>(v);
  }
}

}  // namespace

Expected<std::vector<int64_t>> TensorData::ToInt64s() const {
  std::vector<int64_t> out;
  const int64_t n = type_.ElementCount();
  switch (type_.dtype) {
    case DType::kI64: Widen<int64_t>(data(), n, &out); break;
    case DType::kI32: Widen<int32_t>(data(), n, &out); break;
    case DType::kI16: Widen<int16_t>(data(), n, &out); break;
    case DType::kI8: Widen<int8_t>(data(), n, &out); break;
    case DType::kU8:
    case DType::kBool: Widen<uint8_t>(data(), n, &out); break;
    default: return InvalidArgument("expected an integer tensor, got {}", type_.ToString());
  }
  return out;
}

Expected<std::vector<double>> TensorData::ToDoubles() const {
  std::vector<double> out;
  const int64_t n = type_.ElementCount();
  switch (type_.dtype) {
    case DType::kF32: Widen<float>(data(), n, &out); break;
    case DType::kF64: Widen<double>(data(), n, &out); break;
    case DType::kF16:
    case DType::kBF16: {
      out.resize(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, data() + 2 * i, 2);
        out[static_cast<size_t>(i)] = type_.dtype == DType::kF16 ? F16ToF32(h) : Bf16ToF32(h);
      }
      break;
    }
    default: {
      KILN_ASSIGN_OR_RETURN(auto ints, ToInt64s());
      out.assign(ints.begin(), ints.end());
    }
  }
  return out;
}

}  // namespace kiln
