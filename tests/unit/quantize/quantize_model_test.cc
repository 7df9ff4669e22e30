// Quantizing whole models: Hugging Face folders convert to what llama.cpp's
// converter and llama-quantize write (metadata and tensors byte for byte);
// GGUF sources requantize to llama-quantize's files; a written file reads
// back in kiln with all its metadata, tokenizer and chat template and gives
// the outputs of the in-memory quantized model; Q8_0 stays within 0.05% of
// F32 perplexity.
#include "quantize/quantize_model.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <set>

#include "format/gguf.h"
#include "testing/quantize_test_util.h"
#include "tokenizer/tokenizer.h"

namespace kiln {
namespace quantize_model_tests {

using testing::GgufPath;

struct Collected {
  std::vector<std::string> notices;
  int progress_calls = 0;
  QuantizeProgress last;
};

QuantizedModel Quantize(const std::string& source, const char* type, Collected* collected = nullptr) {
  QuantizeOptions options;
  options.type = *ParseQuantFileType(type);
  options.threads = 2;
  if (collected != nullptr) {
    options.on_notice = [collected](const std::string& s) { collected->notices.push_back(s); };
    options.on_progress = [collected](const QuantizeProgress& p) {
      ++collected->progress_calls;
      collected->last = p;
    };
  }
  auto model = QuantizeModel(source, options);
  EXPECT_TRUE(model.ok()) << model.status().ToString();
  return model.ok() ? std::move(model).value() : QuantizedModel{};
}

const GgufValue* FindKey(const GgufMetadata& metadata, const std::string& key) {
  for (const auto& [k, v] : metadata) {
    if (k == key) return &v;
  }
  return nullptr;
}

// Every key of `reference` (but `except`) is in `mine` with the same value,
// and every tensor has the same name, type, shape and bytes.
void ExpectSameAsReference(const QuantizedModel& mine, const GgufFile& reference,
                           const std::set<std::string>& except = {}) {
  for (const auto& [key, value] : reference.metadata()) {
    if (except.count(key)) continue;
    const GgufValue* v = FindKey(mine.metadata, key);
    ASSERT_NE(v, nullptr) << reference.path() << ": key " << key << " missing";
    EXPECT_TRUE(*v == value) << key << ": " << v->ToString() << " vs " << value.ToString();
  }
  ASSERT_EQ(mine.tensors.size(), reference.tensors().size());
  for (const QuantizedTensor& t : mine.tensors) {
    const GgufTensorInfo* r = reference.FindTensor(t.name);
    ASSERT_NE(r, nullptr) << t.name;
    EXPECT_EQ(t.dtype, r->dtype) << t.name;
    EXPECT_EQ(t.shape, r->shape()) << t.name;
    ASSERT_EQ(t.data.size(), r->nbytes) << t.name;
    EXPECT_EQ(std::memcmp(t.data.data(), r->data, r->nbytes), 0) << t.name << " bytes differ";
  }
}

struct Conversion {
  const char* source;     // a model folder name, or a .gguf file of ../shared/models/gguf
  const char* type;
  const char* reference;  // llama.cpp's file
};

std::string SourcePath(const std::string& source) {
  return source.find(".gguf") != std::string::npos ? GgufPath(source) : testing::ModelDir(source);
}

class QuantizeModelLikeLlamaCpp : public ::testing::TestWithParam<Conversion> {};

// llama.cpp's converter writes tokenizer.ggml.add_sep_token from a
// tokenizer.json post-processor; kiln leaves the key out (false either way).
TEST_P(QuantizeModelLikeLlamaCpp, MetadataAndTensorsAreByteIdentical) {
  const Conversion& c = GetParam();
  QuantizedModel model = Quantize(SourcePath(c.source), c.type);
  auto reference = GgufFile::Open(GgufPath(c.reference));
  ASSERT_TRUE(reference.ok()) << reference.status().ToString();
  ExpectSameAsReference(model, **reference, {"tokenizer.ggml.add_sep_token"});
  EXPECT_EQ(FindKey(model.metadata, "general.file_type")->AsInt(), (*reference)->GetInt("general.file_type"));
}

INSTANTIATE_TEST_SUITE_P(
    Files, QuantizeModelLikeLlamaCpp,
    ::testing::Values(Conversion{"tiny-llama", "f32", "tiny-llama-F32.gguf"},
                      Conversion{"tiny-qwen2", "f32", "tiny-qwen2-F32.gguf"},
                      Conversion{"tiny-qwen3", "f16", "tiny-qwen3-F16.gguf"},
                      Conversion{"tiny-llama", "q4_k_m", "tiny-llama-Q4_K_M.gguf"},
                      Conversion{"tiny-qwen2", "q5_k_m", "tiny-qwen2-Q5_K_M.gguf"},
                      Conversion{"tiny-qwen3", "q4_k_m", "tiny-qwen3-Q4_K_M.gguf"},
                      Conversion{"tiny-qwen3-F16.gguf", "q5_k_m", "tiny-qwen3-Q5_K_M.gguf"},
                      Conversion{"tiny-qwen3-F16.gguf", "q6_k", "tiny-qwen3-Q6_K.gguf"},
                      Conversion{"tiny-qwen3-F16.gguf", "q8_0", "tiny-qwen3-Q8_0.gguf"},
                      Conversion{"tiny-qwen3-F16.gguf", "q4_0", "tiny-qwen3-Q4_0.gguf"},
                      Conversion{"tiny-qwen3-F16.gguf", "q4_1", "tiny-qwen3-Q4_1.gguf"},
                      Conversion{"tiny-qwen3-F16.gguf", "q5_0", "tiny-qwen3-Q5_0.gguf"},
                      Conversion{"tiny-qwen3-F16.gguf", "q5_1", "tiny-qwen3-Q5_1.gguf"},
                      Conversion{"tiny-llama-F32.gguf", "q6_k", "tiny-llama-Q6_K.gguf"},
                      Conversion{"tiny-qwen2-F32.gguf", "q4_0", "tiny-qwen2-Q4_0.gguf"}));

TEST(QuantizeModel, ReportsFallbacksAndProgress) {
  Collected c;
  QuantizedModel model = Quantize(testing::ModelDir("tiny-llama"), "q4_k_m", &c);
  // 30 matrices: the output is q8_0 outright, the 29 others fall back.
  EXPECT_EQ(model.fallbacks, 29);
  int falling_back = 0;
  for (const std::string& n : c.notices) falling_back += n.find("falling back to") != std::string::npos;
  EXPECT_EQ(falling_back, 29);
  EXPECT_NE(std::find(c.notices.begin(), c.notices.end(),
                      "blk.2.attn_v.weight: 128 columns are not a multiple of q6_k's block of 256, falling back to q8_0"),
            c.notices.end());
  EXPECT_EQ(c.progress_calls, 39);
  EXPECT_EQ(c.last.tensors_done, 39);
  EXPECT_EQ(c.last.tensors_total, 39);
  EXPECT_EQ(c.last.bytes_done, c.last.bytes_total);
  EXPECT_EQ(c.last.bytes_total, model.TensorBytes());
}

TEST(QuantizeModel, RequantizingSaysSo) {
  Collected c;
  QuantizedModel model = Quantize(GgufPath("tiny-qwen3-Q8_0.gguf"), "q4_0", &c);
  ASSERT_FALSE(c.notices.empty());
  EXPECT_NE(c.notices.back().find("requantizing"), std::string::npos) << c.notices.back();
  // Same-type tensors are copied, not requantized: Q8_0 -> Q8_0 is the file itself.
  QuantizedModel same = Quantize(GgufPath("tiny-qwen3-Q8_0.gguf"), "q8_0");
  auto reference = GgufFile::Open(GgufPath("tiny-qwen3-Q8_0.gguf"));
  ASSERT_TRUE(reference.ok());
  ExpectSameAsReference(same, **reference);
}

TEST(QuantizeModel, BadSourcesAreErrors) {
  QuantizeOptions options;
  auto missing = QuantizeModel(testing::MakeTempDir() + "/nothing.gguf", options);
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  std::string bad = testing::MakeTempDir() + "/bad.gguf";
  {
    std::FILE* f = std::fopen(bad.c_str(), "wb");
    std::fputs("GGUF but not really", f);
    std::fclose(f);
  }
  auto corrupt = QuantizeModel(bad, options);
  EXPECT_FALSE(corrupt.ok());
  EXPECT_NE(corrupt.status().message().find("bad.gguf"), std::string::npos) << corrupt.status().ToString();
}

// The bytes of a GGUF v3 file with one key and one 256 x 256 tensor of
// ggml type `type`, its data zero.
std::string OneTensorGguf(uint32_t type, uint64_t data_bytes) {
  std::string out;
  auto put = [&out](const auto& v) { out.append(reinterpret_cast<const char*>(&v), sizeof(v)); };
  auto put_string = [&](const std::string& text) {
    put(static_cast<uint64_t>(text.size()));
    out += text;
  };
  out += "GGUF";
  put(uint32_t{3});
  put(uint64_t{1});  // tensors
  put(uint64_t{1});  // keys
  put_string("general.architecture");
  put(uint32_t{8});  // string
  put_string("llama");
  put_string("blk.0.attn_q.weight");
  put(uint32_t{2});
  put(uint64_t{256});
  put(uint64_t{256});
  put(type);
  put(uint64_t{0});  // offset
  out.resize((out.size() + 31) / 32 * 32, '\0');
  out.resize(out.size() + data_bytes, '\0');
  return out;
}

TEST(QuantizeModel, UnsupportedTensorTypesAreNamed) {
  const std::string dir = testing::MakeTempDir();
  struct Case {
    uint32_t type;
    uint64_t bytes;
    const char* expected;
  };
  // IQ1_S (19): a real ggml type kiln does not run; 99: no ggml type at all.
  for (const Case& c : {Case{19, 256 * 50, "IQ1_S (19) is not supported"}, Case{99, 256 * 256, "unknown ggml type 99"}}) {
    const std::string path = dir + "/type" + std::to_string(c.type) + ".gguf";
    {
      std::FILE* f = std::fopen(path.c_str(), "wb");
      ASSERT_NE(f, nullptr);
      const std::string bytes = OneTensorGguf(c.type, c.bytes);
      std::fwrite(bytes.data(), 1, bytes.size(), f);
      std::fclose(f);
    }
    auto model = QuantizeModel(path, QuantizeOptions());
    ASSERT_FALSE(model.ok());
    const std::string message = model.status().ToString();
    EXPECT_NE(message.find(path), std::string::npos) << message;
    EXPECT_NE(message.find("blk.0.attn_q.weight"), std::string::npos) << message;
    EXPECT_NE(message.find(c.expected), std::string::npos) << message;
  }
}

// A file written by WriteQuantizedGguf, read back by kiln, is the in-memory
// model: metadata, tensors, configuration, tokenizer, chat template, and the
// logits of a forward pass, bit for bit.
class QuantizeModelReadBack : public ::testing::TestWithParam<std::pair<const char*, const char*>> {};

TEST_P(QuantizeModelReadBack, FileEqualsInMemoryModel) {
  auto [model_name, type] = GetParam();
  const std::string folder = testing::ModelDir(model_name);
  QuantizedModel model = Quantize(folder, type);
  const std::string path = testing::MakeTempDir() + "/model.gguf";
  ASSERT_TRUE(WriteQuantizedGguf(model, path).ok());
  // Atomic: nothing but the file is left beside it.
  int entries = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(std::filesystem::path(path).parent_path()))
    ++entries;
  EXPECT_EQ(entries, 1);

