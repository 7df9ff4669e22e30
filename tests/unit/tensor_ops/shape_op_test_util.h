// What the shape family's op tests share: building tensors, running one op
// through cpu::RunTensorOp, reading results back.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "backend/cpu/tensor_kernels/run_tensor_op.h"
#include "graph/tensor_data.h"

namespace kiln::shape_test {

inline TensorData F32(std::vector<int64_t> dims, std::vector<float> v) {
  return TensorData::FromValues<float>(DType::kF32, std::move(dims), v);
}
inline TensorData I64(std::vector<int64_t> dims, std::vector<int64_t> v) {
  return TensorData::FromValues<int64_t>(DType::kI64, std::move(dims), v);
}
inline TensorData I32(std::vector<int64_t> dims, std::vector<int32_t> v) {
  return TensorData::FromValues<int32_t>(DType::kI32, std::move(dims), v);
}
inline TensorData Ints1(std::vector<int64_t> v) {
  const auto n = static_cast<int64_t>(v.size());
  return I64({n}, std::move(v));
}

inline int64_t Count(const std::vector<int64_t>& dims) {
  return std::accumulate(dims.begin(), dims.end(), int64_t{1}, std::multiplies<int64_t>());
}

// 0, 1, 2, ... as f32 of these dims.
inline TensorData Iota(std::vector<int64_t> dims) {
  std::vector<float> v(static_cast<size_t>(Count(dims)));
  std::iota(v.begin(), v.end(), 0.0f);
  return F32(std::move(dims), v);
}

template <typename T>
std::vector<T> Values(const TensorData& t) {
  std::vector<T> v(static_cast<size_t>(t.type().ElementCount()));
  if (!v.empty()) std::memcpy(v.data(), t.data(), v.size() * sizeof(T));
  return v;
}

struct Op {
  cpu::TensorOpRun run;
  explicit Op(std::string op_type, std::string node = "n1") {
    run.op_type = std::move(op_type);
    run.node = std::move(node);
  }
  Op& In(TensorData t) {
    run.inputs.emplace_back(std::move(t));
    return *this;
  }
  Op& Absent() {
    run.inputs.emplace_back(std::nullopt);
    return *this;
  }
  Op& Int(const std::string& n, int64_t v) {
    run.attrs.SetInt(n, v);
    return *this;
  }
  Op& Float(const std::string& n, double v) {
    run.attrs.SetFloat(n, v);
    return *this;
  }
  Op& Str(const std::string& n, std::string v) {
    run.attrs.SetString(n, std::move(v));
    return *this;
  }
  Op& Ints(const std::string& n, std::vector<int64_t> v) {
    run.attrs.SetInts(n, std::move(v));
    return *this;
  }
  Op& Floats(const std::string& n, std::vector<double> v) {
    run.attrs.SetFloats(n, std::move(v));
    return *this;
  }
  Op& Outputs(int n) {
    run.num_outputs = n;
    return *this;
  }
  Op& Opset(int v) {
    run.opset = v;
    return *this;
  }
  Op& Constants(bool c = true) {
    run.inputs_are_constants = c;
    return *this;
  }
  Op& Pool(ThreadPool* p) {
    run.pool = p;
    return *this;
  }
  Expected<std::vector<TensorData>> Try() const { return cpu::RunTensorOp(run); }
  // Runs the op twice, its small inputs once known only at run time and
  // once as constants of the kernel, checks both agree, returns output 0.
  std::vector<TensorData> RunAll() const {
    Op a = *this;
    a.run.inputs_are_constants = false;
    auto ra = a.Try();
    EXPECT_TRUE(ra.ok()) << ra.status().message();
    if (!ra.ok()) return {};
    Op b = *this;
    b.run.inputs_are_constants = true;
    auto rb = b.Try();
    EXPECT_TRUE(rb.ok()) << rb.status().message();
    if (rb.ok()) {
      EXPECT_EQ(ra->size(), rb->size());
      for (size_t i = 0; i < ra->size() && i < rb->size(); ++i) {
        EXPECT_EQ((*ra)[i].type(), (*rb)[i].type());
        EXPECT_EQ(std::memcmp((*ra)[i].data(), (*rb)[i].data(), (*ra)[i].bytes()), 0) << "output " << i;
      }
    }
    return *ra;
  }
  TensorData Run() const {
    auto all = RunAll();
    return all.empty() ? TensorData() : all[0];
  }
  // The error message of a run that must fail.
  std::string Error() const {
    auto r = Try();
    EXPECT_FALSE(r.ok());
    return r.ok() ? std::string() : r.status().message();
  }
};

// Row-major offset of idx in dims.
inline int64_t Offset(const std::vector<int64_t>& dims, const std::vector<int64_t>& idx) {
  int64_t o = 0;
  for (size_t a = 0; a < dims.size(); ++a) o = o * dims[a] + idx[a];
  return o;
}

// Calls f(idx) for every index of dims in row-major order.
template <typename F>
void ForEachIndex(const std::vector<int64_t>& dims, F&& f) {
  const int64_t n = Count(dims);
  std::vector<int64_t> idx(dims.size(), 0);
  for (int64_t i = 0; i < n; ++i) {
    f(idx);
    for (size_t a = dims.size(); a-- > 0;) {
      if (++idx[a] < dims[a]) break;
      idx[a] = 0;
    }
  }
}

}  // namespace kiln::shape_test
