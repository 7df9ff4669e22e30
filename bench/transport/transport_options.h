// What kiln_bench_transport measures: message sizes, all-reduce shapes, KV
// block shapes and how often, parsed from its command line.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace kiln::transport {

// One model's KV cache shape: a block of `block_tokens` tokens holds K and V
// for every layer, so it is 2 x layers x kv_heads x head_dim x tokens
// elements.
struct KvShape {
  std::string name;
  int64_t layers = 0;
  int64_t kv_heads = 0;
  int64_t head_dim = 0;
};

struct TransportOptions {
  // Ping-pong message sizes in bytes (1 KiB to 64 MiB, powers of 4).
  std::vector<int64_t> message_sizes;
  // All-reduces of hidden x rows fp32 values: the hidden sizes of
  // Qwen2.5-0.5B, Qwen2.5-7B and Llama-3-70B, and token counts from one
  // decoding step to a prefill chunk.
  std::vector<int64_t> hidden_sizes;
  std::vector<int64_t> rows;
  // KV blocks: the shapes, tokens per block, bytes per element, and how many
  // blocks a streamed transfer sends back to back (64 x 16 = a 1,024-token
  // prompt).
  std::vector<KvShape> kv_shapes;
  int64_t block_tokens = 16;
  int64_t kv_dtype_bytes = 2;
  int64_t stream_blocks = 64;
  // Each figure is the median of `repeats` timed repetitions, each running
  // the operation enough times to last at least `min_repetition_ms`.
  int repeats = 11;
  double min_repetition_ms = 10;
  // Names the transport in the output (the benchmark cannot see which one
  // mpirun's --mca flags chose).
  std::string label = "default";
  bool json = false;        // JSON lines on stdout instead of tables
  std::string append_json;  // a file the JSON lines are appended to as well
};

TransportOptions DefaultTransportOptions();

// "1KiB,64KiB,4MiB" (kiln's byte sizes, each at least 1 byte); "" is an empty
// list (that part is skipped).
Expected<std::vector<int64_t>> ParseSizeList(std::string_view text);
// "1,4,16" (positive integers); "" is an empty list.
Expected<std::vector<int64_t>> ParseCountList(std::string_view text);
// "qwen2.5-0.5b=24x2x64,llama-3-8b=32x8x128": NAME=LAYERSxKV_HEADSxHEAD_DIM,
// each positive; "" is an empty list.
Expected<std::vector<KvShape>> ParseKvShapes(std::string_view text);

// The bytes of one KV block of `shape`.
int64_t KvBlockBytes(const KvShape& shape, int64_t block_tokens, int64_t dtype_bytes);

}  // namespace kiln::transport
