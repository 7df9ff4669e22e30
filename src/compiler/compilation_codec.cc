// The stored compilation's format: "KCMP", a version, the key, the memory
// domains by name, the graph's values and nodes, the report, then the plans.
// Little-endian fixed-width fields (core/byte_stream.h).
#include "compiler/compilation_codec.h"

#include <optional>
#include <set>

#include <fmt/format.h>

#include "core/byte_stream.h"
#include "format/weight_store.h"

namespace kiln {
namespace {

constexpr uint32_t kMagic = 0x504d434b;  // "KCMP"
// Bumped whenever a field is added: an artifact with another version
// compiles again at load.
constexpr uint32_t kVersion = 1;
constexpr uint32_t kMaxName = 1u << 20;
constexpr uint32_t kMaxCount = 1u << 24;
// Bounds on sizes read back, so that products of them cannot overflow.
constexpr int64_t kMaxElements = int64_t{1} << 40;
constexpr int64_t kMaxDim = int64_t{1} << 32;
constexpr size_t kMaxArenaBytes = size_t{1} << 48;

// A change to these structs must reach the codec (fields written below).
static_assert(sizeof(NodeAttrs) == 104, "NodeAttrs changed: update EncodeNode/DecodeNode and kVersion");
static_assert(sizeof(BufferSlot) == 32, "BufferSlot changed: update the plan codec and kVersion");
static_assert(sizeof(ShapeEnv) == 32, "ShapeEnv changed: update the plan codec and kVersion");

// ---- writing ----

void PutStrings(ByteWriter& w, const std::vector<std::string>& v) {
  w.Put(static_cast<uint32_t>(v.size()));
  for (const std::string& s : v) w.PutString(s);
}

void PutInts(ByteWriter& w, const std::vector<int64_t>& v) {
  w.Put(static_cast<uint32_t>(v.size()));
  for (int64_t x : v) w.Put(x);
}

void PutIds(ByteWriter& w, const std::vector<ValueId>& v) {
  w.Put(static_cast<uint32_t>(v.size()));
  for (ValueId x : v) w.Put(x);
}

void PutAttributes(ByteWriter& w, const AttributeMap& attrs) {
  w.Put(static_cast<uint32_t>(attrs.entries().size()));
  for (const auto& [name, value] : attrs.entries()) {
    w.PutString(name);
    w.Put(static_cast<uint8_t>(value.index()));
    if (const auto* i = std::get_if<int64_t>(&value)) {
      w.Put(*i);
    } else if (const auto* d = std::get_if<double>(&value)) {
      w.Put(*d);
    } else if (const auto* s = std::get_if<std::string>(&value)) {
      w.PutString(*s);
    } else if (const auto* is = std::get_if<std::vector<int64_t>>(&value)) {
      PutInts(w, *is);
    } else {
      const auto& ds = std::get<std::vector<double>>(value);
      w.Put(static_cast<uint32_t>(ds.size()));
      for (double x : ds) w.Put(x);
    }
  }
}

// How a value's constant is stored.
enum class ConstantTag : uint8_t { kNone = 0, kInline = 1, kPlaced = 2 };

Status PutValue(ByteWriter& w, const Value& v, const LocateConstant* locate) {
  w.PutString(v.name);
  w.Put(static_cast<uint8_t>(v.dtype));
  w.Put(static_cast<uint8_t>(v.rows));
  w.Put(v.cols);
  w.Put(v.producer);
  w.Put(v.view_of);
  w.Put(v.col_offset);
  w.Put(static_cast<uint8_t>(v.is_output));
  w.Put(v.domain);
  PutInts(w, v.dims);
  w.Put(static_cast<uint8_t>(v.layout));
  w.Put(v.io_slot);
  w.Put(static_cast<uint8_t>(v.is_graph_input));
  if (v.constant == nullptr) {
    w.Put(static_cast<uint8_t>(ConstantTag::kNone));
    return Status::Ok();
  }
  std::optional<ConstantPlacement> placed;
  if (locate != nullptr) {
    KILN_ASSIGN_OR_RETURN(placed, (*locate)(*v.constant));
  }
  w.Put(static_cast<uint8_t>(placed ? ConstantTag::kPlaced : ConstantTag::kInline));
  w.Put(static_cast<uint8_t>(v.constant->type().dtype));
  PutInts(w, v.constant->type().dims);
  w.Put(static_cast<uint64_t>(v.constant->bytes()));
  if (placed) {
    w.PutString(placed->section);
    w.Put(placed->offset);
  } else {
    w.PutBytes(v.constant->data(), v.constant->bytes());
  }
  return Status::Ok();
}

Status PutNode(ByteWriter& w, const Node& n, const WeightStore* weights) {
  w.Put(static_cast<uint8_t>(n.op));
  w.PutString(n.name);
  w.PutString(n.op_type);
  w.Put(n.opset);
  PutIds(w, n.inputs);
  PutIds(w, n.outputs);
  w.Put(static_cast<uint32_t>(n.weights.size()));
  for (const Weight* weight : n.weights) {
    if (weight == nullptr) {
      w.Put(uint8_t{0});
      continue;
    }
    // Only the store's own weights can be found again by name.
    if (weights == nullptr || weights->Find(weight->name) != weight) {
      return Unsupported("node {} reads weight {}, which the compiler made: its graph cannot be stored",
                         n.name, weight->name);
    }
    w.Put(uint8_t{1});
    w.PutString(weight->name);
  }
  const NodeAttrs& a = n.attrs;
  w.Put(a.eps);
  w.Put(a.group);
  w.Put(a.layer);
  w.Put(a.n_heads);
  w.Put(a.n_kv_heads);
  w.Put(a.head_dim);
  w.Put(a.sliding_window);
  w.Put(a.scale);
  w.Put(a.softcap);
  w.Put(static_cast<uint8_t>(a.rope_style));
  w.Put(static_cast<uint8_t>(a.gelu_tanh));
  w.Put(static_cast<uint8_t>(a.cast_to));
  w.Put(a.transfer_from);
  w.Put(a.experts_per_token);
  w.Put(static_cast<uint8_t>(a.normalize_expert_weights));
  PutAttributes(w, n.named_attrs);
  w.PutString(n.backend);
  PutStrings(w, n.fused_from);
  w.Put(static_cast<uint8_t>(n.dead));
  return Status::Ok();
}

void PutSlot(ByteWriter& w, const BufferSlot& s) {
  w.Put(s.domain);
  w.Put(static_cast<uint64_t>(s.offset));
  w.Put(static_cast<uint64_t>(s.bytes));
  w.Put(s.first_node);
  w.Put(s.last_node);
}

void PutSizes(ByteWriter& w, const std::map<int32_t, size_t>& m) {
  w.Put(static_cast<uint32_t>(m.size()));
  for (const auto& [d, bytes] : m) {
    w.Put(d);
    w.Put(static_cast<uint64_t>(bytes));
  }
}

void PutReport(ByteWriter& w, const CompileReport& r) {
  w.PutString(r.backend);
  w.Put(static_cast<uint8_t>(r.precision));
  w.PutString(r.input_shapes);
  const LegalizeReport& l = r.legalize;
  w.PutString(l.target);
  w.Put(l.cost_tokens);
  w.Put(static_cast<int32_t>(l.nodes_on_target));
  w.Put(static_cast<int32_t>(l.nodes_on_cpu));
  PutStrings(w, l.rewrites);
  w.Put(static_cast<uint32_t>(l.fallbacks.size()));
  for (const Fallback& f : l.fallbacks) {
    w.PutString(f.node);
    w.Put(static_cast<uint8_t>(f.op));
    w.PutString(f.op_type);
    w.PutString(f.reason);
    w.Put(f.flops);
    w.Put(f.bytes_moved);
  }
  PutStrings(w, r.fuse.fusions);
  PutStrings(w, r.fuse.precision);
  w.Put(static_cast<int32_t>(r.fuse.casts_inserted));
  PutStrings(w, r.layout.transfers);
  PutStrings(w, r.layout.activation_layouts);
  w.PutString(r.layout.kv_cache_backend);
  w.Put(r.layout.kv_cache_domain);
}

// ---- reading ----

class Reader {
 public:
  Reader(std::span<const uint8_t> bytes, const WeightStore* weights,
         const std::map<std::string, int32_t>* domains, const ResolveConstant* resolve = nullptr)
      : in_(bytes, "compiled graph"), weights_(weights), domain_ids_(domains), resolve_(resolve) {}