  auto file = GgufFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  ASSERT_EQ((*file)->metadata().size(), model.metadata.size());
  for (size_t i = 0; i < model.metadata.size(); ++i) {
    EXPECT_EQ((*file)->metadata()[i].first, model.metadata[i].first);
    EXPECT_TRUE((*file)->metadata()[i].second == model.metadata[i].second) << model.metadata[i].first;
  }
  ExpectSameAsReference(model, **file);

  // Weights and configuration as the engine sees them.
  auto from_file = WeightStore::Open(path);
  ASSERT_TRUE(from_file.ok()) << from_file.status().ToString();
  auto in_memory = QuantizedModelWeights(model);
  ASSERT_TRUE(in_memory.ok()) << in_memory.status().ToString();
  const ModelConfig& a = (*from_file)->config();
  const ModelConfig& b = (*in_memory)->config();
  EXPECT_EQ(a.arch, b.arch);
  EXPECT_EQ(a.rope_style, b.rope_style);
  EXPECT_EQ(a.tie_word_embeddings, b.tie_word_embeddings);
  EXPECT_EQ(a.head_dim, b.head_dim);
  EXPECT_EQ(a.vocab_size, b.vocab_size);
  EXPECT_EQ(a.bos_token_ids, b.bos_token_ids);
  EXPECT_EQ(a.eos_token_ids, b.eos_token_ids);
  EXPECT_DOUBLE_EQ(a.rope_theta, b.rope_theta);
  EXPECT_DOUBLE_EQ(a.rms_norm_eps, b.rms_norm_eps);

