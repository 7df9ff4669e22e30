// WeightStore: the tiny models from Hugging Face folders and GGUF files under
// one naming, dtype conversion at load, the architecture check, and dummy
// weights.
#include "format/weight_store.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "core/half.h"
#include "format/gguf.h"
#include "format/gguf_writer.h"
#include "format/presets.h"
#include "testing/test_paths.h"
#include "unit/format/byte_image.h"

namespace kiln {
namespace weight_store_tests {

int64_t SumElements(const WeightStore& store) {
  int64_t n = 0;
  for (const Weight& w : store.weights()) n += w.num_elements();
  return n;
}

TEST(WeightStore, OpensTheTinyHuggingFaceModels) {
  struct Case {
    const char* model;
    size_t tensors;
    DType dtype;
  };
  for (const Case& c : {Case{"tiny-llama", 39, DType::kBF16}, Case{"tiny-qwen2", 50, DType::kF32},
                        Case{"tiny-qwen3", 46, DType::kBF16}}) {
    SCOPED_TRACE(c.model);
    auto store = WeightStore::Open(testing::ModelDir(c.model));
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    const WeightStore& s = **store;
    EXPECT_EQ(s.format(), ModelFormat::kHuggingFace);
    EXPECT_EQ(s.weights().size(), c.tensors);
    EXPECT_EQ(SumElements(s), s.config().ParameterCount());  // every parameter is in a tensor, once
    for (const Weight& w : s.weights()) {
      EXPECT_EQ(w.dtype, c.dtype) << w.name;  // f32/bf16 stay as mapped
      EXPECT_EQ(w.name, w.source_name);
      EXPECT_NE(w.file.find("model.safetensors"), std::string::npos);
    }
    const Weight* embed = s.Find(weight_names::Embedding());
    ASSERT_NE(embed, nullptr);
    EXPECT_EQ(embed->shape, (std::vector<int64_t>{2048, s.config().hidden_size}));
    EXPECT_EQ(s.Find("nope"), nullptr);
    auto required = s.Require("model.layers.9.mlp.up_proj.weight");
    ASSERT_FALSE(required.ok());
    EXPECT_NE(required.status().message().find("model.layers.9.mlp.up_proj.weight"), std::string::npos);
  }
}

TEST(WeightStore, GgufNamesShapesAndDtypesMatchTheHuggingFaceModel) {
  auto hf = WeightStore::Open(testing::ModelDir("tiny-qwen3"));
  ASSERT_TRUE(hf.ok()) << hf.status().ToString();
  for (const char* file : {"tiny-qwen3-F16.gguf", "tiny-qwen3-Q4_K_M.gguf", "tiny-qwen3-Q2_K.gguf"}) {
    SCOPED_TRACE(file);
    std::string path = testing::ModelDir("gguf") + "/" + file;
    auto store = WeightStore::Open(path);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    const WeightStore& s = **store;
    EXPECT_EQ(s.format(), ModelFormat::kGguf);
    ASSERT_NE(s.gguf(), nullptr);
    EXPECT_EQ(s.weights().size(), (*hf)->weights().size());
    EXPECT_EQ(SumElements(s), s.config().ParameterCount());
    for (const Weight& w : (*hf)->weights()) {
      const Weight* g = s.Find(w.name);
      ASSERT_NE(g, nullptr) << w.name;
      EXPECT_EQ(g->shape, w.shape) << w.name;
      EXPECT_EQ(g->file, path);
      EXPECT_EQ(weight_names::FromGguf(g->source_name), w.name);
      EXPECT_EQ(s.gguf()->FindTensor(g->source_name)->data, g->data);  // still mapped
      EXPECT_TRUE(g->file_mapped) << w.name;
    }
    EXPECT_EQ(s.Find("model.layers.2.mlp.up_proj.weight")->source_name, "blk.2.ffn_up.weight");
  }
  auto q4km = WeightStore::Open(testing::ModelDir("gguf") + "/tiny-qwen3-Q4_K_M.gguf");
  EXPECT_EQ((*q4km)->Find("model.layers.0.self_attn.q_proj.weight")->dtype, DType::kQ4_K);
  EXPECT_EQ((*q4km)->Find("model.layers.3.mlp.down_proj.weight")->dtype, DType::kQ6_K);
  EXPECT_EQ((*q4km)->Find("model.norm.weight")->dtype, DType::kF32);
}

TEST(WeightStore, LlamaGgufKeepsItsSeparateHead) {
  auto store = WeightStore::Open(testing::ModelDir("gguf") + "/tiny-llama-Q8_0.gguf");
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  const Weight* head = (*store)->Find(weight_names::LmHead());
  ASSERT_NE(head, nullptr);
  EXPECT_EQ(head->source_name, "output.weight");
  EXPECT_EQ(head->shape, (std::vector<int64_t>{2048, 128}));
  EXPECT_EQ((*store)->config().rope_style, RopeStyle::kInterleaved);
}

TEST(WeightStore, GgufNameMapping) {
  const std::pair<const char*, const char*> kPairs[] = {
      {"token_embd.weight", "model.embed_tokens.weight"},
      {"output_norm.weight", "model.norm.weight"},
      {"output.weight", "lm_head.weight"},
      {"blk.0.attn_q.weight", "model.layers.0.self_attn.q_proj.weight"},
      {"blk.12.attn_k.bias", "model.layers.12.self_attn.k_proj.bias"},
      {"blk.3.attn_v.weight", "model.layers.3.self_attn.v_proj.weight"},
      {"blk.3.attn_output.weight", "model.layers.3.self_attn.o_proj.weight"},
      {"blk.1.attn_q_norm.weight", "model.layers.1.self_attn.q_norm.weight"},
      {"blk.1.attn_k_norm.weight", "model.layers.1.self_attn.k_norm.weight"},
      {"blk.7.attn_norm.weight", "model.layers.7.input_layernorm.weight"},
      {"blk.7.ffn_norm.weight", "model.layers.7.post_attention_layernorm.weight"},
      {"blk.7.ffn_gate.weight", "model.layers.7.mlp.gate_proj.weight"},
      {"blk.7.ffn_up.weight", "model.layers.7.mlp.up_proj.weight"},
      {"blk.7.ffn_down.weight", "model.layers.7.mlp.down_proj.weight"},
  };
  for (const auto& [gguf, hf] : kPairs) {
    EXPECT_EQ(weight_names::FromGguf(gguf), hf);
    EXPECT_EQ(weight_names::ToGguf(hf), gguf);
  }
  for (const char* other :
       {"rope_freqs.weight", "blk.x.attn_q.weight", "blk.1.mystery.weight", "blk.", "output"}) {
    EXPECT_EQ(weight_names::FromGguf(other), other);
    EXPECT_EQ(weight_names::ToGguf(other), other);
  }
}

// ---- models written by the test ----

// A small Llama config whose rows are multiples of 32.
ModelConfig SmallLlama() {
  ModelConfig c;
  c.arch = Architecture::kLlama;
  c.hf_architecture = "LlamaForCausalLM";
  c.vocab_size = 64;
  c.hidden_size = 32;
  c.intermediate_size = 64;
  c.num_layers = 2;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 8;
  c.max_position_embeddings = 128;
  return c;
}

const char* kSmallLlamaJson = R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 32,
  "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
  "vocab_size": 64, "max_position_embeddings": 128})";

