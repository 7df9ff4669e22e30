// Convolutions through oneDNN: the weights reordered once, when the kernel
// is made, into the layout oneDNN's chosen implementation wants; plain NCHW
// activations in and out (used as they are, or reordered to and from
// nChw16c inside the kernel); bias, activation and residual as oneDNN
// post-ops. oneDNN runs on its own (OpenMP) threads, not the call's pool:
// as many as the call's pool has (the pool's workers sleep meanwhile after a
// 20 us spin). OpenMP's own idle spin follows OMP_WAIT_POLICY and
// GOMP_SPINCOUNT, which libgomp reads when it is loaded, so a program cannot
// set them; the kiln command sets a short spin (cli/openmp_policy.h), the
// tests PASSIVE (the team sleeps at once).
#pragma once

#include <string>

#include "backend/cpu/kernels/isa.h"
#include "backend/cpu/tensor_kernels/conv_window.h"
#include "backend/cpu/tensor_kernels/laid_out_floats.h"
#include "backend/cpu/tensor_kernels/tensor_kernel.h"
#include "graph/tensor_ops/fused_activation.h"
#include "graph/tensor_type.h"

namespace kiln::cpu {

// Whether oneDNN can take this convolution (1-d or 2-d, and an ISA of at
// least AVX2, which oneDNN is then capped at, so that KILN_ISA holds for it).
bool OneDnnConvApplies(const Window3& g, Isa isa);

// Whether oneDNN beats kiln's own kernels on this shape (as measured by
// bench/micro/conv_bench.cc).
bool PreferOneDnn(const Window3& g, Isa isa);

// blocked_internally (row-major activations only): the primitive picks its
// own activation layout (nChw16c on AVX-512), and each call reorders the
// input, and the residual, into the kernel's scratch and the result back.
// Whether oneDNN with its blocked activations inside (reorders in and out
// included) beats kiln's own kernels on this shape.
bool PreferOneDnnBlocked(const Window3& g, Isa isa);

// Whether oneDNN's Winograd kernel on nchw16c activations (MakeOneDnnConv's
// `winograd`) beats kiln's dense 3x3 loop and oneDNN's direct kernel on
// this shape and epilogue: 3x3, stride 1, no activation or ReLU, on
// AVX-512 (the figures are in conv_onednn.cc).
bool PreferOneDnnWinograd(const Window3& g, const FusedEpilogue& e, Isa isa);

// Whether oneDNN's Winograd kernel fuses e's activation: none or ReLU.
bool WinogradFusesActivation(const FusedEpilogue& e);

// Whether a convolution whose activations stay row-major (the layout stage
// keeps nchw16c chains to AVX-512) runs faster on oneDNN with its blocked
// activations inside, reorders included, than on kiln's row-major kernels.
bool PreferOneDnnBlockedOnRowMajor(const Window3& g, Isa isa);

// The implementation oneDNN picks for this convolution with activations in
// `layout` ("jit:avx512_core", "ref:any", ...), without making the kernel;
// an error when oneDNN refuses the shape.
Expected<std::string> OneDnnConvImplementation(const Window3& g, const FusedEpilogue& epilogue,
                                               bool has_residual, TensorLayout layout);

// The kernel; an error when oneDNN refuses the shape or post-ops.
// w [M, C/g, kh, kw] and bias (may be null) are read now. `layout` is the
// activations' layout (input, output and residual alike): row-major NCHW,
// NHWC, or NCHW16c (channels in blocks of 16, zero-padded: the buffers hold
// N x ceil(C/16) x H x W x 16 floats), the layout oneDNN's fastest
// convolutions use. On nchw16c and NHWC, a residual after the activation
// is added by kiln after the primitive (oneDNN's vector kernels refuse a
// sum post-op after an eltwise one). compute = kBF16 multiplies in bf16
// (AVX-512 BF16): the weights are stored bf16 now, each call rounds the input
// to bf16 (to nearest even) in the scratch, and accumulates and writes f32
// (post-ops in f32). src_row_major: the input is NCHW whatever `layout` says
// (a stem writing nchw16c; oneDNN's jit kernels take nchw src with nChw16c
// dst for few input channels). winograd: oneDNN's Winograd algorithm
// rather than its direct one, on nchw16c only (an error where it has no
// kernel for the shape, ISA or activation).
Expected<TensorKernel> MakeOneDnnConv(const Window3& g, const FusedEpilogue& epilogue, const float* w,
                                      const float* bias, bool has_residual,
                                      TensorLayout layout = TensorLayout::kRowMajor,
                                      bool blocked_internally = false, DType compute = DType::kF32,
                                      bool src_row_major = false, const LaidOutSlot& slot = {},
                                      bool winograd = false);

}  // namespace kiln::cpu
