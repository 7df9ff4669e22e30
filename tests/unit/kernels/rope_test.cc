// RoPE: the tables against the scaling formulas (and against torch running
// transformers' recipes when it is installed), and the rotation in both pair
// styles against a plain loop.
#include "backend/cpu/kernels/rope.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "kernel_test_util.h"
#include "testing/test_paths.h"

namespace kiln::cpu {
namespace rope_tests {

using testing::AllIsas;
using testing::ContextFor;
using testing::RandomFloats;

RopeTable BuildOk(int64_t head_dim, int64_t rotary_dim, double theta, const RopeScaling& scaling,
                  int64_t max_positions) {
  auto table = RopeTable::Build(head_dim, rotary_dim, theta, scaling, max_positions);
  EXPECT_TRUE(table.ok()) << table.status().ToString();
  return std::move(table).value();
}

// theta^(-2i/d) in double.
double DefaultInvFreq(double theta, int64_t i, int64_t dim) {
  return std::pow(theta, -static_cast<double>(2 * i) / static_cast<double>(dim));
}

TEST(RopeTable, DefaultFrequenciesAndAngles) {
  RopeTable table = BuildOk(64, 64, 10000.0, RopeScaling{}, 100);
  ASSERT_EQ(table.inv_freq().size(), 32u);
  EXPECT_EQ(table.attention_scaling(), 1.0f);
  for (int64_t i = 0; i < 32; ++i) {
    EXPECT_NEAR(table.inv_freq()[static_cast<size_t>(i)], DefaultInvFreq(10000.0, i, 64),
                2e-7 * DefaultInvFreq(10000.0, i, 64));
  }
  for (int64_t pos : {0, 1, 7, 99}) {
    for (int64_t i = 0; i < 32; ++i) {
      // cos of the fp32 angle, as transformers computes it.
      const float angle = static_cast<float>(pos) * table.inv_freq()[static_cast<size_t>(i)];
      EXPECT_FLOAT_EQ(table.cos()[pos * 32 + i], static_cast<float>(std::cos(static_cast<double>(angle))));
      EXPECT_FLOAT_EQ(table.sin()[pos * 32 + i], static_cast<float>(std::sin(static_cast<double>(angle))));
    }
  }
}

TEST(RopeTable, LinearScalingDividesEveryFrequency) {
  RopeScaling linear;
  linear.type = RopeScalingType::kLinear;
  linear.factor = 4.0;
  RopeTable plain = BuildOk(32, 32, 10000.0, RopeScaling{}, 8);
  RopeTable scaled = BuildOk(32, 32, 10000.0, linear, 8);
  for (size_t i = 0; i < plain.inv_freq().size(); ++i)
    EXPECT_EQ(scaled.inv_freq()[i], plain.inv_freq()[i] / 4.0f);
}

TEST(RopeTable, Llama3ScalingKeepsHighFrequenciesAndDividesLowOnes) {
  RopeScaling llama3;
  llama3.type = RopeScalingType::kLlama3;
  llama3.factor = 8.0;
  llama3.low_freq_factor = 1.0;
  llama3.high_freq_factor = 4.0;
  llama3.original_max_position_embeddings = 8192;
  const double theta = 500000.0;
  RopeTable plain = BuildOk(128, 128, theta, RopeScaling{}, 4);
  RopeTable scaled = BuildOk(128, 128, theta, llama3, 4);
  int kept = 0, divided = 0, blended = 0;
  for (size_t i = 0; i < plain.inv_freq().size(); ++i) {
    const double inv = plain.inv_freq()[i];
    const double wavelen = 2 * M_PI / inv;
    const double got = scaled.inv_freq()[i];
    if (wavelen < 8192.0 / 4.0) {
      EXPECT_EQ(got, inv) << i;
      ++kept;
    } else if (wavelen > 8192.0 / 1.0) {
      EXPECT_NEAR(got, inv / 8.0, 1e-6 * inv) << i;
      ++divided;
    } else {
      const double smooth = (8192.0 / wavelen - 1.0) / (4.0 - 1.0);
      EXPECT_NEAR(got, (1 - smooth) * inv / 8.0 + smooth * inv, 1e-6 * inv) << i;
      ++blended;
    }
  }
  EXPECT_GT(kept, 0);
  EXPECT_GT(divided, 0);
  EXPECT_GT(blended, 0);
}

TEST(RopeTable, YarnBlendsByDimensionAndScalesByMscale) {
  RopeScaling yarn;
  yarn.type = RopeScalingType::kYarn;
  yarn.factor = 4.0;
  yarn.original_max_position_embeddings = 32768;
  const double theta = 1000000.0;
  const int64_t dim = 128;
  RopeTable table = BuildOk(dim, dim, theta, yarn, 16);
  const double mscale = 0.1 * std::log(4.0) + 1.0;
  EXPECT_FLOAT_EQ(table.attention_scaling(), static_cast<float>(mscale));
  // The ramp between the correction dims of 32 and 1 rotations.
  auto correction_dim = [&](double rotations) {
    return dim * std::log(32768.0 / (rotations * 2 * M_PI)) / (2 * std::log(theta));
  };
  const double low = std::max(std::floor(correction_dim(32.0)), 0.0);
  const double high = std::min(std::ceil(correction_dim(1.0)), static_cast<double>(dim - 1));
  for (int64_t i = 0; i < dim / 2; ++i) {
    const double ramp = std::clamp((i - low) / (high - low), 0.0, 1.0);
    const double extrapolation = 1 - ramp;
    const double inv = DefaultInvFreq(theta, i, dim);
    const double want = inv / 4.0 * (1 - extrapolation) + inv * extrapolation;
    EXPECT_NEAR(table.inv_freq()[static_cast<size_t>(i)], want, 1e-6 * want) << i;
  }
  const float angle = 5.0f * table.inv_freq()[3];
  EXPECT_FLOAT_EQ(table.cos()[5 * 64 + 3],
                  static_cast<float>(std::cos(static_cast<double>(angle))) * static_cast<float>(mscale));
  yarn.attention_factor = 1.5;
  EXPECT_FLOAT_EQ(BuildOk(dim, dim, theta, yarn, 2).attention_scaling(), 1.5f);
}

// longrope: each frequency divided by its own factor, the long ones only
// for a context beyond the trained one; cos and sin times the attention
// factor either way.
TEST(RopeTable, LongRopeChoosesFactorsByContext) {
  RopeScaling longrope;
  longrope.type = RopeScalingType::kLongRope;
  longrope.original_max_position_embeddings = 64;
  longrope.factor = 4.0;  // a model of 256 positions
  longrope.short_factor = {1.0, 1.5, 2.0};
  longrope.long_factor = {2.0, 4.0, 8.0};
  const double attention = std::sqrt(1 + std::log(4.0) / std::log(64.0));
  // Rotary dims 6 of a 16-wide head: 3 frequencies.
  RopeTable trained = BuildOk(16, 6, 10000.0, longrope, 64);
  RopeTable extended = BuildOk(16, 6, 10000.0, longrope, 65);
  EXPECT_FLOAT_EQ(trained.attention_scaling(), static_cast<float>(attention));
  EXPECT_FLOAT_EQ(extended.attention_scaling(), static_cast<float>(attention));
  for (size_t i = 0; i < 3; ++i) {
    const double inv = DefaultInvFreq(10000.0, static_cast<int64_t>(i), 6);
    EXPECT_NEAR(trained.inv_freq()[i], inv / longrope.short_factor[i], 1e-6 * inv) << i;
    EXPECT_NEAR(extended.inv_freq()[i], inv / longrope.long_factor[i], 1e-6 * inv) << i;
  }
  const float angle = 9.0f * extended.inv_freq()[2];
  EXPECT_FLOAT_EQ(extended.cos()[9 * 3 + 2],
                  static_cast<float>(std::cos(static_cast<double>(angle))) * static_cast<float>(attention));
  longrope.attention_factor = 1.25;
  EXPECT_FLOAT_EQ(BuildOk(16, 6, 10000.0, longrope, 8).attention_scaling(), 1.25f);
  longrope.long_factor.pop_back();  // one factor per frequency
  EXPECT_FALSE(RopeTable::Build(16, 6, 10000.0, longrope, 8).ok());
}

TEST(RopeTable, PartialRotaryUsesRotaryDimForFrequencies) {
  RopeTable table = BuildOk(64, 32, 10000.0, RopeScaling{}, 4);
  ASSERT_EQ(table.inv_freq().size(), 16u);
  EXPECT_NEAR(table.inv_freq()[1], DefaultInvFreq(10000.0, 1, 32), 1e-7);
}

TEST(RopeTable, RejectsBadArguments) {
  EXPECT_FALSE(RopeTable::Build(64, 63, 10000.0, RopeScaling{}, 4).ok());
  EXPECT_FALSE(RopeTable::Build(64, 128, 10000.0, RopeScaling{}, 4).ok());
  EXPECT_FALSE(RopeTable::Build(64, 64, 0.0, RopeScaling{}, 4).ok());
  EXPECT_FALSE(RopeTable::Build(64, 64, 10000.0, RopeScaling{}, 0).ok());
  EXPECT_FALSE(RopeTable::Build(64, 64, 10000.0, RopeScaling{}, int64_t{1} << 40).ok());
  RopeScaling bad;
  bad.type = RopeScalingType::kLinear;
  bad.factor = 0.0;
  EXPECT_FALSE(RopeTable::Build(64, 64, 10000.0, bad, 4).ok());
  bad.type = RopeScalingType::kLlama3;
  bad.factor = 8.0;
  bad.low_freq_factor = 4.0;
  bad.high_freq_factor = 1.0;
  EXPECT_FALSE(RopeTable::Build(64, 64, 10000.0, bad, 4).ok());
}

// transformers' inv_freq recipes run in torch (float32, as it does them),
// printed as exact hex floats, against ours.
TEST(RopeTable, MatchesTorchRunningTransformersRecipes) {
  const char* python = "/usr/bin/python3";
  if (std::system((std::string(python) + " -c 'import torch' > /dev/null 2>&1").c_str()) != 0) {
    GTEST_SKIP() << "python3 with torch not available";
  }
  const std::string dir = kiln::testing::MakeTempDir();
  const std::string script = dir + "/inv_freq.py";
  std::ofstream(script) << R"PY(
import math, torch
def default(base, dim):
    return 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).to(dtype=torch.float) / dim))
