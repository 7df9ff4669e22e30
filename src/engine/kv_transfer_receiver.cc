// Landed blocks held per transfer until it ends or times out.
#include "engine/kv_transfer_receiver.h"

#include "backend/kv_cache.h"
#include "engine/block_manager.h"
#include "engine/kv_block_copy.h"

namespace kiln {

KvTransferReceiver::KvTransferReceiver(BlockManager& blocks, KvCache& cache, double timeout_seconds)
    : blocks_(blocks), cache_(cache), timeout_seconds_(timeout_seconds) {}

Status KvTransferReceiver::Install(const KvBlockPayload& block, double now) {
  Transfer& t = open_[block.transfer_id];
  t.last_seen = now;
  auto fail = [&](Status status) {
    t.failed = true;
    return status.WithContext(
        fmt::format("KV transfer {:#x}, block {}", block.transfer_id, block.block_index));
  };
  if (static_cast<int32_t>(block.tokens.size()) != blocks_.block_size()) {
    return fail(InvalidArgument("{} tokens in a block of {}", block.tokens.size(), blocks_.block_size()));
  }
  if (BlockManager::ChainHash(block.parent_hash, block.tokens) != block.hash) {
    return fail(InvalidArgument("the block's hash does not match its tokens"));
  }
  const auto expected = static_cast<size_t>(KvBlockPayloadBytes(cache_.layout()));
  if (block.data.size() != expected) {
    return fail(InvalidArgument("{} bytes, where this cache's blocks have {}", block.data.size(), expected));
  }
  BlockManager::AdoptedBlock adopted = blocks_.AdoptTransferredBlock(block.hash, block.tokens);
  if (adopted.already_cached) {
    t.landed += 1;
    return Status::Ok();
  }
  if (adopted.id < 0) {
    return fail(ResourceExhausted("no free KV block to hold it (or prefix caching is off)"));
  }
  // Filed before written: no pass runs between the two (both on the engine
  // thread), so nothing reads the block in between.
  Status written = WriteKvBlock(cache_, adopted.id, block.data);
  t.held.push_back(adopted.id);
  if (!written.ok()) return fail(written);
  t.landed += 1;
  blocks_installed_ += 1;
  return Status::Ok();
}

bool KvTransferReceiver::End(const KvTransferEnd& end) {
  auto it = open_.find(end.transfer_id);
  if (it == open_.end()) return end.num_blocks == 0;
  Transfer& t = it->second;
  const bool complete = !t.failed && t.landed == end.num_blocks;
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
  for (const auto& [id, t] : open_) n += static_cast<int64_t>(t.held.size());
  return n;
}

void KvTransferReceiver::Release(Transfer& transfer) {
  for (int32_t id : transfer.held) blocks_.ReleaseTransferredBlock(id);
  transfer.held.clear();
}

}  // namespace kiln