  // The tokenizer and chat template survive: the reference prompts encode
  // to the reference ids with the file's tokenizer, whose special tokens are
  // those of llama.cpp's conversion (Qwen's BOS comes from config.json).
  auto original = LoadTokenizer(folder);
  auto llama_cpp = LoadTokenizer(GgufPath(std::string(model_name) + (model_name == std::string("tiny-qwen3") ? "-F16.gguf" : "-F32.gguf")));
  auto tokenizer = LoadTokenizer(path);
  auto memory_tokenizer = QuantizedModelTokenizer(model);
  ASSERT_TRUE(original.ok() && llama_cpp.ok() && tokenizer.ok() && memory_tokenizer.ok())
      << tokenizer.status().ToString();
  EXPECT_EQ((*tokenizer)->chat_template(), (*original)->chat_template());
  EXPECT_EQ((*tokenizer)->bos_id(), (*llama_cpp)->bos_id());
  EXPECT_EQ((*tokenizer)->eos_id(), (*llama_cpp)->eos_id());
  EXPECT_EQ((*tokenizer)->eos_id(), (*original)->eos_id());
  EXPECT_EQ((*tokenizer)->add_bos(), (*original)->add_bos());
  EXPECT_EQ((*tokenizer)->end_of_generation_ids(), (*llama_cpp)->end_of_generation_ids());
  EXPECT_EQ((*tokenizer)->vocab_size(), (*original)->vocab_size());
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 4; ++i) {
    auto ref = testing::LoadJsonFile(folder + "/reference/prompt_" + std::to_string(i) + ".json");
    auto ids = (*tokenizer)->Encode(ref["prompt"].get<std::string>());
    EXPECT_EQ(ids, ref["input_ids"].get<std::vector<int32_t>>()) << "prompt " << i;
    EXPECT_EQ((*memory_tokenizer)->Encode(ref["prompt"].get<std::string>()), ids);
    prompts.push_back(ids);
  }
  const std::string chat = "<|im_start|>user\nHi<|im_end|>\n";
  EXPECT_EQ((*tokenizer)->Encode(chat), (*original)->Encode(chat));

