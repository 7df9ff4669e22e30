// Kernels whose output is one of their inputs (an arena that plans an
// elementwise op in place) compute what they compute out of place.
#include <cstring>
#include <memory>

#include "backend/cpu/tensor_kernels/tensor_kernel.h"
#include "elementwise_reduce_test_util.h"
#include "graph/tensor_op.h"

namespace kiln {
namespace elementwise_in_place_tests {

using test::F32;
using test::OpCall;

// Runs c with output 0 written over input `alias` (a copy of it).
std::vector<float> RunInPlace(const OpCall& c, size_t alias) {
  ShapeContext ctx;
  ctx.op_type = c.op;
  ctx.node = c.node;
  ctx.attrs = &c.attrs;
  ctx.opset = c.opset;
  for (const auto& in : c.inputs) ctx.inputs.push_back(TensorOpInput{&in->type(), &*in});
  auto shapes = InferTensorOp(ctx);
  EXPECT_TRUE(shapes.ok()) << shapes.status().message();
  cpu::TensorKernelArgs args;
  args.op_type = c.op;
  args.node = c.node;
  args.attrs = &c.attrs;
  args.opset = c.opset;
  args.outputs = shapes->outputs;
  for (const auto& in : c.inputs) {
    args.inputs.push_back(in->type());
    args.present.push_back(true);
    args.constants.push_back(nullptr);
  }
  auto kernel = cpu::MakeTensorKernel(args);
  EXPECT_TRUE(kernel.ok()) << kernel.status().message();
  std::vector<float> shared(c.inputs[alias]->type().ElementCount());
  std::memcpy(shared.data(), c.inputs[alias]->data(), c.inputs[alias]->bytes());
  std::vector<const void*> ins;
  for (size_t i = 0; i < c.inputs.size(); ++i)
    ins.push_back(i == alias ? static_cast<const void*>(shared.data()) : c.inputs[i]->data());
  void* outs[1] = {shared.data()};
  std::unique_ptr<uint8_t[]> scratch(new uint8_t[kernel->scratch_bytes + 64]);
  cpu::TensorCall call;
  call.inputs = ins.data();
  call.outputs = outs;
  call.scratch = scratch.get();
  EXPECT_TRUE(kernel->run(call).ok());
  return shared;
}

TEST(InPlace, OutputOverAnInputGivesTheSameResult) {
  const std::vector<float> x = {0.5f, -1.0f, 2.0f, 3.5f, -0.25f, 1.0f};
  const std::vector<float> y = {1.0f, 2.0f, -3.0f, 0.5f, 4.0f, -2.0f};
  std::vector<std::pair<OpCall, size_t>> cases = {
      {{"Add", {F32({2, 3}, x), F32({2, 3}, y)}}, 1},
      {{"Sum", {F32({3}, {1, 2, 3}), F32({2, 3}, y), F32({2, 3}, x)}}, 1},
      {{"Max", {F32({2, 3}, x), F32({2, 3}, y)}}, 1},
      {{"Mean", {F32({1}, {2}), F32({2, 3}, y)}}, 1},
      {{"Sigmoid", {F32({2, 3}, x)}}, 0},
      {{"Softmax", {F32({2, 3}, x)}}, 0},
      {{"LogSoftmax", {F32({2, 3}, x)}}, 0},
      {{"LayerNormalization", {F32({2, 3}, x), F32({3}, {1, 2, 3})}}, 0},
      {{"CumSum", {F32({2, 3}, x), test::I64({}, {1})}}, 0},
      {{"Where", {test::Bool({3}, {1, 0, 1}), F32({2, 3}, x), F32({2, 3}, y)}}, 2},
  };
  OpCall softmax_axis0{"Softmax", {F32({2, 3}, x)}};
  softmax_axis0.attrs.SetInt("axis", 0);
  cases.push_back({softmax_axis0, 0});
  OpCall exclusive{"CumSum", {F32({2, 3}, x), test::I64({}, {1})}};
  exclusive.attrs.SetInt("exclusive", 1);
  cases.push_back({exclusive, 0});
  for (const auto& [c, alias] : cases) {
    SCOPED_TRACE(c.op);
    EXPECT_EQ(RunInPlace(c, alias), test::Values<float>(test::Run1(c)));
  }
}

}  // namespace elementwise_in_place_tests
}  // namespace kiln
