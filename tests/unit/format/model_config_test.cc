// ModelConfig from config.json and from GGUF metadata: the tiny models' real
// files, every config variant the loader handles, presets, and the errors.
#include "format/model_config.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include <nlohmann/json.hpp>

#include "format/gguf.h"
#include "format/gguf_writer.h"
#include "format/presets.h"
#include "testing/test_paths.h"
#include "unit/format/byte_image.h"

namespace kiln {
namespace model_config_tests {

using nlohmann::json;

// A minimal valid Llama config.json, to be varied by each test.
json LlamaJson() {
  return json::parse(R"({
    "architectures": ["LlamaForCausalLM"], "model_type": "llama",
    "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 100,
    "max_position_embeddings": 256, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
    "bos_token_id": 1, "eos_token_id": 2, "torch_dtype": "bfloat16"})");
}

Expected<ModelConfig> FromJson(const json& j) {
  return ModelConfigFromHfJson(j, "config.json");
}

TEST(ModelConfig, TinyModelsFromConfigJson) {
  auto llama = ModelConfigFromHfFile(testing::ModelDir("tiny-llama") + "/config.json");
  ASSERT_TRUE(llama.ok()) << llama.status().ToString();
  EXPECT_EQ(llama->arch, Architecture::kLlama);
  EXPECT_EQ(llama->hf_architecture, "LlamaForCausalLM");
  EXPECT_EQ(llama->ParameterCount(), 1262720);
  EXPECT_EQ(llama->head_dim, 16);
  EXPECT_EQ(llama->num_kv_heads, 4);
  EXPECT_EQ(llama->rms_norm_eps, 1e-5);
  EXPECT_FALSE(llama->tie_word_embeddings);
  EXPECT_EQ(llama->rope_style, RopeStyle::kHalf);
  EXPECT_EQ(llama->bos_token_ids, std::vector<int64_t>{1});
  EXPECT_EQ(llama->eos_token_ids, std::vector<int64_t>{2});
  EXPECT_EQ(llama->torch_dtype, "bfloat16");

  auto qwen2 = ModelConfigFromHfFile(testing::ModelDir("tiny-qwen2") + "/config.json");
  ASSERT_TRUE(qwen2.ok()) << qwen2.status().ToString();
  EXPECT_EQ(qwen2->arch, Architecture::kQwen2);
  EXPECT_EQ(qwen2->ParameterCount(), 1050752);
  EXPECT_EQ(qwen2->head_dim, 32);  // no head_dim in the file: 128 / 4
  EXPECT_TRUE(qwen2->attention_bias);
  EXPECT_FALSE(qwen2->attention_output_bias);
  EXPECT_TRUE(qwen2->tie_word_embeddings);
  EXPECT_EQ(qwen2->sliding_window, 0);  // sliding_window 1024 but use_sliding_window false
  EXPECT_EQ(qwen2->rope_theta, 1e6);

  auto qwen3 = ModelConfigFromHfFile(testing::ModelDir("tiny-qwen3") + "/config.json");
  ASSERT_TRUE(qwen3.ok()) << qwen3.status().ToString();
  EXPECT_EQ(qwen3->arch, Architecture::kQwen3);
  EXPECT_EQ(qwen3->ParameterCount(), 3672832);
  EXPECT_EQ(qwen3->head_dim, 64);
  EXPECT_TRUE(qwen3->qk_norm);
  EXPECT_FALSE(qwen3->attention_bias);
  EXPECT_EQ(qwen3->intermediate_size, 768);
}

TEST(ModelConfig, TinyModelsFromGguf) {
  struct Case {
    const char* file;
    int64_t params;
    RopeStyle style;
    int64_t head_dim;
    bool tied;
  };
  const Case cases[] = {{"tiny-llama-F32.gguf", 1262720, RopeStyle::kInterleaved, 16, false},
                        {"tiny-llama-Q4_K_M.gguf", 1262720, RopeStyle::kInterleaved, 16, false},
                        {"tiny-qwen2-F32.gguf", 1050752, RopeStyle::kHalf, 32, true},
                        {"tiny-qwen2-Q8_0.gguf", 1050752, RopeStyle::kHalf, 32, true},
                        {"tiny-qwen3-F16.gguf", 3672832, RopeStyle::kHalf, 64, true},
                        {"tiny-qwen3-Q2_K.gguf", 3672832, RopeStyle::kHalf, 64, true}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.file);
    auto gguf = GgufFile::Open(testing::ModelDir("gguf") + "/" + c.file);
    ASSERT_TRUE(gguf.ok()) << gguf.status().ToString();
    auto config = ModelConfigFromGguf(**gguf);
    ASSERT_TRUE(config.ok()) << config.status().ToString();
    EXPECT_EQ(config->ParameterCount(), c.params);
    EXPECT_EQ(config->rope_style, c.style);
    EXPECT_EQ(config->head_dim, c.head_dim);
    EXPECT_EQ(config->tie_word_embeddings, c.tied);
    EXPECT_EQ(config->vocab_size, 2048);
    EXPECT_EQ(config->max_position_embeddings, 1024);
    EXPECT_EQ(config->num_layers, 4);
  }
  // The HF and GGUF configs of one model agree on everything but the RoPE layout.
  auto gguf = GgufFile::Open(testing::ModelDir("gguf") + "/tiny-qwen2-F32.gguf");
  auto from_gguf = ModelConfigFromGguf(**gguf);
  auto from_hf = ModelConfigFromHfFile(testing::ModelDir("tiny-qwen2") + "/config.json");
  EXPECT_EQ(from_gguf->attention_bias, from_hf->attention_bias);
  EXPECT_EQ(from_gguf->bos_token_ids, from_hf->bos_token_ids);
  EXPECT_EQ(from_gguf->eos_token_ids, from_hf->eos_token_ids);
  EXPECT_FLOAT_EQ(from_gguf->rms_norm_eps, from_hf->rms_norm_eps);
  EXPECT_EQ(from_gguf->rope_theta, from_hf->rope_theta);
  EXPECT_EQ(from_gguf->num_kv_heads, from_hf->num_kv_heads);
}

