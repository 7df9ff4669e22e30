// Per-layer KV sending on the prefill side: the blocks a pass completes
// for their transfers, planned before the pass, each sent as slices of one
// layer from the pass's KvLayerCallback, as soon as that layer's keys and
// values are in the cache, while the later layers still compute.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/forward_batch.h"

namespace kiln {

class KvCache;
class KvConnector;

class KvLayerSender {
 public:
  // REQUIRES: both outlive the sender; connector.SendsPerLayer().
  KvLayerSender(KvConnector& connector, const KvCache& cache);

  // A block whose keys and values are all in the cache at the end of the
  // pass (some maybe from passes before).
  struct PlannedBlock {
    uint64_t transfer_id = 0;
    int32_t block_index = 0;
    uint64_t parent_hash = 0;
    uint64_t hash = 0;
    std::vector<int32_t> tokens;
    int32_t cache_block = 0;  // its block in the cache
  };

  // Forgets the last pass's plan.
  void Clear();
  void Plan(PlannedBlock block);
  const std::vector<PlannedBlock>& planned() const { return planned_; }

  // For the pass's ForwardBatch; unset when nothing is planned.
  KvLayerCallback Callback();

  // After a successful pass: sends the layers the runtime did not call back
  // for (a program whose kv_write steps were fused into others, or a
  // backend that runs a pass without step boundaries). Their bytes are the
  // same; they only go later.
  void SendLayersLeft();

  // Slices sent since Clear, and the layers whose slices went (in order,
  // each once: anything else is the runtime's error).
  int64_t slices_sent() const { return slices_sent_; }
  int32_t layers_sent() const { return next_layer_; }

 private:
  static void OnLayerWritten(void* self, int32_t layer);
  void SendLayer(int32_t layer);

  KvConnector& connector_;
  const KvCache& cache_;
  std::vector<PlannedBlock> planned_;
  int64_t slices_sent_ = 0;
  int32_t next_layer_ = 0;
};

}  // namespace kiln
