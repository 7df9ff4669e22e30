// The tensor op table and the run-one-op path every kernel test uses.
#include <gtest/gtest.h>

#include "backend/cpu/tensor_kernels/run_tensor_op.h"
#include "backend/cpu/tensor_kernels/tensor_kernel.h"
#include "graph/tensor_op.h"

namespace kiln {
namespace tensor_op_table_tests {

TEST(TensorOpTable, EveryCpuKernelHasAnOpDefinition) {
  for (const cpu::TensorKernelEntry& k : cpu::AllTensorKernels()) {
    EXPECT_NE(FindTensorOp(k.op_type), nullptr) << k.op_type;
  }
  EXPECT_EQ(FindTensorOp("NoSuchOp"), nullptr);
}

TEST(TensorOpTable, ReluRunsThroughInferenceAndItsKernel) {
  cpu::TensorOpRun run;
  run.op_type = "Relu";
  run.inputs.push_back(TensorData::FromValues<float>(DType::kF32, {2, 2}, {-1.0f, 2.0f, 0.0f, -3.5f}));
  auto out = cpu::RunTensorOp(run);
  ASSERT_TRUE(out.ok()) << out.status().message();
  ASSERT_EQ(out->size(), 1u);
  EXPECT_EQ((*out)[0].type(), (TensorType{DType::kF32, {2, 2}}));
  const float* y = (*out)[0].As<float>();
  EXPECT_EQ(y[0], 0.0f);
  EXPECT_EQ(y[1], 2.0f);
  EXPECT_EQ(y[3], 0.0f);
}

TEST(TensorOpTable, WrongInputCountNamesTheNode) {
  cpu::TensorOpRun run;
  run.op_type = "Relu";
  run.node = "act7";
  auto out = cpu::RunTensorOp(run);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("Relu act7"), std::string::npos) << out.status().message();
}

TEST(TensorOpTable, UnknownOpIsUnsupported) {
  cpu::TensorOpRun run;
  run.op_type = "Frobnicate";
  run.inputs.push_back(TensorData::FromValues<float>(DType::kF32, {1}, {1.0f}));
  auto out = cpu::RunTensorOp(run);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("Frobnicate"), std::string::npos);
}

}  // namespace tensor_op_table_tests
}  // namespace kiln