def llama3(base, dim, factor, low, high, old):
    inv = default(base, dim)
    low_wl = old / low
    high_wl = old / high
    wavelen = 2 * math.pi / inv
    inv_l = torch.where(wavelen > low_wl, inv / factor, inv)
    smooth = (old / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * inv_l / factor + smooth * inv_l
    medium = ~(wavelen < high_wl) * ~(wavelen > low_wl)
    return torch.where(medium, smoothed, inv_l)
def yarn(base, dim, factor, orig, beta_fast=32, beta_slow=1):
    def cdim(n):
        return (dim * math.log(orig / (n * 2 * math.pi))) / (2 * math.log(base))
    low = max(math.floor(cdim(beta_fast)), 0)
    high = min(math.ceil(cdim(beta_slow)), dim - 1)
    if low == high:
        high += 0.001
    ramp = torch.clamp((torch.arange(dim // 2, dtype=torch.float32) - low) / (high - low), 0, 1)
    pos = base ** (torch.arange(0, dim, 2).to(dtype=torch.float) / dim)
    extra = 1.0 / pos
    inter = 1.0 / (factor * pos)
    ef = 1 - ramp
    return inter * (1 - ef) + extra * ef
for t in [default(10000.0, 64), default(1000000.0, 128), default(10000.0, 64) / 4.0,
          llama3(500000.0, 128, 8.0, 1.0, 4.0, 8192), yarn(1000000.0, 128, 4.0, 32768)]:
    print(" ".join(float(v).hex() for v in t.tolist()))
)PY";
  const std::string out = dir + "/inv_freq.txt";
  ASSERT_EQ(
      std::system((std::string("OMP_WAIT_POLICY=PASSIVE ") + python + " " + script + " > " + out).c_str()),
      0);
  std::ifstream in(out);
  std::vector<std::vector<float>> torch_tables;
  for (std::string line; std::getline(in, line);) {
    std::istringstream words(line);
    std::vector<float> values;
    for (std::string word; words >> word;) values.push_back(std::strtof(word.c_str(), nullptr));
    torch_tables.push_back(values);
  }
  ASSERT_EQ(torch_tables.size(), 5u);

  RopeScaling linear, llama3, yarn;
  linear.type = RopeScalingType::kLinear;
  linear.factor = 4.0;
  llama3.type = RopeScalingType::kLlama3;
  llama3.factor = 8.0;
  llama3.original_max_position_embeddings = 8192;
  yarn.type = RopeScalingType::kYarn;
  yarn.factor = 4.0;
  yarn.original_max_position_embeddings = 32768;
  const std::vector<float> ours[] = {BuildOk(64, 64, 10000.0, RopeScaling{}, 1).inv_freq(),
                                     BuildOk(128, 128, 1000000.0, RopeScaling{}, 1).inv_freq(),
                                     BuildOk(64, 64, 10000.0, linear, 1).inv_freq(),
                                     BuildOk(128, 128, 500000.0, llama3, 1).inv_freq(),
                                     BuildOk(128, 128, 1000000.0, yarn, 1).inv_freq()};
  for (size_t t = 0; t < 5; ++t) {
    ASSERT_EQ(ours[t].size(), torch_tables[t].size()) << "table " << t;
    for (size_t i = 0; i < ours[t].size(); ++i) {
      // Equal, or one ulp apart where libm's powf and torch's pow round differently.
      EXPECT_LE(testing::UlpDistance(ours[t][i], torch_tables[t][i]), 1.0) << "table " << t << " freq " << i;
    }
  }
}

// The rotation written out pair by pair.
void NaiveRope(const RopeTable& table, RopeStyle style, int64_t tokens, const int32_t* positions,
               int64_t heads, float* x, int64_t ldx) {
  const int64_t half = table.rotary_dim() / 2;
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t h = 0; h < heads; ++h) {
      float* head = x + t * ldx + h * table.head_dim();
      for (int64_t i = 0; i < half; ++i) {
        const float c = table.cos()[positions[t] * half + i];
        const float s = table.sin()[positions[t] * half + i];
        float& a = style == RopeStyle::kHalf ? head[i] : head[2 * i];
        float& b = style == RopeStyle::kHalf ? head[i + half] : head[2 * i + 1];
        const float ac = a * c, bs = b * s, bc = b * c, as = a * s;
        a = ac - bs;
        b = bc + as;
      }
    }
  }
}

