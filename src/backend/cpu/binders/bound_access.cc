// Run-time access shared by the CPU binders.
#include "backend/cpu/binders/bound_access.h"

#include "format/weight_store.h"

namespace kiln::cpu {

KernelContext ContextOf(const RunState& s) {
  KernelContext k;
  k.pool = s.pool;
  return k;
}

int64_t RowsOf(RowSpace r, const RunState& s) { return s.RowsIn(r); }

const float* VectorWeight(const Weight* w) {
  return w == nullptr ? nullptr : reinterpret_cast<const float*>(w->data);
}

Status CheckVector(const Weight* w, int64_t n, const std::string& node) {
  if (w == nullptr) return Status::Ok();
  if (w->dtype != DType::kF32) {
    return Unsupported("{}: vector weight {} is {}, the CPU kernels read f32 vectors", node, w->name,
                       DTypeName(w->dtype));
  }
  if (w->num_elements() != n) {
    return InvalidArgument("{}: vector weight {} has {} elements, expected {}", node, w->name, w->num_elements(), n);
  }
  return Status::Ok();
}

KvCacheView KvView(const RunState& s, int64_t layer) {
  const KvCacheLayout& l = s.kv_cache->layout();
  KvCacheView v;
  v.dtype = l.dtype;
  v.k = s.kv_cache->keys(layer);
  v.v = s.kv_cache->values(layer);
  v.k_scale = s.kv_cache->key_scales(layer);
  v.v_scale = s.kv_cache->value_scales(layer);
  v.num_blocks = static_cast<int32_t>(l.LayerBlocks(layer));
  v.block_size = static_cast<int32_t>(l.block_size);
  v.kv_heads = static_cast<int32_t>(l.num_kv_heads);
  v.head_dim = static_cast<int32_t>(l.head_dim);
  return v;
}

}  // namespace kiln::cpu