  ByteReader& in() { return in_; }

  template <typename T>
  Expected<T> Get() {
    return in_.Get<T>();
  }
  Expected<std::string> String() {
    std::string s;
    KILN_RETURN_IF_ERROR(in_.GetString(&s, kMaxName));
    return s;
  }
  Expected<uint32_t> Count(size_t min_bytes_each, const char* of) {
    return in_.GetCount(kMaxCount, min_bytes_each, of);
  }
  Status Strings(std::vector<std::string>* out, const char* of) {
    KILN_ASSIGN_OR_RETURN(uint32_t n, Count(4, of));
    out->resize(n);
    for (std::string& s : *out) {
      KILN_ASSIGN_OR_RETURN(s, String());
    }
    return Status::Ok();
  }
  Status Ints(std::vector<int64_t>* out, const char* of) {
    KILN_ASSIGN_OR_RETURN(uint32_t n, Count(8, of));
    out->resize(n);
    for (int64_t& x : *out) {
      KILN_ASSIGN_OR_RETURN(x, Get<int64_t>());
    }
    return Status::Ok();
  }
  Status Ids(std::vector<ValueId>* out, const char* of) {
    KILN_ASSIGN_OR_RETURN(uint32_t n, Count(4, of));
    out->resize(n);
    for (ValueId& x : *out) {
      KILN_ASSIGN_OR_RETURN(x, Get<ValueId>());
    }
    return Status::Ok();
  }
  template <typename E>
  Expected<E> Enum(int count, const char* what) {
    KILN_ASSIGN_OR_RETURN(uint8_t v, Get<uint8_t>());
    if (v >= count) return Corrupt("compiled graph: {} {} out of range", what, v);
    return static_cast<E>(v);
  }
  Expected<bool> Bool(const char* what) {
    KILN_ASSIGN_OR_RETURN(uint8_t v, Get<uint8_t>());
    if (v > 1) return Corrupt("compiled graph: {} flag {}", what, v);
    return v == 1;
  }

