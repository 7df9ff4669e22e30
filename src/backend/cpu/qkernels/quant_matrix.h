// A block-quantized weight matrix as the quantized kernels read it: the
// GGUF bytes of W[N, K] row by row, used in place (no dequantized form),
// optionally with a copy repacked for the vector kernels (see HasX8Layout), and
// what pairs with it (the activation block size).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/cpu/kernels/embedding.h"
#include "backend/memory_domain.h"
#include "core/dtype.h"
#include "core/status.h"
#include "core/thread_pool.h"

namespace kiln::cpu {

// The block types the quantized linear kernels run: Q4_0, Q4_1, Q5_0, Q5_1,
// Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS and the 2- and 3-bit
// i-quants.
const std::vector<DType>& QuantKernelTypes();
bool IsQuantKernelType(DType dtype);

// The block size activations are quantized in for weights of `dtype`: 32
// for the 32-value formats, 256 for the k-quants. REQUIRES: IsQuantKernelType(dtype).
int QuantActivationBlock(DType dtype);

// Decodes one stored row of a block-quantized table (embedding lookups),
// or null for a dtype without one.
RowDequantizer QuantRowDequantizer(DType dtype);

// The "x8" layout of Q8_0 and Q4_0 weights, which the vector kernels stream
// in one pass per group of kQuantGroupRows (8) output rows and the AMX
// kernel reads as tiles. Groups are stored in pairs: pair p (rows 16p ..
// 16p+15; rows past N are zero) takes X8PairBytes(K) bytes at
// p * X8PairBytes(K):
//   scales: per block b, the 16 rows' f16 scales (32 bytes), the area
//           rounded up to 64 bytes;
//   quants: per block b, one tile of 64-byte lines, line j holding the
//           j-th 4 bytes of each of the 16 rows' block, in row order: Q8_0
//           (8 lines, 512 bytes) values 4j..4j+3; Q4_0 (4 lines, 256 bytes)
//           nibble bytes 4j..4j+3, that is values 4j..4j+3 in the low
//           nibbles and 16+4j..16+4j+3 in the high ones.
// So a Q8_0 tile is an AMX B tile as it stands (those of the nibble
// formats below one unpacking away), and the first (last) 32 bytes of each line are group 2p's (2p+1's)
// eight rows: one vector with one int32 lane per row. The bytes of every
// block are the file's, only moved. IQ4_NL, whose blocks are laid out as
// Q4_0's, moves as Q4_0; Q5_0 as Q4_0 plus a fifth line holding each row's
// 4 bytes of fifth bits (320 bytes a tile). Q4_1 and Q5_1 move as Q4_0 and
// Q5_0, with the 16 rows' f16 m after their d in the scales area (64 bytes
// a block). The vector kernels read these four from the copy for every row
// count (quant_gemm_simd.h: X8Row for one row, X8SharedRows for more).
//
// The k-quants Q2_K, Q3_K, Q4_K, Q5_K and Q6_K take the same pairs of
// groups, one tile per super-block of 256: its scales area holds the 16
// rows' f16 d per super-block and, for Q2_K, Q4_K and Q5_K, their f16 dmin
// after them (64 bytes a super-block), and line l of its tile the l-th 4
// bytes of each row's block without d and dmin, in the file's order (Q4_K:
// 3 lines of packed scales, then 32 of nibbles, 2240 bytes; Q5_K: 3, 8 of
// fifth bits, 32, 2752 bytes; Q2_K: 4 of scale and min nibbles, 16 of
// 2-bit values, 1280 bytes). Q6_K's 6-bit values are rearranged instead, so
// that three of every four come out with one AND: for h < 2 and j < 8,
// lines 3(8h + j) + t (t < 3) hold, in byte p of a row's 4, value 128h +
// 32t + 4j + p in bits 0-5 and bits 2t, 2t+1 of value 128h + 96 + 4j + p in
// bits 6-7; lines 48-51 its 16 int8 scales (3328 bytes). Q3_K's 3-bit
// values (2 bits and the high bit joined) are rearranged alike, eight in
// three bytes: for h < 2 and i < 4, with v(g, j) = value 128h + 32g + 4j +
// p, lines 3(4h + i) + t (t < 3) hold in byte p v(t, 2i) in bits 0-2 and
// v(t, 2i + 1) in bits 3-5; bits 6-7 of the first line hold bits 0-1 of
// v(3, 2i), bit 6 of the second its bit 2, bit 7 of the second bit 0 of
// v(3, 2i + 1) and bits 6-7 of the third its bits 1-2; lines 24-26 its 12
// packed scale bytes (1728 bytes). IQ4_XS moves as Q4_K does: its f16 d
// and then its 16 bits of high scale bits (scales_h) in the scales area (64
// bytes a super-block), its 4 bytes of low scale nibbles on line 0 and its
// 128 index bytes on lines 1-32 in the file's order (2112 bytes). So a
// pair is its 16 rows' bits in the file's bytes (plus the scales area's
// rounding); the vector kernels read
// it for any number of activation rows (one at a time; many Q6_K and Q5_0
// rows in tiles sharing each unpacked vector), so that once the
// copy exists the rows are no longer read (the scalar reference still reads
// the rows; the backend makes no copy for it).
inline constexpr int kX8PairRows = 16;
bool HasX8Layout(DType dtype);
// Whether the vector kernels read the x8 copy for every row count, so that
// it replaces the rows: every x8 type (many rows through tiles of rows
// sharing each unpacked vector, which measured faster than the row
// kernels, bench/RESULTS.md).
bool X8ServesEveryRowCount(DType dtype);
int64_t X8ScaleStride(DType dtype);                // a pair's scale bytes per block
int64_t X8ScaleBytes(DType dtype, int64_t blocks);  // a pair's scales
int64_t X8TileBytes(DType dtype);                  // a pair's block tile
int64_t X8PairBytes(DType dtype, int64_t k);

// Not owning the GGUF bytes: they must outlive it (the WeightStore's
// mapping). A repacked copy, where there is one, is shared by the copies.
class QuantMatrix {
 public:
  QuantMatrix() = default;

