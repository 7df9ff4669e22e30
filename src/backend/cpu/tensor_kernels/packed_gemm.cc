// Packing B and splitting the products over threads.
#include "backend/cpu/tensor_kernels/packed_gemm.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <type_traits>

#include "backend/cpu/kernels/kernel_table.h"
#include "backend/cpu/kernels/parallel.h"

namespace kiln::cpu {
namespace {

constexpr int64_t kRowTile = 6;           // the linear kernels' register tile height
constexpr int64_t kMinPanelsPerCell = 4;  // 64 columns: enough chains to hide the FMA latency
constexpr int64_t kCellsPerThread = 4;

}  // namespace

int64_t PackedBFloats(int64_t k, int64_t n) {
  return (n + kPanelWidth - 1) / kPanelWidth * kPanelWidth * k;
}

// Panels [p0, p1) of PackB's layout.
void PackPanels(const float* b, int64_t k, int64_t n, int64_t stride_k, int64_t stride_n, float scale,
                int64_t p0, int64_t p1, float* dst) {
  for (int64_t p = p0; p < p1; ++p) {
    const int64_t n0 = p * kPanelWidth;
    const int64_t width = std::min<int64_t>(kPanelWidth, n - n0);
    float* panel = dst + p * k * kPanelWidth;
    for (int64_t kk = 0; kk < k; ++kk) {
      float* row = panel + kk * kPanelWidth;
      const float* src = b + kk * stride_k + n0 * stride_n;
      if (stride_n == 1 && scale == 1.0f) {
        std::memcpy(row, src, static_cast<size_t>(width) * sizeof(float));
      } else {
        for (int64_t j = 0; j < width; ++j) row[j] = src[j * stride_n] * scale;
      }
      for (int64_t j = width; j < kPanelWidth; ++j) row[j] = 0.0f;
    }
  }
}

void PackB(const float* b, int64_t k, int64_t n, int64_t stride_k, int64_t stride_n, float scale,
           float* dst) {
  PackPanels(b, k, n, stride_k, stride_n, scale, 0, (n + kPanelWidth - 1) / kPanelWidth, dst);
}

void PackBMatrices(const KernelContext& ctx, const float* b, const int64_t* offsets, int64_t count, int64_t k,
                   int64_t n, int64_t stride_k, int64_t stride_n, float scale, float* dst) {
  // Work items are (matrix, panel), so that one big B packs on every thread too.
  const int64_t floats = PackedBFloats(k, n);
  const int64_t panels = (n + kPanelWidth - 1) / kPanelWidth;
  const int64_t panel_floats = std::max<int64_t>(k * kPanelWidth, 1);
  ParallelRanges(ctx, count * panels, std::max<int64_t>(1, 32768 / panel_floats),
                 [&](int64_t begin, int64_t end, int) {
                   for (int64_t item = begin; item < end;) {
                     const int64_t i = item / panels, p0 = item % panels;
                     const int64_t p1 = std::min(panels, p0 + (end - item));
                     PackPanels(b + offsets[i], k, n, stride_k, stride_n, scale, p0, p1, dst + i * floats);
                     item += p1 - p0;
                   }
                 });
}

AlignedFloats::AlignedFloats(int64_t count) {
  const size_t bytes = (static_cast<size_t>(std::max<int64_t>(count, 1)) * sizeof(float) + 63) / 64 * 64;
  data_.reset(static_cast<float*>(std::aligned_alloc(64, bytes)));
  std::memset(data_.get(), 0, bytes);
}

void AlignedFloats::Free::operator()(float* p) const {
  std::free(p);
}

PackedWeightPanels::PackedWeightPanels(LaidOutWeights* store, std::string_view node, std::string_view layout,
                                       int64_t floats, const std::function<void(float*)>& pack) {
  const size_t bytes = static_cast<size_t>(floats) * sizeof(float);
  if (store != nullptr) {
    if (const uint8_t* stored = store->Take(node, layout, bytes)) {
      data_ = reinterpret_cast<const float*>(stored);
      return;
    }
  }
  own_ = std::make_unique<AlignedFloats>(floats);
  pack(own_->data());
  data_ = own_->data();
  if (store != nullptr) store->Record(node, layout, {reinterpret_cast<const uint8_t*>(data_), bytes});
}

void RunPackedGemm(const KernelContext& ctx, const PackedGemm& g) {
  if (g.batch <= 0 || g.m <= 0 || g.n <= 0) return;
  if (g.k == 0) {
    for (int64_t i = 0; i < g.batch; ++i) {
      for (int64_t r = 0; r < g.m; ++r) {
        float* row = g.c + i * g.c_stride + r * g.ldc;
        for (int64_t j = 0; j < g.n; ++j) row[j] = g.bias != nullptr ? g.bias[j] : 0.0f;
      }
    }
    return;
  }
  const KernelTable& kernels = KernelsFor(ctx.isa);
  const int64_t panels = (g.n + kPanelWidth - 1) / kPanelWidth;
  const int64_t packed_floats = PackedBFloats(g.k, g.n);
  // Cells: whole matrices while there are enough of them; else column
  // chunks of at least kMinPanelsPerCell panels, then row pieces.
  const int64_t threads = ctx.num_threads();
  const int64_t want = kCellsPerThread * threads;
  int64_t panel_chunk = panels;
  if (threads > 1 && g.batch < want) {
    const int64_t chunks = (want + g.batch - 1) / g.batch;
    panel_chunk = std::max<int64_t>(kMinPanelsPerCell, (panels + chunks - 1) / chunks);
  }
  const int64_t col_chunks = (panels + panel_chunk - 1) / panel_chunk;
  const int64_t row_tiles = (g.m + kRowTile - 1) / kRowTile;
  int64_t row_pieces = 1;
  if (threads > 1 && g.batch * col_chunks < want) {
    row_pieces =
        std::clamp<int64_t>((want + g.batch * col_chunks - 1) / (g.batch * col_chunks), 1, row_tiles);
  }
  const int64_t cells = g.batch * col_chunks * row_pieces;
  ParallelChunks(ctx, cells, 1, [&](int64_t begin, int64_t end, int) {
    for (int64_t cell = begin; cell < end; ++cell) {
      const int64_t i = cell / (col_chunks * row_pieces);
      const int64_t rest = cell % (col_chunks * row_pieces);
      const int64_t piece = rest / col_chunks, chunk = rest % col_chunks;
      LinearArgs args{};
      args.x = g.a + g.a_offset[i];
      args.ldx = g.lda;
      args.w_type = ElemType::kF32;
      args.w_panels = g.packed + g.b_index[i] * packed_floats;
      args.n_total = g.n;
      args.k_total = g.k;
      args.bias = g.bias;
      args.y = g.c + i * g.c_stride;
      args.ldy = g.ldc;
      args.m_begin = std::min(g.m, row_tiles * piece / row_pieces * kRowTile);
      args.m_end = std::min(g.m, row_tiles * (piece + 1) / row_pieces * kRowTile);
      args.panel_begin = chunk * panel_chunk;
      args.panel_end = std::min(panels, args.panel_begin + panel_chunk);
      args.scratch = ThreadScratch(ScratchSlot::kLinearWeights, kLinearScratchFloats);
      if (args.m_begin < args.m_end) kernels.linear(args);
    }
  });
}

template <typename T>
void ReferenceBatchedMatMul(int64_t batch, int64_t m, int64_t n, int64_t k, const T* a,
                            const int64_t* a_index, int64_t a_matrix, int64_t a_rs, int64_t a_cs, const T* b,
                            const int64_t* b_index, int64_t b_matrix, int64_t b_rs, int64_t b_cs, T* c) {
  using Acc = std::conditional_t<std::is_floating_point_v<T>, double, T>;
  for (int64_t i = 0; i < batch; ++i) {
    const T* ai = a + a_index[i] * a_matrix;
    const T* bi = b + b_index[i] * b_matrix;
    T* ci = c + i * m * n;
    for (int64_t r = 0; r < m; ++r) {
      for (int64_t j = 0; j < n; ++j) {
        Acc sum = 0;
        for (int64_t kk = 0; kk < k; ++kk) {
          sum += static_cast<Acc>(ai[r * a_rs + kk * a_cs]) * static_cast<Acc>(bi[kk * b_rs + j * b_cs]);
        }
        ci[r * n + j] = static_cast<T>(sum);
      }
    }
  }
}

#define KILN_INSTANTIATE(T)                                                                             \
  template void ReferenceBatchedMatMul<T>(int64_t, int64_t, int64_t, int64_t, const T*, const int64_t*, \
                                          int64_t, int64_t, int64_t, const T*, const int64_t*, int64_t, \
                                          int64_t, int64_t, T*);
KILN_INSTANTIATE(float)
KILN_INSTANTIATE(double)
KILN_INSTANTIATE(int32_t)
KILN_INSTANTIATE(int64_t)
#undef KILN_INSTANTIATE

void PermuteCopy(const float* src, const std::vector<int64_t>& src_dims, const std::vector<int>& perm,
                 float* dst) {
  const size_t rank = perm.size();
  std::vector<int64_t> src_strides(rank, 1);
  for (size_t d = rank; d-- > 1;) src_strides[d - 1] = src_strides[d] * src_dims[d];
  std::vector<int64_t> dims(rank), strides(rank);
  int64_t total = 1;
  for (size_t d = 0; d < rank; ++d) {
    dims[d] = src_dims[static_cast<size_t>(perm[d])];
    strides[d] = src_strides[static_cast<size_t>(perm[d])];
    total *= dims[d];
  }
  if (total == 0) return;
  if (rank == 0) {
    dst[0] = src[0];
    return;
  }
  const int64_t inner = dims[rank - 1], inner_stride = strides[rank - 1];
  std::vector<int64_t> idx(rank, 0);
  int64_t offset = 0;
  for (int64_t done = 0; done < total; done += inner) {
    for (int64_t j = 0; j < inner; ++j) dst[done + j] = src[offset + j * inner_stride];
    for (size_t d = rank - 1; d-- > 0;) {
      offset += strides[d];
      if (++idx[d] < dims[d]) break;
      offset -= strides[d] * dims[d];
      idx[d] = 0;
    }
  }
}

const char* PackedGemmImpl() {
  switch (BestIsa()) {
    case Isa::kAvx512: return "kiln-avx512";
    case Isa::kAvx2: return "kiln-avx2";
    case Isa::kScalar: break;
  }
  return "kiln-scalar";
}

}  // namespace kiln::cpu
