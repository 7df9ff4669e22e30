// The kiln side of the plugin ABI.
#include "backend/plugin/plugin_backend.h"

#include <algorithm>
#include <cstddef>
#include <cstring>

#include <fmt/format.h>

#include "backend/plugin/node_attributes.h"
#include "format/weight_store.h"
#include "graph/tensor_op.h"

namespace kiln {
namespace {

static_assert(sizeof(KvPoolPointers) == sizeof(kiln_kv_pools) &&
                  offsetof(KvPoolPointers, value_scales) == offsetof(kiln_kv_pools, value_scales),
              "KvPoolPointers is passed to plugins as kiln_kv_pools");

// A plugin's error message, always terminated.
struct ErrorText {
  char text[kPluginErrorBytes] = {0};
  char* data() { return text; }
  std::string str() const { return std::string(text, strnlen(text, kPluginErrorBytes)); }
};

Status CallFailed(const std::string& backend, const char* call, int32_t code, const ErrorText& err) {
  std::string msg = err.str();
  if (msg.empty()) msg = fmt::format("error {}", code);
  switch (code) {
    case KILN_BACKEND_INVALID_ARGUMENT: return InvalidArgument("{}: {}: {}", backend, call, msg);
    case KILN_BACKEND_UNSUPPORTED: return Unsupported("{}: {}: {}", backend, call, msg);
    case KILN_BACKEND_OUT_OF_MEMORY: return ResourceExhausted("{}: {}: {}", backend, call, msg);
    default: return Internal("{}: {}: {}", backend, call, msg);
  }
}

int32_t RowSpaceId(RowSpace r) {
  switch (r) {
    case RowSpace::kTokens: return KILN_ROWS_TOKENS;
    case RowSpace::kOutputRows: return KILN_ROWS_OUTPUT;
    case RowSpace::kContextRows: return KILN_ROWS_CONTEXT;
    case RowSpace::kScoreRows: return KILN_ROWS_SCORES;
    case RowSpace::kNone: return KILN_ROWS_NONE;
    case RowSpace::kFixed: return KILN_ROWS_FIXED;
  }
  return KILN_ROWS_NONE;
}

// An N-d tensor op's value (`id` kNoValue: an omitted input).
kiln_tensor DenseTensor(const Graph& g, ValueId id, const BoundValue& v) {
  kiln_tensor t{};
  t.struct_size = sizeof(kiln_tensor);
  t.abi_version = KILN_BACKEND_ABI_VERSION;
  t.layout = "dense";
  t.row_space = KILN_ROWS_FIXED;
  if (id == kNoValue) {
    t.rank = -1;
    t.dtype = "";
    return t;
  }
  const Value& val = g.value(id);
  t.dtype = DTypeName(val.dtype);
  t.rank = static_cast<int32_t>(std::min<size_t>(val.dims.size(), KILN_BACKEND_MAX_RANK));
  int64_t stride = 1;
  for (int32_t i = t.rank - 1; i >= 0; --i) {
    t.shape[i] = val.dims[static_cast<size_t>(i)];
    t.strides[i] = stride;
    stride *= t.shape[i];
  }
  if (val.layout != TensorLayout::kRowMajor && t.rank == 4) {
    // The layout stage's choice for this backend: dims N,C,H,W, memory as the layout says.
    t.layout = TensorLayoutName(val.layout);
    if (val.layout == TensorLayout::kNHWC) {
      t.strides[1] = 1;
      t.strides[3] = t.shape[1];
      t.strides[2] = t.shape[3] * t.shape[1];
      t.strides[0] = t.shape[2] * t.strides[2];
    }
  }
  t.data = v.data;
  t.is_graph_output = v.is_output ? 1 : 0;
  t.is_constant = val.constant ? 1 : 0;
  return t;
}

kiln_tensor Tensor(const BoundValue& v, const ShapeEnv& capacity) {
  kiln_tensor t{};
  t.struct_size = sizeof(kiln_tensor);
  t.abi_version = KILN_BACKEND_ABI_VERSION;
  t.dtype = DTypeName(v.dtype);
  t.layout = "rows";
  t.rank = 2;
  t.shape[0] = capacity.Rows(v.rows);
  t.shape[1] = v.cols;
  t.strides[0] = v.row_stride;
  t.strides[1] = 1;
  t.row_space = RowSpaceId(v.rows);
  t.data = v.data;
  t.is_graph_output = v.is_output ? 1 : 0;
  return t;
}

kiln_weight_desc WeightDesc(const Weight& w) {
  kiln_weight_desc d{};
  d.struct_size = sizeof(kiln_weight_desc);
  d.abi_version = KILN_BACKEND_ABI_VERSION;
  d.name = w.name.c_str();
  d.dtype = DTypeName(w.dtype);
  d.rank = static_cast<int32_t>(std::min<size_t>(w.shape.size(), KILN_BACKEND_MAX_RANK));
  for (int32_t i = 0; i < d.rank; ++i) d.shape[i] = w.shape[static_cast<size_t>(i)];
  d.data = w.data;
  d.nbytes = w.nbytes;
  return d;
}

// Everything a kiln_node_desc points at, kept alive for the call.
struct NodeDescription {
  NodeDescription(const Graph& g, const Node& n, const std::vector<BoundValue>& in, const std::vector<BoundValue>& out,
                  const ShapeEnv& capacity)
      : attrs(n.attrs, n.named_attrs, n.op == OpKind::kTensorOp) {
    if (n.op == OpKind::kTensorOp) {
      for (size_t i = 0; i < in.size(); ++i) inputs.push_back(DenseTensor(g, n.inputs[i], in[i]));
      for (size_t i = 0; i < out.size(); ++i) outputs.push_back(DenseTensor(g, n.outputs[i], out[i]));
    } else {
      for (const BoundValue& v : in) inputs.push_back(Tensor(v, capacity));
      for (const BoundValue& v : out) outputs.push_back(Tensor(v, capacity));
    }
    for (const Weight* w : n.weights) descs.push_back(w != nullptr ? WeightDesc(*w) : kiln_weight_desc{});
    for (size_t i = 0; i < n.weights.size(); ++i) {
      refs.push_back({n.weights[i] != nullptr ? &descs[i] : nullptr, nullptr});
    }
    desc.struct_size = sizeof(kiln_node_desc);
    desc.abi_version = KILN_BACKEND_ABI_VERSION;
    desc.op = n.op == OpKind::kTensorOp ? n.op_type.c_str() : OpName(n.op);
    desc.name = n.name.c_str();
    desc.attrs = attrs.data();
    desc.num_attrs = attrs.size();
    desc.inputs = inputs.data();
    desc.num_inputs = static_cast<uint32_t>(inputs.size());
    desc.outputs = outputs.data();
    desc.num_outputs = static_cast<uint32_t>(outputs.size());
    desc.weights = refs.data();
    desc.num_weights = static_cast<uint32_t>(refs.size());
    desc.kv.struct_size = sizeof(kiln_kv_layout);
    desc.kv.abi_version = KILN_BACKEND_ABI_VERSION;
    desc.capacity[KILN_ROWS_TOKENS] = capacity.tokens;
    desc.capacity[KILN_ROWS_OUTPUT] = capacity.output_rows;
    desc.capacity[KILN_ROWS_CONTEXT] = capacity.context_rows;
    desc.capacity[KILN_ROWS_SCORES] = capacity.score_rows;
  }

