// Strided and table-driven copies.
#include "backend/cpu/tensor_kernels/strided_copy.h"

#include <algorithm>
#include <cstring>

#include "backend/cpu/tensor_kernels/transpose_avx2.h"
#include "core/cpu_info.h"
#include "core/thread_pool.h"

namespace kiln::cpu::shape_kernels {
namespace {

// An element moved as N bytes (alignment 1, so any address is fine).
template <size_t N>
struct Elem {
  uint8_t b[N];
};

// The copy with size-1 axes dropped and neighbours that walk both buffers
// as one axis merged, so most copies become a few long contiguous runs.
struct Simplified {
  std::vector<int64_t> dims, ss, ds;
  bool empty = false;
};

Simplified Simplify(const StridedCopySpec& s) {
  Simplified p;
  for (size_t a = 0; a < s.dims.size(); ++a) {
    if (s.dims[a] == 0) p.empty = true;
    if (s.dims[a] == 1) continue;
    if (!p.dims.empty() && p.ss.back() == s.src_strides[a] * s.dims[a] &&
        p.ds.back() == s.dst_strides[a] * s.dims[a]) {
      p.dims.back() *= s.dims[a];
      p.ss.back() = s.src_strides[a];
      p.ds.back() = s.dst_strides[a];
      continue;
    }
    p.dims.push_back(s.dims[a]);
    p.ss.push_back(s.src_strides[a]);
    p.ds.push_back(s.dst_strides[a]);
  }
  return p;
}

// Walks the positions [begin, end) of an odometer over `dims`, giving each
// position's source and destination offsets.
template <typename F>
void Walk(const std::vector<int64_t>& dims, const std::vector<int64_t>& ss, const std::vector<int64_t>& ds,
          int64_t begin, int64_t end, F&& f) {
  const size_t r = dims.size();
  std::vector<int64_t> idx(r, 0);
  int64_t so = 0, doff = 0;
  int64_t rest = begin;
  for (size_t a = r; a-- > 0;) {
    idx[a] = rest % dims[a];
    rest /= dims[a];
    so += idx[a] * ss[a];
    doff += idx[a] * ds[a];
  }
  for (int64_t i = begin; i < end; ++i) {
    f(so, doff);
    for (size_t a = r; a-- > 0;) {
      ++idx[a];
      so += ss[a];
      doff += ds[a];
      if (idx[a] < dims[a]) break;
      so -= ss[a] * dims[a];
      doff -= ds[a] * dims[a];
      idx[a] = 0;
    }
  }
}

template <size_t N>
void CopyRun(const uint8_t* src, uint8_t* dst, int64_t n, int64_t ss, int64_t ds) {
  const auto* s = reinterpret_cast<const Elem<N>*>(src);
  auto* d = reinterpret_cast<Elem<N>*>(dst);
  if (ss == 0) {
    const Elem<N> v = *s;
    for (int64_t i = 0; i < n; ++i) d[i * ds] = v;
    return;
  }
  for (int64_t i = 0; i < n; ++i) d[i * ds] = s[i * ss];
}

// A transposing tile pair: along `rows` the source is contiguous, along
// `cols` the destination is; tiles keep both sides in cache.
template <size_t N>
void CopyTransposed(const uint8_t* src, uint8_t* dst, int64_t rows, int64_t cols, int64_t dst_row_stride,
                    int64_t src_col_stride) {
  // Blocks of 256 bytes of source rows by 8 columns: the columns are often
  // a power-of-two-ish stride apart and share L1 sets, so only about eight
  // lines per set may be live at once; the destination rows of a block
  // stay in cache while its column blocks fill them.
  constexpr int64_t kRows = 256 / static_cast<int64_t>(N);
  constexpr int64_t kCols = 8;
  const auto* s = reinterpret_cast<const Elem<N>*>(src);
  auto* d = reinterpret_cast<Elem<N>*>(dst);
  for (int64_t r0 = 0; r0 < rows; r0 += kRows) {
    const int64_t r1 = std::min(rows, r0 + kRows);
    for (int64_t c0 = 0; c0 < cols; c0 += kCols) {
      const int64_t c1 = std::min(cols, c0 + kCols);
      for (int64_t r = r0; r < r1; ++r) {
        Elem<N>* drow = d + r * dst_row_stride;
        const Elem<N>* scol = s + r;
        for (int64_t c = c0; c < c1; ++c) drow[c] = scol[c * src_col_stride];
      }
    }
  }
}

template <size_t N>
void GatherRow(const uint8_t* src, const int64_t* offsets, int64_t n, uint8_t* dst) {
  const auto* s = reinterpret_cast<const Elem<N>*>(src);
  auto* d = reinterpret_cast<Elem<N>*>(dst);
  for (int64_t i = 0; i < n; ++i) d[i] = s[offsets[i]];
}

// dst[i] = src[offsets[i]] for i < n.
void GatherRowAny(size_t elem, const uint8_t* src, const int64_t* offsets, int64_t n, uint8_t* dst) {
  switch (elem) {
    case 1: GatherRow<1>(src, offsets, n, dst); break;
    case 2: GatherRow<2>(src, offsets, n, dst); break;
    case 4: GatherRow<4>(src, offsets, n, dst); break;
    case 8: GatherRow<8>(src, offsets, n, dst); break;
    default:
      for (int64_t i = 0; i < n; ++i) {
        std::memcpy(dst + i * static_cast<int64_t>(elem), src + offsets[i] * static_cast<int64_t>(elem),
                    elem);
      }
  }
}

// dst = each of src[0..n/k) repeated k times (a nearest upsample's rows).
template <size_t N, int64_t K>
void RepeatRowFixed(const uint8_t* src, int64_t n, uint8_t* dst) {
  const auto* s = reinterpret_cast<const Elem<N>*>(src);
  auto* d = reinterpret_cast<Elem<N>*>(dst);
  for (int64_t j = 0; j < n / K; ++j) {
    for (int64_t r = 0; r < K; ++r) d[j * K + r] = s[j];
  }
}

template <size_t N>
void RepeatRow(const uint8_t* src, int64_t n, int64_t k, uint8_t* dst) {
  if (k == 2) return RepeatRowFixed<N, 2>(src, n, dst);
  const auto* s = reinterpret_cast<const Elem<N>*>(src);
  auto* d = reinterpret_cast<Elem<N>*>(dst);
  for (int64_t i = 0; i < n; ++i) d[i] = s[i / k];
}

void RepeatRowAny(size_t elem, const uint8_t* src, int64_t n, int64_t k, uint8_t* dst) {
  switch (elem) {
    case 1: RepeatRow<1>(src, n, k, dst); break;
    case 2: RepeatRow<2>(src, n, k, dst); break;
    case 4: RepeatRow<4>(src, n, k, dst); break;
    case 8: RepeatRow<8>(src, n, k, dst); break;
    default:
      for (int64_t i = 0; i < n; ++i) {
        std::memcpy(dst + i * static_cast<int64_t>(elem), src + (i / k) * static_cast<int64_t>(elem), elem);
      }
  }
}

// k when table[i] == table[0] + i / k for every i (and the length is a
// multiple of k), else 0.
int64_t RepeatFactor(const std::vector<int64_t>& table) {
  const auto n = static_cast<int64_t>(table.size());
  int64_t k = 1;
  while (k < n && table[static_cast<size_t>(k)] == table[0]) ++k;
  if (k < 2 || n % k != 0) return 0;
  for (int64_t i = 0; i < n; ++i) {
    if (table[static_cast<size_t>(i)] != table[0] + i / k) return 0;
  }
  return k;
}

// The AVX2 transposes, unless the CPU lacks them or KILN_ISA=scalar.
bool UseAvx2() {
  static const bool use = GetCpuInfo().avx2 && GetCpuInfo().BestIsa() != "scalar";
  return use;
}

void CopyRunAny(size_t elem, const uint8_t* src, uint8_t* dst, int64_t n, int64_t ss, int64_t ds) {
  switch (elem) {
    case 1: CopyRun<1>(src, dst, n, ss, ds); break;
    case 2: CopyRun<2>(src, dst, n, ss, ds); break;
    case 4: CopyRun<4>(src, dst, n, ss, ds); break;
    case 8: CopyRun<8>(src, dst, n, ss, ds); break;
    default:
      for (int64_t i = 0; i < n; ++i)
        std::memcpy(dst + i * ds * static_cast<int64_t>(elem), src + i * ss * static_cast<int64_t>(elem),
                    elem);
  }
}

void CopyTransposedAny(size_t elem, const uint8_t* src, uint8_t* dst, int64_t rows, int64_t cols, int64_t drs,
                       int64_t scs) {
  switch (elem) {
    case 1: CopyTransposed<1>(src, dst, rows, cols, drs, scs); break;
    case 2: CopyTransposed<2>(src, dst, rows, cols, drs, scs); break;
    case 4:
#if defined(__x86_64__)
      if (UseAvx2()) {
        CopyTransposed4Avx2(src, dst, rows, cols, drs, scs);
        break;
      }
#endif
      CopyTransposed<4>(src, dst, rows, cols, drs, scs);
      break;
    case 8: CopyTransposed<8>(src, dst, rows, cols, drs, scs); break;
    default:
      for (int64_t r = 0; r < rows; ++r)
        CopyRunAny(elem, src + r * static_cast<int64_t>(elem), dst + r * drs * static_cast<int64_t>(elem),
                   cols, scs, 1);
  }
}

template <typename Body>
void MaybeParallel(ThreadPool* pool, int64_t n, int64_t bytes, Body&& body) {
  if (pool == nullptr || pool->num_threads() <= 1 || bytes < kParallelCopyBytes || n < 2) {
    body(0, n);
    return;
  }
  // Pieces of at least kParallelCopyBytes / 4 each.
  const int64_t per_item = std::max<int64_t>(1, bytes / n);
  const int64_t min_items = std::max<int64_t>(1, (kParallelCopyBytes / 4) / per_item);
  pool->ParallelFor(n, min_items, [&](int64_t b, int64_t e, int) { body(b, e); });
}

}  // namespace

std::vector<int64_t> ContiguousStrides(const std::vector<int64_t>& dims) {
  std::vector<int64_t> s(dims.size(), 1);
  for (size_t a = dims.size(); a-- > 1;) s[a - 1] = s[a] * dims[a];
  return s;
}

void ParallelMemcpy(void* dst, const void* src, size_t bytes, ThreadPool* pool) {
  if (bytes == 0) return;
  constexpr int64_t kChunk = 1 << 16;
  const int64_t chunks = (static_cast<int64_t>(bytes) + kChunk - 1) / kChunk;
  MaybeParallel(pool, chunks, static_cast<int64_t>(bytes), [&](int64_t b, int64_t e) {
    const size_t begin = static_cast<size_t>(b * kChunk);
    const size_t end = std::min(bytes, static_cast<size_t>(e * kChunk));
    std::memcpy(static_cast<uint8_t*>(dst) + begin, static_cast<const uint8_t*>(src) + begin, end - begin);
  });
}

void StridedCopy(const StridedCopySpec& spec, const uint8_t* src, uint8_t* dst, ThreadPool* pool) {
  Simplified p = Simplify(spec);
  if (p.empty) return;
  const auto elem = static_cast<int64_t>(spec.elem_bytes);
  if (p.dims.empty()) {
    std::memcpy(dst, src, spec.elem_bytes);
    return;
  }
  const size_t last = p.dims.size() - 1;
  int64_t total = 1;
  for (int64_t d : p.dims) total *= d;
  const int64_t total_bytes = total * elem;

  // A contiguous run on both sides: memcpy per row.
  if (p.ss[last] == 1 && p.ds[last] == 1) {
    const int64_t run = p.dims[last];
    std::vector<int64_t> od(p.dims.begin(), p.dims.end() - 1), os(p.ss.begin(), p.ss.end() - 1),
        odst(p.ds.begin(), p.ds.end() - 1);
    const int64_t rows = total / run;
    if (rows == 1) {
      ParallelMemcpy(dst, src, static_cast<size_t>(run * elem), pool);
      return;
    }
    MaybeParallel(pool, rows, total_bytes, [&](int64_t b, int64_t e) {
      Walk(od, os, odst, b, e, [&](int64_t so, int64_t dof) {
        std::memcpy(dst + dof * elem, src + so * elem, static_cast<size_t>(run * elem));
      });
    });
    return;
  }
  // A transpose: the destination is contiguous along the last axis, the
  // source along another one. Tile the pair.
  if (p.ds[last] == 1 && p.dims.size() >= 2) {
    size_t j = last;
    for (size_t a = 0; a < last; ++a) {
      if (p.ss[a] == 1) j = a;
    }
    if (j != last) {
      std::vector<int64_t> od, os, odst;
      for (size_t a = 0; a < last; ++a) {
        if (a == j) continue;
        od.push_back(p.dims[a]);
        os.push_back(p.ss[a]);
        odst.push_back(p.ds[a]);
      }
      const int64_t rows = p.dims[j], cols = p.dims[last];
      const int64_t outer = total / (rows * cols);
      const int64_t drs = p.ds[j], scs = p.ss[last];
      if (outer == 1 && rows >= 64) {  // one big matrix: split its rows
        MaybeParallel(pool, (rows + 31) / 32, total_bytes, [&](int64_t b, int64_t e) {
          const int64_t r0 = b * 32, r1 = std::min(rows, e * 32);
          CopyTransposedAny(spec.elem_bytes, src + r0 * elem, dst + r0 * drs * elem, r1 - r0, cols, drs, scs);
        });
        return;
      }
      MaybeParallel(pool, outer, total_bytes, [&](int64_t b, int64_t e) {
        Walk(od, os, odst, b, e, [&](int64_t so, int64_t dof) {
          CopyTransposedAny(spec.elem_bytes, src + so * elem, dst + dof * elem, rows, cols, drs, scs);
        });
      });
      return;
    }
  }
  // Anything else: element runs along the last axis.
  const int64_t n = p.dims[last], ss = p.ss[last], ds = p.ds[last];
  std::vector<int64_t> od(p.dims.begin(), p.dims.end() - 1), os(p.ss.begin(), p.ss.end() - 1),
      odst(p.ds.begin(), p.ds.end() - 1);
  MaybeParallel(pool, total / n, total_bytes, [&](int64_t b, int64_t e) {
    Walk(od, os, odst, b, e, [&](int64_t so, int64_t dof) {
      CopyRunAny(spec.elem_bytes, src + so * elem, dst + dof * elem, n, ss, ds);
    });
  });
}

void StridedCopyReference(const StridedCopySpec& spec, const uint8_t* src, uint8_t* dst) {
  int64_t total = 1;
  for (int64_t d : spec.dims) total *= d;
  const auto elem = static_cast<int64_t>(spec.elem_bytes);
  Walk(spec.dims, spec.src_strides, spec.dst_strides, 0, total,
       [&](int64_t so, int64_t dof) { std::memcpy(dst + dof * elem, src + so * elem, spec.elem_bytes); });
}

void IndexTableCopy(size_t elem_bytes, const std::vector<std::vector<int64_t>>& offsets, const uint8_t* src,
                    uint8_t* dst, ThreadPool* pool) {
  const auto elem = static_cast<int64_t>(elem_bytes);
  if (offsets.empty()) {
    std::memcpy(dst, src, elem_bytes);
    return;
  }
  int64_t total = 1;
  for (const auto& t : offsets) total *= static_cast<int64_t>(t.size());
  if (total == 0) return;
  const std::vector<int64_t>& inner = offsets.back();
  const auto row = static_cast<int64_t>(inner.size());
  const int64_t rows = total / row;
  const size_t row_bytes = static_cast<size_t>(row * elem);
  bool contiguous = true;
  for (int64_t i = 1; i < row && contiguous; ++i) contiguous = inner[static_cast<size_t>(i)] == inner[0] + i;
  const int64_t repeat = contiguous ? 0 : RepeatFactor(inner);
  std::vector<int64_t> outer_dims;
  for (size_t a = 0; a + 1 < offsets.size(); ++a)
    outer_dims.push_back(static_cast<int64_t>(offsets[a].size()));
  MaybeParallel(pool, rows, total * elem, [&](int64_t b, int64_t e) {
    std::vector<int64_t> idx(outer_dims.size(), 0);
    int64_t rest = b;
    for (size_t a = outer_dims.size(); a-- > 0;) {
      idx[a] = rest % outer_dims[a];
      rest /= outer_dims[a];
    }
    int64_t prev_src = -1;
    for (int64_t r = b; r < e; ++r) {
      int64_t so = 0;
      for (size_t a = 0; a < idx.size(); ++a) so += offsets[a][static_cast<size_t>(idx[a])];
      uint8_t* drow = dst + r * row * elem;
      if (r > b && so == prev_src) {
        std::memcpy(drow, drow - row_bytes, row_bytes);  // a repeated source row (upsampling)
      } else if (contiguous) {
        std::memcpy(drow, src + (so + inner[0]) * elem, row_bytes);
      } else if (repeat > 0) {
        RepeatRowAny(elem_bytes, src + (so + inner[0]) * elem, row, repeat, drow);
      } else {
        GatherRowAny(elem_bytes, src + so * elem, inner.data(), row, drow);
      }
      prev_src = so;
      for (size_t a = idx.size(); a-- > 0;) {
        if (++idx[a] < outer_dims[a]) break;
        idx[a] = 0;
      }
    }
  });
}

void IndexTableCopyReference(size_t elem_bytes, const std::vector<std::vector<int64_t>>& offsets,
                             const uint8_t* src, uint8_t* dst) {
  int64_t total = 1;
  for (const auto& t : offsets) total *= static_cast<int64_t>(t.size());
  const auto elem = static_cast<int64_t>(elem_bytes);
  for (int64_t i = 0; i < total; ++i) {
    int64_t rest = i, so = 0;
    for (size_t a = offsets.size(); a-- > 0;) {
      const auto n = static_cast<int64_t>(offsets[a].size());
      so += offsets[a][static_cast<size_t>(rest % n)];
      rest /= n;
    }
    std::memcpy(dst + i * elem, src + so * elem, elem_bytes);
  }
}

}  // namespace kiln::cpu::shape_kernels
