// Quantizing activations per token, splitting the int8 GEMM over threads and
// choosing its kernel.
#include "backend/cpu/w8a8/int8_gemm.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "backend/cpu/kernels/parallel.h"
#include "backend/cpu/w8a8/int8_gemm_kernels.h"
#include "core/cpu_info.h"
#include "core/half.h"

namespace kiln::cpu {
namespace {

// Rows from which threads split rows as well as panels, the least panels
// in a cell of that split, and its row tile.
constexpr int64_t kManyRows = 16;
constexpr int64_t kMinPanelsPerCell = 4;  // 64 output columns
constexpr int64_t kRowTile = 8;

bool TakesOffsetActivations(Int8Kernel kernel) {
  return kernel == Int8Kernel::kAvxVnni || kernel == Int8Kernel::kAvx512Vnni;
}

// One row of activations to int8 (see ActivationQuantization), stored as
// two's complement or, with `offset`, as q + 128; columns k..kp-1 are the
// value 0.
void QuantizeRow(const float* x, int64_t k, int64_t kp, float static_clip, bool offset, uint8_t* q,
                 float* scale) {
  float clip = static_clip;
  if (!(clip > 0)) {
    clip = 0;
    for (int64_t i = 0; i < k; ++i) clip = std::max(clip, std::fabs(x[i]));
  }
  const float inv = clip > 0 ? 127.0f / clip : 0.0f;
  *scale = clip / 127.0f;
  const int bias = offset ? 128 : 0;
  for (int64_t i = 0; i < k; ++i) {
    float v = std::nearbyint(x[i] * inv);
    v = std::max(-127.0f, std::min(127.0f, v));  // NaN ends at -127, bounded
    q[i] = static_cast<uint8_t>(static_cast<int>(v) + bias);
  }
  for (int64_t i = k; i < kp; ++i) q[i] = static_cast<uint8_t>(bias);
}

using KernelFn = void (*)(const Int8GemmArgs&);

KernelFn KernelFor(Int8Kernel kernel) {
  switch (kernel) {
    case Int8Kernel::kAvx2: return &Int8GemmAvx2;
    case Int8Kernel::kAvxVnni: return &Int8GemmAvxVnni;
    case Int8Kernel::kAvx512Vnni: return &Int8GemmAvx512Vnni;
    case Int8Kernel::kReference: break;
  }
  return &Int8GemmReference;
}

// This thread's buffers for quantized activations; grown on demand and
// kept, so that steady-state calls allocate nothing.
struct ActivationBuffers {
  std::vector<uint8_t> q;
  std::vector<float> scales;
  std::vector<float> widened;  // bf16 input rows as f32
};
ActivationBuffers& ThisThreadBuffers() {
  thread_local ActivationBuffers buffers;
  return buffers;
}

}  // namespace

const char* Int8KernelName(Int8Kernel kernel) {
  switch (kernel) {
    case Int8Kernel::kReference: return "reference";
    case Int8Kernel::kAvx2: return "avx2";
    case Int8Kernel::kAvxVnni: return "avx-vnni";
    case Int8Kernel::kAvx512Vnni: return "avx512-vnni";
  }
  return "?";
}

bool Int8KernelAvailable(Int8Kernel kernel) {
  switch (kernel) {
    case Int8Kernel::kReference: return true;
    case Int8Kernel::kAvx2: return IsaAvailable(Isa::kAvx2);
    case Int8Kernel::kAvxVnni: return IsaAvailable(Isa::kAvx2) && GetCpuInfo().avx_vnni;
    case Int8Kernel::kAvx512Vnni: return IsaAvailable(Isa::kAvx512) && GetCpuInfo().avx512_vnni;
  }
  return false;
}

Int8Kernel BestInt8Kernel(Isa isa) {
  if (isa == Isa::kAvx512 && Int8KernelAvailable(Int8Kernel::kAvx512Vnni)) return Int8Kernel::kAvx512Vnni;
  if (isa != Isa::kScalar && Int8KernelAvailable(Int8Kernel::kAvxVnni)) return Int8Kernel::kAvxVnni;
  if (isa != Isa::kScalar && Int8KernelAvailable(Int8Kernel::kAvx2)) return Int8Kernel::kAvx2;
  return Int8Kernel::kReference;
}

Int8Activations QuantizeActivations(Int8Kernel kernel, const KernelContext& ctx, int64_t rows, const float* x,
                                    const uint16_t* x_bf16, int64_t ldx, int64_t cols,
                                    ActivationQuantization quantization) {
  Int8Activations out;
  out.kernel = kernel;
  out.rows = std::max<int64_t>(rows, 0);
  out.cols = cols;
  out.padded_cols = (cols + kInt8GroupK - 1) / kInt8GroupK * kInt8GroupK;
  const int64_t k = cols, kp = out.padded_cols;
  ActivationBuffers& buffers = ThisThreadBuffers();
  if (buffers.q.size() < static_cast<size_t>(out.rows * kp)) buffers.q.resize(static_cast<size_t>(out.rows * kp));
  if (buffers.scales.size() < static_cast<size_t>(out.rows)) buffers.scales.resize(static_cast<size_t>(out.rows));
  if (x_bf16 != nullptr && buffers.widened.size() < static_cast<size_t>(out.rows * k)) {
    buffers.widened.resize(static_cast<size_t>(out.rows * k));
  }
  uint8_t* q = buffers.q.data();
  float* scales = buffers.scales.data();
  float* widened = buffers.widened.data();
  const bool offset = TakesOffsetActivations(kernel);
  ParallelRanges(ctx, out.rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(k, 1)),
                 [&](int64_t begin, int64_t end, int) {
                   for (int64_t m = begin; m < end; ++m) {
                     const float* row = x + m * ldx;
                     if (x_bf16 != nullptr) {
                       float* dst = widened + m * k;
                       for (int64_t i = 0; i < k; ++i) dst[i] = Bf16ToF32(x_bf16[m * ldx + i]);
                       row = dst;
                     }
                     QuantizeRow(row, k, kp, quantization.static_clip, offset, q + m * kp, scales + m);
                   }
                 });
  out.q = q;
  out.scales = scales;
  return out;
}