  // Stored domain ids and their names; each is mapped to this process's
  // id where it is used, so that a domain only the compiling process had
  // (a plugin's, unused by this graph) does not matter.
  Status ReadDomains() {
    KILN_ASSIGN_OR_RETURN(uint32_t n, Count(8, "memory domains"));
    for (uint32_t i = 0; i < n; ++i) {
      KILN_ASSIGN_OR_RETURN(int32_t id, Get<int32_t>());
      KILN_ASSIGN_OR_RETURN(std::string name, String());
      if (!domain_names_.emplace(id, std::move(name)).second) {
        return Corrupt("compiled graph: memory domain {} twice", id);
      }
    }
    return Status::Ok();
  }
  Expected<int32_t> Domain() {
    KILN_ASSIGN_OR_RETURN(int32_t id, Get<int32_t>());
    auto it = domain_names_.find(id);
    if (it == domain_names_.end())
      return Corrupt("compiled graph: memory domain {} is not among those it names", id);
    if (domain_ids_ == nullptr) return id;
    auto current = domain_ids_->find(it->second);
    if (current == domain_ids_->end()) {
      return NotFound("the compiled graph places values in memory domain '{}', which no loaded backend has",
                      it->second);
    }
    return current->second;
  }

  Status ReadAttributes(AttributeMap* attrs) {
    KILN_ASSIGN_OR_RETURN(uint32_t n, Count(5, "attributes"));
    for (uint32_t i = 0; i < n; ++i) {
      KILN_ASSIGN_OR_RETURN(std::string name, String());
      KILN_ASSIGN_OR_RETURN(uint8_t kind, Get<uint8_t>());
      switch (kind) {
        case 0: {
          KILN_ASSIGN_OR_RETURN(int64_t v, Get<int64_t>());
          attrs->SetInt(name, v);
          break;
        }
        case 1: {
          KILN_ASSIGN_OR_RETURN(double v, Get<double>());
          attrs->SetFloat(name, v);
          break;
        }
        case 2: {
          KILN_ASSIGN_OR_RETURN(std::string v, String());
          attrs->SetString(name, std::move(v));
          break;
        }
        case 3: {
          std::vector<int64_t> v;
          KILN_RETURN_IF_ERROR(Ints(&v, "attribute ints"));
          attrs->SetInts(name, std::move(v));
          break;
        }
        case 4: {
          KILN_ASSIGN_OR_RETURN(uint32_t count, Count(8, "attribute floats"));
          std::vector<double> v(count);
          for (double& x : v) {
            KILN_ASSIGN_OR_RETURN(x, Get<double>());
          }
          attrs->SetFloats(name, std::move(v));
          break;
        }
        default: return Corrupt("compiled graph: attribute {} of kind {}", name, kind);
      }
    }
    return Status::Ok();
  }

