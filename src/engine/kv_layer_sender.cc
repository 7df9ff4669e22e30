// Layer slices read out of the cache and handed to the connector.
#include "engine/kv_layer_sender.h"

#include "backend/kv_cache.h"
#include "core/log.h"
#include "engine/kv_block_copy.h"
#include "engine/kv_connector.h"

namespace kiln {

KvLayerSender::KvLayerSender(KvConnector& connector, const KvCache& cache) : connector_(connector), cache_(cache) {}

void KvLayerSender::Clear() {
  planned_.clear();
  slices_sent_ = 0;
  next_layer_ = 0;
}

void KvLayerSender::Plan(PlannedBlock block) { planned_.push_back(std::move(block)); }

KvLayerCallback KvLayerSender::Callback() {
  if (planned_.empty()) return {};
  return {.fn = &KvLayerSender::OnLayerWritten, .context = this};
}

void KvLayerSender::OnLayerWritten(void* self, int32_t layer) { static_cast<KvLayerSender*>(self)->SendLayer(layer); }

void KvLayerSender::SendLayersLeft() {
  for (auto layer = next_layer_; layer < cache_.layout().num_layers; ++layer) SendLayer(static_cast<int32_t>(layer));
}

void KvLayerSender::SendLayer(int32_t layer) {
  if (layer != next_layer_ || layer >= cache_.layout().num_layers) {
    // A slice out of order would leave a gap the receiver never fills; the
    // transfer then fails at its end rather than here, mid-pass.
    KILN_LOG_ERROR("KV layer sender: layer {} written where layer {} was due", layer, next_layer_);
    return;
  }
  next_layer_ += 1;
  for (const PlannedBlock& b : planned_) {
    KvBlockPayload slice;
    slice.transfer_id = b.transfer_id;
    slice.block_index = b.block_index;
    slice.parent_hash = b.parent_hash;
    slice.hash = b.hash;
    slice.layer_begin = layer;
    slice.layer_end = layer + 1;
    slice.tokens = b.tokens;
    slice.data = ReadKvBlockLayers(cache_, b.cache_block, layer, layer + 1);
    connector_.Send(std::move(slice));
    slices_sent_ += 1;
  }
}

}  // namespace kiln