// Writes the folder `dir` holding the small Llama with every tensor in
// `dtype` (a safetensors dtype name), element i of each tensor having value
// `value(i)`; `skip` names a tensor to leave out, `reshape` one to give the
// wrong shape.
void WriteSmallLlama(const std::string& dir, const std::string& dtype, const std::string& skip = "",
                     const std::string& reshape = "") {
  testing::WriteFile(dir + "/config.json", std::string(kSmallLlamaJson));
  std::vector<testing::SafetensorsEntry> entries;
  for (const WeightSpec& spec : RequiredWeights(SmallLlama())) {
    if (spec.name == skip) continue;
    std::vector<int64_t> shape = spec.shape;
    if (spec.name == reshape) shape.back() /= 2;
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::vector<uint8_t> bytes;
    for (int64_t i = 0; i < n; ++i) {
      int v = static_cast<int>(i % 7) - 3;  // -3 .. 3, exact in every dtype
      if (dtype == "F64") {
        double d = v;
        bytes.insert(bytes.end(), reinterpret_cast<uint8_t*>(&d), reinterpret_cast<uint8_t*>(&d) + 8);
      } else if (dtype == "I8") {
        bytes.push_back(static_cast<uint8_t>(static_cast<int8_t>(v)));
      } else if (dtype == "F8_E4M3") {
        // ±1, ±2, ±3 and 0 in E4M3: exponent bias 7.
        const uint8_t kCodes[7] = {0xC4, 0xC0, 0xB8, 0x00, 0x38, 0x40, 0x44};
        bytes.push_back(kCodes[v + 3]);
      } else {  // BF16
        uint16_t h = F32ToBf16(static_cast<float>(v));
        bytes.push_back(static_cast<uint8_t>(h & 0xff));
        bytes.push_back(static_cast<uint8_t>(h >> 8));
      }
    }
    entries.push_back({spec.name, dtype, shape, bytes});
  }
  testing::WriteFile(dir + "/model.safetensors", testing::SafetensorsImage(entries));
}