  DType dtype() const { return dtype_; }
  int64_t rows() const { return n_; }  // N, the output features
  int64_t cols() const { return k_; }  // K, the input features
  const uint8_t* data() const { return data_; }
  int64_t row_bytes() const { return row_bytes_; }
  size_t bytes() const { return static_cast<size_t>(n_ * row_bytes_); }
  int activation_block() const { return QuantActivationBlock(dtype_); }

  // The x8 copy (see HasX8Layout), or null when the kernels read the GGUF rows.
  const uint8_t* x8() const { return x8_ == nullptr ? nullptr : x8_->data(); }
  // Bytes the vector kernels stream per pass: the x8 copy's, or the rows'.
  size_t kernel_bytes() const { return x8_ == nullptr ? bytes() : x8_->size(); }
  // How the vector kernels read it: "q4_0-x8" (repacked) or "q4_0-rows" (in place).
  std::string layout() const;

 private:
  friend Expected<QuantMatrix> MakeQuantMatrix(DType dtype, const void* data, uint64_t nbytes, int64_t n,
                                               int64_t k);
  friend Expected<QuantMatrix> RepackX8(const QuantMatrix& w, ThreadPool* pool);
  friend Expected<QuantMatrix> AdoptX8(const QuantMatrix& w, DomainBuffer x8);
  DType dtype_ = DType::kQ8_0;
  const uint8_t* data_ = nullptr;
  int64_t n_ = 0;
  int64_t k_ = 0;
  int64_t row_bytes_ = 0;
  std::shared_ptr<const DomainBuffer> x8_;
};

// Wraps row-major W[n, k] of `dtype` stored in `nbytes` bytes at `data`.
// Fails on a type the kernels do not run, non-positive sizes, K that is not
// a whole number of blocks, or a byte count other than the shape's.
Expected<QuantMatrix> MakeQuantMatrix(DType dtype, const void* data, uint64_t nbytes, int64_t n, int64_t k);

// `w` with an x8 copy of its blocks in huge-page memory (weight_memory.h),
// made once at load: the vector kernels then read that copy, one contiguous
// stream per row group with eight scales per load, instead of eight rows.
// A type without the layout comes back as it is. Copies on `pool`'s threads
// when given. Fails when the memory is refused.
Expected<QuantMatrix> RepackX8(const QuantMatrix& w, ThreadPool* pool = nullptr);

// `w` with `x8` as its x8 copy (RepackX8's bytes, stored in an artifact).
// Fails for a type without the layout or bytes of another size.
Expected<QuantMatrix> AdoptX8(const QuantMatrix& w, DomainBuffer x8);

}  // namespace kiln::cpu