TEST(ModelConfig, GqaAndHeadDim) {
  json j = LlamaJson();
  auto c = FromJson(j);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->head_dim, 16);  // 64 / 4
  EXPECT_EQ(c->num_kv_heads, 2);
  EXPECT_EQ(c->KvBytesPerToken(4), 2 * 2 * 2 * 16 * 4);  // K and V, 2 layers, 2 KV heads, 16 dims, f32

  j["head_dim"] = 32;  // explicit, not hidden / heads
  EXPECT_EQ(FromJson(j)->head_dim, 32);
  j["head_dim"] = nullptr;  // null means absent
  EXPECT_EQ(FromJson(j)->head_dim, 16);

  j.erase("num_key_value_heads");  // absent: multi-head attention
  EXPECT_EQ(FromJson(j)->num_kv_heads, 4);

  j["num_key_value_heads"] = 3;
  auto bad = FromJson(j);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("num_heads 4 is not a multiple of num_kv_heads 3"), std::string::npos)
      << bad.status().message();
  EXPECT_EQ(bad.status().message().rfind("config.json: ", 0), 0u);
}

TEST(ModelConfig, RopeScalingVariants) {
  json j = LlamaJson();
  j["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 4.0}};
  auto linear = FromJson(j);
  ASSERT_TRUE(linear.ok()) << linear.status().ToString();
  EXPECT_EQ(linear->rope_scaling.type, RopeScalingType::kLinear);
  EXPECT_EQ(linear->rope_scaling.factor, 4.0);

  j["rope_scaling"] = json::parse(R"({"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0,
                                      "high_freq_factor": 4.0, "original_max_position_embeddings": 8192})");
  auto llama3 = FromJson(j);
  ASSERT_TRUE(llama3.ok()) << llama3.status().ToString();
  EXPECT_EQ(llama3->rope_scaling.type, RopeScalingType::kLlama3);
  EXPECT_EQ(llama3->rope_scaling.factor, 32.0);
  EXPECT_EQ(llama3->rope_scaling.original_max_position_embeddings, 8192);

  // Older configs say "type" instead of "rope_type" (Qwen2.5's yarn example).
  j["rope_scaling"] =
      json::parse(R"({"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768})");
  auto yarn = FromJson(j);
  ASSERT_TRUE(yarn.ok()) << yarn.status().ToString();
  EXPECT_EQ(yarn->rope_scaling.type, RopeScalingType::kYarn);
  EXPECT_EQ(yarn->rope_scaling.original_max_position_embeddings, 32768);
  EXPECT_EQ(yarn->rope_scaling.beta_fast, 32.0);
  EXPECT_EQ(yarn->rope_scaling.beta_slow, 1.0);

  j["rope_scaling"] = {{"rope_type", "default"}};
  EXPECT_EQ(FromJson(j)->rope_scaling.type, RopeScalingType::kNone);

  j["rope_scaling"] = {{"type", "dynamic"}, {"factor", 2.0}};
  auto dynamic = FromJson(j);
  ASSERT_FALSE(dynamic.ok());
  EXPECT_EQ(dynamic.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(dynamic.status().message().find("rope_scaling: type 'dynamic'"), std::string::npos);

  j["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}};
  auto incomplete = FromJson(j);
  ASSERT_FALSE(incomplete.ok());
  EXPECT_NE(incomplete.status().message().find("original_max_position_embeddings"), std::string::npos);

  j["rope_scaling"] = {{"rope_type", "linear"}};
  EXPECT_FALSE(FromJson(j).ok());  // no factor
}

// Phi-3: partial rotary embeddings, longrope in both spellings, the window.
TEST(ModelConfig, Phi3) {
  json j = LlamaJson();
  j["architectures"] = {"Phi3ForCausalLM"};
  j["model_type"] = "phi3";
  j["partial_rotary_factor"] = 0.75;  // 12 of head_dim 16
  j["original_max_position_embeddings"] = 64;
  j["sliding_window"] = 7;
  j["rope_scaling"] = json::parse(R"({"rope_type": "longrope", "short_factor": [1, 1, 1, 1, 1, 1.5],
                                      "long_factor": [1, 2, 3, 4, 5, 6]})");
  auto c = FromJson(j);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->arch, Architecture::kPhi3);
  EXPECT_EQ(c->RotaryDim(), 12);
  EXPECT_EQ(c->sliding_window, 7);
  EXPECT_FALSE(c->attention_bias);
  const RopeScaling& rs = c->rope_scaling;
  EXPECT_EQ(rs.type, RopeScalingType::kLongRope);
  EXPECT_EQ(rs.original_max_position_embeddings, 64);
  EXPECT_EQ(rs.factor, 4.0);  // max_position_embeddings / original
  EXPECT_EQ(rs.long_factor, (std::vector<double>{1, 2, 3, 4, 5, 6}));
  EXPECT_NEAR(rs.LongRopeAttentionFactor(), std::sqrt(1 + std::log(4.0) / std::log(64.0)), 1e-12);

  j["rope_scaling"].erase("rope_type");
  j["rope_scaling"]["type"] = "su";  // Phi-3-mini-128k's spelling
  j["rope_scaling"]["attention_factor"] = 1.25;
  auto su = FromJson(j);
  ASSERT_TRUE(su.ok()) << su.status().ToString();
  EXPECT_EQ(su->rope_scaling.type, RopeScalingType::kLongRope);
  EXPECT_EQ(su->rope_scaling.LongRopeAttentionFactor(), 1.25);

  json no_scaling = LlamaJson();
  no_scaling["model_type"] = "phi3";
  no_scaling.erase("architectures");
  auto plain = FromJson(no_scaling);  // Phi-3-mini-4k: no rope_scaling, whole heads rotate
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_EQ(plain->arch, Architecture::kPhi3);
  EXPECT_EQ(plain->RotaryDim(), 16);
  EXPECT_EQ(plain->rope_scaling.type, RopeScalingType::kNone);

  json short_list = j;
  short_list["rope_scaling"]["long_factor"] = {1, 2, 3};
  auto wrong = FromJson(short_list);
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find("longrope long factors: 3 of them, the 12 rotary dims need 6"),
            std::string::npos)
      << wrong.status().message();
  json missing = j;
  missing["rope_scaling"].erase("short_factor");
  EXPECT_NE(FromJson(missing).status().message().find("missing required field 'short_factor'"),
            std::string::npos);
  json negative = j;
  negative["rope_scaling"]["short_factor"][0] = -1;
  EXPECT_FALSE(FromJson(negative).ok());
  json partial = j;
  partial["partial_rotary_factor"] = 1.5;
  EXPECT_FALSE(FromJson(partial).ok());
  partial["partial_rotary_factor"] = 0.7;  // 11.2 -> 11 dims: odd
  EXPECT_FALSE(FromJson(partial).ok());
}