void Int8Gemm(const KernelContext& ctx, const Int8Activations& x, const Int8Weight& w, const float* bias, float* y,
              int64_t ldy) {
  const int64_t rows = x.rows;
  if (rows <= 0 || w.empty()) return;
  const KernelFn fn = KernelFor(x.kernel);
  const int64_t panels = w.panels();
  Int8GemmArgs args{};
  args.xq = x.q;
  args.ldxq = x.padded_cols;
  args.x_scale = x.scales;
  args.w_panels = w.panel_data();
  args.w_scale = w.scales();
  args.w_sum = w.row_sums();
  args.n_total = w.rows();
  args.kp = w.padded_cols();
  args.bias = bias;
  args.y = y;
  args.ldy = ldy;
  auto run = [&](int64_t m_begin, int64_t m_end, int64_t panel_begin, int64_t panel_end) {
    Int8GemmArgs a = args;
    a.m_begin = m_begin;
    a.m_end = m_end;
    a.panel_begin = panel_begin;
    a.panel_end = panel_end;
    fn(a);
  };
  if (rows >= kManyRows) {
    ParallelGrid(ctx, rows, kRowTile, panels, kMinPanelsPerCell,
                 [&](int64_t m_begin, int64_t m_end, int64_t p_begin, int64_t p_end, int) {
                   run(m_begin, m_end, p_begin, p_end);
                 });
    return;
  }
  const int pieces = static_cast<int>(std::min<int64_t>(ctx.num_threads(), panels));
  ParallelRanges(ctx, pieces, 1, [&](int64_t begin, int64_t end, int) {
    for (int64_t piece = begin; piece < end; ++piece) {
      const IndexRange range = ThreadPool::StaticRange(panels, pieces, static_cast<int>(piece));
      if (range.begin < range.end) run(0, rows, range.begin, range.end);
    }
  });
}

void W8A8Linear(const KernelContext& ctx, int64_t rows, const float* x, int64_t ldx, const Int8Weight& w,
                const float* bias, float* y, int64_t ldy, ActivationQuantization quantization) {
  W8A8LinearWith(BestInt8Kernel(ctx.isa), ctx, rows, x, ldx, w, bias, y, ldy, quantization);
}

void W8A8LinearBf16Input(const KernelContext& ctx, int64_t rows, const uint16_t* x, int64_t ldx,
                         const Int8Weight& w, const float* bias, float* y, int64_t ldy,
                         ActivationQuantization quantization) {
  if (rows <= 0 || w.empty()) return;
  Int8Activations q =
      QuantizeActivations(BestInt8Kernel(ctx.isa), ctx, rows, nullptr, x, ldx, w.cols(), quantization);
  Int8Gemm(ctx, q, w, bias, y, ldy);
}

void W8A8LinearWith(Int8Kernel kernel, const KernelContext& ctx, int64_t rows, const float* x, int64_t ldx,
                    const Int8Weight& w, const float* bias, float* y, int64_t ldy,
                    ActivationQuantization quantization) {
  if (rows <= 0 || w.empty()) return;
  Int8Activations q = QuantizeActivations(kernel, ctx, rows, x, nullptr, ldx, w.cols(), quantization);
  Int8Gemm(ctx, q, w, bias, y, ldy);
}

}  // namespace kiln::cpu