class RopeTest : public ::testing::TestWithParam<Isa> {};

// The binder's form: each token copied from the input and rotated in the
// output, the same bits as rotating a copy in place; the input and the
// output's columns beyond the heads untouched.
TEST_P(RopeTest, RotatingIntoAnotherBufferMatchesRotatingACopy) {
  KILN_SKIP_UNLESS_AVAILABLE(GetParam());
  for (RopeStyle style : {RopeStyle::kHalf, RopeStyle::kInterleaved}) {
    RopeTable table = BuildOk(64, 48, 10000.0, RopeScaling{}, 600);
    const int64_t tokens = 40, heads = 3, ldx = heads * 64 + 7, ldy = heads * 64 + 3;
    std::vector<int32_t> positions(static_cast<size_t>(tokens));
    for (int64_t t = 0; t < tokens; ++t)
      positions[static_cast<size_t>(t)] = static_cast<int32_t>(t * 13 % 600);
    const std::vector<float> x = RandomFloats(static_cast<size_t>(tokens * ldx), 22, -2.0f, 2.0f);
    std::vector<float> want = x;
    ApplyRope(ContextFor(GetParam(), 1), table, style, tokens, positions.data(), heads, want.data(), ldx);
    std::vector<float> input = x, y(static_cast<size_t>(tokens * ldy), -5.0f);
    ApplyRope(ContextFor(GetParam(), 2), table, style, tokens, positions.data(), heads, input.data(), ldx,
              y.data(), ldy);
    ASSERT_EQ(input, x) << "input written";
    for (int64_t t = 0; t < tokens; ++t) {
      for (int64_t c = 0; c < ldy; ++c) {
        const float got = y[static_cast<size_t>(t * ldy + c)];
        if (c < heads * 64) {
          ASSERT_EQ(got, want[static_cast<size_t>(t * ldx + c)]) << "token " << t << " column " << c;
        } else {
          ASSERT_EQ(got, -5.0f) << "written beyond the heads, token " << t;
        }
      }
    }
  }
}

