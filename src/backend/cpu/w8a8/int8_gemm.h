// The W8A8 linear layer: activations quantized to int8 per token at run
// time, multiplied with int8 weights in int32, scaled back to fp32.
#pragma once

#include <cstdint>

#include "backend/cpu/kernels/kernel_context.h"
#include "backend/cpu/w8a8/int8_weight.h"

namespace kiln::cpu {

// The int8 GEMM kernels: the scalar reference, AVX2 (maddubs with the sign
// trick, no int16 saturation), AVX-VNNI and AVX-512 VNNI (vpdpbusd on
// activations offset to unsigned).
enum class Int8Kernel { kReference, kAvx2, kAvxVnni, kAvx512Vnni };

const char* Int8KernelName(Int8Kernel kernel);
// Whether this CPU runs `kernel` (honouring KILN_ISA through the context's
// ISA rules: kAvx512Vnni needs avx512 and VNNI, kAvxVnni and kAvx2 need avx2).
bool Int8KernelAvailable(Int8Kernel kernel);
// The fastest kernel available for `isa` (the ISA a KernelContext runs).
Int8Kernel BestInt8Kernel(Isa isa);

// How a row of activations becomes int8: symmetric, scale = clip / 127 with
// clip = the row's largest |x| (dynamic, static_clip == 0) or static_clip
// (values beyond it saturate at +-127); q = x / scale rounded to nearest,
// ties to even. A row of zeros (or a zero clip) gives q = 0.
struct ActivationQuantization {
  float static_clip = 0;
};

// y[m, n] = sx[m] * sw[n] * sum_k qx[m, k] * qw[n, k] + bias[n] for m < rows,
// n < w.rows(), qx the quantized rows of x; computed as one fma of the exact
// int32 sum, so that every kernel, tiling and thread count gives the same
// bits. Rows of x are ldx floats apart, of y ldy apart.
// REQUIRES: ldx >= w.cols(), ldy >= w.rows(), y does not overlap x or bias.
void W8A8Linear(const KernelContext& ctx, int64_t rows, const float* x, int64_t ldx, const Int8Weight& w,
                const float* bias, float* y, int64_t ldy, ActivationQuantization quantization = {});

// As W8A8Linear, with x in bfloat16.
void W8A8LinearBf16Input(const KernelContext& ctx, int64_t rows, const uint16_t* x, int64_t ldx,
                         const Int8Weight& w, const float* bias, float* y, int64_t ldy,
                         ActivationQuantization quantization = {});

// As W8A8Linear with a given kernel (tests compare them).
// REQUIRES: Int8KernelAvailable(kernel).
void W8A8LinearWith(Int8Kernel kernel, const KernelContext& ctx, int64_t rows, const float* x, int64_t ldx,
                    const Int8Weight& w, const float* bias, float* y, int64_t ldy,
                    ActivationQuantization quantization = {});

// The two halves of W8A8Linear, for several weights sharing one input (a
// fused QKV projection): rows of activations quantized once, in the calling
// thread's buffers (valid until its next QuantizeActivations), then any
// number of GEMMs against weights of `cols` inputs.
struct Int8Activations {
  Int8Kernel kernel = Int8Kernel::kReference;
  const uint8_t* q = nullptr;
  const float* scales = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t padded_cols = 0;
};

// x is f32 rows, or bf16 rows when x_bf16 is set (x then ignored).
Int8Activations QuantizeActivations(Int8Kernel kernel, const KernelContext& ctx, int64_t rows, const float* x,
                                    const uint16_t* x_bf16, int64_t ldx, int64_t cols,
                                    ActivationQuantization quantization);

// y = dequantized (x w^T) + bias as W8A8Linear computes it.
// REQUIRES: x.cols == w.cols().
void Int8Gemm(const KernelContext& ctx, const Int8Activations& x, const Int8Weight& w, const float* bias, float* y,
              int64_t ldy);

}  // namespace kiln::cpu
