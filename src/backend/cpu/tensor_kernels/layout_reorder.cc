// Layout reorders: the element-by-element reference, the AVX-512 transposes
// and the plane loops.
#include "backend/cpu/tensor_kernels/layout_reorder.h"

#include <algorithm>
#include <cstring>

#include "backend/cpu/kernels/isa.h"

#include "core/thread_pool.h"

namespace kiln::cpu {
namespace {

constexpr int64_t kBlock = 16;

int64_t Blocks(int64_t channels) {
  return (channels + kBlock - 1) / kBlock;
}

// Runs fn(begin, end) over [0, count), on the pool when there is one.
template <typename Fn>
void Split(ThreadPool* pool, int64_t count, const Fn& fn) {
  if (pool == nullptr || count <= 1) {
    fn(0, count);
    return;
  }
  pool->ParallelFor(count, 1, [&](int64_t b, int64_t e, int) { fn(b, e); });
}

}  // namespace

int64_t LayoutOffset(const std::vector<int64_t>& dims, TensorLayout layout, int64_t n, int64_t c, int64_t h,
                     int64_t w) {
  return TensorLayoutOffset(dims, layout, n, c, h, w);
}

void ReferenceReorder(const TensorType& type, TensorLayout from, TensorLayout to, const void* src,
                      void* dst) {
  const size_t elem = ElementBytes(type.dtype);
  if (from == to || type.rank() != 4) {
    std::memcpy(dst, src, TensorBytesIn(type, from));
    return;
  }
  std::memset(dst, 0, TensorBytesIn(type, to));
  const auto& d = type.dims;
  const auto* s = static_cast<const uint8_t*>(src);
  auto* t = static_cast<uint8_t*>(dst);
  for (int64_t n = 0; n < d[0]; ++n) {
    for (int64_t c = 0; c < d[1]; ++c) {
      for (int64_t h = 0; h < d[2]; ++h) {
        for (int64_t w = 0; w < d[3]; ++w) {
          std::memcpy(t + static_cast<size_t>(LayoutOffset(d, to, n, c, h, w)) * elem,
                      s + static_cast<size_t>(LayoutOffset(d, from, n, c, h, w)) * elem, elem);
        }
      }
    }
  }
}

bool FastReorder(const TensorType& type, TensorLayout from, TensorLayout to, const void* src, void* dst,
                 ThreadPool* pool) {
  if (ElementBytes(type.dtype) != 4 || type.rank() != 4 || from == to) return false;
  if (from != TensorLayout::kRowMajor && to != TensorLayout::kRowMajor) return false;
  const int64_t N = type.dims[0], C = type.dims[1], HW = type.dims[2] * type.dims[3];
  const auto* s = static_cast<const uint32_t*>(src);
  auto* t = static_cast<uint32_t*>(dst);
  const TensorLayout other = from == TensorLayout::kRowMajor ? to : from;
  if (other == TensorLayout::kNCHW16c && IsaAvailable(Isa::kAvx512)) {
    // Tasks of (n, channel block, run of pixels): a tensor of few channels
    // still splits over the threads.
    const int64_t blocks = Blocks(C), chunk = 256, chunks = (HW + chunk - 1) / chunk;
    Split(pool, N * blocks * chunks, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const int64_t nb = i / chunks, p = (i % chunks) * chunk;
        ReorderBlockPixelsAvx512(static_cast<const float*>(src), static_cast<float*>(dst),
                                 from == TensorLayout::kRowMajor, C, HW, nb / blocks, nb % blocks, p,
                                 std::min(HW, p + chunk));
      }
    });
    return true;
  }
  if (other == TensorLayout::kNCHW16c) {
    const int64_t blocks = Blocks(C);
    // Tasks of (n, channel block, run of kPixels pixels): 16 row-major plane
    // pieces <-> one blocked piece, a 16 x kPixels transpose that stays in
    // L1 (whole planes at once went 16 times over the blocked plane, which
    // on a stem's output is larger than L2).
    constexpr int64_t kPixels = 256;
    const int64_t runs = (HW + kPixels - 1) / kPixels;
    Split(pool, N * blocks * runs, [&](int64_t begin, int64_t end) {
      for (int64_t task = begin; task < end; ++task) {
        const int64_t i = task / runs, p0 = task % runs * kPixels, p1 = std::min(HW, p0 + kPixels);
        const int64_t n = i / blocks, cb = i % blocks;
        uint32_t* blocked =
            (from == TensorLayout::kRowMajor ? t : const_cast<uint32_t*>(s)) + i * HW * kBlock;
        for (int64_t j = 0; j < kBlock; ++j) {
          const int64_t c = cb * kBlock + j;
          if (from == TensorLayout::kRowMajor) {
            if (c >= C) {
              for (int64_t p = p0; p < p1; ++p) blocked[p * kBlock + j] = 0;
              continue;
            }
            const uint32_t* plane = s + (n * C + c) * HW;
            for (int64_t p = p0; p < p1; ++p) blocked[p * kBlock + j] = plane[p];
          } else if (c < C) {
            uint32_t* plane = t + (n * C + c) * HW;
            for (int64_t p = p0; p < p1; ++p) plane[p] = blocked[p * kBlock + j];
          }
        }
      }
    });
    return true;
  }
  // NHWC: per image, a C x HW transpose, split over pixels (to) or channels (from).
  for (int64_t n = 0; n < N; ++n) {
    const uint32_t* si = s + n * C * HW;
    uint32_t* ti = t + n * C * HW;
    if (to == TensorLayout::kNHWC) {
      Split(pool, HW, [&](int64_t begin, int64_t end) {
        for (int64_t p = begin; p < end; ++p) {
          for (int64_t c = 0; c < C; ++c) ti[p * C + c] = si[c * HW + p];
        }
      });
    } else {
      Split(pool, C, [&](int64_t begin, int64_t end) {
        for (int64_t c = begin; c < end; ++c) {
          for (int64_t p = 0; p < HW; ++p) ti[c * HW + p] = si[p * C + c];
        }
      });
    }
  }
  return true;
}

}  // namespace kiln::cpu