TEST(ModelConfig, SlidingWindowBiasTiesAndTokenIds) {
  json mistral = LlamaJson();
  mistral["architectures"] = {"MistralForCausalLM"};
  mistral["sliding_window"] = 4096;
  auto m = FromJson(mistral);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->arch, Architecture::kMistral);
  EXPECT_EQ(m->sliding_window, 4096);
  mistral["sliding_window"] = nullptr;
  EXPECT_EQ(FromJson(mistral)->sliding_window, 0);

  json qwen2 = LlamaJson();
  qwen2["architectures"] = {"Qwen2ForCausalLM"};
  qwen2["sliding_window"] = 128;
  EXPECT_EQ(FromJson(qwen2)->sliding_window, 0);
  qwen2["use_sliding_window"] = true;
  EXPECT_EQ(FromJson(qwen2)->sliding_window, 128);
  EXPECT_TRUE(FromJson(qwen2)->attention_bias);

  json llama = LlamaJson();
  llama["attention_bias"] = true;
  auto biased = FromJson(llama);
  EXPECT_TRUE(biased->attention_bias);
  EXPECT_TRUE(biased->attention_output_bias);
  EXPECT_EQ(biased->ParameterCount() - FromJson(LlamaJson())->ParameterCount(),
            2 * (64 + 2 * 32 + 64));  // q, k, v and o biases in 2 layers

  llama["tie_word_embeddings"] = true;
  EXPECT_EQ(FromJson(LlamaJson())->ParameterCount() - FromJson(llama)->ParameterCount(),
            100 * 64 - 2 * (64 + 2 * 32 + 64));

  json ids = LlamaJson();
  ids["eos_token_id"] = {2, 7, 9};
  EXPECT_EQ(FromJson(ids)->eos_token_ids, (std::vector<int64_t>{2, 7, 9}));
  ids["bos_token_id"] = nullptr;
  EXPECT_TRUE(FromJson(ids)->bos_token_ids.empty());
  ids["eos_token_id"] = 100;  // outside the vocabulary
  EXPECT_FALSE(FromJson(ids).ok());
}

