// Conv and kiln.FusedConv: kiln's vector paths (per ISA, 1 and 2 threads),
// oneDNN and the default choice against the direct reference, over strides,
// pads, dilations, groups, auto_pad and odd sizes; the reference against
// hand-computed values; the errors.
#include <gtest/gtest.h>

#include "backend/cpu/kernels/isa.h"
#include "backend/cpu/tensor_kernels/conv2d_plan.h"
#include "backend/cpu/tensor_kernels/conv_onednn.h"
#include "backend/cpu/tensor_kernels/conv_reference.h"
#include "backend/cpu/tensor_kernels/conv_window.h"
#include "backend/cpu/tensor_kernels/tensor_kernel.h"
#include "core/thread_pool.h"
#include "graph/tensor_ops/conv_geometry.h"
#include "unit/tensor_ops/conv_test_util.h"

namespace kiln {
namespace conv_conv_tests {

using conv_test::ExpectClose;
using conv_test::RandomTensor;

struct ConvCase {
  const char* name;
  int64_t c, m, group;
  std::vector<int64_t> in, kernel;
  std::vector<int64_t> strides, dilations, pads;  // empty: the default
  const char* auto_pad = nullptr;
  bool bias = true;
  int64_t batch = 1;
};

AttributeMap AttrsOf(const ConvCase& c) {
  AttributeMap a;
  if (c.group != 1) a.SetInt("group", c.group);
  if (!c.strides.empty()) a.SetInts("strides", c.strides);
  if (!c.dilations.empty()) a.SetInts("dilations", c.dilations);
  if (!c.pads.empty()) a.SetInts("pads", c.pads);
  if (c.auto_pad != nullptr) a.SetString("auto_pad", c.auto_pad);
  return a;
}

std::vector<ConvCase> Cases() {
  return {
      {"1x1", 16, 24, 1, {9, 7}, {1, 1}},
      {"1x1_many_channels_odd_pixels", 67, 45, 1, {5, 11}, {1, 1}, {}, {}, {}, nullptr, false},
      {"1x1_stride2", 8, 16, 1, {9, 9}, {1, 1}, {2, 2}},
      // Enough pixels that whole panels are read from the input in place.
      {"1x1_in_place_many_pixels", 5, 7, 1, {41, 39}, {1, 1}},
      {"grouped_1x1_in_place", 8, 12, 4, {20, 21}, {1, 1}},
      {"3x3_pad1", 8, 16, 1, {12, 13}, {3, 3}, {}, {}, {1, 1, 1, 1}},
      {"3x3_stride2_pad1", 12, 20, 1, {15, 16}, {3, 3}, {2, 2}, {}, {1, 1, 1, 1}},
      // Rows wide enough for the vector deinterleave of stride 2 (both ISAs).
      {"3x3_stride2_wide_rows", 3, 5, 1, {12, 75}, {3, 3}, {2, 2}, {}, {1, 1, 1, 1}},
      {"5x5_stride2_wide_rows_no_pad", 2, 4, 1, {9, 70}, {5, 5}, {2, 2}},
      {"3x3_asymmetric_pads", 5, 7, 1, {8, 6}, {3, 3}, {}, {}, {0, 2, 1, 0}},
      {"3x3_dilation2", 6, 9, 1, {11, 10}, {3, 3}, {}, {2, 2}, {2, 2, 2, 2}},
      {"5x3_strides_2_1", 4, 10, 1, {13, 9}, {5, 3}, {2, 1}, {}, {2, 1, 2, 1}},
      {"7x7_stride2_pad3", 3, 16, 1, {32, 30}, {7, 7}, {2, 2}, {}, {3, 3, 3, 3}},
      {"same_upper_stride2", 6, 8, 1, {10, 9}, {3, 3}, {2, 2}, {}, {}, "SAME_UPPER"},
      {"same_lower_even_kernel", 6, 8, 1, {7, 8}, {4, 2}, {}, {}, {}, "SAME_LOWER"},
      {"valid", 6, 8, 1, {7, 8}, {3, 2}, {}, {}, {}, "VALID"},
      {"grouped", 8, 12, 4, {9, 10}, {3, 3}, {}, {}, {1, 1, 1, 1}},
      {"grouped_1x1", 12, 24, 3, {6, 5}, {1, 1}},
      {"depthwise_3x3", 16, 16, 16, {14, 15}, {3, 3}, {}, {}, {1, 1, 1, 1}},
      {"depthwise_3x3_stride2", 10, 10, 10, {17, 16}, {3, 3}, {2, 2}, {}, {1, 1, 1, 1}},
      {"depthwise_stride2_odd_width_no_pad", 3, 3, 3, {9, 11}, {3, 3}, {2, 2}},
      {"depthwise_stride3", 4, 4, 4, {10, 13}, {3, 3}, {3, 3}, {}, {1, 2, 1, 0}},
      {"depthwise_5x5_dilation2", 4, 4, 4, {13, 11}, {5, 5}, {}, {2, 2}, {4, 4, 4, 4}, nullptr, false},
      {"depthwise_multiplier2", 4, 8, 4, {9, 9}, {3, 3}, {}, {}, {1, 1, 1, 1}},
      {"batch2", 5, 6, 1, {6, 7}, {3, 3}, {}, {}, {1, 1, 1, 1}, nullptr, true, 2},
      {"depthwise_batch2", 6, 6, 6, {5, 7}, {3, 3}, {2, 1}, {}, {1, 0, 1, 2}, nullptr, true, 2},
      {"conv1d", 6, 10, 1, {20}, {3}, {2}, {}, {1, 1}},
      {"conv1d_depthwise_dilated", 8, 8, 8, {25}, {3}, {}, {3}, {3, 3}},
      {"kernel_covers_input", 3, 5, 1, {3, 4}, {3, 4}},
      {"wide_k_blocks", 300, 10, 1, {6, 6}, {1, 1}},
      {"deep_k_3x3", 40, 33, 1, {7, 7}, {3, 3}, {}, {}, {1, 1, 1, 1}},
      // K = 1080: two K blocks, so tiles accumulate through the output.
      {"two_k_blocks", 120, 14, 1, {5, 6}, {3, 3}, {}, {}, {1, 1, 1, 1}},
      {"two_k_blocks_many_pixels", 130, 7, 1, {15, 16}, {3, 3}, {}, {}, {1, 1, 1, 1}, nullptr, true},
      // AVX2's direct path: tiles wholly inside a row (rows of 40), several
      // channel blocks with partial sums, many tiles per thread, stride 3,
      // dilation with stride 2, a small image split over m panels, a 1x1
      // with stride 2, and weights too big for one tile per chunk.
      {"direct_wide_rows_channel_blocks", 70, 13, 1, {9, 40}, {3, 3}, {}, {}, {1, 1, 1, 1}},
      {"direct_stride3_wide", 5, 7, 1, {11, 50}, {3, 3}, {3, 3}, {}, {1, 1, 1, 1}},
      {"direct_dilated_stride2", 9, 11, 1, {17, 33}, {3, 3}, {2, 2}, {}, {2, 2, 2, 2}},
      {"direct_small_image_many_channels", 200, 40, 1, {7, 7}, {3, 3}, {}, {}, {1, 1, 1, 1}},
      {"direct_1x1_stride2_many_channels", 600, 9, 1, {7, 9}, {1, 1}, {2, 2}},
      {"direct_big_weights_chunks", 160, 200, 1, {12, 13}, {3, 3}, {}, {}, {1, 1, 1, 1}},
      {"direct_stem_7x7_stride2", 3, 8, 1, {40, 38}, {7, 7}, {2, 2}, {}, {3, 3, 3, 3}, nullptr, true, 2},
  };
}

struct Inputs {
  TensorData x, w;
  std::optional<TensorData> bias;
  std::vector<int64_t> x_dims, w_dims;
};

Inputs MakeInputs(const ConvCase& c, uint32_t seed) {
  Inputs in;
  in.x_dims = {c.batch, c.c};
  in.x_dims.insert(in.x_dims.end(), c.in.begin(), c.in.end());
  in.w_dims = {c.m, c.c / c.group};
  in.w_dims.insert(in.w_dims.end(), c.kernel.begin(), c.kernel.end());
  in.x = RandomTensor(in.x_dims, seed);
  in.w = RandomTensor(in.w_dims, seed + 1);
  if (c.bias) in.bias = RandomTensor({c.m}, seed + 2);
  return in;
}

std::vector<float> Reference(const ConvCase& c, const Inputs& in, const FusedEpilogue& e = {},
                             const float* residual = nullptr) {
  auto g = ConvGeometry("Conv", "ref", AttrsOf(c), in.x_dims, in.w_dims);
  EXPECT_TRUE(g.ok()) << g.status().message();
  std::vector<float> y(static_cast<size_t>(conv_test::Count(g->OutputDims())));
  cpu::ReferenceConv(cpu::ToWindow3(*g), in.x.As<float>(), in.w.As<float>(),
                     in.bias ? in.bias->As<float>() : nullptr, residual, e, y.data());
  return y;
}

std::vector<float> RunOp(const ConvCase& c, const Inputs& in, const char* impl, ThreadPool* pool) {
  conv_test::ScopedConvImpl scoped(impl);
  cpu::TensorOpRun run;
  run.op_type = "Conv";
  run.attrs = AttrsOf(c);
  run.inputs = {in.x, in.w};
  if (in.bias) run.inputs.push_back(*in.bias);
  run.inputs_are_constants = true;
  run.pool = pool;
  auto out = cpu::RunTensorOp(run);
  EXPECT_TRUE(out.ok()) << out.status().message();
  if (!out.ok()) return {};
  const float* y = (*out)[0].As<float>();
  return std::vector<float>(y, y + (*out)[0].type().ElementCount());
}

TEST(Conv, ReferenceMatchesHandComputedValues) {
  // ONNX's documented example: 5x5 ramp, 3x3 ones, pads 1.
  std::vector<float> x(25);
  for (int i = 0; i < 25; ++i) x[static_cast<size_t>(i)] = static_cast<float>(i);
  cpu::TensorOpRun run;
  run.op_type = "Conv";
  run.attrs.SetInts("pads", {1, 1, 1, 1});
  run.inputs = {conv_test::Floats({1, 1, 5, 5}, x),
                conv_test::Floats({1, 1, 3, 3}, std::vector<float>(9, 1.0f))};
  conv_test::ScopedConvImpl scoped("reference");
  auto out = cpu::RunTensorOp(run);
  ASSERT_TRUE(out.ok()) << out.status().message();
  const std::vector<float> expected = {12,  21, 27, 33,  24,  33,  54,  63, 72,  51,  63,  99, 108,
                                       117, 81, 93, 144, 153, 162, 111, 72, 111, 117, 123, 84};
  ASSERT_EQ((*out)[0].type().dims, (std::vector<int64_t>{1, 1, 5, 5}));
  for (size_t i = 0; i < expected.size(); ++i) EXPECT_EQ((*out)[0].As<float>()[i], expected[i]) << i;
}

TEST(Conv, EveryPathMatchesTheReference) {
  ThreadPool pool(2);
  uint32_t seed = 1;
  for (const ConvCase& c : Cases()) {
    SCOPED_TRACE(c.name);
    const Inputs in = MakeInputs(c, seed += 3);
    const std::vector<float> expected = Reference(c, in);
    for (const char* impl : {"kiln", "onednn", "onednn-blocked", static_cast<const char*>(nullptr)}) {
      for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
        const std::vector<float> got = RunOp(c, in, impl, p);
        ASSERT_EQ(got.size(), expected.size());
        ExpectClose(
            got.data(), expected.data(), static_cast<int64_t>(got.size()), 1e-5f,
            std::string(impl != nullptr ? impl : "default") + (p != nullptr ? " 2 threads" : " 1 thread"));
      }
    }
  }
}

// Each ISA's plan directly (the default path runs only the best one), so
// that the AVX2 code is checked on AVX-512 machines too.
TEST(Conv, EachIsaPlanMatchesTheReference) {
  ThreadPool pool(2);
  uint32_t seed = 100;
  for (cpu::Isa isa : {cpu::Isa::kAvx2, cpu::Isa::kAvx512}) {
    if (!cpu::IsaAvailable(isa)) continue;
    for (const ConvCase& c : Cases()) {
      SCOPED_TRACE(std::string(c.name) + " " + cpu::IsaName(isa));
      const Inputs in = MakeInputs(c, seed += 3);
      auto geometry = ConvGeometry("Conv", "n", AttrsOf(c), in.x_dims, in.w_dims);
      ASSERT_TRUE(geometry.ok());
      const cpu::Window3 g = cpu::ToWindow3(*geometry);
      ASSERT_TRUE(cpu::ConvPlanApplies(g, isa));
      FusedEpilogue e;
      e.activation = FusedActivation::kSilu;
      const std::vector<float> residual =
          conv_test::RandomFloats(conv_test::Count(geometry->OutputDims()), seed);
      for (const float* res : {static_cast<const float*>(nullptr), residual.data()}) {
        const std::vector<float> expected = Reference(c, in, e, res);
        const cpu::ConvPlan plan =
            cpu::MakeConvPlan(g, e, in.w.As<float>(), in.bias ? in.bias->As<float>() : nullptr, isa, 2);
        for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
          std::vector<float> scratch(static_cast<size_t>(plan.ScratchFloats(2) + 1));
          std::vector<float> y(expected.size(), -7.0f);
          cpu::RunConvPlan(plan, in.x.As<float>(), res, y.data(), scratch.data(), p);
          ExpectClose(y.data(), expected.data(), static_cast<int64_t>(y.size()), 1e-5f, "plan");
        }
      }
    }
  }
}

