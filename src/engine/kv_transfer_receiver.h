// The decode instance's side of a KV transfer: files each landed block in
// the prefix cache, holding it until its transfer ends, so that eviction
// cannot take a block while the rest of its prompt is on the way. A block
// sent in layer slices is assembled in a private block, outside the prefix
// cache (the engine's passes run between landings and must never find a
// half-written block), and filed once its last layer landed. A transfer
// that ends with every block landed leaves them as ordinary prefix-cache
// entries; one that goes quiet for longer than the time-out (its sender
// died, or lost its request) has its blocks, whole or partial, freed.
#pragma once

#include <cstdint>
#include <map>
#include <set>
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

  // Writes a landed block or layer slice (at time `now`, in seconds on any
  // steady clock), filing the block once all of its layers are in.
  // Errors name what is wrong with it (a hash that does not match its
  // tokens, a size of another layout, layers outside this cache's, layers
  // that landed already, a slice whose tokens differ from its block's
  // first); the transfer then fails at its end. A block whose prefix is
  // cached already counts as landed.
  Status Install(const KvBlockPayload& block, double now);

  // Ends a transfer: releases its blocks into the prefix cache, frees the
  // blocks still partial, and says whether every one of its blocks landed
  // whole and was filed.
  bool End(const KvTransferEnd& end);

  // Frees the blocks of every transfer quiet since before now - timeout and
  // returns those transfers' ids.
  std::vector<uint64_t> Expire(double now);

  int64_t num_open_transfers() const { return static_cast<int64_t>(open_.size()); }
  // Filed blocks held until their transfer ends, and partial ones.
  int64_t num_held_blocks() const;
  int64_t num_partial_blocks() const;
  // Blocks filed (landed here, not found cached already) since start.
  int64_t blocks_installed() const { return blocks_installed_; }
  // Layer slices taken in (written, or counted for a prefix cached already;
  // a whole block counts its layers) since start.
  int64_t layer_slices_installed() const { return layer_slices_installed_; }

 private:
  // A block some of whose layers landed.
  struct Partial {
    int32_t id = -1;  // its private block; -1 when its hash was cached at its first slice
    uint64_t parent_hash = 0;
    uint64_t hash = 0;
    std::vector<int32_t> tokens;
    std::vector<bool> layers;  // landed, by layer
    int32_t num_landed = 0;
  };
  struct Transfer {
    std::vector<int32_t> held;          // blocks filed and not yet released
    std::map<int32_t, Partial> partial;  // by block index
    std::set<int32_t> complete;         // block indices filed or found cached
    int32_t landed = 0;                 // blocks filed or found cached
    bool failed = false;
    double last_seen = 0;
  };
  // Checks a message against this cache and, for a slice of a block that
  // has others landed, against them.
  Status Check(const Transfer& t, const KvBlockPayload& block) const;
  // Files a block whose last layer landed.
  void Complete(Transfer& t, int32_t block_index, Partial& p);
  void Release(Transfer& transfer);

  BlockManager& blocks_;
  KvCache& cache_;
  double timeout_seconds_;
  std::unordered_map<uint64_t, Transfer> open_;
  int64_t blocks_installed_ = 0;
  int64_t layer_slices_installed_ = 0;
};

}  // namespace kiln
