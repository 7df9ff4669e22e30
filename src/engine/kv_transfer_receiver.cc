// Landed blocks held per transfer until it ends or times out; blocks sent
// in layer slices assembled privately until their last layer lands.
#include "engine/kv_transfer_receiver.h"

#include "backend/kv_cache.h"
#include "engine/block_manager.h"
#include "engine/kv_block_copy.h"

namespace kiln {

KvTransferReceiver::KvTransferReceiver(BlockManager& blocks, KvCache& cache, double timeout_seconds)
    : blocks_(blocks), cache_(cache), timeout_seconds_(timeout_seconds) {}

Status KvTransferReceiver::Check(const Transfer& t, const KvBlockPayload& block) const {
  const KvCacheLayout& layout = cache_.layout();
  if (static_cast<int32_t>(block.tokens.size()) != blocks_.block_size()) {
    return InvalidArgument("{} tokens in a block of {}", block.tokens.size(), blocks_.block_size());
  }
  if (BlockManager::ChainHash(block.parent_hash, block.tokens) != block.hash) {
    return InvalidArgument("the block's hash does not match its tokens");
  }
  if (block.layer_begin < 0 || block.layer_end <= block.layer_begin || block.layer_end > layout.num_layers) {
    return OutOfRange("layers [{}, {}) outside this cache's {} layers", block.layer_begin, block.layer_end,
                      layout.num_layers);
  }
  const auto expected =
      static_cast<size_t>(KvLayerSliceBytes(layout) * (int64_t{block.layer_end} - block.layer_begin));
  if (block.data.size() != expected) {
    return InvalidArgument("{} bytes for layers [{}, {}), where this cache's have {}", block.data.size(),
                           block.layer_begin, block.layer_end, expected);
  }
  if (t.complete.count(block.block_index) != 0) return InvalidArgument("the block landed whole already");
  auto it = t.partial.find(block.block_index);
  if (it == t.partial.end()) return Status::Ok();
  const Partial& p = it->second;
  if (p.hash != block.hash || p.parent_hash != block.parent_hash || p.tokens != block.tokens) {
    return InvalidArgument("its tokens or hash differ from those of the block's first slice");
  }
  for (int32_t layer = block.layer_begin; layer < block.layer_end; ++layer) {
    if (p.layers[static_cast<size_t>(layer)]) return InvalidArgument("layer {} landed already", layer);
  }
  return Status::Ok();
}

Status KvTransferReceiver::Install(const KvBlockPayload& block, double now) {
  Transfer& t = open_[block.transfer_id];
  t.last_seen = now;
  auto fail = [&](Status status) {
    t.failed = true;
    return status.WithContext(fmt::format("KV transfer {:#x}, block {}, layers [{}, {})", block.transfer_id,
                                          block.block_index, block.layer_begin, block.layer_end));
  };
  Status checked = Check(t, block);
  if (!checked.ok()) return fail(checked);
  auto it = t.partial.find(block.block_index);
  if (it == t.partial.end()) {
    Partial p;
    p.parent_hash = block.parent_hash;
    p.hash = block.hash;
    p.tokens = block.tokens;
    p.layers.assign(static_cast<size_t>(cache_.layout().num_layers), false);
    // A prefix cached here already needs no block: its slices are only
    // counted.
    if (!blocks_.IsCached(block.hash)) {
      p.id = blocks_.TakePrivateBlock();
      if (p.id < 0) return fail(ResourceExhausted("no free KV block to hold it (or prefix caching is off)"));
    }
    it = t.partial.emplace(block.block_index, std::move(p)).first;
  }
  Partial& p = it->second;
  if (p.id >= 0) {
    Status written = WriteKvBlockLayers(cache_, p.id, block.layer_begin, block.data);
    if (!written.ok()) return fail(written);
  }
  for (int32_t layer = block.layer_begin; layer < block.layer_end; ++layer) {
    p.layers[static_cast<size_t>(layer)] = true;
  }
  p.num_landed += block.layer_end - block.layer_begin;
  layer_slices_installed_ += block.layer_end - block.layer_begin;
  if (p.num_landed == static_cast<int32_t>(p.layers.size())) Complete(t, block.block_index, p);
  return Status::Ok();
}

void KvTransferReceiver::Complete(Transfer& t, int32_t block_index, Partial& p) {
  if (p.id >= 0) {
    if (blocks_.FileTransferredBlock(p.id, p.hash, p.tokens)) {
      t.held.push_back(p.id);
      blocks_installed_ += 1;
    } else {
      blocks_.FreePrivateBlock(p.id);  // the same prefix landed meanwhile (another transfer's)
    }
  }
  t.landed += 1;
  t.complete.insert(block_index);
  t.partial.erase(block_index);  // `p` dies here
}

bool KvTransferReceiver::End(const KvTransferEnd& end) {
  auto it = open_.find(end.transfer_id);
  if (it == open_.end()) return end.num_blocks == 0;
  Transfer& t = it->second;
  const bool complete = !t.failed && t.partial.empty() && t.landed == end.num_blocks;
  Release(t);
  open_.erase(it);
  return complete;
}

std::vector<uint64_t> KvTransferReceiver::Expire(double now) {
  std::vector<uint64_t> expired;
  for (auto it = open_.begin(); it != open_.end();) {
    if (now - it->second.last_seen > timeout_seconds_) {
      Release(it->second);
      expired.push_back(it->first);
      it = open_.erase(it);
    } else {
      ++it;
    }
  }
  return expired;
}

int64_t KvTransferReceiver::num_held_blocks() const {
  int64_t n = 0;
  for (const auto& entry : open_) n += static_cast<int64_t>(entry.second.held.size());
  return n;
}

int64_t KvTransferReceiver::num_partial_blocks() const {
  int64_t n = 0;
  for (const auto& entry : open_) {
    for (const auto& partial : entry.second.partial) n += partial.second.id >= 0 ? 1 : 0;
  }
  return n;
}

void KvTransferReceiver::Release(Transfer& transfer) {
  for (int32_t id : transfer.held) blocks_.ReleaseTransferredBlock(id);
  transfer.held.clear();
  for (auto& partial : transfer.partial) {
    if (partial.second.id >= 0) blocks_.FreePrivateBlock(partial.second.id);
  }
  transfer.partial.clear();
}

}  // namespace kiln
