// The quantized GEMM on AMX tiles, for many activation rows (prefill and
// batched decoding) against Q8_0 and Q4_0 weights in the x8 layout.
//
// Per block of 32 values, tdpbssd multiplies 16 activation rows by 16 weight
// rows in signed bytes (Q4_0's nibbles made signed by taking 8 off each,
// which gives the reference's A = sum w q - 8 (s0 + s1) exactly); the int32
// block sums then take the reference's fp32 steps, acc = fma(d * dx, A, acc)
// block by block. So the result equals quant_reference.cc bit for bit, and
// with it the vector kernels', whatever the rows, tiles or threads.
#pragma once

#include <cstdint>

#include "backend/cpu/qkernels/qkernel_table.h"
#include "core/dtype.h"

namespace kiln::cpu {

// Whether AmxQuantGemm runs `w_type` (Q8_0 or Q4_0) here: it needs AMX-INT8
// (AmxInt8Usable) and the x8 copy of the weights.
bool AmxQuantGemmRuns(DType w_type, bool has_x8);

// Rows [begin, end) of x's `rows` scales into x.tile_d (qkernel_table.h);
// with end == rows, also the zeros that fill the last row tile.
// REQUIRES: x.tile_d set.
void AmxTileScales(const QuantizedRows& x, int64_t rows, int64_t begin, int64_t end);

// Scratch AmxQuantGemm needs for K = k, in bytes.
// REQUIRES: AmxQuantGemmRuns (it is compiled for AMX machines).
int64_t AmxQuantGemmScratchBytes(int64_t k);

// QuantGemmArgs' piece (rows [m_begin, m_end) x row groups [g_begin,
// g_end)) on the calling thread, reading a.x8 a pair of groups at a time
// and a.x->tile_d. `scratch` is 64-byte aligned,
// AmxQuantGemmScratchBytes(a.k) long. REQUIRES: AmxQuantGemmRuns(a.w_type,
// true), a.x8 and a.x->tile_d set, m_begin a multiple of 16, g_begin even
// and g_end even or the last group.
void AmxQuantGemm(const QuantGemmArgs& a, void* scratch);

}  // namespace kiln::cpu