TEST(FusedConv, EveryActivationAndResidualPlacementMatchesTheReference) {
  const ConvCase c = {"fused", 8, 20, 1, {9, 11}, {3, 3}, {}, {}, {1, 1, 1, 1}};
  const ConvCase dw = {"fused_dw", 8, 8, 8, {9, 11}, {3, 3}, {}, {}, {1, 1, 1, 1}};
  struct Act {
    const char* name;
    std::optional<double> alpha, beta;
  };
  const std::vector<Act> acts = {
      {"Relu"},      {"LeakyRelu", 0.1}, {"Clip", -0.5, 0.6}, {"HardSigmoid"}, {"HardSigmoid", 0.3, 0.4},
      {"HardSwish"}, {"Silu"},           {"Sigmoid"},         {"Tanh"}};
  ThreadPool pool(2);
  for (const ConvCase* cc : {&c, &dw}) {
    const Inputs in = MakeInputs(*cc, 7);
    auto geometry = ConvGeometry("Conv", "n", AttrsOf(*cc), in.x_dims, in.w_dims);
    ASSERT_TRUE(geometry.ok());
    const TensorData residual = RandomTensor(geometry->OutputDims(), 9);
    for (const Act& act : acts) {
      for (int with_residual = 0; with_residual < 2; ++with_residual) {
        for (int before = 0; before < 2; ++before) {
          AttributeMap attrs = AttrsOf(*cc);
          attrs.SetString("activation", act.name);
          if (act.alpha) attrs.SetFloat("activation_alpha", *act.alpha);
          if (act.beta) attrs.SetFloat("activation_beta", *act.beta);
          attrs.SetInt("residual_before_activation", before);
          auto e = ParseFusedEpilogue("kiln.FusedConv", "n", attrs);
          ASSERT_TRUE(e.ok());
          const std::vector<float> expected =
              Reference(*cc, in, *e, with_residual ? residual.As<float>() : nullptr);
          for (const char* impl : {"kiln", "onednn", "onednn-blocked", "reference"}) {
            SCOPED_TRACE(std::string(cc->name) + " " + act.name + " " + impl +
                         (with_residual ? " residual" : "") + (before ? " before" : " after"));
            conv_test::ScopedConvImpl scoped(impl);
            cpu::TensorOpRun run;
            run.op_type = "kiln.FusedConv";
            run.attrs = attrs;
            run.inputs = {in.x, in.w, *in.bias};
            if (with_residual) run.inputs.push_back(residual);
            run.inputs_are_constants = true;
            run.pool = &pool;
            auto out = cpu::RunTensorOp(run);
            ASSERT_TRUE(out.ok()) << out.status().message();
            ExpectClose((*out)[0].As<float>(), expected.data(), static_cast<int64_t>(expected.size()), 2e-5f,
                        "fused");
          }
        }
      }
    }
  }
}

