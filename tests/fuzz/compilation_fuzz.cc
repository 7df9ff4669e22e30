// Fuzzes the reader of a compiled artifact's stored graph and plans
// (compiler/compilation_codec.h): whatever the bytes, decoding ends in an
// error or in a graph whose every planned buffer holds its value and lies
// inside its arena. The seeds are the "compiled" sections of artifacts of a
// one-layer model of hidden size 32, whose weights the store below has, and
// of a tiny ONNX graph's artifact, whose constants are stored apart: its
// bytes are also read as a tensor graph's, whose constants are found in
// two sections of zeros of the seed's sizes (a constant outside them is an
// error).
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "compiler/compilation_codec.h"
#include "format/weight_store.h"

namespace {

const kiln::WeightStore* Store() {
  static const std::unique_ptr<kiln::WeightStore> store = [] {
    kiln::ModelConfig c;
    c.arch = kiln::Architecture::kLlama;
    c.vocab_size = 32;
    c.hidden_size = 32;
    c.intermediate_size = 64;
    c.num_layers = 1;
    c.num_heads = 2;
    c.num_kv_heads = 1;
    c.head_dim = 16;
    c.max_position_embeddings = 64;
    c.rms_norm_eps = 1e-6;
    c.tie_word_embeddings = true;
    auto s = kiln::WeightStore::Dummy(c, kiln::DType::kF32, 1);
    if (!s.ok()) __builtin_trap();
    return std::move(s).value();
  }();
  return store.get();
}

// What binding reads: every planned buffer inside its arena.
void CheckPlans(const kiln::StoredCompilation& decoded) {
  for (const kiln::MemoryPlan& plan : decoded.plans) {
    for (const auto& [id, slot] : plan.values) {
      auto arena = plan.arena_bytes.find(slot.domain);
      if (arena == plan.arena_bytes.end() || slot.offset + slot.bytes > arena->second) __builtin_trap();
      if (id < 0 || static_cast<size_t>(id) >= decoded.graph.values().size()) __builtin_trap();
    }
  }
}

// A resolver over two sections of zeros, with the bounds checks a load makes.
kiln::Expected<kiln::SharedBytes> Resolve(const std::string& section, uint64_t offset, uint64_t bytes) {
  static const auto zeros = std::make_shared<const std::vector<uint8_t>>(size_t{1} << 20, 0);
  const uint64_t size = section == "onnx.w" ? 256 * 1024 : section == "onnx.c" ? 64 * 1024 : 0;
  if (size == 0) return kiln::Corrupt("no section {}", section);
  if (offset > size || bytes > size - offset) return kiln::Corrupt("outside section {}", section);
  return kiln::SharedBytes(zeros, zeros->data() + offset, static_cast<size_t>(bytes));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::map<std::string, int32_t> domains = {{"host", 0}, {"testaccel-mem", 1}, {"testaccel-mm-mem", 2}};
  auto decoded = kiln::DecodeCompilation({data, size}, *Store(), domains);
  if (decoded.ok()) CheckPlans(*decoded);
  auto tensor = kiln::DecodeTensorCompilation({data, size}, domains, Resolve);
  if (tensor.ok()) {
    CheckPlans(*tensor);
    for (const kiln::Value& v : tensor->graph.values()) {
      if (v.constant != nullptr && v.constant->bytes() != v.tensor_type().Bytes()) __builtin_trap();
    }
  }
  return 0;
}
