// Internal: the loops of the pools on nchw16c activations, one set per ISA
// (blocked_pool_loops_*.cc compile blocked_pool_body.h with their flags).
// Every output pixel is the max or sum of its window's 16-channel vectors.
#pragma once

#include <cstdint>

#include "backend/cpu/kernels/isa.h"

namespace kiln::cpu {

// One output index on one axis: the window's first input index (start) and
// its taps [first, end) that fall inside the input; `padded` counts the taps
// inside the padded input (count_include_pad's divisor).
struct BlockedPoolTaps {
  int64_t start, first, end, padded;
};

struct BlockedPoolJob {
  const float* x = nullptr;  // [planes, in_h, in_w, 16]
  float* y = nullptr;        // [planes, out_h, out_w, 16]
  int64_t in_h = 0, in_w = 0, out_h = 0, out_w = 0, dilation_h = 1, dilation_w = 1;
  const BlockedPoolTaps* th = nullptr;  // out_h entries
  const BlockedPoolTaps* tw = nullptr;  // out_w entries
  bool is_max = true;
  bool count_include_pad = false;
  // Planes are (image, channel block); the last block of an image holds
  // this many channels (its other lanes stay zero, even for an empty window).
  int64_t blocks = 1;
  int64_t last_block_channels = 16;
};

// Output rows [begin, end) of the job, row r being plane r / out_h, row r % out_h.
using BlockedPoolRowsFn = void (*)(const BlockedPoolJob& job, int64_t begin, int64_t end);

// MaxPool planes [begin, end) by rows then columns; `rows` holds in_h x
// out_w x 16 floats.
using BlockedMaxPoolSeparableFn = void (*)(const BlockedPoolJob& job, float* rows, int64_t begin,
                                           int64_t end);

struct BlockedGlobalPoolJob {
  const float* x = nullptr;  // [planes, pixels, 16]
  float* y = nullptr;        // [planes, 16]
  int64_t pixels = 0;
  bool is_max = true;
};

// Planes [begin, end) of the job.
using BlockedGlobalPoolFn = void (*)(const BlockedGlobalPoolJob& job, int64_t begin, int64_t end);

void BlockedPoolRowsBaseline(const BlockedPoolJob& job, int64_t begin, int64_t end);
void BlockedPoolRowsAvx2(const BlockedPoolJob& job, int64_t begin, int64_t end);
void BlockedPoolRowsAvx512(const BlockedPoolJob& job, int64_t begin, int64_t end);
void BlockedMaxPoolSeparableBaseline(const BlockedPoolJob& job, float* rows, int64_t begin, int64_t end);
void BlockedMaxPoolSeparableAvx2(const BlockedPoolJob& job, float* rows, int64_t begin, int64_t end);
void BlockedMaxPoolSeparableAvx512(const BlockedPoolJob& job, float* rows, int64_t begin, int64_t end);
void BlockedGlobalPoolBaseline(const BlockedGlobalPoolJob& job, int64_t begin, int64_t end);
void BlockedGlobalPoolAvx2(const BlockedGlobalPoolJob& job, int64_t begin, int64_t end);
void BlockedGlobalPoolAvx512(const BlockedGlobalPoolJob& job, int64_t begin, int64_t end);

inline BlockedPoolRowsFn BlockedPoolRowsFor(Isa isa) {
  return isa == Isa::kAvx512 ? BlockedPoolRowsAvx512
         : isa == Isa::kAvx2 ? BlockedPoolRowsAvx2
                             : BlockedPoolRowsBaseline;
}
inline BlockedMaxPoolSeparableFn BlockedMaxPoolSeparableFor(Isa isa) {
  return isa == Isa::kAvx512 ? BlockedMaxPoolSeparableAvx512
         : isa == Isa::kAvx2 ? BlockedMaxPoolSeparableAvx2
                             : BlockedMaxPoolSeparableBaseline;
}
inline BlockedGlobalPoolFn BlockedGlobalPoolFor(Isa isa) {
  return isa == Isa::kAvx512 ? BlockedGlobalPoolAvx512
         : isa == Isa::kAvx2 ? BlockedGlobalPoolAvx2
                             : BlockedGlobalPoolBaseline;
}

}  // namespace kiln::cpu