  AttributeList attrs;
  std::vector<kiln_tensor> inputs, outputs;
  std::vector<kiln_weight_desc> descs;
  std::vector<kiln_weight_ref> refs;
  kiln_node_desc desc{};
};

// Values as the binder sees them, for scratch sizing (no memory yet).
std::vector<BoundValue> Shapes(const Graph& g, const std::vector<ValueId>& ids) {
  std::vector<BoundValue> out;
  for (ValueId id : ids) {
    if (id == kNoValue) {
      out.emplace_back();
      continue;
    }
    BoundValue b = ShapeOf(g, id);
    if (g.value(id).constant) b.data = const_cast<uint8_t*>(g.value(id).constant->data());
    out.push_back(b);
  }
  return out;
}

class PluginDomain : public MemoryDomain {
 public:
  PluginDomain(std::string name, const kiln_backend& table, const std::string& backend)
      : MemoryDomain(std::move(name), NewDomainId()), table_(table), backend_(backend) {}

  Expected<void*> Allocate(size_t bytes) override {
    ErrorText err;
    void* p = nullptr;
    int32_t rc = table_.alloc(table_.self, bytes, &p, err.data(), kPluginErrorBytes);
    if (rc != KILN_BACKEND_OK) return CallFailed(backend_, "alloc", rc, err);
    if (p == nullptr) return Internal("{}: alloc of {} bytes returned no memory", backend_, bytes);
    CountAllocation(bytes);
    return p;
  }
  void Free(void* p, size_t bytes) override {
    if (p == nullptr) return;
    table_.free(table_.self, p, bytes);
    CountFree(bytes);
  }
  void Discard(void* p, size_t bytes) override {
    if (table_.discard != nullptr) table_.discard(table_.self, p, bytes);
  }

