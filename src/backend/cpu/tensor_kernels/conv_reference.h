// The plain convolutions every fast path is tested against: direct loops
// over output, channel and taps in double-free fp32, any group, stride,
// dilation and pad, 1-d to 3-d. Also what runs shapes no fast path takes.
#pragma once

#include "backend/cpu/tensor_kernels/conv_window.h"
#include "graph/tensor_ops/fused_activation.h"

namespace kiln::cpu {

// y = epilogue(conv(x, w) + bias [+ residual]); bias and residual may be null.
// x [N, C, D, H, W], w [M, C/group, kd, kh, kw], y [N, M, od, oh, ow].
void ReferenceConv(const Window3& g, const float* x, const float* w, const float* bias, const float* residual,
                   const FusedEpilogue& epilogue, float* y);

// ConvTranspose: x [N, C, ...], w [C, M/group, k...], y [N, M, out...].
// Computes the output planes (n * M + m) in [begin, end) (end < 0: all).
void ReferenceConvTranspose(const Window3& g, const float* x, const float* w, const float* bias, float* y,
                            int64_t begin = 0, int64_t end = -1);

// The epilogue on one value that has its bias: the residual before or after
// the activation, as the epilogue says.
inline float ApplyEpilogue(const FusedEpilogue& e, float v, const float* residual, int64_t i) {
  if (residual != nullptr && e.residual_before_activation) v += residual[i];
  v = ApplyFusedActivation(e, v);
  if (residual != nullptr && !e.residual_before_activation) v += residual[i];
  return v;
}

}  // namespace kiln::cpu