TEST(ModelConfig, Errors) {
  json j = LlamaJson();
  j["architectures"] = {"GPT2LMHeadModel"};
  auto arch = FromJson(j);
  ASSERT_FALSE(arch.ok());
  EXPECT_EQ(arch.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(arch.status().message().find("'GPT2LMHeadModel' is not supported"), std::string::npos);
  EXPECT_NE(arch.status().message().find(SupportedArchitectureList()), std::string::npos);
  EXPECT_EQ(SupportedArchitectureList(),
            "LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM, Phi3ForCausalLM, "
            "Gemma2ForCausalLM, Gemma3ForCausalLM, MixtralForCausalLM, Qwen2MoeForCausalLM, Qwen3MoeForCausalLM");

  json no_arch = LlamaJson();
  no_arch.erase("architectures");
  EXPECT_EQ(FromJson(no_arch)->arch, Architecture::kLlama);  // model_type decides

  json missing = LlamaJson();
  missing.erase("hidden_size");
  EXPECT_NE(FromJson(missing).status().message().find("missing required field 'hidden_size'"),
            std::string::npos);

  json wrong = LlamaJson();
  wrong["num_hidden_layers"] = "two";
  EXPECT_NE(FromJson(wrong).status().message().find("num_hidden_layers: expected an integer, got \"two\""),
            std::string::npos);

  json negative = LlamaJson();
  negative["intermediate_size"] = -5;
  EXPECT_NE(FromJson(negative).status().message().find("intermediate_size -5"), std::string::npos);

  json act = LlamaJson();
  act["hidden_act"] = "relu2";
  EXPECT_EQ(FromJson(act).status().code(), StatusCode::kUnsupported);

  EXPECT_FALSE(FromJson(json::array()).ok());

  std::string dir = testing::MakeTempDir();
  testing::WriteFile(dir + "/config.json", std::string("{\"hidden_size\": "));
  auto broken = ModelConfigFromHfFile(dir + "/config.json");
  ASSERT_FALSE(broken.ok());
  EXPECT_NE(broken.status().message().find("config.json: invalid JSON"), std::string::npos)
      << broken.status().message();
  EXPECT_EQ(ModelConfigFromHfFile(dir + "/absent.json").status().code(), StatusCode::kIoError);
}

// GGUF metadata, written with the writer.
Expected<ModelConfig> FromGgufMetadata(const std::vector<std::pair<std::string, GgufValue>>& kv,
                                       bool with_output = false) {
  GgufWriter w;
  for (const auto& [k, v] : kv) KILN_RETURN_IF_ERROR(w.Set(k, v));
  if (with_output) {
    KILN_RETURN_IF_ERROR(
        w.AddTensor("output.weight", DType::kF32, {100, 64}, std::vector<uint8_t>(100 * 64 * 4)));
  }
  std::vector<uint8_t> image = w.Serialize();
  KILN_ASSIGN_OR_RETURN(auto f, GgufFile::Parse(image.data(), image.size(), "meta.gguf"));
  return ModelConfigFromGguf(*f);
}

std::vector<std::pair<std::string, GgufValue>> QwenMetadata() {
  auto u32 = [](uint32_t v) { return GgufValue::UInt(GgufType::kU32, v); };
  return {{"general.architecture", GgufValue::String("qwen2")},
          {"qwen2.context_length", u32(4096)},
          {"qwen2.embedding_length", u32(64)},
          {"qwen2.block_count", u32(2)},
          {"qwen2.feed_forward_length", u32(128)},
          {"qwen2.attention.head_count", u32(4)},
          {"qwen2.attention.head_count_kv", u32(2)},
          {"qwen2.attention.layer_norm_rms_epsilon", GgufValue::Float(GgufType::kF32, 1e-6)},
          {"qwen2.rope.freq_base", GgufValue::Float(GgufType::kF32, 1e6)},
          {"qwen2.vocab_size", u32(100)},
          {"tokenizer.ggml.bos_token_id", u32(5)},
          {"tokenizer.ggml.eos_token_id", u32(6)}};
}

TEST(ModelConfig, GgufMetadataVariants) {
  auto base = FromGgufMetadata(QwenMetadata());
  ASSERT_TRUE(base.ok()) << base.status().ToString();
  EXPECT_EQ(base->arch, Architecture::kQwen2);
  EXPECT_EQ(base->head_dim, 16);
  EXPECT_TRUE(base->tie_word_embeddings);  // no output.weight
  EXPECT_EQ(base->bos_token_ids, std::vector<int64_t>{5});
  EXPECT_EQ(base->eos_token_ids, std::vector<int64_t>{6});
  EXPECT_EQ(base->rope_scaling.type, RopeScalingType::kNone);
  EXPECT_FALSE(FromGgufMetadata(QwenMetadata(), true)->tie_word_embeddings);

  auto kv = QwenMetadata();
  kv.emplace_back("qwen2.rope.scaling.type", GgufValue::String("yarn"));
  kv.emplace_back("qwen2.rope.scaling.factor", GgufValue::Float(GgufType::kF32, 4.0));
  kv.emplace_back("qwen2.rope.scaling.original_context_length", GgufValue::UInt(GgufType::kU32, 32768));
  kv.emplace_back("qwen2.attention.key_length", GgufValue::UInt(GgufType::kU32, 32));
  kv.emplace_back("qwen2.attention.sliding_window", GgufValue::UInt(GgufType::kU32, 512));
  auto yarn = FromGgufMetadata(kv);
  ASSERT_TRUE(yarn.ok()) << yarn.status().ToString();
  EXPECT_EQ(yarn->rope_scaling.type, RopeScalingType::kYarn);
  EXPECT_EQ(yarn->rope_scaling.factor, 4.0);
  EXPECT_EQ(yarn->rope_scaling.original_max_position_embeddings, 32768);
  EXPECT_EQ(yarn->head_dim, 32);
  EXPECT_EQ(yarn->sliding_window, 512);

  kv = QwenMetadata();
  kv[0].second = GgufValue::String("llama");
  for (auto& [k, v] : kv) {
    if (k.rfind("qwen2.", 0) == 0) k = "llama." + k.substr(6);
  }
  kv.emplace_back("llama.rope.scaling.type", GgufValue::String("linear"));
  kv.emplace_back("llama.rope.scaling.factor", GgufValue::Float(GgufType::kF32, 2.0));
  auto llama = FromGgufMetadata(kv);
  ASSERT_TRUE(llama.ok()) << llama.status().ToString();
  EXPECT_EQ(llama->arch, Architecture::kLlama);
  EXPECT_EQ(llama->rope_style, RopeStyle::kInterleaved);
  EXPECT_EQ(llama->rope_scaling.type, RopeScalingType::kLinear);

  // Vocabulary from the token list when there is no vocab_size key.
  kv = QwenMetadata();
  kv.erase(kv.begin() + 9);
  std::vector<GgufValue> tokens(77, GgufValue::String("t"));
  kv.emplace_back("tokenizer.ggml.tokens", GgufValue::Array(GgufType::kString, tokens));
  EXPECT_EQ(FromGgufMetadata(kv)->vocab_size, 77);
}

// GGUF phi3: rotary dims from rope.dimension_count, longrope's factors from
// their tensors, and llama.cpp's attention factor of 1 when the key is absent.
TEST(ModelConfig, GgufPhi3LongRope) {
  auto phi3 = [](bool attn_factor, bool both_factors) -> Expected<ModelConfig> {
    GgufWriter w;
    for (auto [k, v] : QwenMetadata()) {
      if (k.rfind("qwen2.", 0) == 0) k = "phi3." + k.substr(6);
      KILN_RETURN_IF_ERROR(w.Set(k, k == "general.architecture" ? GgufValue::String("phi3") : v));
    }
    KILN_RETURN_IF_ERROR(w.Set("phi3.rope.dimension_count", GgufValue::UInt(GgufType::kU32, 12)));
    KILN_RETURN_IF_ERROR(
        w.Set("phi3.rope.scaling.original_context_length", GgufValue::UInt(GgufType::kU32, 1024)));
    if (attn_factor) {
      KILN_RETURN_IF_ERROR(w.Set("phi3.rope.scaling.attn_factor", GgufValue::Float(GgufType::kF32, 1.25)));
    }
    std::vector<float> long_factors = {1, 2, 3, 4, 5, 6}, short_factors = {1, 1, 1, 1, 1, 2};
    auto bytes = [](const std::vector<float>& f) {
      std::vector<uint8_t> b(f.size() * 4);
      std::memcpy(b.data(), f.data(), b.size());
      return b;
    };
    KILN_RETURN_IF_ERROR(w.AddTensor("rope_factors_long.weight", DType::kF32, {6}, bytes(long_factors)));
    if (both_factors) {
      KILN_RETURN_IF_ERROR(w.AddTensor("rope_factors_short.weight", DType::kF32, {6}, bytes(short_factors)));
    }
    std::vector<uint8_t> image = w.Serialize();
    KILN_ASSIGN_OR_RETURN(auto f, GgufFile::Parse(image.data(), image.size(), "meta.gguf"));
    return ModelConfigFromGguf(*f);
  };
  auto c = phi3(false, true);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->arch, Architecture::kPhi3);
  EXPECT_EQ(c->rope_style, RopeStyle::kHalf);
  EXPECT_EQ(c->RotaryDim(), 12);
  EXPECT_EQ(c->rope_scaling.type, RopeScalingType::kLongRope);
  EXPECT_EQ(c->rope_scaling.long_factor, (std::vector<double>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(c->rope_scaling.short_factor, (std::vector<double>{1, 1, 1, 1, 1, 2}));
  EXPECT_EQ(c->rope_scaling.original_max_position_embeddings, 1024);
  EXPECT_EQ(c->rope_scaling.factor, 4.0);  // context_length 4096 / 1024
  EXPECT_EQ(c->rope_scaling.LongRopeAttentionFactor(), 1.0);
  EXPECT_EQ(phi3(true, true)->rope_scaling.LongRopeAttentionFactor(), 1.25);
  EXPECT_EQ(phi3(true, false).status().code(), StatusCode::kNotFound);
}

TEST(ModelConfig, GgufMetadataErrors) {
  auto kv = QwenMetadata();
  kv[0].second = GgufValue::String("gpt2");
  auto arch = FromGgufMetadata(kv);
  ASSERT_FALSE(arch.ok());
  EXPECT_NE(arch.status().message().find(
                "meta.gguf: general.architecture 'gpt2' is not supported; supported: llama, "
                "qwen2, qwen3, phi3"),
            std::string::npos)
      << arch.status().message();

  kv = QwenMetadata();
  kv.erase(kv.begin() + 3);  // block_count
  auto missing = FromGgufMetadata(kv);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("missing metadata key 'qwen2.block_count'"), std::string::npos);

  kv = QwenMetadata();
  kv[5].second = GgufValue::Array(GgufType::kU32, {GgufValue::UInt(GgufType::kU32, 4)});
  EXPECT_EQ(FromGgufMetadata(kv).status().code(), StatusCode::kUnsupported);  // per-layer head counts

  kv = QwenMetadata();
  kv[3].second = GgufValue::String("4");
  auto typed = FromGgufMetadata(kv);
  EXPECT_NE(typed.status().message().find("qwen2.block_count: expected an integer, got string"),
            std::string::npos);

  kv = QwenMetadata();
  kv.emplace_back("qwen2.rope.scaling.type", GgufValue::String("longrope"));
  EXPECT_EQ(FromGgufMetadata(kv).status().code(), StatusCode::kUnsupported);

  EXPECT_FALSE(FromGgufMetadata({}).ok());
}

// A minimal Gemma config.json (Gemma 2 or Gemma 3 text).
json GemmaJson(bool gemma3) {
  json j = json::parse(R"({
    "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 6,
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32, "vocab_size": 100,
    "max_position_embeddings": 256, "rms_norm_eps": 1e-6, "rope_theta": 10000.0,
    "hidden_activation": "gelu_pytorch_tanh", "query_pre_attn_scalar": 24, "sliding_window": 16,
    "bos_token_id": 2, "eos_token_id": 1})");
  if (gemma3) {
    j["architectures"] = {"Gemma3ForCausalLM"};
    j["rope_local_base_freq"] = 10000.0;
    j["rope_theta"] = 1000000.0;
  } else {
    j["architectures"] = {"Gemma2ForCausalLM"};
    j["attn_logit_softcapping"] = 50.0;
    j["final_logit_softcapping"] = 30.0;
  }
  return j;
}

