// kiln.ChannelShuffle (row-major against the shuffle written out; nchw16c
// against row-major) and the channel windows of Slice, Split and Concat on
// nchw16c at offsets that are not a multiple of 16, which move by the lane
// permutes of blocked_channel_gather.h (the AVX-512 kernel against the
// plain loops as well).
#include <gtest/gtest.h>

#include "backend/cpu/tensor_kernels/blocked_channel_gather.h"
#include "backend/cpu/tensor_kernels/channel_shuffle_kernels.h"
#include "unit/tensor_ops/blocked_layout_test_util.h"

namespace kiln {
namespace blocked_channel_gather_tests {

using blocked_test::BlockedCase;
using conv_test::RandomTensor;

BlockedCase ShuffleCase(int64_t groups, const std::vector<std::vector<int64_t>>& parts) {
  BlockedCase bc;
  bc.op = "kiln.ChannelShuffle";
  bc.attrs.SetInt("groups", groups);
  uint32_t seed = 11;
  for (const auto& dims : parts) {
    bc.inputs.push_back(RandomTensor(dims, seed++));
    bc.constant.push_back(false);
  }
  return bc;
}

// Concat along the channels, Reshape [N, g, C/g, H, W], Transpose
// [0, 2, 1, 3, 4], Reshape back, as loops.
std::vector<float> ShuffleByDefinition(const std::vector<TensorData>& parts, int64_t groups) {
  const std::vector<int64_t>& d = parts[0].type().dims;
  const int64_t n = d[0], hw = d[2] * d[3];
  int64_t c = 0;
  for (const TensorData& p : parts) c += p.type().dims[1];
  std::vector<float> joined(static_cast<size_t>(n * c * hw));
  for (int64_t i = 0; i < n; ++i) {
    int64_t at = 0;
    for (const TensorData& p : parts) {
      const int64_t pc = p.type().dims[1];
      for (int64_t k = 0; k < pc * hw; ++k)
        joined[static_cast<size_t>((i * c + at) * hw + k)] = p.As<float>()[(i * pc) * hw + k];
      at += pc;
    }
  }
  std::vector<float> out(joined.size());
  const int64_t per = c / groups;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t g = 0; g < groups; ++g)
      for (int64_t j = 0; j < per; ++j)
        for (int64_t k = 0; k < hw; ++k)
          out[static_cast<size_t>((i * c + j * groups + g) * hw + k)] =
              joined[static_cast<size_t>((i * c + g * per + j) * hw + k)];
  return out;
}

void ExpectShuffle(const BlockedCase& bc, const std::string& what) {
  SCOPED_TRACE(what);
  cpu::TensorOpRun run;
  run.op_type = bc.op;
  run.attrs = bc.attrs;
  for (const TensorData& t : bc.inputs) run.inputs.emplace_back(t);
  auto got = cpu::RunTensorOp(run);
  ASSERT_TRUE(got.ok()) << got.status().message();
  const std::vector<float> want = ShuffleByDefinition(bc.inputs, *bc.attrs.Int("groups"));
  ASSERT_EQ((*got)[0].type().ElementCount(), static_cast<int64_t>(want.size()));
  conv_test::ExpectClose((*got)[0].As<float>(), want.data(), static_cast<int64_t>(want.size()), 0.0f,
                         "row-major");
  blocked_test::ExpectBlockedMatchesRowMajor(bc, what + " nchw16c");
}

TEST(ChannelShuffle, MatchesConcatReshapeTransposeReshape) {
  ExpectShuffle(ShuffleCase(2, {{1, 24, 5, 4}, {1, 24, 5, 4}}), "ShuffleNet stage 2: 24 + 24");
  ExpectShuffle(ShuffleCase(2, {{2, 48, 3, 3}, {2, 48, 3, 3}}), "48 + 48, batch 2");
  ExpectShuffle(ShuffleCase(2, {{1, 20, 2, 3}, {1, 20, 2, 3}}), "20 + 20");
  ExpectShuffle(ShuffleCase(3, {{1, 16, 2, 2}, {1, 8, 2, 2}, {1, 12, 2, 2}}), "3 groups of uneven parts");
  ExpectShuffle(ShuffleCase(4, {{1, 64, 7, 7}}), "one part, 4 groups");
  ExpectShuffle(ShuffleCase(2, {{1, 96, 30, 30}, {1, 96, 30, 30}}), "large enough for two threads");
}

BlockedCase SliceCase(const std::vector<int64_t>& dims, int64_t start, int64_t end) {
  BlockedCase bc;
  bc.op = "Slice";
  auto ints = [](std::vector<int64_t> v) {
    const auto n = static_cast<int64_t>(v.size());
    return TensorData::FromValues<int64_t>(DType::kI64, {n}, std::move(v));
  };
  bc.inputs = {RandomTensor(dims, 5), ints({start}), ints({end}), ints({1}), ints({1})};
  bc.constant = {false, true, true, true, true};
  return bc;
}

TEST(BlockedLayoutSlice, ChannelWindowsAtAnyOffset) {
  blocked_test::ExpectBlockedMatchesRowMajor(SliceCase({1, 48, 5, 4}, 0, 24), "first half of 48");
  blocked_test::ExpectBlockedMatchesRowMajor(SliceCase({1, 48, 5, 4}, 24, 48), "second half of 48");
  blocked_test::ExpectBlockedMatchesRowMajor(SliceCase({2, 96, 3, 3}, 48, 96), "second half of 96");
  blocked_test::ExpectBlockedMatchesRowMajor(SliceCase({1, 40, 2, 3}, 5, 37), "5..37");
  blocked_test::ExpectBlockedMatchesRowMajor(SliceCase({1, 192, 28, 28}, 96, 192), "pooled");
}

TEST(BlockedLayoutSlice, OtherAxesAndStepsStayRowMajor) {
  BlockedCase bc = SliceCase({1, 48, 6, 4}, 0, 3);
  bc.inputs[3] = TensorData::FromValues<int64_t>(DType::kI64, {1}, {2});  // axis 2
  bc.expect_taken = false;
  blocked_test::ExpectBlockedMatchesRowMajor(bc, "height");
  bc = SliceCase({1, 48, 2, 2}, 0, 48);
  bc.inputs[4] = TensorData::FromValues<int64_t>(DType::kI64, {1}, {2});  // step 2
  bc.expect_taken = false;
  blocked_test::ExpectBlockedMatchesRowMajor(bc, "step 2");
}

TEST(BlockedLayoutSplit, UnevenChannelPartsMoveByLanes) {
  auto split = [](const std::vector<int64_t>& dims, const std::vector<int64_t>& sizes) {
    BlockedCase bc;
    bc.op = "Split";
    bc.attrs.SetInt("axis", 1);
    bc.inputs = {RandomTensor(dims, 3),
                 TensorData::FromValues<int64_t>(DType::kI64, {static_cast<int64_t>(sizes.size())}, sizes)};
    bc.constant = {false, true};
    bc.num_outputs = static_cast<int>(sizes.size());
    return bc;
  };
  blocked_test::ExpectBlockedMatchesRowMajor(split({1, 48, 5, 4}, {24, 24}), "48 -> 24+24");
  blocked_test::ExpectBlockedMatchesRowMajor(split({2, 48, 3, 3}, {20, 28}), "48 -> 20+28");
  blocked_test::ExpectBlockedMatchesRowMajor(split({1, 48, 2, 2}, {5, 30, 13}), "48 -> 5+30+13");
}

TEST(BlockedLayoutConcat, UnevenChannelPartsMoveByLanes) {
  BlockedCase bc;
  bc.op = "Concat";
  bc.attrs.SetInt("axis", 1);
  bc.inputs = {RandomTensor({1, 24, 5, 4}, 1), RandomTensor({1, 24, 5, 4}, 2), RandomTensor({1, 7, 5, 4}, 3)};
  bc.constant = {false, false, false};
  blocked_test::ExpectBlockedMatchesRowMajor(bc, "24+24+7");
}

// The AVX-512 kernel against the plain loops on one plan with blocks of
// one, two and several permutes.
TEST(BlockedChannelGather, VectorKernelMatchesPlainLoops) {
  if (!cpu::IsaAvailable(cpu::Isa::kAvx512)) GTEST_SKIP() << "no AVX-512 here";
  const std::vector<int64_t> channels = {24, 40, 13};
  std::vector<cpu::ChannelSource> sources;
  for (int64_t c = 0; c < 70; ++c) {
    const auto in = static_cast<int32_t>((c * 7) % 3);
    sources.push_back({c % 11 == 0 ? -1 : in, (c * 5 + 3) % channels[static_cast<size_t>(in)]});
  }
  const int64_t batch = 2, pixels = 9;
  const cpu::BlockedGatherPlan plan = cpu::PlanBlockedGather(sources, channels, batch, pixels);
  std::vector<std::vector<float>> inputs;
  std::vector<const float*> ptrs;
  for (size_t i = 0; i < channels.size(); ++i) {
    TensorData t = RandomTensor({batch, channels[i], 3, 3}, static_cast<uint32_t>(20 + i));
    inputs.push_back(blocked_test::ToBlocked(t.As<float>(), t.type().dims));
  }
  for (const auto& v : inputs) ptrs.push_back(v.data());
  const auto n = static_cast<size_t>(blocked_test::BlockedCount({batch, 70, 3, 3}));
  std::vector<float> plain(n, -1.0f), vector(n, -2.0f);
  cpu::RunBlockedGather(plan, ptrs.data(), plain.data(), nullptr, cpu::Isa::kScalar);
  cpu::RunBlockedGather(plan, ptrs.data(), vector.data(), nullptr, cpu::Isa::kAvx512);
  EXPECT_EQ(plain, vector);
  const std::vector<float> got = blocked_test::FromBlocked(plain.data(), {batch, 70, 3, 3});
  for (int64_t i = 0; i < batch; ++i)
    for (int64_t c = 0; c < 70; ++c)
      for (int64_t p = 0; p < pixels; ++p) {
        const cpu::ChannelSource& s = sources[static_cast<size_t>(c)];
        const float want =
            s.input < 0 ? 0.0f
                        : blocked_test::FromBlocked(
                              inputs[static_cast<size_t>(s.input)].data(),
                              {batch, channels[static_cast<size_t>(s.input)], 3, 3})[static_cast<size_t>(
                              (i * channels[static_cast<size_t>(s.input)] + s.channel) * pixels + p)];
        ASSERT_EQ(got[static_cast<size_t>((i * 70 + c) * pixels + p)], want)
            << "n " << i << " c " << c << " p " << p;
      }
}

}  // namespace blocked_channel_gather_tests
}  // namespace kiln
