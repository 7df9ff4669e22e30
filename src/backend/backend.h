// The backend interface. A backend is a support list, a memory domain, a
// way to pre-pack weights into its kernels' layout, a binder that turns a
// placed node with resolved buffers into a kernel call, and what a device
// runtime orders work with: a stream its kernels and copies run on, and
// events between streams. It never decides placement: the compiler does.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <span>
#include <mutex>
#include <string>
#include <vector>

#include "backend/forward_batch.h"
#include "backend/kv_cache.h"
#include "backend/memory_domain.h"
#include "backend/stream.h"
#include "backend/support_list.h"
#include "core/status.h"
#include "graph/graph.h"

namespace kiln {

class Collective;
class ThreadPool;
struct StoredPackedMatrix;
struct Weight;

// The version of the packed weight layouts (PackedMatrix::layout() names
// them): bumped whenever any backend changes how it lays out a packed
// weight, so that a compiled artifact holding the old bytes is refused.
inline constexpr int kKernelLayoutVersion = 1;

// What every kernel call can read at run time.
struct RunState {
  const ForwardBatch* batch = nullptr;
  KvCache* kv_cache = nullptr;
  float* logits = nullptr;       // caller memory for the graph's output
  int64_t logits_stride = 0;     // elements between logit rows
  ThreadPool* pool = nullptr;
  // Derived once per pass from the batch (CompiledModel::Forward):
  const int32_t* slots = nullptr;             // [num_tokens]: KV slot of each token
  // The same in the window pool (KvCacheLayout), for the layers in it;
  // null when the batch has no window_block_tables.
  const int32_t* window_slots = nullptr;
  const int32_t* block_table_lens = nullptr;  // [num_seqs]: ceil(seq_len / block_size)
  // Decomposed attention: where each sequence's rows start in the context
  // space (gathered keys) and in the score space, [num_seqs + 1] each.
  const int64_t* context_offsets = nullptr;
  const int64_t* score_offsets = nullptr;
  int64_t context_rows = 0;
  int64_t score_rows = 0;
  // Tensor graphs: the caller's buffers of the graph inputs and outputs,
  // by Value::io_slot; and where a kernel reports an error that depends on
  // run-time values (the first one is kept).
  void* const* tensor_io = nullptr;
  Status* tensor_error = nullptr;
  // A model split across processes: the group its all-reduces sum over.
  Collective* collective = nullptr;

  // The rows of a row space in this pass.
  int64_t RowsIn(RowSpace r) const;
};

class Backend;

// One kernel call of a Program, with every static argument bound.
struct Step {
  std::string name;     // the node's name
  OpKind op = OpKind::kAdd;
  std::string backend;
  // Which implementation the backend bound, where it says
  // ("onednn:jit_fp32_wino_2x3:avx512_core", "kiln-avx512-nchw16c-3x3"):
  // for the plan and the benchmark's per-node table.
  std::string kernel;
  // The kernel, run on the executor's stream (set by the compiler's bind:
  // the backend that bound it, or for a transfer the device side).
  std::function<void(const RunState&)> run;
  // Instead of `run`: called on the host when the Program reaches the step,
  // it enqueues its own work on the executor's stream (copies).
  std::function<void(const RunState&)> enqueue;
  Backend* executor = nullptr;
  // A kv_write step's layer (the node's attrs.layer), -1 for every other
  // step: after it, Program::Run calls the batch's on_kv_layer_written.
  int32_t kv_layer = -1;
};

// A weight in a backend's preferred layout, packed once at load.
class PackedMatrix {
 public:
  virtual ~PackedMatrix() = default;
  virtual std::string layout() const = 0;
  virtual size_t bytes() const = 0;
  // True when the packed form is the file's bytes, used in place.
  virtual bool in_place() const { return false; }
  // The packed bytes by part name, for storing in an artifact (valid while
  // this matrix lives); the weight's own bytes are stored beside them. An
  // error for a form that cannot be stored.
  virtual Expected<std::map<std::string, std::span<const uint8_t>>> StoredParts() const {
    return Unsupported("packed layout {} cannot be stored in an artifact", layout());
  }
};

// A value as the binder sees it: memory and geometry.
struct BoundValue {
  uint8_t* data = nullptr;  // null for the graph output (bound per run) and markers
  int64_t row_stride = 0;   // elements between rows
  int64_t cols = 0;
  DType dtype = DType::kF32;
  RowSpace rows = RowSpace::kTokens;
  bool is_output = false;
  int32_t domain = 0;  // the memory domain of `data`
  // A tensor graph's input or output: data is RunState::tensor_io[io_slot],
  // known only per run.
  int32_t io_slot = -1;