TEST_P(RopeTest, BothStylesMatchThePairwiseRotationExactly) {
  KILN_SKIP_UNLESS_AVAILABLE(GetParam());
  struct Dims {
    int64_t head_dim, rotary_dim;
  };
  for (RopeStyle style : {RopeStyle::kHalf, RopeStyle::kInterleaved}) {
    for (Dims d : {Dims{64, 64}, Dims{128, 128}, Dims{6, 6}, Dims{34, 34}, Dims{80, 40}, Dims{64, 18}}) {
      RopeTable table = BuildOk(d.head_dim, d.rotary_dim, 10000.0, RopeScaling{}, 600);
      const int64_t tokens = 9, heads = 3, ldx = heads * d.head_dim + 7;
      std::vector<int32_t> positions = {0, 1, 2, 599, 17, 300, 5, 5, 128};
      std::vector<float> x = RandomFloats(static_cast<size_t>(tokens * ldx), 21, -2.0f, 2.0f);
      std::vector<float> want = x;
      NaiveRope(table, style, tokens, positions.data(), heads, want.data(), ldx);
      ApplyRope(ContextFor(GetParam(), 2), table, style, tokens, positions.data(), heads, x.data(), ldx);
      for (size_t i = 0; i < x.size(); ++i) {
        ASSERT_EQ(x[i], want[i]) << (style == RopeStyle::kHalf ? "half" : "interleaved") << " head_dim "
                                 << d.head_dim << " rotary " << d.rotary_dim << " element " << i;
      }
    }
  }
}