TEST(ModelConfig, GemmaVariants) {
  auto g2 = FromJson(GemmaJson(false));
  ASSERT_TRUE(g2.ok()) << g2.status().ToString();
  EXPECT_EQ(g2->arch, Architecture::kGemma2);
  EXPECT_TRUE(g2->gemma_norms);
  EXPECT_FALSE(g2->qk_norm);
  EXPECT_TRUE(g2->tie_word_embeddings);  // Gemma's default
  EXPECT_EQ(g2->activation, Activation::kGeluTanh);
  EXPECT_EQ(g2->attn_logit_softcap, 50.0);
  EXPECT_EQ(g2->final_logit_softcap, 30.0);
  EXPECT_DOUBLE_EQ(g2->AttentionScale(), 1.0 / std::sqrt(24.0));
  for (int64_t l = 0; l < 6; ++l) {
    EXPECT_EQ(g2->LayerSlides(l), l % 2 == 0) << l;  // even layers slide
    EXPECT_EQ(g2->LayerRopeTheta(l), 10000.0);
  }
  // norms: 4 per layer of 64, and the final one
  EXPECT_EQ(g2->ParameterCount(), 100 * 64 + 6 * (64 * 128 + 2 * 64 * 64 + 128 * 64 + 3 * 64 * 128 + 4 * 64) + 64);

  auto g3 = FromJson(GemmaJson(true));
  ASSERT_TRUE(g3.ok()) << g3.status().ToString();
  EXPECT_EQ(g3->arch, Architecture::kGemma3);
  EXPECT_TRUE(g3->qk_norm);
  EXPECT_EQ(g3->attn_logit_softcap, 0.0);
  for (int64_t l = 0; l < 6; ++l) {
    EXPECT_EQ(g3->LayerSlides(l), l != 5) << l;  // the default pattern: every sixth global
    EXPECT_EQ(g3->LayerRopeTheta(l), l != 5 ? 10000.0 : 1e6) << l;
  }
  // model_type alone names Gemma 3's text model.
  json by_type = GemmaJson(true);
  by_type.erase("architectures");
  by_type["model_type"] = "gemma3_text";
  EXPECT_EQ(FromJson(by_type)->arch, Architecture::kGemma3);

  // An explicit layer_types list wins over the pattern.
  json typed = GemmaJson(true);
  typed["sliding_window_pattern"] = 2;
  typed["layer_types"] = {"full_attention",    "sliding_attention", "sliding_attention",
                          "sliding_attention", "full_attention",    "sliding_attention"};
  auto g3t = FromJson(typed);
  ASSERT_TRUE(g3t.ok()) << g3t.status().ToString();
  EXPECT_EQ(g3t->sliding_layers, (std::vector<bool>{false, true, true, true, false, true}));
  json pattern = GemmaJson(true);
  pattern["sliding_window_pattern"] = 2;
  EXPECT_EQ(FromJson(pattern)->sliding_layers, (std::vector<bool>{true, false, true, false, true, false}));

  json short_types = GemmaJson(true);
  short_types["layer_types"] = {"full_attention"};
  EXPECT_EQ(FromJson(short_types).status().code(), StatusCode::kInvalidArgument);
  json odd_type = typed;
  odd_type["layer_types"][0] = "chunked_attention";
  EXPECT_EQ(FromJson(odd_type).status().code(), StatusCode::kUnsupported);
  json negative_cap = GemmaJson(false);
  negative_cap["final_logit_softcapping"] = -1.0;
  EXPECT_FALSE(FromJson(negative_cap).ok());
}