  Status ReadValue(Value* v) {
    KILN_ASSIGN_OR_RETURN(v->name, String());
    KILN_ASSIGN_OR_RETURN(v->dtype, Enum<DType>(kNumDTypes, "dtype"));
    KILN_ASSIGN_OR_RETURN(v->rows, Enum<RowSpace>(static_cast<int>(RowSpace::kFixed) + 1, "row space"));
    KILN_ASSIGN_OR_RETURN(v->cols, Get<int64_t>());
    KILN_ASSIGN_OR_RETURN(v->producer, Get<int32_t>());
    KILN_ASSIGN_OR_RETURN(v->view_of, Get<ValueId>());
    KILN_ASSIGN_OR_RETURN(v->col_offset, Get<int64_t>());
    KILN_ASSIGN_OR_RETURN(v->is_output, Bool("output"));
    KILN_ASSIGN_OR_RETURN(v->domain, Domain());
    KILN_RETURN_IF_ERROR(Ints(&v->dims, "dims"));
    KILN_ASSIGN_OR_RETURN(v->layout,
                          Enum<TensorLayout>(static_cast<int>(TensorLayout::kNCHW16c) + 1, "layout"));
    KILN_ASSIGN_OR_RETURN(v->io_slot, Get<int32_t>());
    KILN_ASSIGN_OR_RETURN(v->is_graph_input, Bool("graph input"));
    if (v->cols < 0 || v->cols > kMaxElements || v->col_offset < 0 || v->col_offset > kMaxElements) {
      return Corrupt("compiled graph: value {} has {} columns at offset {}", v->name, v->cols, v->col_offset);
    }
    int64_t elements = 1;
    for (int64_t d : v->dims) {
      if (d < 0 || d > kMaxDim) return Corrupt("compiled graph: value {} has a dimension of {}", v->name, d);
      elements *= d;
      if (elements > kMaxElements) return Corrupt("compiled graph: value {} is too large", v->name);
    }
    if (v->rows == RowSpace::kFixed && elements != v->cols) {
      return Corrupt("compiled graph: value {} has {} columns for dims {}", v->name, v->cols,
                     DimsToString(v->dims));
    }
    KILN_ASSIGN_OR_RETURN(uint8_t tag, Get<uint8_t>());
    if (tag > static_cast<uint8_t>(ConstantTag::kPlaced)) {
      return Corrupt("compiled graph: value {} has constant tag {}", v->name, tag);
    }
    if (tag != static_cast<uint8_t>(ConstantTag::kNone)) {
      TensorType type;
      KILN_ASSIGN_OR_RETURN(type.dtype, Enum<DType>(kNumDTypes, "constant dtype"));
      KILN_RETURN_IF_ERROR(Ints(&type.dims, "constant dims"));
      if (type != v->tensor_type())
        return Corrupt("compiled graph: constant {} is {}", v->name, type.ToString());
      KILN_ASSIGN_OR_RETURN(uint64_t n, Get<uint64_t>());
      if (n != type.Bytes()) return Corrupt("compiled graph: constant {} of {} bytes", v->name, n);
      if (tag == static_cast<uint8_t>(ConstantTag::kPlaced)) {
        KILN_ASSIGN_OR_RETURN(std::string section, String());
        KILN_ASSIGN_OR_RETURN(uint64_t offset, Get<uint64_t>());
        if (resolve_ == nullptr) {
          return Corrupt("compiled graph: constant {} is stored in section {}, which this graph cannot have",
                         v->name, section);
        }
        auto bytes = (*resolve_)(section, offset, n);
        if (!bytes.ok()) return bytes.status().WithContext(fmt::format("compiled graph: constant {}", v->name));
        if (bytes->size() != n) return Corrupt("compiled graph: constant {}: {} bytes found", v->name, bytes->size());
        v->constant = std::make_shared<const TensorData>(type, std::move(bytes).value());
      } else {
        auto bytes = std::make_shared<std::string>(static_cast<size_t>(n), '\0');
        KILN_RETURN_IF_ERROR(in_.GetBytes(bytes->data(), bytes->size()));
        v->constant = std::make_shared<const TensorData>(type, std::move(bytes));
      }
    }
    return Status::Ok();
  }