TEST(FusedConv, NamedParametersMatchOnnxDefinitions) {
  FusedEpilogue e;
  e.activation = FusedActivation::kHardSigmoid;
  e.alpha = 0.2f;
  e.beta = 0.5f;
  EXPECT_FLOAT_EQ(ApplyFusedActivation(e, 1.0f), 0.7f);
  EXPECT_FLOAT_EQ(ApplyFusedActivation(e, 10.0f), 1.0f);
  e.activation = FusedActivation::kHardSwish;
  EXPECT_FLOAT_EQ(ApplyFusedActivation(e, 1.0f), 1.0f * (1.0f / 6.0f + 0.5f));
  EXPECT_FLOAT_EQ(ApplyFusedActivation(e, -4.0f), 0.0f);
  e.activation = FusedActivation::kSilu;
  EXPECT_NEAR(ApplyFusedActivation(e, 2.0f), 2.0f / (1.0f + std::exp(-2.0f)), 1e-7f);
  AttributeMap attrs;
  attrs.SetString("activation", "LeakyRelu");
  auto parsed = ParseFusedEpilogue("kiln.FusedConv", "n", attrs);
  ASSERT_TRUE(parsed.ok());
  EXPECT_FLOAT_EQ(parsed->alpha, 0.01f);
}

// A 3-d convolution runs on the reference loops.
TEST(Conv, ThreeDimensionalRunsTheReference) {
  const ConvCase c = {"conv3d", 3, 4, 1, {4, 5, 6}, {3, 3, 3}, {}, {}, {1, 1, 1, 1, 1, 1}};
  const Inputs in = MakeInputs(c, 21);
  const std::vector<float> expected = Reference(c, in);
  const std::vector<float> got = RunOp(c, in, nullptr, nullptr);
  ASSERT_EQ(got.size(), expected.size());
  ExpectClose(got.data(), expected.data(), static_cast<int64_t>(got.size()), 1e-6f, "3-d");
}