TEST(WeightStore, ConvertsDtypesTheEngineDoesNotComputeIn) {
  for (const char* dtype : {"F64", "I8", "F8_E4M3"}) {
    SCOPED_TRACE(dtype);
    std::string dir = testing::MakeTempDir();
    WriteSmallLlama(dir, dtype);
    auto store = WeightStore::Open(dir);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    const Weight* w = (*store)->Find("model.layers.1.mlp.down_proj.weight");
    ASSERT_NE(w, nullptr);
    EXPECT_EQ(w->dtype, DType::kF32);
    EXPECT_FALSE(w->file_mapped);  // a converted copy
    EXPECT_EQ(w->file_dtype, *DTypeFromName(std::string(dtype) == "F8_E4M3" ? "f8_e4m3" : dtype));
    EXPECT_EQ(w->nbytes, static_cast<uint64_t>(w->num_elements()) * 4);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(w->data) % 64, 0u);
    for (int64_t i = 0; i < 20; ++i) {
      float v;
      std::memcpy(&v, w->data + 4 * i, 4);
      EXPECT_EQ(v, static_cast<float>(i % 7 - 3)) << i;
    }
  }
  std::string dir = testing::MakeTempDir();
  WriteSmallLlama(dir, "BF16");
  auto bf16 = WeightStore::Open(dir + "/model.safetensors");  // a file of the folder opens the folder
  ASSERT_TRUE(bf16.ok()) << bf16.status().ToString();
  const Weight* w = (*bf16)->Find("model.norm.weight");
  EXPECT_EQ(w->dtype, DType::kBF16);  // kept as mapped
  EXPECT_TRUE(w->file_mapped);
  auto values = (*bf16)->ReadF32("model.norm.weight");
  ASSERT_TRUE(values.ok());
  EXPECT_EQ((*values)[4], 1.0f);  // 4 % 7 - 3
}

TEST(WeightStore, MissingOrMisshapenTensorsNameTheTensorAndTheFile) {
  std::string dir = testing::MakeTempDir();
  WriteSmallLlama(dir, "BF16", "model.layers.1.mlp.up_proj.weight");
  auto missing = WeightStore::Open(dir);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find(
                "model.safetensors: tensor model.layers.1.mlp.up_proj.weight is missing "
                "(LlamaForCausalLM needs it)"),
            std::string::npos)
      << missing.status().message();

  std::string dir2 = testing::MakeTempDir();
  WriteSmallLlama(dir2, "BF16", "", "model.layers.0.self_attn.k_proj.weight");
  auto misshapen = WeightStore::Open(dir2);
  ASSERT_FALSE(misshapen.ok());
  EXPECT_NE(
      misshapen.status().message().find(
          "tensor model.layers.0.self_attn.k_proj.weight has shape [16, 16], the config implies [16, 32]"),
      std::string::npos)
      << misshapen.status().message();

  std::string dir3 = testing::MakeTempDir();
  WriteSmallLlama(dir3, "BF16", weight_names::LmHead());
  EXPECT_FALSE(WeightStore::Open(dir3).ok());  // untied: lm_head is required

  auto absent = WeightStore::Open(dir + "/nothing-here");
  ASSERT_FALSE(absent.ok());
  EXPECT_EQ(absent.status().code(), StatusCode::kNotFound);

  std::string no_weights = testing::MakeTempDir();
  testing::WriteFile(no_weights + "/config.json", std::string(kSmallLlamaJson));
  auto empty = WeightStore::Open(no_weights);
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.status().message().find("no model.safetensors"), std::string::npos);
}

