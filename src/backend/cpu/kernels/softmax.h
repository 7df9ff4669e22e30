// Row softmax in fp32, whole rows or a valid column range per row (the
// masked softmax of attention decomposed into matmul + softmax + matmul).
#pragma once

#include <cstdint>

#include "backend/cpu/kernels/kernel_context.h"

namespace kiln::cpu {

// out[r, c] = e^(s x[r, c] - m) / sum over the row of the same, with m the
// row's maximum of s x, s = scale; fp32 throughout. out may equal x.
// A row whose every value is -inf comes out all zeros.
void Softmax(const KernelContext& ctx, int64_t rows, int64_t cols, const float* x, int64_t ldx, float scale,
             float* out, int64_t ld_out);

// As Softmax over columns [valid_begin[r], valid_end[r]) of row r only;
// the other columns of out are 0 (an empty range gives a zero row). For
// causal attention over key positions: valid_end = query position + 1,
// valid_begin = its sliding-window start.
void MaskedSoftmax(const KernelContext& ctx, int64_t rows, int64_t cols, const float* x, int64_t ldx,
                   float scale, const int32_t* valid_begin, const int32_t* valid_end, float* out,
                   int64_t ld_out);

}  // namespace kiln::cpu