// gemma-3-4b-it's config.json as published: the text model's config under
// text_config, giving only what differs from Gemma3TextConfig's defaults.
TEST(ModelConfig, Gemma3MultimodalCheckpointReadsItsTextConfig) {
  json j = json::parse(R"({
    "architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3",
    "boi_token_index": 255999, "eoi_token_index": 256000, "eos_token_id": [1, 106],
    "image_token_index": 262144, "initializer_range": 0.02, "mm_tokens_per_image": 256,
    "text_config": {"hidden_size": 2560, "intermediate_size": 10240, "model_type": "gemma3_text",
                    "num_hidden_layers": 34, "rope_scaling": {"factor": 8.0, "rope_type": "linear"},
                    "sliding_window": 1024},
    "torch_dtype": "bfloat16", "transformers_version": "4.50.0.dev0",
    "vision_config": {"hidden_size": 1152, "image_size": 896, "model_type": "siglip_vision_model"}})");
  auto c = FromJson(j);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->arch, Architecture::kGemma3);
  EXPECT_EQ(c->hf_architecture, "Gemma3ForConditionalGeneration");
  EXPECT_TRUE(c->text_tower_of_multimodal);
  EXPECT_EQ(c->hidden_size, 2560);
  EXPECT_EQ(c->num_layers, 34);
  EXPECT_EQ(c->num_heads, 8);
  EXPECT_EQ(c->num_kv_heads, 4);
  EXPECT_EQ(c->head_dim, 256);
  EXPECT_EQ(c->vocab_size, 262208);
  EXPECT_EQ(c->sliding_window, 1024);
  EXPECT_EQ(c->rope_scaling.type, RopeScalingType::kLinear);
  EXPECT_EQ(c->rope_scaling.factor, 8.0);
  EXPECT_EQ(c->eos_token_ids, (std::vector<int64_t>{1, 106}));
  EXPECT_EQ(c->torch_dtype, "bfloat16");
  EXPECT_TRUE(c->tie_word_embeddings);
  EXPECT_EQ(c->activation, Activation::kGeluTanh);
  for (int64_t l = 0; l < 12; ++l) {
    EXPECT_EQ(c->LayerSlides(l), (l + 1) % 6 != 0) << l;
    EXPECT_EQ(c->LayerRopeTheta(l), c->LayerSlides(l) ? 10000.0 : 1e6) << l;
  }
  EXPECT_DOUBLE_EQ(c->AttentionScale(), 1.0 / 16.0);  // query_pre_attn_scalar 256
  // The published 4B's text model: about 3.88 billion parameters.
  EXPECT_NEAR(static_cast<double>(c->ParameterCount()), 3.88e9, 0.01e9);

  // model_type gemma3 with a text_config and no architectures reads the same.
  json by_type = j;
  by_type.erase("architectures");
  EXPECT_EQ(FromJson(by_type)->num_layers, 34);
  json no_text = j;
  no_text.erase("text_config");
  auto missing = FromJson(no_text);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("text_config"), std::string::npos) << missing.status().ToString();
}

