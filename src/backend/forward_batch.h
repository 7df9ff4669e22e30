// The runtime inputs of one forward pass: which tokens, at which positions,
// of which sequences, where their KV blocks are, and whose logits to return.
// Programs are compiled for a capacity; these arrays say what is in it now.
#pragma once

#include <cstdint>

namespace kiln {

// Called during a pass once layer `layer`'s kv_write step has run and its
// keys and values are in the cache (the step's stream synchronized), while
// later layers still compute: a KV connector sends that layer's slice of
// the blocks the pass completes. A plain function pointer, so that a pass
// without one pays a null test per layer and nothing else.
struct KvLayerCallback {
  void (*fn)(void* context, int32_t layer) = nullptr;
  void* context = nullptr;
  explicit operator bool() const { return fn != nullptr; }
};

struct ForwardBatch {
  // Tokens of the batch, grouped by sequence: sequence s owns tokens
  // [query_start[s], query_start[s + 1]), in increasing position order.
  int32_t num_tokens = 0;
  const int32_t* token_ids = nullptr;  // [num_tokens]
  const int32_t* positions = nullptr;  // [num_tokens]
  const int32_t* token_seq = nullptr;  // [num_tokens]: index of the token's sequence

  int32_t num_seqs = 0;
  const int32_t* query_start = nullptr;  // [num_seqs + 1]
  // Tokens in each sequence's cache once this pass has written its own:
  // the last position + 1.
  const int32_t* seq_lens = nullptr;              // [num_seqs]
  const int32_t* const* block_tables = nullptr;   // [num_seqs][ceil(seq_len / block_size)]
  // For a KV cache with a window pool (and only then): each sequence's
  // blocks in it, indexed like block_tables, for the sliding-window layers.
  // Entries wholly before the window of the sequence's first query in the
  // batch may be -1 (released). Never sent to other ranks: a split model
  // keeps one table.
  const int32_t* const* window_block_tables = nullptr;  // [num_seqs][ceil(seq_len / block_size)]

  // Token indices whose logits are wanted (usually each sequence's last).
  int32_t num_output_rows = 0;
  const int32_t* output_rows = nullptr;  // [num_output_rows]

  // Optional; local to this process (a batch sent to other ranks drops it).
  KvLayerCallback on_kv_layer_written;
};

}  // namespace kiln