  Status ReadNode(Node* n) {
    KILN_ASSIGN_OR_RETURN(n->op, Enum<OpKind>(kNumOpKinds, "op"));
    KILN_ASSIGN_OR_RETURN(n->name, String());
    KILN_ASSIGN_OR_RETURN(n->op_type, String());
    KILN_ASSIGN_OR_RETURN(n->opset, Get<int32_t>());
    KILN_RETURN_IF_ERROR(Ids(&n->inputs, "inputs"));
    KILN_RETURN_IF_ERROR(Ids(&n->outputs, "outputs"));
    KILN_ASSIGN_OR_RETURN(uint32_t count, Count(1, "weights"));
    n->weights.resize(count);
    for (const Weight*& weight : n->weights) {
      KILN_ASSIGN_OR_RETURN(bool named, Bool("weight"));
      if (!named) {
        weight = nullptr;
        continue;
      }
      KILN_ASSIGN_OR_RETURN(std::string name, String());
      weight = weights_ != nullptr ? weights_->Find(name) : nullptr;
      if (weight == nullptr)
        return Corrupt("compiled graph: node {} reads weight {}, which the model lacks", n->name, name);
    }
    NodeAttrs& a = n->attrs;
    KILN_ASSIGN_OR_RETURN(a.eps, Get<double>());
    KILN_ASSIGN_OR_RETURN(a.group, Get<int64_t>());
    KILN_ASSIGN_OR_RETURN(a.layer, Get<int64_t>());
    KILN_ASSIGN_OR_RETURN(a.n_heads, Get<int64_t>());
    KILN_ASSIGN_OR_RETURN(a.n_kv_heads, Get<int64_t>());
    KILN_ASSIGN_OR_RETURN(a.head_dim, Get<int64_t>());
    KILN_ASSIGN_OR_RETURN(a.sliding_window, Get<int64_t>());
    KILN_ASSIGN_OR_RETURN(a.scale, Get<double>());
    KILN_ASSIGN_OR_RETURN(a.softcap, Get<double>());
    KILN_ASSIGN_OR_RETURN(a.rope_style,
                          Enum<RopeStyle>(static_cast<int>(RopeStyle::kInterleaved) + 1, "rope style"));
    KILN_ASSIGN_OR_RETURN(a.gelu_tanh, Bool("gelu_tanh"));
    KILN_ASSIGN_OR_RETURN(a.cast_to, Enum<DType>(kNumDTypes, "cast dtype"));
    KILN_ASSIGN_OR_RETURN(a.transfer_from, Domain());
    KILN_ASSIGN_OR_RETURN(a.experts_per_token, Get<int64_t>());
    KILN_ASSIGN_OR_RETURN(a.normalize_expert_weights, Bool("normalize_expert_weights"));
    KILN_RETURN_IF_ERROR(ReadAttributes(&n->named_attrs));
    KILN_ASSIGN_OR_RETURN(n->backend, String());
    KILN_RETURN_IF_ERROR(Strings(&n->fused_from, "fused nodes"));
    KILN_ASSIGN_OR_RETURN(n->dead, Bool("dead"));
    return Status::Ok();
  }

  Expected<BufferSlot> Slot() {
    BufferSlot s;
    KILN_ASSIGN_OR_RETURN(s.domain, Domain());
    KILN_ASSIGN_OR_RETURN(uint64_t offset, Get<uint64_t>());
    KILN_ASSIGN_OR_RETURN(uint64_t bytes, Get<uint64_t>());
    if (offset > kMaxArenaBytes || bytes > kMaxArenaBytes) {
      return Corrupt("compiled graph: a buffer of {} bytes at offset {}", bytes, offset);
    }
    s.offset = static_cast<size_t>(offset);
    s.bytes = static_cast<size_t>(bytes);
    KILN_ASSIGN_OR_RETURN(s.first_node, Get<int32_t>());
    KILN_ASSIGN_OR_RETURN(s.last_node, Get<int32_t>());
    return s;
  }
  Status Sizes(std::map<int32_t, size_t>* out) {
    KILN_ASSIGN_OR_RETURN(uint32_t n, Count(12, "arena sizes"));
    for (uint32_t i = 0; i < n; ++i) {
      KILN_ASSIGN_OR_RETURN(int32_t d, Domain());
      KILN_ASSIGN_OR_RETURN(uint64_t bytes, Get<uint64_t>());
      if (bytes > kMaxArenaBytes) return Corrupt("compiled graph: an arena of {} bytes", bytes);
      (*out)[d] = static_cast<size_t>(bytes);
    }
    return Status::Ok();
  }

  Status ReadReport(CompileReport* r) {
    KILN_ASSIGN_OR_RETURN(r->backend, String());
    KILN_ASSIGN_OR_RETURN(r->precision, Enum<Precision>(static_cast<int>(Precision::kBf16) + 1, "precision"));
    KILN_ASSIGN_OR_RETURN(r->input_shapes, String());
    LegalizeReport& l = r->legalize;
    KILN_ASSIGN_OR_RETURN(l.target, String());
    KILN_ASSIGN_OR_RETURN(l.cost_tokens, Get<int64_t>());
    KILN_ASSIGN_OR_RETURN(l.nodes_on_target, Get<int32_t>());
    KILN_ASSIGN_OR_RETURN(l.nodes_on_cpu, Get<int32_t>());
    KILN_RETURN_IF_ERROR(Strings(&l.rewrites, "rewrites"));
    KILN_ASSIGN_OR_RETURN(uint32_t fallbacks, Count(29, "fallbacks"));
    l.fallbacks.resize(fallbacks);
    for (Fallback& f : l.fallbacks) {
      KILN_ASSIGN_OR_RETURN(f.node, String());
      KILN_ASSIGN_OR_RETURN(f.op, Enum<OpKind>(kNumOpKinds, "fallback op"));
      KILN_ASSIGN_OR_RETURN(f.op_type, String());
      KILN_ASSIGN_OR_RETURN(f.reason, String());
      KILN_ASSIGN_OR_RETURN(f.flops, Get<double>());
      KILN_ASSIGN_OR_RETURN(f.bytes_moved, Get<double>());
    }
    KILN_RETURN_IF_ERROR(Strings(&r->fuse.fusions, "fusions"));
    KILN_RETURN_IF_ERROR(Strings(&r->fuse.precision, "precision decisions"));
    KILN_ASSIGN_OR_RETURN(r->fuse.casts_inserted, Get<int32_t>());
    KILN_RETURN_IF_ERROR(Strings(&r->layout.transfers, "transfers"));
    KILN_RETURN_IF_ERROR(Strings(&r->layout.activation_layouts, "activation layouts"));
    KILN_ASSIGN_OR_RETURN(r->layout.kv_cache_backend, String());
    KILN_ASSIGN_OR_RETURN(r->layout.kv_cache_domain, Domain());
    return Status::Ok();
  }

