// A tensor known at compile time: a weight (an ONNX initializer), a
// constant, or a value the compiler folded. Immutable and shared, so that
// copying one is cheap.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/shared_bytes.h"
#include "core/status.h"
#include "graph/tensor_type.h"

namespace kiln {

class TensorData {
 public:
  TensorData() = default;
  // `bytes` holds type.Bytes() bytes, row-major, little-endian.
  TensorData(TensorType type, std::shared_ptr<const std::string> bytes);
  // The same over shared bytes: owned, or mapped and used where they lie.
  TensorData(TensorType type, SharedBytes bytes) : type_(std::move(type)), bytes_(std::move(bytes)) {}

  template <typename T>
  static TensorData FromValues(DType dtype, std::vector<int64_t> dims, const std::vector<T>& values) {
    auto bytes = std::make_shared<std::string>(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
    return TensorData(TensorType{dtype, std::move(dims)}, std::move(bytes));
  }
  // A tensor of `type` whose every element is zero.
  static TensorData Zeros(TensorType type);

  const TensorType& type() const { return type_; }
  const uint8_t* data() const { return bytes_.data(); }
  size_t bytes() const { return bytes_.size(); }
  template <typename T>
  const T* As() const {
    return reinterpret_cast<const T*>(bytes_.data());
  }
  bool empty() const { return !bytes_.held(); }
  const SharedBytes& shared_bytes() const { return bytes_; }

  // The elements as int64 (an int64, int32, int16, int8, uint8 or bool
  // tensor: shapes, axes, indices); an error names the dtype otherwise.
  Expected<std::vector<int64_t>> ToInt64s() const;
  // The elements as double (any plain dtype).
  Expected<std::vector<double>> ToDoubles() const;

 private:
  TensorType type_;
  SharedBytes bytes_;
};

}  // namespace kiln
