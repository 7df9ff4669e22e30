// The pools on nchw16c activations against the row-major ones: windows
// with strides, pads, ceil_mode, dilations and count_include_pad (MaxPool
// with stride 1 down the image runs rows then columns), and the global
// pools; channel counts that are and are not multiples of 16.
#include <gtest/gtest.h>

#include "unit/tensor_ops/blocked_layout_test_util.h"

namespace kiln {
namespace blocked_layout_pool_tests {

using blocked_test::BlockedCase;
using conv_test::RandomTensor;

BlockedCase PoolCase(const char* op, int64_t c, std::vector<int64_t> kernel, std::vector<int64_t> strides,
                     std::vector<int64_t> pads) {
  BlockedCase bc;
  bc.op = op;
  bc.attrs.SetInts("kernel_shape", std::move(kernel));
  bc.attrs.SetInts("strides", std::move(strides));
  bc.attrs.SetInts("pads", std::move(pads));
  bc.inputs = {RandomTensor({2, c, 11, 9}, 5)};
  bc.constant = {false};
  return bc;
}

TEST(BlockedLayoutPool, MaxAndAverageMatchRowMajor) {
  for (int64_t c : {16, 24, 40}) {
    for (const char* op : {"MaxPool", "AveragePool"}) {
      const std::string what = std::string(op) + " c=" + std::to_string(c);
      blocked_test::ExpectBlockedMatchesRowMajor(PoolCase(op, c, {3, 3}, {2, 2}, {1, 1, 1, 1}),
                                                 what + " 3x3/2");
      // SPPF's 5x5/1 with pads 2.
      blocked_test::ExpectBlockedMatchesRowMajor(PoolCase(op, c, {5, 5}, {1, 1}, {2, 2, 2, 2}),
                                                 what + " 5x5/1");
      blocked_test::ExpectBlockedMatchesRowMajor(PoolCase(op, c, {2, 2}, {2, 2}, {0, 0, 0, 0}),
                                                 what + " 2x2/2");
      // Stride 1 down the image only (MaxPool's rows-then-columns path).
      blocked_test::ExpectBlockedMatchesRowMajor(PoolCase(op, c, {3, 4}, {1, 2}, {1, 0, 2, 1}),
                                                 what + " 3x4/(1,2)");
      BlockedCase ceil = PoolCase(op, c, {3, 2}, {2, 3}, {0, 1, 1, 0});
      ceil.attrs.SetInt("ceil_mode", 1);
      blocked_test::ExpectBlockedMatchesRowMajor(ceil, what + " ceil_mode");
    }
    BlockedCase include = PoolCase("AveragePool", c, {3, 3}, {2, 2}, {1, 1, 1, 1});
    include.attrs.SetInt("count_include_pad", 1);
    blocked_test::ExpectBlockedMatchesRowMajor(include, "count_include_pad c=" + std::to_string(c));
    BlockedCase dilated = PoolCase("MaxPool", c, {3, 3}, {1, 1}, {2, 2, 2, 2});
    dilated.attrs.SetInts("dilations", {2, 2});
    blocked_test::ExpectBlockedMatchesRowMajor(dilated, "dilated MaxPool c=" + std::to_string(c));
  }
}

TEST(BlockedLayoutPool, MaxPoolWithIndicesIsLeftRowMajor) {
  BlockedCase bc = PoolCase("MaxPool", 24, {2, 2}, {2, 2}, {0, 0, 0, 0});
  bc.num_outputs = 2;
  bc.expect_taken = false;
  blocked_test::ExpectBlockedMatchesRowMajor(bc, "Indices");
}

TEST(BlockedLayoutPool, GlobalPoolsMatchRowMajor) {
  for (int64_t c : {16, 24, 40}) {
    for (const char* op : {"GlobalMaxPool", "GlobalAveragePool"}) {
      for (int64_t size : {1, 7, 20}) {
        BlockedCase bc;
        bc.op = op;
        bc.inputs = {RandomTensor({2, c, size, size + 1}, 9)};
        bc.constant = {false};
        blocked_test::ExpectBlockedMatchesRowMajor(
            bc, std::string(op) + " c=" + std::to_string(c) + " size=" + std::to_string(size));
      }
    }
  }
}

}  // namespace blocked_layout_pool_tests
}  // namespace kiln