// Weights computed at run time (not constants) still run, on the reference.
TEST(Conv, RunTimeWeightsRunTheReference) {
  const ConvCase c = {"runtime_w", 4, 6, 2, {7, 7}, {3, 3}, {2, 2}, {}, {1, 1, 1, 1}};
  const Inputs in = MakeInputs(c, 31);
  cpu::TensorOpRun run;
  run.op_type = "Conv";
  run.attrs = AttrsOf(c);
  run.inputs = {in.x, in.w, *in.bias};
  auto out = cpu::RunTensorOp(run);
  ASSERT_TRUE(out.ok()) << out.status().message();
  const std::vector<float> expected = Reference(c, in);
  ExpectClose((*out)[0].As<float>(), expected.data(), static_cast<int64_t>(expected.size()), 1e-6f,
              "runtime");
}

Status RunConvStatus(const std::vector<int64_t>& x, const std::vector<int64_t>& w, AttributeMap attrs,
                     const char* op = "Conv", std::optional<TensorData> extra = std::nullopt) {
  cpu::TensorOpRun run;
  run.op_type = op;
  run.node = "conv7";
  run.attrs = std::move(attrs);
  run.inputs = {RandomTensor(x, 1), RandomTensor(w, 2)};
  if (extra) {
    run.inputs.push_back(RandomTensor({w[0]}, 3));
    run.inputs.push_back(*extra);
  }
  auto out = cpu::RunTensorOp(run);
  return out.ok() ? Status::Ok() : out.status();
}