 private:
  const kiln_backend& table_;
  std::string backend_;
};

class PluginEvent : public Event {
 public:
  PluginEvent(const kiln_backend& table, void* handle) : table_(table), handle_(handle) {}
  ~PluginEvent() override { table_.event_destroy(table_.self, handle_); }
  void HostWait() override {
    ErrorText err;
    (void)table_.event_synchronize(table_.self, handle_, err.data(), kPluginErrorBytes);
  }
  const kiln_backend* table() const { return &table_; }
  void* handle() const { return handle_; }

 private:
  const kiln_backend& table_;
  void* handle_;
};

class PluginStream : public Stream {
 public:
  PluginStream(const kiln_backend& table, void* handle, std::string backend)
      : table_(table), handle_(handle), backend_(std::move(backend)) {}
  ~PluginStream() override { table_.stream_destroy(table_.self, handle_); }

  bool is_inline() const override { return false; }
  // Host work in the stream's order: after everything before it.
  void Enqueue(std::function<void()> work) override {
    Synchronize();
    work();
  }
  void Synchronize() override {
    ErrorText err;
    int32_t rc = table_.stream_synchronize(table_.self, handle_, err.data(), kPluginErrorBytes);
    if (rc != KILN_BACKEND_OK) Fail(CallFailed(backend_, "stream_synchronize", rc, err));
  }
  void Record(Event& event) override {
    auto* own = dynamic_cast<PluginEvent*>(&event);
    if (own != nullptr && own->table() == &table_) {
      ErrorText err;
      int32_t rc = table_.event_record(table_.self, own->handle(), handle_, err.data(), kPluginErrorBytes);
      if (rc != KILN_BACKEND_OK) Fail(CallFailed(backend_, "event_record", rc, err));
      return;
    }
    // Another runtime's event: completing the stream completes the point.
    Synchronize();
    if (auto* host = dynamic_cast<HostEvent*>(&event)) host->Signal(host->Arm());
  }
  void Wait(Event& event) override {
    auto* own = dynamic_cast<PluginEvent*>(&event);
    if (own != nullptr && own->table() == &table_) {
      ErrorText err;
      int32_t rc = table_.stream_wait_event(table_.self, handle_, own->handle(), err.data(), kPluginErrorBytes);
      if (rc != KILN_BACKEND_OK) Fail(CallFailed(backend_, "stream_wait_event", rc, err));
      return;
    }
    event.HostWait();  // the host holds back what it enqueues next
  }
  Status TakeError() override {
    std::lock_guard<std::mutex> lock(mu_);
    Status s = error_;
    error_ = Status::Ok();
    return s;
  }
  void Fail(Status s) {
    std::lock_guard<std::mutex> lock(mu_);
    if (error_.ok()) error_ = std::move(s);
  }
  void* handle() const { return handle_; }