// Qwen2-MoE's and Qwen3-MoE's keys: the experts, norm_topk_prob's default
// by architecture, dense layers by decoder_sparse_step and mlp_only_layers;
// Mixtral's experts of intermediate_size; and the errors, each named.
TEST(ModelConfig, MixturesOfExperts) {
  json qwen3 = LlamaJson();
  qwen3["architectures"] = {"Qwen3MoeForCausalLM"};
  qwen3["num_hidden_layers"] = 4;
  qwen3["num_experts"] = 8;
  qwen3["num_experts_per_tok"] = 2;
  qwen3["moe_intermediate_size"] = 32;
  auto c = FromJson(qwen3);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->arch, Architecture::kQwen3Moe);
  EXPECT_TRUE(c->qk_norm);
  EXPECT_TRUE(c->normalize_expert_weights);
  EXPECT_EQ(c->expert_intermediate_size, 32);
  EXPECT_TRUE(c->dense_mlp_layers.empty());
  for (int64_t l = 0; l < 4; ++l) EXPECT_TRUE(c->LayerIsMoe(l));

  json qwen2 = qwen3;
  qwen2["architectures"] = {"Qwen2MoeForCausalLM"};
  qwen2["shared_expert_intermediate_size"] = 64;
  qwen2["decoder_sparse_step"] = 2;
  qwen2["mlp_only_layers"] = {3};
  c = FromJson(qwen2);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE(c->attention_bias);
  EXPECT_FALSE(c->normalize_expert_weights);
  EXPECT_EQ(c->shared_expert_intermediate_size, 64);
  EXPECT_FALSE(c->LayerIsMoe(0));
  EXPECT_TRUE(c->LayerIsMoe(1));
  EXPECT_FALSE(c->LayerIsMoe(2));
  EXPECT_FALSE(c->LayerIsMoe(3));  // listed in mlp_only_layers

  json mixtral = LlamaJson();
  mixtral["architectures"] = {"MixtralForCausalLM"};
  mixtral["num_local_experts"] = 8;
  mixtral["num_experts_per_tok"] = 2;
  c = FromJson(mixtral);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->arch, Architecture::kMixtral);
  EXPECT_EQ(c->expert_intermediate_size, 128);
  EXPECT_TRUE(c->normalize_expert_weights);
  EXPECT_EQ(c->ActiveParameterCount(), c->ParameterCount() - 2 * 6 * 3 * 64 * 128);

  auto message = [](const json& j) { return FromJson(j).status().ToString(); };
  json too_many = qwen3;
  too_many["num_experts_per_tok"] = 9;
  EXPECT_NE(message(too_many).find("experts per token 9"), std::string::npos) << message(too_many);
  json no_experts = mixtral;
  no_experts.erase("num_local_experts");
  EXPECT_NE(message(no_experts).find("num_local_experts"), std::string::npos) << message(no_experts);
  json bad_layer = qwen2;
  bad_layer["mlp_only_layers"] = {4};
  EXPECT_NE(message(bad_layer).find("mlp_only_layers"), std::string::npos) << message(bad_layer);
  json no_shared = qwen2;
  no_shared.erase("shared_expert_intermediate_size");
  EXPECT_NE(message(no_shared).find("shared_expert_intermediate_size"), std::string::npos);
}