void ExpectError(const Status& s, const std::string& part) {
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find(part), std::string::npos) << s.message();
}

TEST(Conv, BadShapesAndAttributesGiveClearErrors) {
  ExpectError(RunConvStatus({1, 3, 8, 8}, {4, 4, 3, 3}, {}),
              "Conv conv7: input channels 3 != weight's 4 x group 1");
  AttributeMap grouped;
  grouped.SetInt("group", 2);
  ExpectError(RunConvStatus({1, 6, 8, 8}, {4, 2, 3, 3}, grouped), "input channels 6 != weight's 2 x group 2");
  ExpectError(RunConvStatus({1, 3, 2, 8}, {4, 3, 3, 3}, {}), "larger than the padded input");
  AttributeMap bad_pad;
  bad_pad.SetString("auto_pad", "SAME");
  ExpectError(RunConvStatus({1, 3, 8, 8}, {4, 3, 3, 3}, bad_pad), "auto_pad 'SAME'");
  AttributeMap short_strides;
  short_strides.SetInts("strides", {2});
  ExpectError(RunConvStatus({1, 3, 8, 8}, {4, 3, 3, 3}, short_strides), "strides has 1 values");
  ExpectError(RunConvStatus({1, 3, 8, 8}, {4, 3, 3}, {}), "differ in rank");
  AttributeMap act;
  act.SetString("activation", "Gelu");
  ExpectError(RunConvStatus({1, 3, 8, 8}, {4, 3, 3, 3}, act, "kiln.FusedConv"),
              "kiln.FusedConv conv7: activation 'Gelu'");
  ExpectError(RunConvStatus({1, 3, 8, 8}, {4, 3, 3, 3}, {}, "kiln.FusedConv", RandomTensor({1, 4, 5, 5}, 4)),
              "residual f32[1,4,5,5] is not the output's f32[1,4,6,6]");
}

