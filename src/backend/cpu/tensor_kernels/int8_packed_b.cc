// Packing int8 operands in K chunks and running the int8 GEMM over them.
#include "backend/cpu/tensor_kernels/int8_packed_b.h"

#include <algorithm>
#include <cstring>

#include "backend/cpu/kernels/isa.h"
#include "backend/cpu/w8a8/int8_gemm_kernels.h"
#include "backend/cpu/w8a8/int8_weight.h"

namespace kiln::cpu {
namespace {

void (*KernelFn(Int8Kernel kernel))(const Int8GemmArgs&) {
  switch (kernel) {
    case Int8Kernel::kAvx2: return &Int8GemmAvx2;
    case Int8Kernel::kAvxVnni: return &Int8GemmAvxVnni;
    case Int8Kernel::kAvx512Vnni: return &Int8GemmAvx512Vnni;
    case Int8Kernel::kReference: break;
  }
  return &Int8GemmReference;
}

// Sets out's sizes and chunks (sums zero); returns the panels' bytes.
int64_t PlanInt8B(int64_t n, int64_t k, bool exact_sums, Int8PackedB* out) {
  Int8PackedB& p = *out;
  p.n = n;
  p.k = k;
  p.kernel = BestInt8Kernel(BestIsa());
  p.kp = (k + kInt8GroupK - 1) / kInt8GroupK * kInt8GroupK;
  p.panels = (n + kInt8PanelRows - 1) / kInt8PanelRows;
  const int64_t chunk_k = exact_sums ? 1024 : p.kp;
  int64_t bytes = 0;
  p.chunks.clear();
  for (int64_t k0 = 0; k0 < p.kp; k0 += chunk_k) {
    Int8PackedB::Chunk chunk;
    chunk.k0 = k0;
    chunk.kp = std::min(chunk_k, p.kp - k0);
    chunk.offset = bytes;
    chunk.w_sum.assign(static_cast<size_t>(p.padded_n()), 0);
    bytes += p.panels * chunk.kp * kInt8PanelRows;
    p.chunks.push_back(std::move(chunk));
  }
  p.w_sum.assign(static_cast<size_t>(p.padded_n()), 0);
  return bytes;
}

}  // namespace

bool PackInt8B(int64_t n, int64_t k, bool exact_sums, const std::function<int32_t(int64_t, int64_t)>& w,
               Int8PackedB* out) {
  if (n <= 0 || k <= 0 || k > kInt8MaxK) return false;
  Int8PackedB& p = *out;
  const int64_t bytes = PlanInt8B(n, k, exact_sums, out);
  p.storage = std::make_shared<std::vector<int8_t>>(static_cast<size_t>(bytes + 64), 0);
  const auto addr = reinterpret_cast<uintptr_t>(p.storage->data());
  int8_t* packed = p.storage->data() + ((64 - addr % 64) % 64);
  for (Int8PackedB::Chunk& chunk : p.chunks) {
    const int64_t groups = chunk.kp / kInt8GroupK;
    int8_t* base = packed + chunk.offset;
    for (int64_t j = 0; j < n; ++j) {
      const int64_t panel = j / kInt8PanelRows, r = j % kInt8PanelRows;
      int32_t sum = 0;
      for (int64_t kk = chunk.k0; kk < std::min(k, chunk.k0 + chunk.kp); ++kk) {
        const int32_t v = w(j, kk);
        if (v < -127 || v > 127) return false;
        const int64_t kc = kk - chunk.k0;
        base[((panel * groups + kc / kInt8GroupK) * kInt8PanelRows + r) * kInt8GroupK + kc % kInt8GroupK] =
            static_cast<int8_t>(v);
        sum += v;
      }
      chunk.w_sum[static_cast<size_t>(j)] = sum;
      p.w_sum[static_cast<size_t>(j)] += sum;
    }
  }
  p.data = packed;
  return true;
}

bool PackInt8BFor(LaidOutWeights* store, std::string_view node, const std::string& name, int64_t n, int64_t k,
                  bool exact_sums, const std::function<int32_t(int64_t, int64_t)>& w, Int8PackedB* out) {
  if (n <= 0 || k <= 0 || k > kInt8MaxK) return false;
  const std::string panels_layout = name + "-panels", sums_layout = name + "-sums";
  if (store != nullptr) {
    Int8PackedB p;
    const int64_t bytes = PlanInt8B(n, k, exact_sums, &p);
    const size_t sums = (p.chunks.size() + 1) * static_cast<size_t>(p.padded_n());
    const uint8_t* stored = store->Take(node, panels_layout, static_cast<size_t>(bytes));
    const uint8_t* stored_sums = stored != nullptr ? store->Take(node, sums_layout, sums * sizeof(int32_t)) : nullptr;
    if (stored_sums != nullptr) {
      const size_t per = static_cast<size_t>(p.padded_n()) * sizeof(int32_t);
      for (size_t i = 0; i < p.chunks.size(); ++i) std::memcpy(p.chunks[i].w_sum.data(), stored_sums + i * per, per);
      std::memcpy(p.w_sum.data(), stored_sums + p.chunks.size() * per, per);
      p.data = reinterpret_cast<const int8_t*>(stored);
      *out = std::move(p);
      return true;
    }
  }
  if (!PackInt8B(n, k, exact_sums, w, out)) return false;
  if (store == nullptr) return true;
  auto sums = std::make_shared<std::vector<int32_t>>();
  for (const Int8PackedB::Chunk& chunk : out->chunks) sums->insert(sums->end(), chunk.w_sum.begin(), chunk.w_sum.end());
  sums->insert(sums->end(), out->w_sum.begin(), out->w_sum.end());
  out->recorded_sums = sums;
  int64_t bytes = 0;
  for (const Int8PackedB::Chunk& chunk : out->chunks) bytes += out->panels * chunk.kp * kInt8PanelRows;
  store->Record(node, panels_layout, {reinterpret_cast<const uint8_t*>(out->data), static_cast<size_t>(bytes)});
  store->Record(node, sums_layout,
                {reinterpret_cast<const uint8_t*>(sums->data()), sums->size() * sizeof(int32_t)});
  return true;
}

void RunInt8Cell(const Int8Cell& c, int64_t r0, int64_t r1, int64_t p0, int64_t p1) {
  const Int8PackedB& b = *c.b;
  const auto fn = KernelFn(b.kernel);
  const int64_t j0 = p0 * kInt8PanelRows, j1 = std::min(b.n, p1 * kInt8PanelRows);
  for (size_t ci = 0; ci < b.chunks.size(); ++ci) {
    const Int8PackedB::Chunk& chunk = b.chunks[ci];
    Int8GemmArgs a{};
    a.xq = c.xq + chunk.k0;
    a.ldxq = c.ldxq;
    a.x_scale = c.x_scale;
    a.w_panels = b.data + chunk.offset;
    a.w_scale = c.w_scale;
    a.w_sum = chunk.w_sum.data();
    a.n_total = b.n;
    a.kp = chunk.kp;
    a.bias = c.sums != nullptr ? nullptr : c.bias;
    a.y = c.y;
    a.ldy = c.ldy;
    a.m_begin = r0;
    a.m_end = r1;
    a.panel_begin = p0;
    a.panel_end = p1;
    fn(a);
    if (c.sums == nullptr) continue;
    // This chunk's sums, exact in fp32 (x_scale and w_scale are 1).
    for (int64_t r = r0; r < r1; ++r) {
      int32_t* out = c.sums + r * c.ldy;
      const float* y = c.y + r * c.ldy;
      for (int64_t j = j0; j < j1; ++j) out[j] = (ci == 0 ? 0 : out[j]) + static_cast<int32_t>(y[j]);
    }
  }
}

}  // namespace kiln::cpu