TEST(Presets, PublishedShapes) {
  struct Case {
    const char* name;
    int64_t params;  // the published parameter counts
    int64_t hidden;
    int64_t layers;
  };
  for (const Case& c :
       {Case{"qwen2.5-0.5b", 494032768, 896, 24}, Case{"qwen2.5-1.5b", 1543714304, 1536, 28},
        Case{"qwen3-0.6b", 596049920, 1024, 28}, Case{"llama-3.2-1b", 1235814400, 2048, 16},
        Case{"phi-4-mini", 3836021760, 3072, 32}, Case{"gemma-3-1b", 999885952, 1152, 26}}) {
    auto config = PresetConfig(c.name);
    ASSERT_TRUE(config.ok()) << c.name;
    EXPECT_TRUE(config->Validate().ok()) << c.name;
    EXPECT_EQ(config->ParameterCount(), c.params) << c.name;
    EXPECT_EQ(config->hidden_size, c.hidden) << c.name;
    EXPECT_EQ(config->num_layers, c.layers) << c.name;
  }
  auto qwen = *PresetConfig("qwen2.5-0.5b");
  EXPECT_EQ(qwen.num_heads, 14);
  EXPECT_EQ(qwen.num_kv_heads, 2);
  EXPECT_EQ(qwen.intermediate_size, 4864);
  EXPECT_EQ(qwen.vocab_size, 151936);
  EXPECT_TRUE(qwen.tie_word_embeddings);
  EXPECT_TRUE(qwen.attention_bias);
  EXPECT_EQ(qwen.rope_theta, 1e6);
  auto llama = *PresetConfig("llama-3.2-1b");
  EXPECT_EQ(llama.rope_scaling.type, RopeScalingType::kLlama3);
  EXPECT_EQ(llama.rope_scaling.factor, 32.0);
  EXPECT_EQ(llama.rope_scaling.original_max_position_embeddings, 8192);
  EXPECT_EQ(llama.rope_theta, 500000.0);
  EXPECT_EQ(PresetConfig("qwen3-0.6b")->head_dim, 128);

  auto unknown = PresetConfig("gpt-5");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), StatusCode::kNotFound);
  EXPECT_NE(unknown.status().message().find("qwen2.5-0.5b, qwen2.5-1.5b, qwen3-0.6b, llama-3.2-1b"),
            std::string::npos);
  auto phi = *PresetConfig("phi-4-mini");
  EXPECT_EQ(phi.arch, Architecture::kPhi3);
  EXPECT_EQ(phi.RotaryDim(), 96);
  EXPECT_EQ(phi.rope_scaling.type, RopeScalingType::kLongRope);
  EXPECT_EQ(phi.rope_scaling.long_factor.size(), 48u);
  EXPECT_EQ(phi.rope_scaling.long_factor.back(), 47.77);
  EXPECT_EQ(phi.rope_scaling.original_max_position_embeddings, 4096);
  EXPECT_NEAR(phi.rope_scaling.LongRopeAttentionFactor(), std::sqrt(1 + std::log(32.0) / std::log(4096.0)),
              1e-12);
  EXPECT_TRUE(phi.tie_word_embeddings);
  EXPECT_EQ(PresetNames().size(), 10u);
  // Llama-3-8B's published total: 8.03B.
  auto llama3 = *PresetConfig("llama-3-8b");
  EXPECT_TRUE(llama3.Validate().ok());
  EXPECT_EQ(llama3.ParameterCount(), 8030261248);
  EXPECT_EQ(llama3.rope_scaling.type, RopeScalingType::kNone);
  // The mixtures: published totals, and the parameters a token computes with
  // (3.3B of Qwen3-30B-A3B, 12.9B of Mixtral-8x7B).
  auto qwen_moe = *PresetConfig("qwen3-30b-a3b");
  EXPECT_TRUE(qwen_moe.Validate().ok());
  EXPECT_EQ(qwen_moe.ParameterCount(), 30532122624);
  EXPECT_EQ(qwen_moe.ActiveParameterCount(), 3353032704);
  EXPECT_TRUE(qwen_moe.LayerIsMoe(47));
  auto qwen_moe_small = *PresetConfig("qwen3-moe-small");
  EXPECT_TRUE(qwen_moe_small.Validate().ok());
  EXPECT_EQ(qwen_moe_small.num_layers, 6);
  EXPECT_EQ(qwen_moe_small.num_experts, qwen_moe.num_experts);
  EXPECT_EQ(qwen_moe_small.expert_intermediate_size, qwen_moe.expert_intermediate_size);
  auto mixtral = *PresetConfig("mixtral-8x7b");
  EXPECT_TRUE(mixtral.Validate().ok());
  EXPECT_EQ(mixtral.ParameterCount(), 46702792704);
  EXPECT_EQ(mixtral.ActiveParameterCount(), 12879925248);
  auto gemma = *PresetConfig("gemma-3-1b");
  EXPECT_EQ(gemma.arch, Architecture::kGemma3);
  EXPECT_EQ(gemma.sliding_window, 512);
  EXPECT_TRUE(gemma.LayerSlides(0));
  EXPECT_FALSE(gemma.LayerSlides(5));
  EXPECT_EQ(gemma.LayerRopeTheta(0), 10000.0);
  EXPECT_EQ(gemma.LayerRopeTheta(5), 1e6);
  EXPECT_DOUBLE_EQ(gemma.AttentionScale(), 1.0 / 16.0);
}

}  // namespace model_config_tests
}  // namespace kiln
