// Helpers of the elementwise and reduce op tests: building tensors,
// running one op through cpu::RunTensorOp, reading results.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "backend/cpu/tensor_kernels/run_tensor_op.h"

namespace kiln::test {

inline TensorData F32(std::vector<int64_t> dims, const std::vector<float>& v) {
  return TensorData::FromValues<float>(DType::kF32, std::move(dims), v);
}
inline TensorData F64(std::vector<int64_t> dims, const std::vector<double>& v) {
  return TensorData::FromValues<double>(DType::kF64, std::move(dims), v);
}
inline TensorData I64(std::vector<int64_t> dims, const std::vector<int64_t>& v) {
  return TensorData::FromValues<int64_t>(DType::kI64, std::move(dims), v);
}
inline TensorData I32(std::vector<int64_t> dims, const std::vector<int32_t>& v) {
  return TensorData::FromValues<int32_t>(DType::kI32, std::move(dims), v);
}
inline TensorData Bool(std::vector<int64_t> dims, const std::vector<uint8_t>& v) {
  return TensorData::FromValues<uint8_t>(DType::kBool, std::move(dims), v);
}
inline TensorData U8(std::vector<int64_t> dims, const std::vector<uint8_t>& v) {
  return TensorData::FromValues<uint8_t>(DType::kU8, std::move(dims), v);
}

struct OpCall {
  std::string op;
  std::vector<std::optional<TensorData>> inputs;
  AttributeMap attrs;
  int opset = 17;
  int num_outputs = 1;
  std::string node = "n1";
  ThreadPool* pool = nullptr;
};

inline Expected<std::vector<TensorData>> Run(const OpCall& c) {
  cpu::TensorOpRun run;
  run.op_type = c.op;
  run.node = c.node;
  run.inputs = c.inputs;
  run.attrs = c.attrs;
  run.opset = c.opset;
  run.num_outputs = c.num_outputs;
  run.pool = c.pool;
  return cpu::RunTensorOp(run);
}

// Output 0 of a call that must succeed.
inline TensorData Run1(const OpCall& c) {
  auto out = Run(c);
  EXPECT_TRUE(out.ok()) << c.op << ": " << out.status().message();
  if (!out.ok()) return TensorData();
  return (*out)[0];
}

template <typename T>
std::vector<T> Values(const TensorData& t) {
  if (t.empty()) return {};
  const T* p = t.As<T>();
  return std::vector<T>(p, p + t.type().ElementCount());
}

// Expects the error to name the op and the node and to contain `what`.
inline void ExpectError(const OpCall& c, const std::string& what) {
  auto out = Run(c);
  ASSERT_FALSE(out.ok()) << c.op << " should fail";
  const std::string msg = out.status().message();
  EXPECT_NE(msg.find(c.op + " " + c.node), std::string::npos) << msg;
  EXPECT_NE(msg.find(what), std::string::npos) << msg;
}

inline void ExpectNear(const std::vector<float>& got, const std::vector<double>& want, double rel = 1e-5,
                       double abs = 1e-6) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << "element " << i;
      continue;
    }
    EXPECT_NEAR(got[i], want[i], abs + rel * std::abs(want[i])) << "element " << i;
  }
}

}  // namespace kiln::test
