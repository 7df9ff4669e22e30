// One rank's share of a model's weights under tensor parallelism. Row
// slices of a row-major [out, in] matrix are contiguous (whole rows, so
// whole blocks of a quantized one): they stay views into the source's
// memory, mapped files included. Column slices are gathered row by row
// into a buffer of the rank's own.
#include "format/weight_store.h"

#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

// The store's members' complete types, for its destructor.
#include "core/shape_text.h"
#include "format/artifact_file.h"
#include "format/gguf.h"

namespace kiln {
namespace {

class ShardWeightStore : public WeightStore {
 public:
  ShardWeightStore(const WeightStore& source, int rank, int size) {
    path_ = fmt::format("{} (tensor-parallel rank {} of {})", source.path(), rank, size);
    format_ = source.format();
    config_ = source.config();
  }
  ModelConfig& config() { return config_; }
  void Add(Weight w) {
    index_.emplace(w.name, weights_.size());
    weights_.push_back(std::move(w));
  }
  void Own(std::shared_ptr<void> p) { owned_.push_back(std::move(p)); }
};

// Bytes of `elements` consecutive elements of a row of `w`, which must be
// whole blocks.
Expected<uint64_t> SpanBytes(const Weight& w, int64_t elements, int size) {
  const DTypeInfo& info = GetDTypeInfo(w.dtype);
  if (elements % info.block_size != 0) {
    return InvalidArgument(
        "tensor {} of shape {} ({}): its {} input columns split over {} ranks give {} each, not a whole "
        "number of "
        "its {}-element blocks",
        w.name, ShapeText(w.shape), info.name, w.shape.back(), size, elements, info.block_size);
  }
  return static_cast<uint64_t>(elements / info.block_size) * static_cast<uint64_t>(info.block_bytes);
}

// Rows [first, first + count) of a matrix (or elements of a vector).
Expected<Weight> SliceRows(const Weight& w, int64_t first, int64_t count, int size) {
  const int64_t row = w.shape.size() >= 2 ? w.shape.back() : 1;
  KILN_ASSIGN_OR_RETURN(uint64_t row_bytes, SpanBytes(w, row, size));
  Weight out = w;
  out.shape[0] = count;
  out.data = w.data + static_cast<uint64_t>(first) * row_bytes;
  out.nbytes = static_cast<uint64_t>(count) * row_bytes;
  return out;
}

// Columns [first, first + count) of every row of a matrix, copied.
Expected<Weight> SliceColumns(ShardWeightStore& store, const Weight& w, int64_t first, int64_t count,
                              int size) {
  const int64_t rows = w.shape[0];
  KILN_ASSIGN_OR_RETURN(uint64_t row_bytes, SpanBytes(w, w.shape[1], size));
  KILN_ASSIGN_OR_RETURN(uint64_t offset, SpanBytes(w, first, size));
  KILN_ASSIGN_OR_RETURN(uint64_t slice_bytes, SpanBytes(w, count, size));
  const uint64_t total = slice_bytes * static_cast<uint64_t>(rows);
  constexpr uint64_t kAlign = 64;
  void* p = std::aligned_alloc(kAlign, std::max<uint64_t>(kAlign, (total + kAlign - 1) / kAlign * kAlign));
  if (p == nullptr)
    return ResourceExhausted("tensor {}: cannot allocate {} bytes for its slice", w.name, total);
  std::shared_ptr<void> buffer(p, std::free);
  auto* dst = static_cast<uint8_t*>(p);
  for (int64_t r = 0; r < rows; ++r) {
    std::memcpy(dst + static_cast<uint64_t>(r) * slice_bytes,
                w.data + static_cast<uint64_t>(r) * row_bytes + offset, slice_bytes);
  }
  store.Own(std::move(buffer));
  Weight out = w;
  out.shape[1] = count;
  out.data = dst;
  out.nbytes = total;
  out.file_mapped = false;
  return out;
}

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

}  // namespace

Expected<std::unique_ptr<WeightStore>> WeightStore::TensorParallelShard(
    std::shared_ptr<const WeightStore> source, int rank, int size) {
  if (source == nullptr) return InvalidArgument("tensor parallelism: no weights");
  const ModelConfig& c = source->config();
  if (size < 1 || rank < 0 || rank >= size) {
    return InvalidArgument("tensor parallelism: rank {} of {} ranks", rank, size);
  }
  if (c.tensor_parallel_size != 1)
    return InvalidArgument("{}: already a tensor-parallel shard", source->path());
  if (source->format() == ModelFormat::kArtifact) {
    return Unsupported(
        "{}: a compiled artifact cannot be split for tensor parallelism; give the model it was "
        "compiled from",
        source->path());
  }
  if (c.num_experts > 0) {
    return Unsupported("{}: tensor parallelism over a mixture of experts is not supported", source->path());
  }
  if (c.num_heads % size != 0 || c.num_kv_heads % size != 0) {
    return InvalidArgument(
        "{}: tensor parallel size {} must divide the attention heads ({}) and the key/value heads ({})",
        source->path(), size, c.num_heads, c.num_kv_heads);
  }
  if (c.intermediate_size % size != 0) {
    return InvalidArgument("{}: tensor parallel size {} does not divide intermediate_size {}", source->path(),
                           size, c.intermediate_size);
  }
  auto store = std::make_unique<ShardWeightStore>(*source, rank, size);
  ModelConfig& sc = store->config();
  sc.num_heads = c.num_heads / size;
  sc.num_kv_heads = c.num_kv_heads / size;
  sc.intermediate_size = c.intermediate_size / size;
  sc.tensor_parallel_size = size;
  const int64_t q_rows = sc.num_heads * c.head_dim, kv_rows = sc.num_kv_heads * c.head_dim;
  const int64_t ffn = sc.intermediate_size;

  for (const Weight& w : source->weights()) {
    const std::string& n = w.name;
    Expected<Weight> sliced = w;
    if (n.find(".self_attn.q_proj.") != std::string::npos) {
      sliced = SliceRows(w, rank * q_rows, q_rows, size);
    } else if (n.find(".self_attn.k_proj.") != std::string::npos ||
               n.find(".self_attn.v_proj.") != std::string::npos) {
      sliced = SliceRows(w, rank * kv_rows, kv_rows, size);
    } else if (EndsWith(n, ".self_attn.o_proj.weight")) {
      sliced = SliceColumns(*store, w, rank * q_rows, q_rows, size);
    } else if (EndsWith(n, ".self_attn.o_proj.bias")) {
      if (rank != 0) continue;  // added once, to rank 0's partial sum
    } else if (EndsWith(n, ".mlp.gate_proj.weight") || EndsWith(n, ".mlp.up_proj.weight")) {
      sliced = SliceRows(w, rank * ffn, ffn, size);
    } else if (EndsWith(n, ".mlp.down_proj.weight")) {
      sliced = SliceColumns(*store, w, rank * ffn, ffn, size);
    }
    if (!sliced.ok()) return sliced.status();
    store->Add(std::move(sliced).value());
  }
  // The views point into the source's memory.
  store->Own(std::const_pointer_cast<WeightStore>(source));
  return std::unique_ptr<WeightStore>(std::move(store));
}

}  // namespace kiln
