// The GGUF metadata of a model converted from a Hugging Face folder, written
// as llama.cpp's converter writes it for the architectures kiln runs: the
// general.* keys, the <arch>.* hyper-parameters and the tokenizer
// (tokenizer.ggml.* and tokenizer.chat_template), so that the file loads in
// other GGUF tools and in kiln alike.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "format/gguf.h"
#include "format/model_config.h"

namespace kiln {

using GgufMetadata = std::vector<std::pair<std::string, GgufValue>>;

// GGUF's general.architecture for a kiln architecture: "llama" (Mistral
// too), "qwen2", "qwen3".
const char* GgufArchitectureName(Architecture arch);

// The metadata for the folder's config.json (parsed as `config`) and its
// tokenizer files, for a file of GGUF file type `file_type`. The tokenizer
// comes from tokenizer.model (SentencePiece: tokenizer.ggml.model "llama"),
// else tokenizer.json or vocab.json + merges.txt (byte-level BPE: "gpt2",
// with .pre naming the pre-tokenizer), with tokenizer_config.json for added
// tokens, special ids and the chat template. Errors name the file and field;
// features GGUF readers could not reproduce (Llama 3 RoPE scaling) are
// reported as Unsupported.
Expected<GgufMetadata> HfGgufMetadata(const std::string& folder, const ModelConfig& config, uint32_t file_type);

// GGUF token_type values (llama.cpp's): 1 normal, 2 unknown, 3 control,
// 4 user-defined, 5 unused, 6 byte.
enum class GgufTokenType : int32_t {
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

}  // namespace kiln
