// Row conversions: picks the kernel for the type pair, splits rows over threads.
#include "backend/cpu/kernels/convert.h"

#include <algorithm>
#include <cstring>

#include "backend/cpu/kernels/kernel_table.h"
#include "backend/cpu/kernels/parallel.h"

namespace kiln::cpu {

Status ConvertRows(const KernelContext& ctx, int64_t rows, int64_t cols, DType src_type, const void* src,
                   int64_t lds, DType dst_type, void* dst, int64_t ldd) {
  const KernelTable& kernels = KernelsFor(ctx.isa);
  void (*kernel)(const ConvertArgs&) = nullptr;
  size_t src_size = 2, dst_size = 2;
  if (src_type == DType::kF32 && dst_type == DType::kBF16) {
    kernel = kernels.f32_to_bf16, src_size = 4;
  } else if (src_type == DType::kF32 && dst_type == DType::kF16) {
    kernel = kernels.f32_to_f16, src_size = 4;
  } else if (src_type == DType::kBF16 && dst_type == DType::kF32) {
    kernel = kernels.bf16_to_f32, dst_size = 4;
  } else if (src_type == DType::kF16 && dst_type == DType::kF32) {
    kernel = kernels.f16_to_f32, dst_size = 4;
  } else if (src_type == dst_type &&
             (src_type == DType::kF32 || src_type == DType::kF16 || src_type == DType::kBF16)) {
    src_size = dst_size = src_type == DType::kF32 ? 4 : 2;
  } else {
    return Unsupported("convert: {} to {}", DTypeName(src_type), DTypeName(dst_type));
  }
  if (rows <= 0 || cols <= 0) return Status::Ok();
  ParallelRanges(ctx, rows, std::max<int64_t>(1, 32768 / cols), [&](int64_t begin, int64_t end, int) {
    const void* s = static_cast<const uint8_t*>(src) + static_cast<size_t>(begin * lds) * src_size;
    void* d = static_cast<uint8_t*>(dst) + static_cast<size_t>(begin * ldd) * dst_size;
    if (kernel != nullptr) {
      kernel(ConvertArgs{s, lds, d, ldd, end - begin, cols});
      return;
    }
    for (int64_t r = 0; r < end - begin; ++r) {
      std::memcpy(static_cast<uint8_t*>(d) + static_cast<size_t>(r * ldd) * dst_size,
                  static_cast<const uint8_t*>(s) + static_cast<size_t>(r * lds) * src_size,
                  static_cast<size_t>(cols) * src_size);
    }
  });
  return Status::Ok();
}

}  // namespace kiln::cpu