 private:
  ByteReader in_;
  const WeightStore* weights_;
  const std::map<std::string, int32_t>* domain_ids_;
  const ResolveConstant* resolve_;
  std::map<int32_t, std::string> domain_names_;  // stored id -> name
};

Status ReadHeader(Reader& r, std::string* key) {
  KILN_ASSIGN_OR_RETURN(uint32_t magic, r.Get<uint32_t>());
  if (magic != kMagic) return Corrupt("compiled graph: not a stored compilation (magic {:08x})", magic);
  KILN_ASSIGN_OR_RETURN(uint32_t version, r.Get<uint32_t>());
  if (version != kVersion) {
    return Status(StatusCode::kUnsupported,
                  fmt::format("compiled graph: format version {}, this kiln reads {}", version, kVersion));
  }
  KILN_ASSIGN_OR_RETURN(*key, r.String());
  return Status::Ok();
}

// The checks that make binding the plan safe: views inside their storage,
// no view cycles, every planned buffer large enough for its value at the
// bucket's sizes and inside its domain's arena.
Status CheckGraphAndPlans(const StoredCompilation& c) {
  const Graph& g = c.graph;
  const auto n_values = static_cast<int64_t>(g.values().size());
  const auto n_nodes = static_cast<int64_t>(g.nodes().size());
  for (int64_t i = 0; i < n_values; ++i) {
    const Value& v = g.value(static_cast<ValueId>(i));
    if (v.producer < -1 || v.producer >= n_nodes)
      return Corrupt("compiled graph: value {} has producer {}", v.name, v.producer);
    if (v.io_slot < -1 || v.io_slot >= n_values)
      return Corrupt("compiled graph: value {} has I/O slot {}", v.name, v.io_slot);
    if (v.view_of == kNoValue) continue;
    // A chain of views ends at a storage within as many steps as there are values.
    ValueId s = static_cast<ValueId>(i);
    for (int64_t steps = 0; g.value(s).view_of != kNoValue; ++steps) {
      const ValueId next = g.value(s).view_of;
      if (next < 0 || next >= n_values || steps >= n_values) {
        return Corrupt("compiled graph: value {} is a view of {}, which is no storage", v.name, next);
      }
      s = next;
    }
    const Value& storage = g.value(s);
    if (v.col_offset + v.cols > storage.cols || v.rows != storage.rows || v.dtype != storage.dtype) {
      return Corrupt("compiled graph: value {} (columns [{}, {})) is not inside {}", v.name, v.col_offset,
                     v.col_offset + v.cols, storage.name);
    }
  }
  for (const Node& n : g.nodes()) {
    for (ValueId in : n.inputs) {
      if (in == kNoValue && n.op != OpKind::kTensorOp)
        return Corrupt("compiled graph: node {} omits an input", n.name);
    }
  }
  KILN_RETURN_IF_ERROR(g.Validate().WithContext("compiled graph"));
  // Each value names the node that writes it.
  for (int64_t i = 0; i < n_nodes; ++i) {
    if (g.nodes()[static_cast<size_t>(i)].dead) continue;
    for (ValueId out : g.nodes()[static_cast<size_t>(i)].outputs) {
      if (g.value(out).producer != i) {
        return Corrupt("compiled graph: value {} is written by node {} but names node {}", g.value(out).name,
                       i, g.value(out).producer);
      }
    }
  }
  for (const MemoryPlan& plan : c.plans) {
    const ShapeEnv& env = plan.env;
    for (int64_t rows : {env.tokens, env.output_rows, env.context_rows, env.score_rows}) {
      if (rows < 0 || rows > kMaxElements) return Corrupt("compiled graph: a bucket of {} rows", rows);
    }
    auto inside = [&](const BufferSlot& s, const std::string& what) -> Status {
      auto arena = plan.arena_bytes.find(s.domain);
      if (arena == plan.arena_bytes.end() || s.offset + s.bytes > arena->second || s.offset % 64 != 0) {
        return Corrupt("compiled graph: the buffer of {} ({} bytes at {}) is outside its arena", what,
                       s.bytes, s.offset);
      }
      return Status::Ok();
    };
    for (const auto& [id, slot] : plan.values) {
      if (id < 0 || id >= n_values) return Corrupt("compiled graph: a buffer for value {}", id);
      const Value& v = g.value(id);
      const auto need =
          static_cast<unsigned __int128>(env.Rows(v.rows)) * static_cast<uint64_t>(v.RowBytes());
      if (v.view_of != kNoValue || slot.bytes < need || slot.domain != v.domain) {
        return Corrupt("compiled graph: the buffer of {} ({} bytes) does not hold it at {} tokens", v.name,
                       slot.bytes, env.tokens);
      }
      KILN_RETURN_IF_ERROR(inside(slot, v.name));
    }
    // Every value the kernels write into the arena has a buffer.
    for (const Node& n : g.nodes()) {
      for (ValueId out : n.outputs) {
        const ValueId s = g.StorageOf(out);
        const Value& v = g.value(s);
        if (v.is_marker() || v.is_output || v.io_slot >= 0 || v.is_preset()) continue;
        const auto need =
            static_cast<unsigned __int128>(env.Rows(v.rows)) * static_cast<uint64_t>(v.RowBytes());
        if (need > 0 && plan.values.count(s) == 0) {
          return Corrupt("compiled graph: value {} has no buffer at {} tokens", v.name, env.tokens);
        }
      }
    }
    for (const auto& [node, slot] : plan.scratch) {
      if (node < 0 || node >= n_nodes) return Corrupt("compiled graph: scratch for node {}", node);
      KILN_RETURN_IF_ERROR(inside(slot, g.nodes()[static_cast<size_t>(node)].name + "'s scratch"));
    }
  }
  for (size_t i = 1; i < c.plans.size(); ++i) {
    if (c.plans[i].env.tokens <= c.plans[i - 1].env.tokens) {
      return Corrupt("compiled graph: buckets not in ascending order");
    }
  }
  return Status::Ok();
}

}  // namespace

namespace {

Expected<std::vector<uint8_t>> Encode(const StoredCompilation& c, const WeightStore* weights,
                                      const LocateConstant* locate) {
  ByteWriter w;
  w.Put(kMagic);
  w.Put(kVersion);
  w.PutString(c.key);
  // Every domain an id below refers to, by name.
  w.Put(static_cast<uint32_t>(c.report.domain_names.size()));
  for (const auto& [id, name] : c.report.domain_names) {
    w.Put(id);
    w.PutString(name);
  }
  const Graph& g = c.graph;
  if (g.laid_out != nullptr) return Unsupported("a graph with laid-out constants cannot be stored here");
  w.Put(static_cast<uint32_t>(g.values().size()));
  for (const Value& v : g.values()) KILN_RETURN_IF_ERROR(PutValue(w, v, locate));
  w.Put(static_cast<uint32_t>(g.nodes().size()));
  for (const Node& n : g.nodes()) KILN_RETURN_IF_ERROR(PutNode(w, n, weights));
  PutReport(w, c.report);
  w.Put(static_cast<uint32_t>(c.plans.size()));
  for (const MemoryPlan& p : c.plans) {
    w.Put(p.env.tokens);
    w.Put(p.env.output_rows);
    w.Put(p.env.context_rows);
    w.Put(p.env.score_rows);
    w.Put(static_cast<uint32_t>(p.values.size()));
    for (const auto& [id, slot] : p.values) {
      w.Put(id);
      PutSlot(w, slot);
    }
    w.Put(static_cast<uint32_t>(p.scratch.size()));
    for (const auto& [node, slot] : p.scratch) {
      w.Put(node);
      PutSlot(w, slot);
    }
    PutSizes(w, p.arena_bytes);
    PutSizes(w, p.naive_bytes);
  }
  return w.Take();
}

}  // namespace

Expected<std::vector<uint8_t>> EncodeCompilation(const StoredCompilation& c, const WeightStore& weights) {
  return Encode(c, &weights, nullptr);
}

Expected<std::vector<uint8_t>> EncodeTensorCompilation(const StoredCompilation& c, const LocateConstant& locate) {
  return Encode(c, nullptr, &locate);
}

Expected<std::string> CompilationKeyOf(std::span<const uint8_t> bytes) {
  Reader r(bytes, nullptr, nullptr);
  std::string key;
  KILN_RETURN_IF_ERROR(ReadHeader(r, &key));
  return key;
}

namespace {

Expected<StoredCompilation> Decode(std::span<const uint8_t> bytes, const WeightStore* weights,
                                   const std::map<std::string, int32_t>& domain_ids, const ResolveConstant* resolve) {
  Reader r(bytes, weights, &domain_ids, resolve);
  StoredCompilation c;
  KILN_RETURN_IF_ERROR(ReadHeader(r, &c.key));
  KILN_RETURN_IF_ERROR(r.ReadDomains());
  KILN_ASSIGN_OR_RETURN(uint32_t n_values, r.Count(40, "values"));
  std::vector<Value>& values = c.graph.values();
  values.resize(n_values);
  for (Value& v : values) KILN_RETURN_IF_ERROR(r.ReadValue(&v));
  KILN_ASSIGN_OR_RETURN(uint32_t n_nodes, r.Count(60, "nodes"));
  std::vector<Node>& nodes = c.graph.nodes();
  nodes.resize(n_nodes);
  for (Node& n : nodes) KILN_RETURN_IF_ERROR(r.ReadNode(&n));
  KILN_RETURN_IF_ERROR(r.ReadReport(&c.report));
  KILN_ASSIGN_OR_RETURN(uint32_t n_plans, r.Count(48, "buckets"));
  c.plans.resize(n_plans);
  for (MemoryPlan& p : c.plans) {
    KILN_ASSIGN_OR_RETURN(p.env.tokens, r.Get<int64_t>());
    KILN_ASSIGN_OR_RETURN(p.env.output_rows, r.Get<int64_t>());
    KILN_ASSIGN_OR_RETURN(p.env.context_rows, r.Get<int64_t>());
    KILN_ASSIGN_OR_RETURN(p.env.score_rows, r.Get<int64_t>());
    KILN_ASSIGN_OR_RETURN(uint32_t n, r.Count(32, "buffers"));
    for (uint32_t i = 0; i < n; ++i) {
      KILN_ASSIGN_OR_RETURN(ValueId id, r.Get<ValueId>());
      KILN_ASSIGN_OR_RETURN(p.values[id], r.Slot());
    }
    KILN_ASSIGN_OR_RETURN(uint32_t scratch, r.Count(32, "scratch buffers"));
    for (uint32_t i = 0; i < scratch; ++i) {
      KILN_ASSIGN_OR_RETURN(int32_t node, r.Get<int32_t>());
      KILN_ASSIGN_OR_RETURN(p.scratch[node], r.Slot());
    }
    KILN_RETURN_IF_ERROR(r.Sizes(&p.arena_bytes));
    KILN_RETURN_IF_ERROR(r.Sizes(&p.naive_bytes));
  }
  KILN_RETURN_IF_ERROR(r.in().End());
  KILN_RETURN_IF_ERROR(CheckGraphAndPlans(c));
  return c;
}

}  // namespace

Expected<StoredCompilation> DecodeCompilation(std::span<const uint8_t> bytes, const WeightStore& weights,
                                              const std::map<std::string, int32_t>& domain_ids) {
  return Decode(bytes, &weights, domain_ids, nullptr);
}

Expected<StoredCompilation> DecodeTensorCompilation(std::span<const uint8_t> bytes,
                                                    const std::map<std::string, int32_t>& domain_ids,
                                                    const ResolveConstant& resolve) {
  return Decode(bytes, nullptr, domain_ids, &resolve);
}

Status CheckStoredScratch(const Graph& g, const std::vector<MemoryPlan>& plans,
                          const std::vector<std::vector<size_t>>& scratch) {
  if (scratch.size() != plans.size())
    return Internal("scratch needs for {} of {} buckets", scratch.size(), plans.size());
  for (size_t b = 0; b < plans.size(); ++b) {
    const MemoryPlan& plan = plans[b];
    for (size_t i = 0; i < scratch[b].size(); ++i) {
      if (scratch[b][i] == 0) continue;
      auto slot = plan.scratch.find(static_cast<int32_t>(i));
      if (slot == plan.scratch.end() || slot->second.bytes < scratch[b][i]) {
        return Corrupt("compiled graph: node {} needs {} bytes of scratch at {} tokens; its plan has {}",
                       g.nodes()[i].name, scratch[b][i], plan.env.tokens,
                       slot == plan.scratch.end() ? 0 : slot->second.bytes);
      }
    }
  }
  return Status::Ok();
}

}  // namespace kiln
