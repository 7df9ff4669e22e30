// The test accelerators as backend plugins: `testaccel` (linears, norms,
// elementwise ops) and `testaccel-mm` (those plus the matmuls and softmax of
// decomposed attention), each a library of its own built from this file. Stand-ins for a device: they compute with kiln's
// CPU kernels (linked in statically), but everything else crosses the
// plugin ABI, and they behave as a device runtime does: kernels and copies
// run on a worker thread per stream after a small delay
// (KILN_TESTACCEL_DELAY_US, default 20, or the option "kernel_delay_us"),
// their memory is a domain of its own, and whatever is not yet written
// holds poison (device memory when allocated and when a pass ends; a host
// buffer a copy is about to fill), so a missing synchronization fails
// every time. Outputs equal the CPU's bit for bit.
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/kernels/isa.h"
#include "backend/plugin/node_attributes.h"
#include "core/thread_pool.h"
#include "format/weight_store.h"
#include "graph/tensor_op.h"
#include "kiln/kiln_backend.h"
#include "testaccel/poisoning_domain.h"
#include "testaccel/worker_stream.h"

namespace kiln {
namespace {

int32_t Fail(char* err, size_t size, int32_t code, const std::string& msg) {
  if (err != nullptr && size > 0) {
    size_t n = std::min(size - 1, msg.size());
    std::memcpy(err, msg.data(), n);
    err[n] = '\0';
  }
  return code;
}

// The CPU kernels the stand-ins compute with, and the threads they use:
// one per process, shared by both backends.
CpuBackend& Kernels() {
  static CpuBackend cpu;
  return cpu;
}

ThreadPool& Threads() {
  static ThreadPool pool(2);
  return pool;
}

std::chrono::microseconds DelayFromEnvironment() {
  const char* s = std::getenv("KILN_TESTACCEL_DELAY_US");
  long us = s != nullptr ? std::strtol(s, nullptr, 10) : 20;
  return std::chrono::microseconds(us < 0 ? 0 : us);
}

// A support list in C: strings with static lifetime.
const char* const kF32[] = {"f32"};
const char* const kF32Bf16[] = {"f32", "bf16"};

kiln_support_entry Entry(const char* op, bool weights, int64_t max_cols = 0) {
  kiln_support_entry e{};
  e.struct_size = sizeof(kiln_support_entry);
  e.abi_version = KILN_BACKEND_ABI_VERSION;
  e.op = op;
  e.activation_dtypes = kF32;
  e.num_activation_dtypes = 1;
  if (weights) {
    e.weight_dtypes = kF32;
    e.num_weight_dtypes = 1;
    e.weight_layout = "panel";
  }
  e.activation_layout = "rows";
  e.max_cols = max_cols;
  e.sliding_window = 1;
  return e;
}

std::vector<kiln_support_entry> Support(bool matmuls) {
  std::vector<kiln_support_entry> s = {
      Entry("linear", true, 4096), Entry("gate_up_silu_mul", true, 4096),
      Entry("rms_norm", false),    Entry("add_rms_norm", false),
      Entry("add", false),         Entry("silu_mul", false),
      Entry("cast", false),        Entry("transfer", false),
  };
  s.back().activation_dtypes = kF32Bf16;
  s.back().num_activation_dtypes = 2;
  if (matmuls) {
    s.push_back(Entry("attn_scores", false));
    s.push_back(Entry("masked_softmax", false));
    s.push_back(Entry("attn_values", false));
  } else {
    // A partial vision op list, as accelerators have: convolutions, pooling,
    // the common activations and elementwise ops, concatenation and the
    // classifier's matmul; everything else (Resize, Softmax, Transpose,
    // Reshape, the shape ops, ...) falls back to the CPU.
    for (const char* op : {"Conv", "kiln.FusedConv", "MaxPool", "AveragePool", "GlobalAveragePool", "Relu",
                           "Sigmoid", "Clip", "HardSwish", "HardSigmoid", "LeakyRelu", "Add", "Mul", "Concat",
                           "Flatten", "Gemm"}) {
      kiln_support_entry e = Entry(op, false);
      // Its convolutions index channels-last, as accelerators' do (the CPU
      // kernels it runs them with take NHWC from AVX2 on).
      const bool conv = (std::strcmp(op, "Conv") == 0 || std::strcmp(op, "kiln.FusedConv") == 0) &&
                        cpu::IsaAvailable(cpu::Isa::kAvx2);
      e.activation_layout = conv ? "nhwc" : "dense";
      e.note = conv ? "nhwc activations, 2-d" : "dense layout, rank <= 8";
      s.push_back(e);
    }
  }
  return s;
}

struct StandIn {
  std::string name;
  std::vector<kiln_support_entry> support;
  std::unique_ptr<PoisoningDomain> domain;
  std::mutex mu;
  std::vector<WorkerStream*> streams;  // every live stream's worker
  std::chrono::microseconds delay = DelayFromEnvironment();
};

StandIn& Self(void* self) { return *static_cast<StandIn*>(self); }

// A stream handle: the worker, and the host memory its pending copies to
// the device still read (which poisoning must not touch).
struct DeviceStream {
  explicit DeviceStream(std::chrono::microseconds delay) : worker(delay) {}
  struct HostRead {
    const uint8_t* begin;
    const uint8_t* end;
    uint64_t position;  // in the worker's stream
  };
  WorkerStream worker;
  std::mutex mu;  // passes of several models may enqueue at once
  std::vector<HostRead> host_reads;
};

DeviceStream& StreamOf(void* stream) { return *static_cast<DeviceStream*>(stream); }

// The bytes rows of a copy span, from the first row's start to the last's end.
std::pair<const uint8_t*, const uint8_t*> Span(const void* p, uint64_t pitch, uint64_t row_bytes, uint64_t rows) {
  const auto* b = static_cast<const uint8_t*>(p);
  return {b, rows == 0 ? b : b + (rows - 1) * pitch + row_bytes};
}

// ---- memory

int32_t Alloc(void* self, uint64_t bytes, void** out, char* err, size_t err_size) {
  auto p = Self(self).domain->Allocate(bytes);
  if (!p.ok()) return Fail(err, err_size, KILN_BACKEND_OUT_OF_MEMORY, p.status().message());
  *out = *p;
  return KILN_BACKEND_OK;
}

void Free(void* self, void* p, uint64_t bytes) { Self(self).domain->Free(p, bytes); }

void Discard(void* self, void* p, uint64_t bytes) { Self(self).domain->Discard(p, bytes); }

int32_t EnqueueCopy(void* self, void* stream, int32_t direction, const kiln_copy* copy, char* err,
                    size_t err_size) {
  if (copy == nullptr || stream == nullptr) return Fail(err, err_size, KILN_BACKEND_INVALID_ARGUMENT, "no copy");
  const kiln_copy c = *copy;
  DeviceStream& ds = StreamOf(stream);
  std::lock_guard<std::mutex> lock(ds.mu);
  if (direction == KILN_COPY_DEVICE_TO_HOST) {
    // Until the copy has run, its host destination holds nothing valid: it
    // is poisoned now, unless a copy still pending reads those bytes (the
    // host's arena reuses them once their last reader is enqueued).
    const uint64_t done = ds.worker.finished();
    std::erase_if(ds.host_reads, [&](const DeviceStream::HostRead& r) { return r.position <= done; });
    auto [begin, end] = Span(c.dst, c.dst_pitch, c.row_bytes, c.rows);
    bool read_pending = false;
    for (const auto& r : ds.host_reads) read_pending = read_pending || (begin < r.end && r.begin < end);
    if (!read_pending) PoisonRows(c.dst, c.dst_pitch, c.row_bytes, c.rows);
  }
  MemoryDomain* domain = Self(self).domain.get();
  uint64_t position = ds.worker.EnqueueCounted([domain, direction, c] {
    if (direction == KILN_COPY_HOST_TO_DEVICE) {
      domain->CopyFromHost(c.dst, c.dst_pitch, c.src, c.src_pitch, c.row_bytes, c.rows);
    } else if (direction == KILN_COPY_DEVICE_TO_HOST) {
      domain->CopyToHost(c.dst, c.dst_pitch, c.src, c.src_pitch, c.row_bytes, c.rows);
    } else {
      domain->CopyWithin(c.dst, c.dst_pitch, c.src, c.src_pitch, c.row_bytes, c.rows);
    }
  });
  if (direction == KILN_COPY_HOST_TO_DEVICE) {
    auto [begin, end] = Span(c.src, c.src_pitch, c.row_bytes, c.rows);
    ds.host_reads.push_back({begin, end, position});
  }
  return KILN_BACKEND_OK;
}

// ---- streams and events

int32_t StreamCreate(void* self, void** out, char* err, size_t err_size) {
  StandIn& s = Self(self);
  std::lock_guard<std::mutex> lock(s.mu);
  auto* stream = new (std::nothrow) DeviceStream(s.delay);
  if (stream == nullptr) return Fail(err, err_size, KILN_BACKEND_OUT_OF_MEMORY, "no memory for a stream");
  s.streams.push_back(&stream->worker);
  *out = stream;
  return KILN_BACKEND_OK;
}

void StreamDestroy(void* self, void* stream) {
  StandIn& s = Self(self);
  {
    std::lock_guard<std::mutex> lock(s.mu);
    std::erase(s.streams, &StreamOf(stream).worker);
  }
  delete &StreamOf(stream);
}

int32_t StreamSynchronize(void*, void* stream, char*, size_t) {
  StreamOf(stream).worker.Synchronize();
  return KILN_BACKEND_OK;
}

int32_t EventCreate(void*, void** out, char* err, size_t err_size) {
  auto* e = new (std::nothrow) HostEvent();
  if (e == nullptr) return Fail(err, err_size, KILN_BACKEND_OUT_OF_MEMORY, "no memory for an event");
  *out = e;
  return KILN_BACKEND_OK;
}

void EventDestroy(void*, void* event) { delete static_cast<HostEvent*>(event); }

int32_t EventRecord(void*, void* event, void* stream, char*, size_t) {
  StreamOf(stream).worker.Record(*static_cast<HostEvent*>(event));
  return KILN_BACKEND_OK;
}

int32_t StreamWaitEvent(void*, void* stream, void* event, char*, size_t) {
  StreamOf(stream).worker.Wait(*static_cast<HostEvent*>(event));
  return KILN_BACKEND_OK;
}

int32_t EventSynchronize(void*, void* event, char*, size_t) {
  static_cast<HostEvent*>(event)->HostWait();
  return KILN_BACKEND_OK;
}

// ---- weights

// A weight as kiln's CPU kernels know it, rebuilt from its C description.
Expected<std::unique_ptr<Weight>> WeightFrom(const kiln_weight_desc& d) {
  auto w = std::make_unique<Weight>();
  w->name = d.name != nullptr ? d.name : "";
  auto dtype = DTypeFromName(d.dtype != nullptr ? d.dtype : "");
  if (!dtype) return InvalidArgument("weight {}: unknown dtype '{}'", w->name, d.dtype != nullptr ? d.dtype : "");
  w->dtype = *dtype;
  w->file_dtype = *dtype;
  for (int32_t i = 0; i < d.rank && i < KILN_BACKEND_MAX_RANK; ++i) w->shape.push_back(d.shape[i]);
  w->data = static_cast<const uint8_t*>(d.data);
  w->nbytes = d.nbytes;
  return w;
}

struct PackedWeight {
  std::unique_ptr<Weight> weight;
  std::shared_ptr<const PackedMatrix> packed;
  std::string layout;
};

// The stand-ins have no int8 kernels: every weight is packed as the CPU
// packs floats, whatever the request asks.
int32_t PackWeight(void*, const kiln_weight_desc* desc, const kiln_pack_request*, kiln_packed_weight* out,
                   char* err, size_t err_size) {
  auto w = WeightFrom(*desc);
  if (!w.ok()) return Fail(err, err_size, KILN_BACKEND_INVALID_ARGUMENT, w.status().message());
  auto box = std::make_unique<PackedWeight>();
  box->weight = std::move(*w);
  PackRequest request;
  request.weight = box->weight.get();
  auto m = Kernels().PackWeight(request);
  if (!m.ok()) return Fail(err, err_size, KILN_BACKEND_UNSUPPORTED, m.status().message());
  box->packed = std::move(*m);
  box->layout = box->packed->layout();
  out->handle = box.get();
  out->layout = box->layout.c_str();
  out->bytes = box->packed->bytes();
  box.release();
  return KILN_BACKEND_OK;
}

void ReleaseWeight(void*, void* handle) { delete static_cast<PackedWeight*>(handle); }

// ---- kernels

RowSpace RowSpaceFrom(int32_t id) {
  switch (id) {
    case KILN_ROWS_TOKENS: return RowSpace::kTokens;
    case KILN_ROWS_OUTPUT: return RowSpace::kOutputRows;
    case KILN_ROWS_CONTEXT: return RowSpace::kContextRows;
    case KILN_ROWS_SCORES: return RowSpace::kScoreRows;
    default: return RowSpace::kNone;
  }
}

// A node rebuilt from its C description into what the CPU's binder takes:
// a one-node graph, its weights, and the bound values.
struct Kernel {
  Graph graph;
  int32_t node = 0;
  std::vector<std::unique_ptr<Weight>> weights;
  BindContext ctx;
  Step step;
};

// An N-d tensor op node: its values rebuilt with their shapes; constants
// (weights) copied now, as a device uploads them at bind.
Status RebuildTensorNode(const kiln_node_desc& d, Kernel* k, Node* n) {
  auto values = [&](const kiln_tensor* ts, uint32_t count, bool inputs, std::vector<ValueId>* ids,
                    std::vector<BoundValue>* bound) -> Status {
    for (uint32_t i = 0; i < count; ++i) {
      const kiln_tensor& t = ts[i];
      if (t.rank < 0 && inputs) {
        ids->push_back(kNoValue);
        bound->emplace_back();
        continue;
      }
      // Channels-last only where the support list says so (the node then
      // carries activation_layout "nhwc", which the kernels below index).
      const bool nhwc = t.layout != nullptr && std::strcmp(t.layout, "nhwc") == 0 && t.rank == 4 &&
                        n->named_attrs.Has("activation_layout");
      if (t.rank > KILN_BACKEND_MAX_RANK || t.layout == nullptr || (std::strcmp(t.layout, "dense") != 0 && !nhwc)) {
        return Unsupported("{}: tensor {} of rank {} in layout '{}' (dense only)", n->name, i, t.rank,
                           t.layout != nullptr ? t.layout : "");
      }
      auto dtype = DTypeFromName(t.dtype != nullptr ? t.dtype : "");
      if (!dtype) return InvalidArgument("{}: tensor {} has unknown dtype", n->name, i);
      TensorType type{*dtype, std::vector<int64_t>(t.shape, t.shape + t.rank)};
      const std::string name = fmt::format("{}.{}{}", n->name, inputs ? "in" : "out", i);
      ValueId id;
      BoundValue b;
      if (t.is_constant) {
        auto bytes = std::make_shared<std::string>(static_cast<const char*>(t.data), type.Bytes());
        id = k->graph.AddConstant(name, TensorData(type, bytes));
        b.data = const_cast<uint8_t*>(k->graph.value(id).constant->data());
      } else {
        id = k->graph.AddTensorValue(name, type);
        b.data = static_cast<uint8_t*>(t.data);
      }
      ids->push_back(id);
      b.cols = type.ElementCount();
      b.row_stride = b.cols;
      b.dtype = *dtype;
      b.rows = RowSpace::kFixed;
      bound->push_back(b);
    }
    return Status::Ok();
  };
  KILN_RETURN_IF_ERROR(values(d.inputs, d.num_inputs, true, &n->inputs, &k->ctx.inputs));
  return values(d.outputs, d.num_outputs, false, &n->outputs, &k->ctx.outputs);
}

Expected<std::unique_ptr<Kernel>> Rebuild(const StandIn& s, const kiln_node_desc& d) {
  auto k = std::make_unique<Kernel>();
  auto op = OpFromName(d.op != nullptr ? d.op : "");
  const bool tensor_op = !op && d.op != nullptr && FindTensorOp(d.op) != nullptr;
  if (!op && !tensor_op) return InvalidArgument("unknown op '{}'", d.op != nullptr ? d.op : "");
  bool supported = false;
  for (const kiln_support_entry& e : s.support) supported = supported || std::strcmp(e.op, d.op) == 0;
  if (!supported) return Unsupported("{} does not run {}", s.name, d.op);
  Node n;
  if (tensor_op) {
    n.op = OpKind::kTensorOp;
    n.op_type = d.op;
    n.name = d.name != nullptr ? d.name : "";
    n.backend = s.name;
    KILN_RETURN_IF_ERROR(AttributesFromList(d.attrs, d.num_attrs, &n.attrs, &n.named_attrs, true));
    KILN_RETURN_IF_ERROR(RebuildTensorNode(d, k.get(), &n));
    k->node = k->graph.AddNode(std::move(n));
    k->ctx.graph = &k->graph;
    k->ctx.node = &k->graph.nodes()[static_cast<size_t>(k->node)];
    k->ctx.scratch = static_cast<uint8_t*>(d.scratch);
    return k;
  }
  n.op = *op;
  n.name = d.name != nullptr ? d.name : "";
  n.backend = s.name;
  KILN_RETURN_IF_ERROR(AttributesFromList(d.attrs, d.num_attrs, &n.attrs, &n.named_attrs));
  auto values = [&](const kiln_tensor* ts, uint32_t count, std::vector<ValueId>* ids,
                    std::vector<BoundValue>* bound) -> Status {
    for (uint32_t i = 0; i < count; ++i) {
      const kiln_tensor& t = ts[i];
      if (t.rank != 2 || (t.layout != nullptr && std::strcmp(t.layout, "rows") != 0)) {
        return Unsupported("{}: tensor {} of rank {} in layout '{}' (rows only)", n.name, i, t.rank,
                           t.layout != nullptr ? t.layout : "");
      }
      auto dtype = DTypeFromName(t.dtype != nullptr ? t.dtype : "");
      if (!dtype) return InvalidArgument("{}: tensor {} has unknown dtype", n.name, i);
      ValueId id = k->graph.AddValue(fmt::format("{}.{}", n.name, ids->size()), *dtype, RowSpaceFrom(t.row_space),
                                     t.shape[1]);
      k->graph.value(id).is_output = t.is_graph_output != 0;
      ids->push_back(id);
      BoundValue b;
      b.data = static_cast<uint8_t*>(t.data);
      b.row_stride = t.strides[0];
      b.cols = t.shape[1];
      b.dtype = *dtype;
      b.rows = RowSpaceFrom(t.row_space);
      b.is_output = t.is_graph_output != 0;
      bound->push_back(b);
    }
    return Status::Ok();
  };
  KILN_RETURN_IF_ERROR(values(d.inputs, d.num_inputs, &n.inputs, &k->ctx.inputs));
  KILN_RETURN_IF_ERROR(values(d.outputs, d.num_outputs, &n.outputs, &k->ctx.outputs));
  for (uint32_t i = 0; i < d.num_weights; ++i) {
    const kiln_weight_ref& r = d.weights[i];
    if (r.weight == nullptr) {
      n.weights.push_back(nullptr);
      k->ctx.packed.push_back(nullptr);
      continue;
    }
    KILN_ASSIGN_OR_RETURN(auto w, WeightFrom(*r.weight));
    n.weights.push_back(w.get());
    k->weights.push_back(std::move(w));
    k->ctx.packed.push_back(r.packed != nullptr ? static_cast<PackedWeight*>(r.packed)->packed.get() : nullptr);
  }
  k->node = k->graph.AddNode(std::move(n));
  k->ctx.graph = &k->graph;
  k->ctx.node = &k->graph.nodes()[static_cast<size_t>(k->node)];
  k->ctx.scratch = static_cast<uint8_t*>(d.scratch);
  k->ctx.kv_layout.num_layers = d.kv.num_layers;
  k->ctx.kv_layout.num_blocks = d.kv.num_blocks;
  k->ctx.kv_layout.block_size = d.kv.block_size;
  k->ctx.kv_layout.num_kv_heads = d.kv.num_kv_heads;
  k->ctx.kv_layout.head_dim = d.kv.head_dim;
  k->ctx.max_positions = d.max_positions;
  k->ctx.capacity.tokens = d.capacity[KILN_ROWS_TOKENS];
  k->ctx.capacity.output_rows = d.capacity[KILN_ROWS_OUTPUT];
  k->ctx.capacity.context_rows = d.capacity[KILN_ROWS_CONTEXT];
  k->ctx.capacity.score_rows = d.capacity[KILN_ROWS_SCORES];
  return k;
}

uint64_t ScratchBytes(void* self, const kiln_node_desc* d) {
  auto k = Rebuild(Self(self), *d);
  if (!k.ok()) return 0;
  const uint64_t bytes = Kernels().ScratchBytes((*k)->graph, *(*k)->ctx.node, (*k)->ctx.capacity);
  // The node is rebuilt again at bind: drop what sizing made of this one.
  Kernels().ForgetTensorKernel(*(*k)->ctx.node);
  return bytes;
}

int32_t Bind(void* self, const kiln_node_desc* d, void** kernel, char* err, size_t err_size) {
  auto k = Rebuild(Self(self), *d);
  if (!k.ok()) return Fail(err, err_size, KILN_BACKEND_UNSUPPORTED, k.status().message());
  auto step = Kernels().Bind((*k)->ctx);
  if (!step.ok()) return Fail(err, err_size, KILN_BACKEND_UNSUPPORTED, step.status().message());
  (*k)->step = std::move(*step);
  *kernel = k->release();
  return KILN_BACKEND_OK;
}

void ReleaseKernel(void*, void* kernel) { delete static_cast<Kernel*>(kernel); }

int32_t Enqueue(void*, void* kernel, void* stream, const kiln_run_args* args, char* err, size_t err_size) {
  if (args == nullptr || args->struct_size < sizeof(kiln_run_args)) {
    return Fail(err, err_size, KILN_BACKEND_INVALID_ARGUMENT, "run arguments missing or too small");
  }
  const kiln_run_args a = *args;  // the struct is valid only during this call
  auto* k = static_cast<Kernel*>(kernel);
  StreamOf(stream).worker.Enqueue([k, a] {
    ForwardBatch b;
    b.num_tokens = a.num_tokens;
    b.token_ids = a.token_ids;
    b.positions = a.positions;
    b.token_seq = a.token_seq;
    b.num_seqs = a.num_seqs;
    b.query_start = a.query_start;
    b.seq_lens = a.seq_lens;
    b.block_tables = a.block_tables;
    b.num_output_rows = a.num_output_rows;
    b.output_rows = a.output_rows;
    RunState s;
    s.batch = &b;
    s.logits = a.logits;
    s.logits_stride = a.logits_stride;
    s.pool = &Threads();
    s.slots = a.slots;
    s.block_table_lens = a.block_table_lens;
    s.context_offsets = a.context_offsets;
    s.score_offsets = a.score_offsets;
    s.context_rows = a.context_rows;
    s.score_rows = a.score_rows;
    k->step.run(s);
  });
  return KILN_BACKEND_OK;
}

int32_t SetOption(void* self, const char* key, const char* value, char* err, size_t err_size) {
  StandIn& s = Self(self);
  if (key == nullptr || std::strcmp(key, "kernel_delay_us") != 0) {
    return Fail(err, err_size, KILN_BACKEND_UNSUPPORTED, fmt::format("no option '{}'", key != nullptr ? key : ""));
  }
  char* end = nullptr;
  long us = value != nullptr ? std::strtol(value, &end, 10) : -1;
  if (value == nullptr || end == value || *end != '\0' || us < 0) {
    return Fail(err, err_size, KILN_BACKEND_INVALID_ARGUMENT, "kernel_delay_us takes a count of microseconds");
  }
  std::lock_guard<std::mutex> lock(s.mu);
  s.delay = std::chrono::microseconds(us);
  for (WorkerStream* stream : s.streams) stream->set_delay(s.delay);
  return KILN_BACKEND_OK;
}

void Destroy(void* self) { delete static_cast<StandIn*>(self); }

kiln_backend Table(StandIn* s, const char* description) {
  kiln_backend t{};
  t.struct_size = sizeof(kiln_backend);
  t.abi_version = KILN_BACKEND_ABI_VERSION;
  t.name = s->name.c_str();
  t.description = description;
  t.support = s->support.data();
  t.num_support = static_cast<uint32_t>(s->support.size());
  t.self = s;
  t.alloc = &Alloc;
  t.free = &Free;
  t.enqueue_copy = &EnqueueCopy;
  t.discard = &Discard;
  t.stream_create = &StreamCreate;
  t.stream_destroy = &StreamDestroy;
  t.stream_synchronize = &StreamSynchronize;
  t.event_create = &EventCreate;
  t.event_destroy = &EventDestroy;
  t.event_record = &EventRecord;
  t.stream_wait_event = &StreamWaitEvent;
  t.event_synchronize = &EventSynchronize;
  t.pack_weight = &PackWeight;
  t.release_weight = &ReleaseWeight;
  t.scratch_bytes = &ScratchBytes;
  t.bind = &Bind;
  t.release_kernel = &ReleaseKernel;
  t.enqueue = &Enqueue;
  t.set_option = &SetOption;
  t.destroy = &Destroy;
  return t;
}

int32_t RegisterStandIn(const kiln_plugin_host* host, const char* name, bool matmuls, const char* description,
                        char* err, size_t err_size) {
  auto* s = new (std::nothrow) StandIn();
  if (s == nullptr) return Fail(err, err_size, KILN_BACKEND_OUT_OF_MEMORY, "no memory");
  s->name = name;
  s->support = Support(matmuls);
  s->domain = std::make_unique<PoisoningDomain>(s->name + "-mem", 0);
  kiln_backend t = Table(s, description);
  int32_t rc = host->register_backend(host->ctx, &t, err, err_size);
  if (rc != KILN_BACKEND_OK) delete s;  // refused: the state is still ours
  return rc;
}

}  // namespace
}  // namespace kiln

extern "C" KILN_BACKEND_EXPORT int32_t kiln_backend_plugin_entry(const kiln_plugin_host* host, char* err,
                                                                 size_t err_size) {
  using kiln::Fail;
  if (host == nullptr || host->struct_size < sizeof(kiln_plugin_host)) {
    return Fail(err, err_size, KILN_BACKEND_INVALID_ARGUMENT, "kiln_plugin_host missing or too small");
  }
  if (host->abi_version != KILN_BACKEND_ABI_VERSION) {
    return Fail(err, err_size, KILN_BACKEND_UNSUPPORTED, "built for another kiln backend ABI version");
  }
  try {
#if defined(KILN_TESTACCEL_MATMULS)
    return kiln::RegisterStandIn(host, "testaccel-mm", true,
                                 "testaccel plus the matmuls and softmax of decomposed attention", err, err_size);
#else
    return kiln::RegisterStandIn(
        host, "testaccel", false,
        "a stand-in accelerator with a partial support list, its own memory and an asynchronous stream "
        "(for testing placement and synchronization)",
        err, err_size);
#endif
  } catch (...) {
    return Fail(err, err_size, KILN_BACKEND_INTERNAL, "unexpected exception");
  }
}
