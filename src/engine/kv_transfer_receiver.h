// The decode instance's side of a KV transfer: files each landed block in
// the prefix cache, holding it until its transfer ends, so that eviction
// cannot take a block while the rest of its prompt is on the way. A
// transfer that ends with every block landed leaves them as ordinary
// prefix-cache entries; one that goes quiet for longer than the time-out
// (its sender died, or lost its request) has its blocks freed.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "engine/kv_transfer.h"

namespace kiln {

class BlockManager;
class KvCache;

class KvTransferReceiver {
 public:
  // `timeout_seconds`: how long a transfer may go without a block or its
  // end before its blocks are freed.
  KvTransferReceiver(BlockManager& blocks, KvCache& cache, double timeout_seconds);

  // Files a landed block (at time `now`, in seconds on any steady clock).
  // Errors name what is wrong with it (a hash that does not match its
  // tokens, a size of another layout); the transfer then fails at its end.
  // A block whose prefix is cached already counts as landed.
  Status Install(const KvBlockPayload& block, double now);

  // Ends a transfer: releases its blocks into the prefix cache and says
  // whether every one of its blocks landed and was filed.
  bool End(const KvTransferEnd& end);

  // Frees the blocks of every transfer quiet since before now - timeout and
  // returns those transfers' ids.
  std::vector<uint64_t> Expire(double now);

  int64_t num_open_transfers() const { return static_cast<int64_t>(open_.size()); }
  int64_t num_held_blocks() const;
  // Blocks filed (landed here, not found cached already) since start.
  int64_t blocks_installed() const { return blocks_installed_; }

 private:
  struct Transfer {
    std::vector<int32_t> held;  // blocks adopted and not yet released
    int32_t landed = 0;         // blocks filed or found cached
    bool failed = false;
    double last_seen = 0;
  };
  void Release(Transfer& transfer);

  BlockManager& blocks_;
  KvCache& cache_;
  double timeout_seconds_;
  std::unordered_map<uint64_t, Transfer> open_;
  int64_t blocks_installed_ = 0;
};

}  // namespace kiln
