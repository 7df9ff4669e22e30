// Shared by the tests of kiln's nchw16c convolutions (conv_nchw16c.h): one
// 2-D convolution case of random values (Conv, or kiln.FusedConv when it
// has an activation or a residual), its name in failure messages, and its
// window as the kernels' plans take it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backend/cpu/kernels/isa.h"
#include "backend/cpu/tensor_kernels/conv_window.h"
#include "unit/tensor_ops/blocked_layout_test_util.h"

namespace kiln::blocked_test {

// One image: c channels in, m out, an h x w input, a square k x k kernel.
struct ConvShape {
  int64_t c, m, h, w, k, stride, pad, group;
};

inline int64_t ConvOutSize(int64_t in, const ConvShape& s) {
  return (in + 2 * s.pad - s.k) / s.stride + 1;
}

inline std::string ConvName(const ConvShape& s, const std::string& activation, bool residual) {
  return "c=" + std::to_string(s.c) + " m=" + std::to_string(s.m) + " " + std::to_string(s.h) + "x" +
         std::to_string(s.w) + " k=" + std::to_string(s.k) + " s=" + std::to_string(s.stride) +
         " p=" + std::to_string(s.pad) + " g=" + std::to_string(s.group) + " " + activation +
         (residual ? " +residual" : "");
}

// The input, weights, bias (and residual) are random, seeded from `seed`
// upwards; the weights and bias are constants, as in an imported model.
inline BlockedCase ConvCase(const ConvShape& s, const std::string& activation, bool residual, bool residual_first,
                            uint32_t seed) {
  BlockedCase bc;
  bc.op = activation.empty() && !residual ? "Conv" : "kiln.FusedConv";
  bc.attrs.SetInts("kernel_shape", {s.k, s.k});
  bc.attrs.SetInts("strides", {s.stride, s.stride});
  bc.attrs.SetInts("pads", {s.pad, s.pad, s.pad, s.pad});
  if (s.group != 1) bc.attrs.SetInt("group", s.group);
  bc.inputs = {conv_test::RandomTensor({1, s.c, s.h, s.w}, seed),
               conv_test::RandomTensor({s.m, s.c / s.group, s.k, s.k}, seed + 1),
               conv_test::RandomTensor({s.m}, seed + 2)};
  bc.constant = {false, true, true};
  if (bc.op == "kiln.FusedConv") {
    if (!activation.empty()) bc.attrs.SetString("activation", activation);
    if (residual_first) bc.attrs.SetInt("residual_before_activation", 1);
    if (residual) {
      bc.inputs.push_back(conv_test::RandomTensor({1, s.m, ConvOutSize(s.h, s), ConvOutSize(s.w, s)}, seed + 3));
      bc.constant.push_back(false);
    }
  }
  bc.tol = 1e-4f;
  bc.expect_taken = cpu::BestIsa() == cpu::Isa::kAvx512;
  return bc;
}

inline cpu::Window3 ConvWindow(const ConvShape& s) {
  cpu::Window3 g;
  g.in_channels = s.c;
  g.out_channels = s.m;
  g.group = s.group;
  g.in = {1, s.h, s.w};
  g.kernel = {1, s.k, s.k};
  g.stride = {1, s.stride, s.stride};
  g.pad_begin = {0, s.pad, s.pad};
  g.pad_end = {0, s.pad, s.pad};
  g.out = {1, ConvOutSize(s.h, s), ConvOutSize(s.w, s)};
  return g;
}

}  // namespace kiln::blocked_test