  // The memory of this value in this run.
  uint8_t* Resolve(const RunState& state) const {
    return io_slot >= 0 ? static_cast<uint8_t*>(state.tensor_io[io_slot]) : data;
  }
};

// Value `id`'s geometry as a binder sees it, with no memory bound yet.
BoundValue ShapeOf(const Graph& g, ValueId id);

// A copy of rows between host memory and a backend's domain.
enum class CopyDirection { kHostToDevice, kDeviceToHost, kWithinDevice };
struct RowCopy {
  void* dst = nullptr;
  size_t dst_pitch = 0;  // bytes between rows
  const void* src = nullptr;
  size_t src_pitch = 0;
  size_t row_bytes = 0;
  size_t rows = 0;
};

struct BindContext {
  const Graph* graph = nullptr;
  const Node* node = nullptr;
  std::vector<BoundValue> inputs;
  std::vector<BoundValue> outputs;
  uint8_t* scratch = nullptr;  // ScratchBytes() of node scratch memory
  // One per weight of the node, in node.weights order; null for vectors
  // (norm weights, biases) and absent weights.
  std::vector<const PackedMatrix*> packed;
  KvCacheLayout kv_layout;
  int64_t max_positions = 0;  // positions are below this (the max model length)
  ShapeEnv capacity;          // the bucket's row capacities
};

// What the compiler asks of a backend for one weight matrix.
struct PackRequest {
  const Weight* weight = nullptr;
  const Node* node = nullptr;  // the first node that reads it (its op and name)
  // W8A8 wanted: weights in int8 per output channel, input activations in
  // int8. A backend without such kernels, or for a weight it keeps as it
  // is, packs the weight as usual.
  bool int8 = false;
  // With int8: the input's static clip (scale clip / 127); 0 quantizes it
  // per token at run time.
  float activation_clip = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;

  virtual const std::string& name() const = 0;
  virtual std::string description() const = 0;
  virtual const SupportList& support() const = 0;
  virtual MemoryDomain& domain() = 0;

  // Packs request.weight (a matrix, [out, in]) into the layout of this
  // backend's kernels; called once per weight at load, the result shared by
  // every Program.
  virtual Expected<std::shared_ptr<const PackedMatrix>> PackWeight(const PackRequest& request) = 0;

  // What PackWeight(request) would return, made from `stored` (a compiled
  // artifact's bytes, which outlive the result) without packing again.
  // Errors when `stored` is not the layout this backend packs the request
  // in, or its bytes are not that layout's size.
  virtual Expected<std::shared_ptr<const PackedMatrix>> AdoptPacked(const PackRequest& request,
                                                                    const StoredPackedMatrix& stored) {
    return Unsupported("backend {} cannot adopt packed weights", name());
  }

  // Scratch memory a node needs during its call (planned in the arena).
  virtual size_t ScratchBytes(const Graph& g, const Node& node, const ShapeEnv& capacity) const { return 0; }

  // The kernel call for ctx.node. Errors when the node's shape or dtypes
  // are not what this backend can run (legalize should have prevented it).
  virtual Expected<Step> Bind(const BindContext& ctx) = 0;

  // The stream this backend's kernels and copies run on: created once per
  // process, shared by every model and request.
  virtual Stream& stream() { return HostStream(); }
  // A reusable event that stream() can Record.
  virtual std::unique_ptr<Event> CreateEvent() { return std::make_unique<HostEvent>(); }
  // Enqueues `copy` on stream(); the host may read a host destination only
  // after synchronizing (an event or the stream).
  virtual void EnqueueCopy(CopyDirection direction, const RowCopy& copy);

  // Sets a backend-specific option (a test stand-in's "kernel_delay_us").
  virtual Status SetOption(const std::string& key, const std::string& value) {
    return Unsupported("backend {} has no option '{}'", name(), key);
  }

  // Tensor graphs, as the layout stage asks: the layout this backend wants
  // `node`'s 4-d activations in, where one of its nodes starts a chain in
  // that layout (kRowMajor: none); and whether it runs `node` with its
  // non-constant 4-d inputs and its 4-d outputs in `layout`.
  virtual TensorLayout WantedLayout(const Graph& g, const Node& node) const { return TensorLayout::kRowMajor; }
  virtual bool TakesLayout(const Graph& g, const Node& node, TensorLayout layout) const {
    return layout == TensorLayout::kRowMajor;
  }
  // Whether `node`, run in `layout`, can read its first input row-major
  // while its other activations stay in `layout` (a network's stem: a
  // convolution of few input channels that writes blocked output), so that
  // a chain can start at it without a reorder of its input.
  virtual bool ReadsRowMajorInput(const Graph& g, const Node& node, TensorLayout layout) const {
    return false;
  }

  // True when this backend multiplies bf16 inputs natively (for the
  // `mixed` precision policy of language models, whose kernels use the
  // instructions directly).
  virtual bool has_native_bf16_dot() const { return false; }
  // True when this backend's tensor kernels multiply the bf16 products the
  // tensor graphs' precision policy asks for (compute_dtype = bf16).
  virtual bool has_bf16_tensor_products() const { return has_native_bf16_dot(); }
};

// The backends of this process, created once and shared by every model:
// the CPU, then the backends of the plugins in KILN_BACKEND_PATH (at first
// use), then those loaded explicitly (--backend-plugin).
class BackendRegistry {
 public:
  static BackendRegistry& Get();

  // nullptr when unknown.
  Backend* Find(const std::string& name) const;
  Backend& cpu() const;
  std::vector<Backend*> All() const;
  // "cpu, testaccel".
  std::string Names() const;

  // Loads a backend plugin (include/kiln/kiln_backend.h) and registers its
  // backends. Loading a file already loaded does nothing. A refused plugin
  // registers nothing; the error names the file and the problem.
  Status LoadPlugin(const std::string& path);
  // The plugin files loaded so far.
  std::vector<std::string> plugin_files() const;
  // Messages of the plugins in KILN_BACKEND_PATH that were refused.
  std::vector<std::string> startup_errors() const;

  // Adds a backend (the registry takes ownership); errors when its name is
  // taken.
  Status Register(std::unique_ptr<Backend> backend);

 private:
  BackendRegistry();
  mutable std::mutex mu_;
  std::vector<std::unique_ptr<Backend>> backends_;
  std::vector<std::string> plugin_files_;  // canonical paths
  std::vector<std::string> startup_errors_;
};

}  // namespace kiln