// Rows are computed on first use, a chunk at a time: rotating first at
// early positions, then at later ones beyond the first chunks, gives what
// a table computed whole gives.
TEST_P(RopeTest, RowsFilledOnFirstUseEqualATableComputedWhole) {
  KILN_SKIP_UNLESS_AVAILABLE(GetParam());
  RopeTable lazy = BuildOk(64, 64, 1000000.0, RopeScaling{}, 5000);
  RopeTable whole = BuildOk(64, 64, 1000000.0, RopeScaling{}, 5000);
  ASSERT_NE(whole.cos(), nullptr);  // computes every row
  const int64_t heads = 2, ldx = heads * 64;
  for (std::vector<int32_t> positions : {std::vector<int32_t>{0, 3, 7}, std::vector<int32_t>{1500, 1023, 1024},
                                         std::vector<int32_t>{4999, 3100, 2}}) {
    const auto tokens = static_cast<int64_t>(positions.size());
    std::vector<float> x = RandomFloats(static_cast<size_t>(tokens * ldx), 5, -2.0f, 2.0f);
    std::vector<float> want = x;
    ApplyRope(ContextFor(GetParam(), 2), whole, RopeStyle::kHalf, tokens, positions.data(), heads, want.data(), ldx);
    ApplyRope(ContextFor(GetParam(), 2), lazy, RopeStyle::kHalf, tokens, positions.data(), heads, x.data(), ldx);
    ASSERT_EQ(x, want) << "positions up to " << *std::max_element(positions.begin(), positions.end());
  }
  EXPECT_EQ(std::memcmp(lazy.cos(), whole.cos(), 5000 * 32 * sizeof(float)), 0);
}

TEST_P(RopeTest, PositionZeroIsTheIdentityAndRotationKeepsNorms) {
  KILN_SKIP_UNLESS_AVAILABLE(GetParam());
  RopeTable table = BuildOk(64, 64, 10000.0, RopeScaling{}, 64);
  std::vector<float> x = RandomFloats(64, 22);
  std::vector<float> y = x;
  const int32_t zero = 0, later = 40;
  ApplyRope(ContextFor(GetParam(), 1), table, RopeStyle::kHalf, 1, &zero, 1, y.data(), 64);
  EXPECT_EQ(x, y);
  ApplyRope(ContextFor(GetParam(), 1), table, RopeStyle::kHalf, 1, &later, 1, y.data(), 64);
  for (int i = 0; i < 32; ++i) {
    EXPECT_NEAR(std::hypot(y[i], y[i + 32]), std::hypot(x[i], x[i + 32]), 1e-6);
  }
}

INSTANTIATE_TEST_SUITE_P(Isas, RopeTest, ::testing::ValuesIn(AllIsas()), testing::IsaParamName);

}  // namespace rope_tests
}  // namespace kiln::cpu
