// The backend interface. A backend is a support list, a memory domain, a
// way to pre-pack weights into its kernels' layout, and a binder that turns
// a placed node with resolved buffers into a kernel call. It never decides
// placement: the compiler does.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backend/forward_batch.h"
#include "backend/kv_cache.h"
#include "backend/memory_domain.h"
#include "backend/support_list.h"
#include "core/status.h"
#include "graph/graph.h"

namespace kiln {

class ThreadPool;
struct Weight;

// What every kernel call can read at run time.
struct RunState {
  const ForwardBatch* batch = nullptr;
  KvCache* kv_cache = nullptr;
  float* logits = nullptr;       // caller memory for the graph's output
  int64_t logits_stride = 0;     // elements between logit rows
  ThreadPool* pool = nullptr;
  // Derived once per pass from the batch (CompiledModel::Forward):
  const int32_t* slots = nullptr;             // [num_tokens]: KV slot of each token
  const int32_t* block_table_lens = nullptr;  // [num_seqs]: ceil(seq_len / block_size)
  // Decomposed attention: where each sequence's rows start in the context
  // space (gathered keys) and in the score space, [num_seqs + 1] each.
  const int64_t* context_offsets = nullptr;
  const int64_t* score_offsets = nullptr;
  int64_t context_rows = 0;
  int64_t score_rows = 0;
};

// One kernel call of a Program, with every static argument bound.
struct Step {
  std::string name;     // the node's name
  OpKind op = OpKind::kAdd;
  std::string backend;
  std::function<void(const RunState&)> run;
};

// A weight in a backend's preferred layout, packed once at load.
class PackedMatrix {
 public:
  virtual ~PackedMatrix() = default;
  virtual std::string layout() const = 0;
  virtual size_t bytes() const = 0;
  // True when the packed form is the file's bytes, used in place.
  virtual bool in_place() const { return false; }
};

// A value as the binder sees it: memory and geometry.
struct BoundValue {
  uint8_t* data = nullptr;  // null for the graph output (bound per run) and markers
  int64_t row_stride = 0;   // elements between rows
  int64_t cols = 0;
  DType dtype = DType::kF32;
  RowSpace rows = RowSpace::kTokens;
  bool is_output = false;
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

  // Scratch memory a node needs during its call (planned in the arena).
  virtual size_t ScratchBytes(const Graph& g, const Node& node, const ShapeEnv& capacity) const { return 0; }

  // The kernel call for ctx.node. Errors when the node's shape or dtypes
  // are not what this backend can run (legalize should have prevented it).
  virtual Expected<Step> Bind(const BindContext& ctx) = 0;

  // True when this backend multiplies bf16 inputs natively (for the
  // `mixed` precision policy).
  virtual bool has_native_bf16_dot() const { return false; }
};

// The backends of this process, created once and shared by every model.
class BackendRegistry {
 public:
  static BackendRegistry& Get();

  // nullptr when unknown.
  Backend* Find(const std::string& name) const;
  Backend& cpu() const;
  std::vector<Backend*> All() const;
  // "cpu, testaccel".
  std::string Names() const;

  // For tests: adds a backend (the registry takes ownership).
  void Register(std::unique_ptr<Backend> backend);

 private:
  BackendRegistry();
  std::vector<std::unique_ptr<Backend>> backends_;
};

}  // namespace kiln
