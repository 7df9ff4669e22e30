// Fuzzes the KV-transfer messages a decode instance reads off the network
// (handshake, block or layer slice, transfer end), then checks what they
// promise of a message they accept: its layout is canonical, so writing it
// back gives the same bytes, and a block's layer range is not empty.
#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "engine/kv_transfer.h"

namespace {

template <typename Parse, typename Write>
void RoundTrip(std::span<const uint8_t> bytes, Parse parse, Write write) {
  auto message = parse(bytes);
  if (!message.ok()) return;
  const std::vector<uint8_t> again = write(*message);
  if (again.size() != bytes.size() || !std::equal(again.begin(), again.end(), bytes.begin())) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> bytes(data, size);
  RoundTrip(bytes, kiln::DeserializeIdentity, kiln::SerializeIdentity);
  RoundTrip(bytes, kiln::DeserializeBlock, kiln::SerializeBlock);
  if (auto block = kiln::DeserializeBlock(bytes); block.ok()) {
    if (block->layer_begin < 0 || block->layer_end <= block->layer_begin) __builtin_trap();
  }
  RoundTrip(bytes, kiln::DeserializeTransferEnd, kiln::SerializeTransferEnd);
  return 0;
}
