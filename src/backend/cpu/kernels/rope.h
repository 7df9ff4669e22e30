// Rotary position embedding: the cos/sin table, built once per model the
// way Hugging Face transformers computes it, and its application in place.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "backend/cpu/kernels/kernel_context.h"
#include "core/status.h"
#include "format/model_config.h"

namespace kiln::cpu {

class RopeTable {
 public:
  // The table for positions [0, max_positions): inverse frequencies of
  // the first rotary_dim elements of each head computed in fp32 as
  // transformers' default, linear, llama3, yarn or longrope initialisation
  // does (longrope with its long factors when max_positions exceeds
  // original_max_position_embeddings); cos and sin of fp32 position *
  // inv_freq, times the attention scaling (yarn's mscale, longrope's
  // attention factor, else 1). An original_max_position_embeddings of 0
  // means max_positions.
  // Fails on odd or out-of-range dims, a non-positive theta or factor, or a
  // table over 2^28 entries.
  static Expected<RopeTable> Build(int64_t head_dim, int64_t rotary_dim, double theta,
                                   const RopeScaling& scaling, int64_t max_positions);

  int64_t head_dim() const { return head_dim_; }
  int64_t rotary_dim() const { return rotary_dim_; }
  int64_t max_positions() const { return max_positions_; }
  // The factor folded into cos and sin.
  float attention_scaling() const { return attention_scaling_; }
  // rotary_dim / 2 inverse frequencies.
  const std::vector<float>& inv_freq() const { return inv_freq_; }
  // [max_positions][rotary_dim / 2], every row computed.
  const float* cos() const {
    RowsBelow(max_positions_);
    return rows_->cos.get();
  }
  const float* sin() const {
    RowsBelow(max_positions_);
    return rows_->sin.get();
  }
  // Computes the rows of positions below `positions` if they are not yet
  // (rows are filled on first use, a chunk at a time: a 32k-position
  // context's table costs a start-up tens of milliseconds, and a short
  // request reads its first rows only). Thread-safe.
  // REQUIRES: positions <= max_positions().
  void RowsBelow(int64_t positions) const;

 private:
  friend void ApplyRope(const KernelContext& ctx, const RopeTable& table, RopeStyle style, int64_t tokens,
                        const int32_t* positions, int64_t heads, const float* x, int64_t ldx, float* y,
                        int64_t ldy);
  struct Rows {
    std::unique_ptr<float[]> cos, sin;  // allocated whole, written as filled
    std::atomic<int64_t> filled{0};     // rows [0, filled) are computed
    std::mutex mu;                      // held while filling
  };

  int64_t head_dim_ = 0;
  int64_t rotary_dim_ = 0;
  int64_t max_positions_ = 0;
  float attention_scaling_ = 1.0f;
  std::vector<float> inv_freq_;
  std::unique_ptr<Rows> rows_;
};

// Rotates, in place, the first rotary_dim elements of every head of tokens
// t < tokens: head h of token t is the head_dim floats at x + t * ldx +
// h * head_dim; token t is at position positions[t]. kHalf pairs elements
// (i, i + rotary_dim/2), kInterleaved (2i, 2i + 1).
// REQUIRES: 0 <= positions[t] < table.max_positions() (the caller checks
// positions against the context length).
void ApplyRope(const KernelContext& ctx, const RopeTable& table, RopeStyle style, int64_t tokens,
               const int32_t* positions, int64_t heads, float* x, int64_t ldx);

// The same into y: token t's heads copied from x + t * ldx to y + t * ldy,
// then rotated there, each token by the thread that rotates it (a copy of
// all tokens beforehand ran on one thread, and the others then read their
// rows from that thread's cache). y must not overlap x.
void ApplyRope(const KernelContext& ctx, const RopeTable& table, RopeStyle style, int64_t tokens,
               const int32_t* positions, int64_t heads, const float* x, int64_t ldx, float* y, int64_t ldy);

}  // namespace kiln::cpu