TEST(Conv, F16IsRefusedByTheKernelWithAClearError) {
  cpu::TensorOpRun run;
  run.op_type = "Conv";
  run.node = "half";
  run.inputs = {TensorData::Zeros({DType::kF16, {1, 1, 3, 3}}),
                TensorData::Zeros({DType::kF16, {1, 1, 1, 1}})};
  auto out = cpu::RunTensorOp(run);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("Conv half"), std::string::npos) << out.status().message();
  EXPECT_NE(out.status().message().find("f16"), std::string::npos) << out.status().message();
}

}  // namespace conv_conv_tests
}  // namespace kiln

namespace kiln {
namespace conv_conv_tests {

std::string ImplFor(const char* forced, const std::vector<int64_t>& x, const std::vector<int64_t>& w,
                    int64_t group) {
  conv_test::ScopedConvImpl scoped(forced);
  AttributeMap attrs;
  attrs.SetInt("group", group);
  attrs.SetInts("pads", {1, 1, 1, 1});
  const TensorData wd = RandomTensor(w, 5);
  auto g = ConvGeometry("Conv", "n", attrs, x, w);
  EXPECT_TRUE(g.ok());
  cpu::TensorKernelArgs args;
  args.op_type = "Conv";
  args.node = "n";
  args.attrs = &attrs;
  args.inputs = {TensorType{DType::kF32, x}, wd.type()};
  args.present = {true, true};
  args.constants = {nullptr, &wd};
  args.outputs = {TensorType{DType::kF32, g->OutputDims()}};
  args.num_threads = 2;
  auto k = cpu::MakeTensorKernel(args);
  EXPECT_TRUE(k.ok()) << k.status().message();
  return k.ok() ? k->impl : "";
}

TEST(Conv, ForcedImplementationsAreTheOnesThatRun) {
  if (!cpu::IsaAvailable(cpu::Isa::kAvx2)) GTEST_SKIP() << "no vector ISA";
  EXPECT_EQ(ImplFor("reference", {1, 8, 9, 9}, {8, 8, 3, 3}, 1), "reference");
  EXPECT_EQ(ImplFor("kiln", {1, 8, 9, 9}, {8, 8, 3, 3}, 1).rfind("kiln-", 0), 0u);
  EXPECT_NE(ImplFor("kiln", {1, 8, 9, 9}, {8, 8, 3, 3}, 1).find("-gemm"), std::string::npos);
  EXPECT_NE(ImplFor("kiln", {1, 8, 9, 9}, {8, 1, 3, 3}, 8).find("-depthwise"), std::string::npos);
  EXPECT_EQ(ImplFor("onednn", {1, 8, 9, 9}, {8, 8, 3, 3}, 1).rfind("onednn:", 0), 0u);
  const std::string blocked = ImplFor("onednn-blocked", {1, 8, 9, 9}, {8, 8, 3, 3}, 1);
  EXPECT_EQ(blocked.rfind("onednn:", 0), 0u);
  EXPECT_NE(blocked.find("-blocked"), std::string::npos);
}

TEST(Conv, RowMajorAvx2TakesOneDnnBlockedForWindowsLargerThanOneByOne) {
  auto geometry = [](std::vector<int64_t> x, std::vector<int64_t> w, int64_t group) {
    AttributeMap attrs;
    attrs.SetInt("group", group);
    const int64_t pad = w[2] / 2;
    attrs.SetInts("pads", {pad, pad, pad, pad});
    auto g = ConvGeometry("Conv", "n", attrs, x, w);
    EXPECT_TRUE(g.ok());
    return cpu::ToWindow3(*g);
  };
  using cpu::Isa;
  // A YOLO 3x3 (59 MFLOP) and a small 3x3 stem: oneDNN on AVX2 only.
  EXPECT_TRUE(cpu::PreferOneDnnBlockedOnRowMajor(geometry({1, 64, 40, 40}, {128, 64, 3, 3}, 1), Isa::kAvx2));
  EXPECT_TRUE(cpu::PreferOneDnnBlockedOnRowMajor(geometry({1, 3, 64, 64}, {16, 3, 3, 3}, 1), Isa::kAvx2));
  EXPECT_FALSE(cpu::PreferOneDnnBlockedOnRowMajor(geometry({1, 64, 40, 40}, {128, 64, 3, 3}, 1), Isa::kAvx512));
  // 1x1 layers stay on kiln's GEMM, depthwise on its own loop, tiny layers too.
  EXPECT_FALSE(cpu::PreferOneDnnBlockedOnRowMajor(geometry({1, 64, 40, 40}, {128, 64, 1, 1}, 1), Isa::kAvx2));
  EXPECT_FALSE(cpu::PreferOneDnnBlockedOnRowMajor(geometry({1, 64, 40, 40}, {64, 1, 3, 3}, 64), Isa::kAvx2));
  EXPECT_FALSE(cpu::PreferOneDnnBlockedOnRowMajor(geometry({1, 8, 9, 9}, {8, 8, 3, 3}, 1), Isa::kAvx2));
  if (cpu::BestIsa() == Isa::kAvx2) {
    const std::string impl = ImplFor(nullptr, {1, 64, 40, 40}, {128, 64, 3, 3}, 1);
    EXPECT_EQ(impl.rfind("onednn:", 0), 0u) << impl;
    EXPECT_NE(impl.find("-blocked"), std::string::npos) << impl;
  }
}

}  // namespace conv_conv_tests
}  // namespace kiln