  // Same logits from the file and from memory, with the quantized kernels
  // reading the blocks in place ...
  auto file_native = CompiledModel::Compile(**from_file, testing::Fp32Options());
  auto memory_native = CompiledModel::Compile(**in_memory, testing::Fp32Options());
  ASSERT_TRUE(file_native.ok() && memory_native.ok()) << file_native.status().ToString();
  testing::DirectRunner file_native_runner(**file_native, 4, 256), memory_native_runner(**memory_native, 4, 256);
  auto file_native_logits = file_native_runner.Prefill(prompts, 32, true);
  auto memory_native_logits = memory_native_runner.Prefill(prompts, 32, true);
  ASSERT_EQ(file_native_logits.size(), 4u);
  ASSERT_EQ(file_native_logits.size(), memory_native_logits.size());
  for (size_t i = 0; i < file_native_logits.size(); ++i) {
    ASSERT_EQ(file_native_logits[i].size(), memory_native_logits[i].size());
    EXPECT_EQ(std::memcmp(file_native_logits[i].data(), memory_native_logits[i].data(),
                          file_native_logits[i].size() * sizeof(float)),
              0)
        << "prompt " << i << ", quantized kernels";
  }

  // ... and on the weights widened to f32.
  auto file_f32 = testing::WidenedWeights::Of(**from_file);
  auto memory_f32 = testing::WidenedWeights::Of(**in_memory);
  auto file_model = CompiledModel::Compile(*file_f32, testing::Fp32Options());
  auto memory_model = CompiledModel::Compile(*memory_f32, testing::Fp32Options());
  ASSERT_TRUE(file_model.ok() && memory_model.ok()) << file_model.status().ToString();
  testing::DirectRunner file_runner(**file_model, 4, 256), memory_runner(**memory_model, 4, 256);
  auto file_logits = file_runner.Prefill(prompts, 32, true);
  auto memory_logits = memory_runner.Prefill(prompts, 32, true);
  ASSERT_EQ(file_logits.size(), 4u);
  ASSERT_EQ(file_logits.size(), memory_logits.size());
  for (size_t i = 0; i < file_logits.size(); ++i) {
    ASSERT_EQ(file_logits[i].size(), memory_logits[i].size());
    EXPECT_EQ(std::memcmp(file_logits[i].data(), memory_logits[i].data(), file_logits[i].size() * sizeof(float)), 0)
        << "prompt " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Models, QuantizeModelReadBack,
                         ::testing::Values(std::make_pair("tiny-llama", "q4_k_m"),
                                           std::make_pair("tiny-qwen2", "q8_0"),
                                           std::make_pair("tiny-qwen3", "q4_k_m"),
                                           std::make_pair("tiny-qwen3", "bf16"),
                                           std::make_pair("tiny-qwen2", "iq4_nl"),
                                           std::make_pair("tiny-qwen3", "iq4_xs")));

// Q8_0 costs at most 0.05% of held-out perplexity (fp32 compute on the
// dequantized weights, against the unquantized model).
TEST(QuantizeModelAccuracy, Q8_0WithinFiveHundredthsOfAPercent) {
  for (const char* name : {"tiny-llama", "tiny-qwen2", "tiny-qwen3"}) {
    QuantizedModel f32 = Quantize(testing::ModelDir(name), "f32");
    QuantizedModel q8 = Quantize(testing::ModelDir(name), "q8_0");
    auto f32_weights = QuantizedModelWeights(f32);
    auto q8_weights = QuantizedModelWeights(q8);
    ASSERT_TRUE(f32_weights.ok() && q8_weights.ok());
    auto q8_f32 = testing::WidenedWeights::Of(**q8_weights);
    auto base = CompiledModel::Compile(**f32_weights, testing::Fp32Options());
    auto quantized = CompiledModel::Compile(*q8_f32, testing::Fp32Options());
    ASSERT_TRUE(base.ok() && quantized.ok());
    double ppl_f32 = testing::HeldOutPerplexity(**base, name, 16);
    double ppl_q8 = testing::HeldOutPerplexity(**quantized, name, 16);
    std::printf("%s held-out perplexity (16 windows): f32 %.4f, q8_0 %.4f (%+.4f%%)\n", name, ppl_f32, ppl_q8,
                100 * (ppl_q8 / ppl_f32 - 1));
    EXPECT_LT(std::fabs(ppl_q8 / ppl_f32 - 1), 5e-4) << name;
  }
}

// The IQ4 formats, run by the quantized kernels on their blocks, cost at
// most 1% of held-out perplexity on the model whose rows are all whole
// super-blocks (measured: +0.3%, as Q4_0).
TEST(QuantizeModelAccuracy, IQ4WithinOnePercent) {
  QuantizedModel f32 = Quantize(testing::ModelDir("tiny-qwen3"), "f32");
  auto f32_weights = QuantizedModelWeights(f32);
  ASSERT_TRUE(f32_weights.ok());
  auto base = CompiledModel::Compile(**f32_weights, testing::Fp32Options());
  ASSERT_TRUE(base.ok());
  const double ppl_f32 = testing::HeldOutPerplexity(**base, "tiny-qwen3", 16);
  for (const char* type : {"iq4_nl", "iq4_xs"}) {
    QuantizedModel iq4 = Quantize(testing::ModelDir("tiny-qwen3"), type);
    for (const QuantizedTensor& t : iq4.tensors) {
      if (t.shape.size() == 2 && t.name != "token_embd.weight") {
        EXPECT_EQ(DTypeName(t.dtype), std::string(type)) << t.name;
      }
    }
    auto weights = QuantizedModelWeights(iq4);
    ASSERT_TRUE(weights.ok());
    auto model = CompiledModel::Compile(**weights, testing::Fp32Options());
    ASSERT_TRUE(model.ok()) << model.status().ToString();
    const double ppl = testing::HeldOutPerplexity(**model, "tiny-qwen3", 16);
    std::printf("tiny-qwen3 held-out perplexity (16 windows): f32 %.4f, %s %.4f (%+.4f%%)\n", ppl_f32, type, ppl,
                100 * (ppl / ppl_f32 - 1));
    EXPECT_LT(std::fabs(ppl / ppl_f32 - 1), 0.01) << type;
  }
}

}  // namespace quantize_model_tests
}  // namespace kiln
