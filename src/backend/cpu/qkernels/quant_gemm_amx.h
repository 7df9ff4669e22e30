// The quantized GEMM on AMX tiles, for many activation rows (prefill and
// batched decoding) against the 32-value formats in the x8 layout (Q8_0,
// Q4_0, Q5_0, IQ4_NL, Q4_1 and Q5_1), the k-quants (Q2_K to Q6_K) and
// IQ4_XS: every format with an x8 copy.
//
// Per block of 32 values, tdpbssd multiplies 16 activation rows by 16 weight
// rows in signed bytes (Q4_0's nibbles made signed by taking 8 off each,
// which gives the reference's A = sum w q - 8 (s0 + s1) exactly; Q5_0's
// values less 16 alike, IQ4_NL's table values, Q4_1's and Q5_1's unsigned
// values as they are); the int32 block sums then take the reference's fp32
// steps, acc = fma(d * dx, A, acc) block by block, and for Q4_1 and Q5_1
// acc = fma(m * dx, s0 + s1, acc) after it. Q4_K and Q5_K take one
// tdpbssd per sub-block of 32 (their unsigned values as signed bytes), whose
// int32 sums are scaled by the sub-block's integer scale and added up to
// the super-block's A as integers; B = -sum_j m_j s_j comes from the rows'
// sub-block sums, then the reference's two fmas per super-block. Q6_K
// alike, one tdpbssd per sub-block of 16 (its values less 32, which gives
// the reference's sum w q - 32 s_i exactly, times its int8 scale), with
// no min term; Q3_K as Q6_K, its 3-bit values less 4 and scales less 32;
// Q2_K as Q6_K, its 2-bit values and 4-bit scales, with Q4_K's min term
// over 16 pieces of 16; IQ4_XS as Q4_K, its table values and scales
// ls - 32, with no min term. So the
// result equals quant_reference.cc bit for bit, and with it the vector
// kernels', whatever the rows, tiles or threads.
#pragma once

#include <cstdint>

#include "backend/cpu/qkernels/qkernel_table.h"
#include "core/dtype.h"

namespace kiln::cpu {

// Whether AmxQuantGemm runs `w_type` (one of the formats above) here: it
// needs AMX-INT8 (AmxInt8Usable) and the x8 copy of the weights.
bool AmxQuantGemmRuns(DType w_type, bool has_x8);

// Blocks [b_begin, b_end) of rows [begin, end) of x's `rows`: their scales
// and block sums into x.tile_d and x.tile_s (32-value blocks) or
// x.tile_pairs (256) (qkernel_table.h); with end == rows, also the zeros
// that fill the last row tile. REQUIRES: those set.
void AmxTileScales(const QuantizedRows& x, int64_t rows, int64_t begin, int64_t end, int64_t b_begin,
                   int64_t b_end);

// Scratch AmxQuantGemm needs for K = k, in bytes.
// REQUIRES: AmxQuantGemmRuns (it is compiled for AMX machines).
int64_t AmxQuantGemmScratchBytes(int64_t k);

// QuantGemmArgs' piece (rows [m_begin, m_end) x row groups [g_begin,
// g_end)) on the calling thread, reading a.x8 a pair of groups at a time
// and a.x->tile_d (and tile_s or tile_pairs). `scratch` is 64-byte aligned,
// AmxQuantGemmScratchBytes(a.k) long. REQUIRES: AmxQuantGemmRuns(a.w_type,
// true), a.x8 and a.x->tile_d set, m_begin a multiple of 16, g_begin even
// and g_end even or the last group.
void AmxQuantGemm(const QuantGemmArgs& a, void* scratch);

}  // namespace kiln::cpu