TEST(WeightStore, GgufMissingTensorNamesBothNames) {
  GgufWriter w;
  auto u32 = [](uint32_t v) { return GgufValue::UInt(GgufType::kU32, v); };
  ASSERT_TRUE(w.SetString("general.architecture", "llama").ok());
  ASSERT_TRUE(w.Set("llama.context_length", u32(128)).ok());
  ASSERT_TRUE(w.Set("llama.embedding_length", u32(32)).ok());
  ASSERT_TRUE(w.Set("llama.block_count", u32(2)).ok());
  ASSERT_TRUE(w.Set("llama.feed_forward_length", u32(64)).ok());
  ASSERT_TRUE(w.Set("llama.attention.head_count", u32(4)).ok());
  ASSERT_TRUE(w.Set("llama.attention.head_count_kv", u32(2)).ok());
  ASSERT_TRUE(w.Set("llama.vocab_size", u32(64)).ok());
  for (const WeightSpec& spec : RequiredWeights(SmallLlama())) {
    if (spec.name == "model.layers.1.mlp.up_proj.weight") continue;
    int64_t n = 1;
    for (int64_t d : spec.shape) n *= d;
    ASSERT_TRUE(w.AddTensor(weight_names::ToGguf(spec.name), DType::kF32, spec.shape,
                            std::vector<uint8_t>(static_cast<size_t>(n) * 4))
                    .ok());
  }
  std::string path = testing::MakeTempDir() + "/small.gguf";
  ASSERT_TRUE(w.Write(path).ok());
  auto store = WeightStore::Open(path);
  ASSERT_FALSE(store.ok());
  EXPECT_NE(store.status().message().find(
                "small.gguf: tensor blk.1.ffn_up.weight (model.layers.1.mlp.up_proj.weight) is missing"),
            std::string::npos)
      << store.status().message();
}

TEST(WeightStore, DummyWeights) {
  ModelConfig config = SmallLlama();
  for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0, DType::kQ4_0}) {
    SCOPED_TRACE(DTypeName(dtype));
    auto store = WeightStore::Dummy(config, dtype, 7);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    EXPECT_EQ((*store)->format(), ModelFormat::kDummy);
    EXPECT_EQ(SumElements(**store), config.ParameterCount());
    EXPECT_EQ((*store)->Find("model.layers.0.input_layernorm.weight")->dtype,
              IsQuantized(dtype) ? DType::kF32 : dtype);
    EXPECT_EQ((*store)->Find("model.layers.0.mlp.up_proj.weight")->dtype, dtype);
    EXPECT_FALSE((*store)->Find("model.layers.0.mlp.up_proj.weight")->file_mapped);  // generated in memory
    auto norm = (*store)->ReadF32("model.layers.1.post_attention_layernorm.weight");
    ASSERT_TRUE(norm.ok());
    for (float v : *norm) EXPECT_EQ(v, 1.0f);
    // Matrices look like N(0, 0.02).
    auto m = (*store)->ReadF32(weight_names::LmHead());
    ASSERT_TRUE(m.ok());
    double sum = 0, sq = 0;
    for (float v : *m) {
      sum += v;
      sq += static_cast<double>(v) * v;
    }
    double mean = sum / m->size(), stddev = std::sqrt(sq / m->size() - mean * mean);
    EXPECT_NEAR(mean, 0.0, 0.002);
    EXPECT_NEAR(stddev, 0.02, 0.002);
  }
  // Deterministic in the seed.
  auto a = WeightStore::Dummy(config, DType::kF16, 1);
  auto b = WeightStore::Dummy(config, DType::kF16, 1);
  auto c = WeightStore::Dummy(config, DType::kF16, 2);
  const Weight* wa = (*a)->Find("model.embed_tokens.weight");
  const Weight* wb = (*b)->Find("model.embed_tokens.weight");
  const Weight* wc = (*c)->Find("model.embed_tokens.weight");
  EXPECT_EQ(std::memcmp(wa->data, wb->data, wa->nbytes), 0);
  EXPECT_NE(std::memcmp(wa->data, wc->data, wa->nbytes), 0);
  // Quantized dummies are the quantized f32 dummies of the same seed.
  auto f32 = (*WeightStore::Dummy(config, DType::kF32, 3))->ReadF32("model.layers.0.self_attn.q_proj.weight");
  auto q8 = (*WeightStore::Dummy(config, DType::kQ8_0, 3))->ReadF32("model.layers.0.self_attn.q_proj.weight");
  ASSERT_EQ(f32->size(), q8->size());
  for (size_t i = 0; i < f32->size(); ++i) EXPECT_NEAR((*q8)[i], (*f32)[i], 0.0005f) << i;
}

TEST(WeightStore, DummyErrors) {
  EXPECT_EQ(WeightStore::Dummy(SmallLlama(), DType::kQ2_K).status().code(), StatusCode::kUnsupported);
  ModelConfig odd = SmallLlama();
  odd.hidden_size = 48;
  odd.head_dim = 12;
  auto rows = WeightStore::Dummy(odd, DType::kQ8_0);
  ASSERT_FALSE(rows.ok());
  EXPECT_NE(rows.status().message().find("model.embed_tokens.weight rows of 48"), std::string::npos)
      << rows.status().message();
  ModelConfig broken = SmallLlama();
  broken.num_kv_heads = 3;
  EXPECT_FALSE(WeightStore::Dummy(broken, DType::kF32).ok());
}