 private:
  const kiln_backend& table_;
  void* handle_;
  std::string backend_;
  std::mutex mu_;
  Status error_ = Status::Ok();
};

class PluginPackedWeight : public PackedMatrix {
 public:
  PluginPackedWeight(const kiln_backend& table, const kiln_packed_weight& p)
      : table_(table), handle_(p.handle), layout_(p.layout != nullptr ? p.layout : ""), bytes_(p.bytes) {}
  ~PluginPackedWeight() override { table_.release_weight(table_.self, handle_); }
  std::string layout() const override { return layout_; }
  size_t bytes() const override { return bytes_; }
  void* handle() const { return handle_; }

 private:
  const kiln_backend& table_;
  void* handle_;
  std::string layout_;
  size_t bytes_;
};

// A support list in C, checked and converted.
Expected<SupportList> ConvertSupport(const kiln_backend& t) {
  SupportList list;
  if (t.num_support > 0 && t.support == nullptr) {
    return InvalidArgument("support list of {} entries is NULL", t.num_support);
  }
  const size_t min_entry = offsetof(kiln_support_entry, note) + sizeof(const char*);
  // Strided by the plugin's own struct size (a newer minor revision may
  // have added fields at the end).
  const size_t stride = t.num_support > 0 ? t.support[0].struct_size : 0;
  for (uint32_t i = 0; i < t.num_support; ++i) {
    const auto& e = *reinterpret_cast<const kiln_support_entry*>(reinterpret_cast<const char*>(t.support) + i * stride);
    if (e.struct_size < min_entry || e.struct_size != stride) {
      return InvalidArgument("support entry {}: struct_size {} (smaller than ABI {}'s {} bytes, or unlike the first "
                             "entry's {})",
                             i, e.struct_size, KILN_BACKEND_ABI_VERSION, min_entry, stride);
    }
    if (e.abi_version != KILN_BACKEND_ABI_VERSION) {
      return Unsupported("support entry {}: ABI version {}; this kiln speaks version {}", i, e.abi_version,
                         KILN_BACKEND_ABI_VERSION);
    }
    auto op = OpFromName(e.op != nullptr ? e.op : "");
    // Not one of kiln's LLM ops: an N-d tensor op by its ONNX name.
    const bool tensor_op = !op && e.op != nullptr && FindTensorOp(e.op) != nullptr;
    if (!op && !tensor_op) return InvalidArgument("support entry {} names unknown op '{}'", i, e.op != nullptr ? e.op : "");
    SupportEntry s;
    s.op = tensor_op ? OpKind::kTensorOp : *op;
    if (tensor_op) {
      s.op_type = e.op;
      s.max_rank = KILN_BACKEND_MAX_RANK;
    }
    auto dtypes = [&](const char* const* names, uint32_t n, std::vector<DType>* out) -> Status {
      for (uint32_t j = 0; j < n; ++j) {
        auto d = DTypeFromName(names != nullptr && names[j] != nullptr ? names[j] : "");
        if (!d) return InvalidArgument("support entry {} ({}) names unknown dtype '{}'", i, e.op,
                                       names != nullptr && names[j] != nullptr ? names[j] : "");
        out->push_back(*d);
      }
      return Status::Ok();
    };
    KILN_RETURN_IF_ERROR(dtypes(e.activation_dtypes, e.num_activation_dtypes, &s.activation_dtypes));
    KILN_RETURN_IF_ERROR(dtypes(e.weight_dtypes, e.num_weight_dtypes, &s.weight_dtypes));
    const char* wanted_layout = tensor_op ? "dense" : "rows";
    if (tensor_op && e.activation_layout != nullptr && std::strcmp(e.activation_layout, "nhwc") == 0) {
      s.activation_layout = TensorLayout::kNHWC;
    } else if (e.activation_layout != nullptr && std::strcmp(e.activation_layout, wanted_layout) != 0) {
      return Unsupported("support entry {} ({}): activation layout '{}' (this kiln places '{}'{} here)", i, e.op,
                         e.activation_layout, wanted_layout, tensor_op ? " or 'nhwc'" : "");
    }
    s.weight_layout = e.weight_layout != nullptr ? e.weight_layout : "";
    s.max_cols = e.max_cols;
    s.max_head_dim = e.max_head_dim;
    s.sliding_window = e.sliding_window != 0;
    // The plugin ABI has no soft-capping or embedding scale attributes: such
    // nodes stay on the CPU.
    s.softcap = false;
    s.embedding_scale = false;
    s.note = e.note != nullptr ? e.note : "";
    list.Add(std::move(s));
  }
  return list;
}

}  // namespace

Expected<std::unique_ptr<PluginBackend>> PluginBackend::Create(const kiln_backend& table,
                                                               const std::string& library) {
  const size_t min_size = offsetof(kiln_backend, destroy) + sizeof(table.destroy);
  if (table.struct_size < min_size) {
    return InvalidArgument("backend plugin {}: struct kiln_backend of {} bytes is smaller than ABI {}'s {} bytes",
                           library, table.struct_size, KILN_BACKEND_ABI_VERSION, min_size);
  }
  if (table.abi_version != KILN_BACKEND_ABI_VERSION) {
    return Unsupported("backend plugin {}: backend built for plugin ABI version {}; this kiln speaks version {}",
                       library, table.abi_version, KILN_BACKEND_ABI_VERSION);
  }
  if (table.name == nullptr || table.name[0] == '\0') {
    return InvalidArgument("backend plugin {}: backend has no name", library);
  }
  const std::string name = table.name;
  struct Required {
    const char* name;
    bool present;
  };
  const Required required[] = {
      {"alloc", table.alloc != nullptr},
      {"free", table.free != nullptr},
      {"enqueue_copy", table.enqueue_copy != nullptr},
      {"stream_create", table.stream_create != nullptr},
      {"stream_destroy", table.stream_destroy != nullptr},
      {"stream_synchronize", table.stream_synchronize != nullptr},
      {"event_create", table.event_create != nullptr},
      {"event_destroy", table.event_destroy != nullptr},
      {"event_record", table.event_record != nullptr},
      {"stream_wait_event", table.stream_wait_event != nullptr},
      {"event_synchronize", table.event_synchronize != nullptr},
      {"pack_weight", table.pack_weight != nullptr},
      {"release_weight", table.release_weight != nullptr},
      {"scratch_bytes", table.scratch_bytes != nullptr},
      {"bind", table.bind != nullptr},
      {"release_kernel", table.release_kernel != nullptr},
      {"enqueue", table.enqueue != nullptr},
      {"destroy", table.destroy != nullptr},
  };
  for (const Required& r : required) {
    if (!r.present) {
      return InvalidArgument("backend plugin {}: backend '{}' lacks the function {}", library, name, r.name);
    }
  }
  if ((table.serialize_weight == nullptr) != (table.deserialize_weight == nullptr)) {
    return InvalidArgument("backend plugin {}: backend '{}' sets only one of serialize_weight and deserialize_weight",
                           library, name);
  }
  auto support = ConvertSupport(table);
  if (!support.ok()) {
    return support.status().WithContext(fmt::format("backend plugin {}: backend '{}'", library, name));
  }

  auto b = std::unique_ptr<PluginBackend>(new PluginBackend());
  std::memcpy(&b->table_, &table, std::min<size_t>(table.struct_size, sizeof(kiln_backend)));
  b->table_.struct_size = sizeof(kiln_backend);
  b->library_ = library;
  b->name_ = name;
  b->description_ = table.description != nullptr ? table.description : "";
  b->support_ = std::move(*support);
  b->domain_ = std::make_unique<PluginDomain>(name + "-mem", b->table_, name);
  ErrorText err;
  void* stream = nullptr;
  int32_t rc = b->table_.stream_create(b->table_.self, &stream, err.data(), kPluginErrorBytes);
  if (rc != KILN_BACKEND_OK || stream == nullptr) {
    b->table_.destroy = nullptr;  // the caller still owns the plugin's state
    return CallFailed(name, "stream_create", rc, err).WithContext("backend plugin " + library);
  }
  b->stream_ = std::make_unique<PluginStream>(b->table_, stream, name);
  return b;
}

PluginBackend::~PluginBackend() {
  stream_.reset();
  if (table_.destroy != nullptr) table_.destroy(table_.self);
}

std::string PluginBackend::description() const {
  return fmt::format("{} (plugin {})", description_, library_);
}

std::unique_ptr<Event> PluginBackend::CreateEvent() {
  ErrorText err;
  void* handle = nullptr;
  int32_t rc = table_.event_create(table_.self, &handle, err.data(), kPluginErrorBytes);
  if (rc != KILN_BACKEND_OK || handle == nullptr) {
    // Ordering then falls back to the host waiting on the whole stream.
    static_cast<PluginStream*>(stream_.get())->Fail(CallFailed(name_, "event_create", rc, err));
    return std::make_unique<HostEvent>();
  }
  return std::make_unique<PluginEvent>(table_, handle);
}

void PluginBackend::EnqueueCopy(CopyDirection direction, const RowCopy& c) {
  kiln_copy copy{};
  copy.struct_size = sizeof(kiln_copy);
  copy.abi_version = KILN_BACKEND_ABI_VERSION;
  copy.dst = c.dst;
  copy.dst_pitch = c.dst_pitch;
  copy.src = c.src;
  copy.src_pitch = c.src_pitch;
  copy.row_bytes = c.row_bytes;
  copy.rows = c.rows;
  int32_t dir = direction == CopyDirection::kHostToDevice   ? KILN_COPY_HOST_TO_DEVICE
                : direction == CopyDirection::kDeviceToHost ? KILN_COPY_DEVICE_TO_HOST
                                                            : KILN_COPY_DEVICE_TO_DEVICE;
  auto* stream = static_cast<PluginStream*>(stream_.get());
  ErrorText err;
  int32_t rc = table_.enqueue_copy(table_.self, stream->handle(), dir, &copy, err.data(), kPluginErrorBytes);
  if (rc != KILN_BACKEND_OK) stream->Fail(CallFailed(name_, "enqueue_copy", rc, err));
}

Status PluginBackend::SetOption(const std::string& key, const std::string& value) {
  if (table_.set_option == nullptr) return Backend::SetOption(key, value);
  ErrorText err;
  int32_t rc = table_.set_option(table_.self, key.c_str(), value.c_str(), err.data(), kPluginErrorBytes);
  return rc == KILN_BACKEND_OK ? Status::Ok() : CallFailed(name_, "set_option", rc, err);
}

Expected<std::shared_ptr<const PackedMatrix>> PluginBackend::PackWeight(const PackRequest& request) {
  const Weight& w = *request.weight;
  kiln_weight_desc desc = WeightDesc(w);
  kiln_pack_request req{};
  req.struct_size = sizeof(kiln_pack_request);
  req.abi_version = KILN_BACKEND_ABI_VERSION;
  req.op = request.node != nullptr ? OpName(request.node->op) : "";
  req.node_name = request.node != nullptr ? request.node->name.c_str() : "";
  req.int8 = request.int8 ? 1 : 0;
  req.activation_clip = request.activation_clip;
  kiln_packed_weight out{};
  out.struct_size = sizeof(kiln_packed_weight);
  out.abi_version = KILN_BACKEND_ABI_VERSION;
  ErrorText err;
  int32_t rc = table_.pack_weight(table_.self, &desc, &req, &out, err.data(), kPluginErrorBytes);
  if (rc != KILN_BACKEND_OK) return CallFailed(name_, "pack_weight", rc, err);
  if (out.handle == nullptr) return Internal("{}: pack_weight of {} returned no handle", name_, w.name);
  return std::shared_ptr<const PackedMatrix>(std::make_shared<PluginPackedWeight>(table_, out));
}

TensorLayout PluginBackend::WantedLayout(const Graph& g, const Node& node) const {
  if (node.op != OpKind::kTensorOp) return TensorLayout::kRowMajor;
  const SupportEntry* e = support_.Match(g, node, nullptr);
  return e == nullptr ? TensorLayout::kRowMajor : e->activation_layout;
}

bool PluginBackend::TakesLayout(const Graph& g, const Node& node, TensorLayout layout) const {
  return layout == WantedLayout(g, node);
}

size_t PluginBackend::ScratchBytes(const Graph& g, const Node& node, const ShapeEnv& capacity) const {
  NodeDescription d(g, node, Shapes(g, node.inputs), Shapes(g, node.outputs), capacity);
  return static_cast<size_t>(table_.scratch_bytes(table_.self, &d.desc));
}

Expected<Step> PluginBackend::Bind(const BindContext& ctx) {
  const Node& n = *ctx.node;
  NodeDescription d(*ctx.graph, n, ctx.inputs, ctx.outputs, ctx.capacity);
  for (size_t i = 0; i < d.refs.size() && i < ctx.packed.size(); ++i) {
    if (ctx.packed[i] == nullptr) continue;
    auto* p = dynamic_cast<const PluginPackedWeight*>(ctx.packed[i]);
    if (p == nullptr) return Internal("{}: weight {} was not packed by this backend", name_, i);
    d.refs[i].packed = p->handle();
  }
  d.desc.scratch = ctx.scratch;
  d.desc.scratch_bytes = ctx.scratch != nullptr ? ScratchBytes(*ctx.graph, n, ctx.capacity) : 0;
  d.desc.kv.num_layers = ctx.kv_layout.num_layers;
  d.desc.kv.num_blocks = ctx.kv_layout.num_blocks;
  d.desc.kv.block_size = ctx.kv_layout.block_size;
  d.desc.kv.num_kv_heads = ctx.kv_layout.num_kv_heads;
  d.desc.kv.head_dim = ctx.kv_layout.head_dim;
  d.desc.kv.dtype = DTypeName(ctx.kv_layout.dtype);
  d.desc.max_positions = ctx.max_positions;
  ErrorText err;
  void* kernel = nullptr;
  int32_t rc = table_.bind(table_.self, &d.desc, &kernel, err.data(), kPluginErrorBytes);
  if (rc != KILN_BACKEND_OK) return CallFailed(name_, "bind", rc, err);
  if (kernel == nullptr) return Internal("{}: bind of {} returned no kernel", name_, n.name);
  const kiln_backend* table = &table_;
  std::shared_ptr<void> handle(kernel, [table](void* k) { table->release_kernel(table->self, k); });
  auto* stream = static_cast<PluginStream*>(stream_.get());
  const std::string backend = name_;

  Step step;
  step.name = n.name;
  step.op = n.op;
  step.backend = name_;
  step.executor = this;
  step.enqueue = [table, handle, stream, backend](const RunState& s) {
    kiln_run_args a{};
    a.struct_size = sizeof(kiln_run_args);
    a.abi_version = KILN_BACKEND_ABI_VERSION;
    static const ForwardBatch kNoBatch{};  // tensor graphs run without one
    const ForwardBatch& b = s.batch != nullptr ? *s.batch : kNoBatch;
    a.num_tokens = b.num_tokens;
    a.token_ids = b.token_ids;
    a.positions = b.positions;
    a.token_seq = b.token_seq;
    a.num_seqs = b.num_seqs;
    a.query_start = b.query_start;
    a.seq_lens = b.seq_lens;
    a.block_tables = b.block_tables;
    a.block_table_lens = s.block_table_lens;
    a.slots = s.slots;
    a.num_output_rows = b.num_output_rows;
    a.output_rows = b.output_rows;
    a.context_offsets = s.context_offsets;
    a.score_offsets = s.score_offsets;
    a.context_rows = s.context_rows;
    a.score_rows = s.score_rows;
    a.logits = s.logits;
    a.logits_stride = s.logits_stride;
    if (s.kv_cache != nullptr) {
      a.kv = reinterpret_cast<const kiln_kv_pools*>(s.kv_cache->pool_pointers().data());
      a.num_kv_layers = static_cast<int64_t>(s.kv_cache->pool_pointers().size());
    }
    ErrorText err;
    int32_t rc = table->enqueue(table->self, handle.get(), stream->handle(), &a, err.data(), kPluginErrorBytes);
    if (rc != KILN_BACKEND_OK) stream->Fail(CallFailed(backend, "enqueue", rc, err));
  };
  return step;
}

}  // namespace kiln
