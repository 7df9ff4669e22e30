// The linear layer y = x W^T + bias on block-quantized weights: the
// activation rows are quantized to int8 once per call (blocks of 32 or 256
// with a float scale each), then every output is a sum of exact integer
// block dot products, each scaled and added in fp32 in block order.
#pragma once

#include <cstdint>
#include <functional>

#include "backend/cpu/kernels/kernel_context.h"
#include "backend/cpu/qkernels/qkernel_table.h"
#include "backend/cpu/qkernels/quant_matrix.h"

namespace kiln::cpu {

// Quantizes rows m < rows of x (fp32, or bfloat16 when `bf16`; row m at
// x + m * ldx elements, k values) in blocks of `block` (32 or 256) into
// memory of the calling thread, valid until its next call. The split over
// threads changes nothing: each row is quantized on its own.
// REQUIRES: k % block == 0; ldx >= k.
QuantizedRows QuantizeActivations(const KernelContext& ctx, int64_t rows, const void* x, bool bf16, int64_t ldx,
                                  int64_t k, int block);

// y[m, n] = (quantized row m) . (W row n) (+ bias[n]) for m < rows, n <
// w.rows(), as quant_reference.cc defines it per format. Deterministic: the
// value of y[m, n] depends only on activation row m and weight row n, never
// on `rows`, the ISA's tiling or the threads; every ISA computes the same
// bits. Rows of y are ldy floats apart (y may be a column slice).
// REQUIRES: x.k == w.cols(), x.block == w.activation_block(); ldy >= N; y
// overlaps neither x nor bias.
void QuantLinear(const KernelContext& ctx, int64_t rows, const QuantizedRows& x, const QuantMatrix& w,
                 const float* bias, float* y, int64_t ldy);

// The kernel QuantLinear runs for `rows` rows of w under ctx: "amx-int8"
// (many rows of Q8_0 or Q4_0 on AMX tiles), else the ISA table's name
// ("avx512-vnni", "avx2", "scalar", ...).
const char* QuantLinearKernel(const KernelContext& ctx, int64_t rows, const QuantMatrix& w);

// One weight of a fused projection and where its outputs go.
struct QuantLinearPart {
  const QuantMatrix* w;
  const float* bias;  // null: none
  float* y;
};

// QuantLinear for each of `count` parts sharing the activation rows x and
// ldy, with the same bits; with few rows (decoding) the parts' work is split
// over the threads as one, so that a fused projection costs one wait for
// the threads instead of one per weight.
// REQUIRES: what QuantLinear requires, for every part.
void QuantLinearParts(const KernelContext& ctx, int64_t rows, const QuantizedRows& x, const QuantLinearPart* parts,
                      int count, int64_t ldy);

// What QuantLinearPairedChunks hands over for each chunk: output columns
// [col_begin, col_begin + cols) of both weights for every row, a's at a and
// b's at b, rows ld floats apart. It runs on the thread that multiplied the
// chunk, inside the threads' shares of the work, so it must not use them.
using PairedChunkFinish =
    std::function<void(int64_t col_begin, int64_t cols, const float* a, const float* b, int64_t ld)>;

// Two weights of the same shape (a gated MLP's gate and up) on many rows,
// chunk of output columns by chunk: a thread multiplies a chunk of both into
// a buffer of its own and hands it to `finish` while it is in its cache, so
// that the two products (20 MB for 512 rows of a 4864-wide MLP) are never
// written to memory and read back. Each product has QuantLinear's bits.
// Returns false, doing nothing, for few rows (decoding), whose products
// are small: QuantLinearParts serves them.
// REQUIRES: what QuantLinear requires, for both; a.rows() == b.rows().
bool QuantLinearPairedChunks(const KernelContext& ctx, int64_t rows, const QuantizedRows& x,
                             const QuantMatrix& a, const QuantMatrix& b, const PairedChunkFinish& finish);

// One weight applied to activation rows of its own: a mixture's expert on
// the rows that chose it.
struct QuantLinearJob {
  const QuantMatrix* w;
  const QuantizedRows* x;  // rows [0, rows) are the job's
  int64_t rows;
  float* y;  // row m at y + m * ldy
  int64_t ldy;
};

// QuantLinear (without bias) for each of `count` jobs, with the same bits,
// their row groups split over the threads as one range: one wait for the
// threads for all of them. For few rows a job (decoding); many rows go job
// by job to QuantLinear.
// REQUIRES: what QuantLinear requires, for every job.
void QuantLinearJobs(const KernelContext& ctx, const QuantLinearJob* jobs, int count);

}  // namespace kiln::cpu