namespace kiln {
namespace conv_conv_tests {

// NCHW <-> the layout named (n, c, h, w index the logical tensor).
std::vector<float> ToLayout(const float* nchw, int64_t n, int64_t c, int64_t hw, const std::string& layout,
                            bool inverse) {
  std::vector<float> out(static_cast<size_t>(n * c * hw));
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t ch = 0; ch < c; ++ch) {
      for (int64_t p = 0; p < hw; ++p) {
        const int64_t plain = (i * c + ch) * hw + p;
        const int64_t laid =
            layout == "nhwc" ? (i * hw + p) * c + ch : (((i * (c / 16) + ch / 16) * hw + p) * 16 + ch % 16);
        if (inverse) {
          out[static_cast<size_t>(plain)] = nchw[laid];
        } else {
          out[static_cast<size_t>(laid)] = nchw[plain];
        }
      }
    }
  }
  return out;
}

TEST(FusedConv, BlockedAndChannelsLastActivationsOnOneDnn) {
  if (!cpu::IsaAvailable(cpu::Isa::kAvx2)) GTEST_SKIP() << "no vector ISA";
  const ConvCase c = {"blocked", 16, 32, 1, {9, 10}, {3, 3}, {2, 1}, {}, {1, 1, 1, 1}, nullptr, true, 2};
  const Inputs in = MakeInputs(c, 77);
  auto geometry = ConvGeometry("Conv", "n", AttrsOf(c), in.x_dims, in.w_dims);
  ASSERT_TRUE(geometry.ok());
  const std::vector<int64_t> y_dims = geometry->OutputDims();
  const int64_t y_hw = y_dims[2] * y_dims[3], x_hw = c.in[0] * c.in[1];
  const TensorData residual = RandomTensor(y_dims, 78);
  FusedEpilogue e;
  e.activation = FusedActivation::kSilu;
  const std::vector<float> expected = Reference(c, in, e, residual.As<float>());
  for (const std::string layout : {"nchw16c", "nhwc"}) {
    SCOPED_TRACE(layout);
    cpu::TensorOpRun run;
    run.op_type = "kiln.FusedConv";
    run.attrs = AttrsOf(c);
    run.attrs.SetString("activation", "Silu");
    run.attrs.SetString("activation_layout", layout);
    run.inputs = {
        conv_test::Floats(in.x_dims, ToLayout(in.x.As<float>(), c.batch, c.c, x_hw, layout, false)), in.w,
        *in.bias,
        conv_test::Floats(y_dims, ToLayout(residual.As<float>(), c.batch, c.m, y_hw, layout, false))};
    run.inputs_are_constants = true;
    auto out = cpu::RunTensorOp(run);
    ASSERT_TRUE(out.ok()) << out.status().message();
    const std::vector<float> got = ToLayout((*out)[0].As<float>(), c.batch, c.m, y_hw, layout, true);
    ExpectClose(got.data(), expected.data(), static_cast<int64_t>(expected.size()), 2e-5f, layout);
  }
  // Channels that are not whole blocks need padded buffers, which a tensor
  // run on its own does not have: refused, not overrun (the kernels take
  // them on buffers of the padded size: blocked_layout_conv_test.cc).
  const ConvCase odd = {"odd", 8, 16, 1, {5, 5}, {3, 3}};
  const Inputs odd_in = MakeInputs(odd, 79);
  cpu::TensorOpRun run;
  run.op_type = "Conv";
  run.node = "c9";
  run.attrs.SetString("activation_layout", "nchw16c");
  run.inputs = {odd_in.x, odd_in.w};
  run.inputs_are_constants = true;
  auto out = cpu::RunTensorOp(run);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("Conv c9: nchw16c activations of 8 channels need padded buffers"),
            std::string::npos)
      << out.status().message();
}

}  // namespace conv_conv_tests
}  // namespace kiln