// A requantized copy is what quantizing each matrix gives: the f32 dummy
// requantized to q8_0 or q4_0 is, byte for byte, the dummy generated in
// that dtype from the same seed; vectors keep their dtype and values.
TEST(WeightStore, RequantizedCopies) {
  const ModelConfig config = SmallLlama();
  auto f32 = WeightStore::Dummy(config, DType::kF32, 3);
  ASSERT_TRUE(f32.ok());
  for (DType dtype : {DType::kQ8_0, DType::kQ4_0}) {
    SCOPED_TRACE(DTypeName(dtype));
    auto copy = WeightStore::Requantized(**f32, dtype);
    ASSERT_TRUE(copy.ok()) << copy.status().ToString();
    auto generated = WeightStore::Dummy(config, dtype, 3);
    ASSERT_TRUE(generated.ok());
    ASSERT_EQ((*copy)->weights().size(), (*generated)->weights().size());
    for (const Weight& g : (*generated)->weights()) {
      const Weight* c = (*copy)->Find(g.name);
      ASSERT_NE(c, nullptr) << g.name;
      EXPECT_EQ(c->dtype, g.dtype) << g.name;
      EXPECT_EQ(c->shape, g.shape) << g.name;
      ASSERT_EQ(c->nbytes, g.nbytes) << g.name;
      EXPECT_EQ(std::memcmp(c->data, g.data, g.nbytes), 0) << g.name;
      EXPECT_NE(c->data, (*f32)->Find(g.name)->data) << g.name;  // nothing shared
    }
  }
  // Rows that are no whole number of blocks stay as they are.
  ModelConfig odd = SmallLlama();
  odd.hidden_size = 48;
  odd.head_dim = 12;
  auto odd_f32 = WeightStore::Dummy(odd, DType::kF32, 1);
  ASSERT_TRUE(odd_f32.ok()) << odd_f32.status().ToString();
  auto odd_copy = WeightStore::Requantized(**odd_f32, DType::kQ4_0);
  ASSERT_TRUE(odd_copy.ok()) << odd_copy.status().ToString();
  EXPECT_EQ((*odd_copy)->Find("model.embed_tokens.weight")->dtype, DType::kF32);
  EXPECT_EQ(WeightStore::Requantized(**f32, DType::kQ6_K).status().code(), StatusCode::kUnsupported);
}

TEST(WeightStore, OpensTheFuzzSeedModels) {
  std::string dir = testing::SourceDir() + "/tests/fuzz/seeds/gguf_fuzz";
  auto llama = WeightStore::Open(dir + "/llama.gguf");
  ASSERT_TRUE(llama.ok()) << llama.status().ToString();
  EXPECT_FALSE((*llama)->config().tie_word_embeddings);
  EXPECT_EQ((*llama)->config().rope_scaling.type, RopeScalingType::kLinear);
  auto qwen3 = WeightStore::Open(dir + "/qwen3.gguf");
  ASSERT_TRUE(qwen3.ok()) << qwen3.status().ToString();
  EXPECT_TRUE((*qwen3)->config().qk_norm);
  auto embed = (*qwen3)->ReadF32(weight_names::Embedding());
  ASSERT_TRUE(embed.ok());
  EXPECT_NEAR((*embed)[1], 0.02f, 1e-4f);  // element i is 0.01 * 2^(i % 5) (make_seeds.py)
  EXPECT_NEAR((*embed)[4], 0.16f, 1e-3f);
}

TEST(WeightStore, DummyOfAPresetHasThePublishedSize) {
  // Shapes only: bf16 Qwen2.5-0.5B is about 1 GB, so check the spec instead of generating it.
  auto config = PresetConfig("qwen2.5-0.5b");
  ASSERT_TRUE(config.ok());
  int64_t elements = 0;
  for (const WeightSpec& spec : RequiredWeights(*config)) {
    int64_t n = 1;
    for (int64_t d : spec.shape) n *= d;
    elements += n;
  }
  EXPECT_EQ(elements, 494032768);
  EXPECT_EQ(RequiredWeights(*config).size(), 1u + 24 * 12 + 1);  // tied: no lm_head
}

}  // namespace weight_store_tests
}  // namespace kiln
