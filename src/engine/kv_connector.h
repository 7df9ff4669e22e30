// The engine's side of prefill/decode disaggregation: a transport that
// moves a request's KV blocks from the instance that prefilled it to the
// instance that will decode it. The engine decides which blocks go (a
// request's full prompt blocks, as each pass completes them) and installs
// the blocks that land. A connector that sends per layer gets each block
// as slices of one layer, each handed over during the pass as soon as that
// layer's keys and values are written, so that sending overlaps the
// layers still computing; one that does not gets whole blocks after the
// pass; the connector only carries them, so another
// transport is another KvConnector (the UCX one is src/disagg/).
//
// Threads: the engine calls Send, EndTransfer, TakeLanded and
// Acknowledge from its own thread; WaitAcknowledged is called from request
// threads. Implementations send and receive on threads of their own, so
// that a block's transfer overlaps the passes that follow.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "core/status.h"
#include "engine/kv_transfer.h"

namespace kiln {

// What arrived since the engine last looked.
struct KvLanded {
  std::vector<KvBlockPayload> blocks;
  std::vector<KvTransferEnd> ends;
};

class KvConnector {
 public:
  virtual ~KvConnector() = default;

  // --- The sending (prefill) side.
  // Whether Send may be called during a pass, from the engine thread, with
  // layer slices of blocks (KvBlockPayload's layer range); it must then
  // return at once. False: the engine sends whole blocks after each pass.
  virtual bool SendsPerLayer() const = 0;
  // Queues a block, or a slice of one, for the peer and returns at once.
  virtual void Send(KvBlockPayload block) = 0;
  // Every block of the transfer is queued; the peer acknowledges once it
  // has installed them all.
  virtual void EndTransfer(const KvTransferEnd& end) = 0;
  // Waits until the peer acknowledged the transfer (every block landed and
  // installed in its prefix cache). Errors when the peer refused it,
  // disconnected, or `timeout_seconds` passed.
  virtual Status WaitAcknowledged(uint64_t transfer_id, double timeout_seconds) = 0;

  // --- The receiving (decode) side.
  // Blocks and transfer ends that arrived, oldest first.
  virtual KvLanded TakeLanded() = 0;
  // Tells the sender that the transfer's blocks are installed (`ok`), or
  // that they are not (a missing block, a full cache): its request then
  // fails on the prefill instance instead of waiting.
  virtual void Acknowledge(uint64_t transfer_id, bool ok) = 0;
  // Called (from a connector thread) whenever something lands, so that an
  // idle engine loop wakes up to install it.
  virtual void SetLandedCallback(std::function<void()> callback) = 0;
};

}  // namespace kiln
