// Stage 2, layout: everything about where bytes live.
//   - the paged KV cache lives with the kernel that reads it for attention
//     (fused attention, or the gather of decomposed attention); a KV write
//     placed elsewhere moves to that backend, its inputs transferred;
//   - each value gets the memory domain of the backend that produces it, and
//     a transfer node is inserted wherever a reader sits in another domain;
//   - every weight matrix is packed once into its backend's layout (at load;
//     every Program shares the packed copies);
//   - the activation arena of each domain is planned from value lifetimes
//     (PlanMemory), so buffers are reused and nothing is allocated while a
//     Program runs. Every buffer is 64-byte aligned.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "graph/graph.h"

namespace kiln {

class Backend;
class BackendRegistry;
class DomainBuffer;
class PackedMatrix;
class WeightStore;
struct Weight;

struct PackedWeightInfo {
  std::string weight;
  std::string backend;
  std::string layout;
  size_t bytes = 0;
  bool in_place = false;
  bool adopted = false;  // taken from a compiled artifact, not packed here
};

struct LayoutReport {
  std::vector<std::string> transfers;  // "%12 layers.0.q: testaccel-mem -> host (before ...)"
  std::vector<PackedWeightInfo> packed;
  size_t packed_bytes = 0;
  // Tensor graphs: the activation layouts chosen and the reorders between
  // them ("activations nchw16c on cpu: 3 nodes, ...", "reorder x: row-major -> nchw16c (for conv1)").
  std::vector<std::string> activation_layouts;
  std::string kv_cache_backend;  // where the KV cache must be allocated ("" without attention)
  int32_t kv_cache_domain = 0;
};

// The backend whose memory holds the KV cache: the one running the nodes
// that read it (attention, or the KV gather). nullptr for a graph without
// them; an error when they disagree.
Expected<Backend*> KvCacheBackend(const Graph& g, const BackendRegistry& backends);

// Packed weights keyed by (backend, weight name), shared across Programs;
// and fp32 copies of the 16-bit vector weights (norms, biases).
class PackedWeights {
 public:
  PackedWeights();
  ~PackedWeights();
  const PackedMatrix* Find(const std::string& backend, const std::string& weight) const;
  void Add(const std::string& backend, const std::string& weight, std::shared_ptr<const PackedMatrix> m);
  size_t TotalBytes() const;
  // Every packed matrix by (backend, weight name).
  const std::map<std::pair<std::string, std::string>, std::shared_ptr<const PackedMatrix>>& all() const {
    return packed_;
  }

  // An fp32 copy of vector weight `w` (made on first request).
  Expected<const Weight*> F32Vector(const Weight& w);

 private:
  std::map<std::pair<std::string, std::string>, std::shared_ptr<const PackedMatrix>> packed_;
  struct Vector;
  std::map<std::string, std::unique_ptr<Vector>> vectors_;
};

// W8A8 as the compiler asks backends for it: int8 weights per output
// channel and int8 activations, quantized per token or with static clips.
struct W8A8Options {
  bool enabled = false;
  // Static activation clips by weight name ("model.layers.0.mlp.down_proj.weight"),
  // from calibration: the weight's input is quantized with scale clip / 127.
  // Weights without one quantize their input per token (dynamic).
  std::map<std::string, float> input_clips;
};

// Places the KV writes with the KV cache, assigns domains and inserts
// transfers. The graph output stays in host memory (the caller's).
Status AssignDomainsAndTransfers(Graph& g, const BackendRegistry& backends, LayoutReport* report);

// Packs every weight matrix of every node for the node's backend (once per
// (backend, weight)), asking for int8 when w8a8 is enabled (the backend
// decides which weights it takes so), and points nodes at fp32 copies of
// vector weights stored in another dtype: kernels read norms and biases as
// fp32. Where `stored` (a compiled artifact's weights; may be null) holds a
// weight's packed form for the backend, the backend adopts those bytes
// instead of packing.
Status PackWeights(Graph& g, const BackendRegistry& backends, const W8A8Options& w8a8, PackedWeights* packed,
                   LayoutReport* report, const WeightStore* stored = nullptr);

// Where each buffer lives in its domain's arena for one bucket.
struct BufferSlot {
  int32_t domain = 0;
  size_t offset = 0;
  size_t bytes = 0;
  int32_t first_node = 0;  // lifetime, inclusive
  int32_t last_node = 0;
};

struct MemoryPlan {
  ShapeEnv env;
  std::map<ValueId, BufferSlot> values;   // storage values only (not views, markers, outputs)
  std::map<int32_t, BufferSlot> scratch;  // per node
  std::map<int32_t, size_t> arena_bytes;  // per domain: planned peak
  std::map<int32_t, size_t> naive_bytes;  // per domain: sum of all buffers
};

// Plans the arenas. `scratch_bytes[i]` is node i's scratch need.
Expected<MemoryPlan> PlanMemory(const Graph& g, const ShapeEnv& env, const std::vector<size_t>& scratch_bytes);

// Allocates one arena per domain, `arena_bytes[d]` bytes from the backend
// that owns domain d, appending the buffers to `arenas`; returns each
// domain's base address.
Expected<std::map<int32_t, uint8_t*>> AllocateArenas(const std::map<int32_t, size_t>& arena_bytes,
                                                     const BackendRegistry& backends,
                                                     std::vector<DomainBuffer>* arenas);

inline size_t AlignUp64(size_t n) { return (n + 63) & ~static_cast<size_t>(63); }

}  // namespace kiln
