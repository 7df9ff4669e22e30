// Compiled artifacts: the logits of a model loaded from its artifact equal
// those of the model it was compiled from, bit for bit, for Hugging Face
// folders, GGUF files of several types and generated weights, with every
// packed matrix adopted rather than packed again; the tokenizer and
// generation defaults come along; stale files (another kernel-layout
// version, a higher ISA, a missing backend) and flags that disagree with
// what was compiled are refused by name.
#include "engine/model_artifact.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "backend/backend.h"
#include "compiler/compiled_model.h"
#include "core/page_prefault.h"
#include "engine/model_loader.h"
#include "engine/model_session.h"
#include "engine/model_session_options.h"
#include "format/artifact_file.h"
#include "format/weight_store.h"
#include "testing/artifact_edit_for_tests.h"
#include "testing/test_paths.h"
#include "tokenizer/tokenizer.h"

namespace kiln {
namespace model_artifact_tests {

EngineOptions SmallOptions(const std::string& model) {
  EngineOptions o;
  o.model = model;
  o.max_model_len = 64;
  o.max_num_seqs = 2;
  o.max_num_batched_tokens = 16;
  o.threads = 2;
  return o;
}

// Greedy ids of `steps` decoded tokens after `prompt`, and every step's logits.
struct Run {
  std::vector<int32_t> tokens;
  std::vector<float> logits;
  int adopted = 0;
  int packed = 0;
  // What the session bound: whether from the artifact's stored graph and
  // plans, the graph, and each bucket's arena sizes and step count.
  bool from_artifact = false;
  std::string graph;
  std::vector<std::string> buckets;
};

Run Decode(const EngineOptions& options, const std::vector<int32_t>& prompt, int steps) {
  Run run;
  auto loaded = LoadModel(options);
  EXPECT_TRUE(loaded.ok()) << loaded.status().ToString();
  if (!loaded.ok()) return run;
  auto session_options = SessionOptionsFor(options, *loaded);
  EXPECT_TRUE(session_options.ok());
  auto session = ModelSession::Create(*loaded->weights, *session_options);
  EXPECT_TRUE(session.ok()) << session.status().ToString();
  if (!session.ok()) return run;
  const CompileReport& report = (*session)->model().report();
  for (const PackedWeightInfo& p : report.layout.packed) (p.adopted ? run.adopted : run.packed) += 1;
  run.from_artifact = report.from_artifact;
  run.graph = (*session)->model().graph().ToString();
  for (const BucketPlan& b : report.buckets) {
    std::string arenas;
    for (const auto& [domain, bytes] : b.arena_bytes)
      arenas += fmt::format(" {}:{}", report.domain_names.at(domain), bytes);
    run.buckets.push_back(fmt::format("{} tokens, {} steps,{}", b.env.tokens, b.steps, arenas));
  }
  const int64_t vocab = (*loaded->weights).config().vocab_size;
  std::vector<float> logits(static_cast<size_t>(vocab));
  std::vector<int32_t> ids = prompt;
  int32_t position = 0;
  for (int s = 0; s < steps; ++s) {
    const int32_t last = static_cast<int32_t>(ids.size()) - 1 - position;
    EXPECT_TRUE((*session)
                    ->ForwardSequence({ids.data() + position, ids.size() - position}, position, {&last, 1},
                                      logits.data())
                    .ok());
    position = static_cast<int32_t>(ids.size());
    const auto best = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    run.logits.insert(run.logits.end(), logits.begin(), logits.end());
    run.tokens.push_back(best);
    ids.push_back(best);
  }
  return run;
}

// The artifact's session ran no stage: it bound the stored graph and
// plans, which are the ones compiling the source makes.
void ExpectBoundFromTheStoredPlans(const Run& source, const Run& artifact) {
  EXPECT_FALSE(source.from_artifact);
  EXPECT_TRUE(artifact.from_artifact) << "the artifact's session planned again";
  EXPECT_EQ(source.graph, artifact.graph);
  EXPECT_EQ(source.buckets, artifact.buckets);
  EXPECT_FALSE(artifact.buckets.empty());
}

void ExpectSameAsSource(const EngineOptions& source) {
  const std::string artifact = testing::MakeTempDir() + "/model.kiln";
  auto summary = CompileArtifact(source, artifact);
  ASSERT_TRUE(summary.ok()) << summary.status().ToString();
  EXPECT_GT(summary->packed, 0);
  EngineOptions from_artifact = source;
  from_artifact.model = artifact;
  from_artifact.load_format = "auto";
  from_artifact.preset.clear();
  const std::vector<int32_t> prompt = {1, 17, 42, 99, 5};
  auto a = Decode(source, prompt, 4);
  auto b = Decode(from_artifact, prompt, 4);
  EXPECT_EQ(a.tokens, b.tokens);
  ASSERT_EQ(a.logits.size(), b.logits.size());
  EXPECT_EQ(std::memcmp(a.logits.data(), b.logits.data(), a.logits.size() * sizeof(float)), 0)
      << "logits differ";
  EXPECT_EQ(a.adopted, 0);
  EXPECT_EQ(b.packed, 0) << "every packed matrix comes from the artifact";
  EXPECT_EQ(b.adopted, a.packed);
  ExpectBoundFromTheStoredPlans(a, b);
}

std::string Gguf(const std::string& name) {
  return testing::SharedDir() + "/models/gguf/" + name;
}

TEST(ModelArtifact, HuggingFaceFolderGivesTheSameLogits) {
  ExpectSameAsSource(SmallOptions(testing::ModelDir("tiny-qwen2")));
}

TEST(ModelArtifact, GgufFilesGiveTheSameLogits) {
  for (const char* file : {"tiny-qwen2-Q8_0.gguf", "tiny-qwen2-Q4_0.gguf", "tiny-llama-Q4_K_M.gguf",
                           "tiny-qwen3-F16.gguf", "tiny-qwen3-Q5_0.gguf"}) {
    SCOPED_TRACE(file);
    ExpectSameAsSource(SmallOptions(Gguf(file)));
  }
}

TEST(ModelArtifact, GeneratedWeightsGiveTheSameLogits) {
  for (DType dtype : {DType::kBF16, DType::kQ8_0}) {
    EngineOptions o = SmallOptions("");
    o.load_format = "dummy";
    o.dummy_dtype = dtype;
    o.model = testing::ModelDir("tiny-llama");  // its config.json's shapes
    ExpectSameAsSource(o);
  }
}

// A mixture of experts (tiny-qwen3's shapes and tokenizer, four experts of
// which two run per token, generated weights): its config's experts come
// back from the artifact and so do its logits.
TEST(ModelArtifact, MixtureOfExpertsGivesTheSameLogits) {
  namespace fs = std::filesystem;
  // Not a MakeTempDir: ExpectSameAsSource makes (and so empties) that one.
  const std::string dir = testing::BinaryDir() + "/test_tmp/moe_artifact_model";
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (const char* file : {"tokenizer.json", "tokenizer_config.json", "vocab.json", "merges.txt"}) {
    fs::copy_file(fs::path(testing::ModelDir("tiny-qwen3")) / file, fs::path(dir) / file);
  }
  std::ifstream in(testing::ModelDir("tiny-qwen3") + "/config.json");
  nlohmann::json config = nlohmann::json::parse(in);
  config["architectures"] = {"Qwen3MoeForCausalLM"};
  config["model_type"] = "qwen3_moe";
  config["num_experts"] = 4;
  config["num_experts_per_tok"] = 2;
  config["moe_intermediate_size"] = 128;
  config["norm_topk_prob"] = true;
  std::ofstream(dir + "/config.json") << config.dump();
  for (DType dtype : {DType::kBF16, DType::kQ8_0}) {
    EngineOptions o = SmallOptions(dir);
    o.load_format = "dummy";
    o.dummy_dtype = dtype;
    ExpectSameAsSource(o);
  }
}

// Accelerators with memory of their own: the stored graph's transfers and
// domains (named in the file, numbered by this process) come back, with
// the KV cache where the source's compile put it.
TEST(ModelArtifact, AcceleratorPlacementsComeBackFromTheStoredGraph) {
  for (const char* backend : {"testaccel", "testaccel-mm"}) {
    SCOPED_TRACE(backend);
    EngineOptions source = SmallOptions(testing::ModelDir("tiny-llama"));
    source.backend = backend;
    const std::string artifact = testing::MakeTempDir() + "/model.kiln";
    auto summary = CompileArtifact(source, artifact);
    ASSERT_TRUE(summary.ok()) << summary.status().ToString();
    EngineOptions from_artifact = source;
    from_artifact.model = artifact;
    const std::vector<int32_t> prompt = {1, 17, 42, 99, 5};
    auto a = Decode(source, prompt, 3);
    auto b = Decode(from_artifact, prompt, 3);
    EXPECT_EQ(a.tokens, b.tokens);
    ASSERT_EQ(a.logits.size(), b.logits.size());
    EXPECT_EQ(std::memcmp(a.logits.data(), b.logits.data(), a.logits.size() * sizeof(float)), 0);
    ExpectBoundFromTheStoredPlans(a, b);
    EXPECT_NE(b.graph.find("transfer"), std::string::npos) << "the accelerator's graph has transfers";
  }
}

// An artifact written before graphs were stored (no "compiled" section)
// still loads: its session runs the stages, with the same logits.
TEST(ModelArtifact, AnArtifactWithoutAStoredGraphCompilesAtLoad) {
  const EngineOptions source = SmallOptions(testing::ModelDir("tiny-qwen2"));
  const std::string dir = testing::MakeTempDir();
  ASSERT_TRUE(CompileArtifact(source, dir + "/model.kiln").ok());
  testing::RewriteArtifactSections(
      dir + "/model.kiln", dir + "/old.kiln",
      [](const std::string& name, std::vector<uint8_t>&) { return name != "compiled"; });
  auto file = ArtifactFile::Open(dir + "/old.kiln");
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_EQ((*file)->Find("compiled"), nullptr);
  file->reset();
  const std::vector<int32_t> prompt = {1, 17, 42, 99, 5};
  auto a = Decode(SmallOptions(dir + "/model.kiln"), prompt, 3);
  auto b = Decode(SmallOptions(dir + "/old.kiln"), prompt, 3);
  EXPECT_TRUE(a.from_artifact);
  EXPECT_FALSE(b.from_artifact);
  EXPECT_EQ(a.graph, b.graph);
  EXPECT_EQ(a.buckets, b.buckets);
  ASSERT_EQ(a.logits.size(), b.logits.size());
  EXPECT_EQ(std::memcmp(a.logits.data(), b.logits.data(), a.logits.size() * sizeof(float)), 0);
  // So does one whose stored graph is set aside, to measure what it saves.
  ::setenv("KILN_ARTIFACT_PLANS", "recompile", 1);
  auto c = Decode(SmallOptions(dir + "/model.kiln"), prompt, 3);
  ::unsetenv("KILN_ARTIFACT_PLANS");
  EXPECT_FALSE(c.from_artifact);
  EXPECT_EQ(a.graph, c.graph);
  EXPECT_EQ(std::memcmp(a.logits.data(), c.logits.data(), a.logits.size() * sizeof(float)), 0);
}

// An artifact the caller opened (the command line does, to apply its
// options) is loaded from that opening, not opened and checked again; one
// opened for another path is not used.
TEST(ModelArtifact, AnArtifactOpenedByTheCallerIsNotOpenedAgain) {
  const std::string dir = testing::MakeTempDir();
  ASSERT_TRUE(CompileArtifact(SmallOptions(testing::ModelDir("tiny-qwen2")), dir + "/a.kiln").ok());
  std::filesystem::copy_file(dir + "/a.kiln", dir + "/b.kiln");
  auto opened = OpenArtifact(dir + "/a.kiln");
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  EngineOptions o = SmallOptions(dir + "/a.kiln");
  o.opened_artifact = std::make_shared<const OpenedArtifact>(std::move(opened).value());
  // Gone from the folder, still mapped: only the opening can load it.
  std::filesystem::remove(dir + "/a.kiln");
  auto loaded = LoadModel(o);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  o.model = dir + "/b.kiln";
  auto copy = LoadModel(o);
  ASSERT_TRUE(copy.ok()) << copy.status().ToString();
  EXPECT_EQ(loaded->weights->config().num_layers, copy->weights->config().num_layers);
  EXPECT_EQ(loaded->weights->weights().size(), copy->weights->weights().size());
  o.model = dir + "/a.kiln";  // the opening's path again, but ...
  o.opened_artifact.reset();  // ... without it, the file must be there
  EXPECT_FALSE(LoadModel(o).ok());
}

TEST(ModelArtifact, TokenizerAndGenerationDefaultsComeAlong) {
  for (const std::string& model : {testing::ModelDir("tiny-qwen2"), Gguf("tiny-llama-Q8_0.gguf")}) {
    SCOPED_TRACE(model);
    const std::string artifact = testing::MakeTempDir() + "/model.kiln";
    ASSERT_TRUE(CompileArtifact(SmallOptions(model), artifact).ok());
    auto source = LoadModel(SmallOptions(model));
    auto compiled = LoadModel(SmallOptions(artifact));
    ASSERT_TRUE(source.ok() && compiled.ok()) << compiled.status().ToString();
    ASSERT_NE(compiled->tokenizer, nullptr);
    const std::string text = "Hello, world! The quick brown fox.";
    EXPECT_EQ(source->tokenizer->Encode(text), compiled->tokenizer->Encode(text));
    EXPECT_EQ(source->tokenizer->chat_template(), compiled->tokenizer->chat_template());
    EXPECT_EQ(source->generation.eos_token_ids, compiled->generation.eos_token_ids);
    EXPECT_EQ(source->generation.temperature, compiled->generation.temperature);
    // The artifact holds the compiled tokenizer, not its source files.
    auto file = ArtifactFile::Open(artifact);
    ASSERT_TRUE(file.ok());
    EXPECT_NE((*file)->Find("tok.spec"), nullptr);
    for (const ArtifactSection& section : (*file)->sections()) {
      EXPECT_TRUE(section.name == "tok.spec" || section.name.rfind("tok.", 0) != 0) << section.name;
    }

    // Built on a thread while the caller goes on: the same tokenizer once
    // FinishTokenizer has waited for it.
    auto background = LoadModel(SmallOptions(artifact), TokenizerLoad::kInBackground);
    ASSERT_TRUE(background.ok()) << background.status().ToString();
    EXPECT_EQ(background->tokenizer, nullptr);
    EXPECT_TRUE(background->pending_tokenizer.valid());
    ASSERT_TRUE(background->FinishTokenizer().ok());
    ASSERT_NE(background->tokenizer, nullptr);
    EXPECT_FALSE(background->pending_tokenizer.valid());
    EXPECT_EQ(source->tokenizer->Encode(text), background->tokenizer->Encode(text));
    EXPECT_TRUE(background->FinishTokenizer().ok());  // a second call changes nothing
    // The packed matrices' page tables are filled while it waits; what is
    // left, a step at a time.
    ASSERT_NE(background->prefault, nullptr);
    while (background->prefault->Step()) {
    }
    uint64_t packed_bytes = 0;
    for (const ArtifactSection& section : (*file)->sections()) {
      if (section.name.rfind("p.", 0) == 0) packed_bytes += section.bytes;
    }
    EXPECT_EQ(background->prefault->populated_bytes(), packed_bytes);
    EXPECT_EQ(source->prefault, nullptr) << "only an artifact's weights are prefaulted";
  }
}

// Rewrites `path` with its metadata changed by `edit` (sealed with fresh
// checksums, as a file from another build or machine would be).
template <typename Edit>
std::string Rewritten(const std::string& path, Edit edit) {
  const std::string out = path + ".edited.kiln";
  testing::RewriteArtifactMetadata(path, out, edit);
  return out;
}

class ArtifactRefusals : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = testing::MakeTempDir() + "/model.kiln";
    ASSERT_TRUE(CompileArtifact(SmallOptions(testing::ModelDir("tiny-qwen2")), path_).ok());
  }
  std::string path_;
};

TEST_F(ArtifactRefusals, AnotherKernelLayoutVersion) {
  const std::string stale =
      Rewritten(path_, [](nlohmann::json& m) { m["kernel_layout_version"] = kKernelLayoutVersion + 1; });
  auto loaded = LoadModel(SmallOptions(stale));
  ASSERT_FALSE(loaded.ok());
  EXPECT_NE(loaded.status().message().find("kernel-layout version"), std::string::npos)
      << loaded.status().message();
  EXPECT_NE(loaded.status().message().find("kiln compile"), std::string::npos);
}

TEST_F(ArtifactRefusals, AStaleFileIsRebuiltFromItsSourceWhenAsked) {
  const std::string stale =
      Rewritten(path_, [](nlohmann::json& m) { m["kernel_layout_version"] = kKernelLayoutVersion + 1; });
  auto not_stale = RecompileStaleArtifact(path_);
  ASSERT_FALSE(not_stale.ok());
  EXPECT_NE(not_stale.status().message().find("not stale"), std::string::npos);

  auto opened = OpenArtifact(stale, /*recompile_if_stale=*/true);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  EXPECT_EQ(opened->metadata.at("kernel_layout_version").get<int>(), kKernelLayoutVersion);
  const std::vector<int32_t> prompt = {1, 17, 42, 99, 5};
  auto a = Decode(SmallOptions(path_), prompt, 3);
  auto b = Decode(SmallOptions(stale), prompt, 3);
  EXPECT_EQ(a.tokens, b.tokens);
  ASSERT_EQ(a.logits.size(), b.logits.size());
  EXPECT_EQ(std::memcmp(a.logits.data(), b.logits.data(), a.logits.size() * sizeof(float)), 0);
  EXPECT_EQ(b.packed, 0) << "the rebuilt file holds its packed matrices";
}

TEST_F(ArtifactRefusals, AStaleFileWhoseSourceIsGoneIsNotRebuilt) {
  const std::string stale = Rewritten(path_, [](nlohmann::json& m) {
    m["kernel_layout_version"] = kKernelLayoutVersion + 1;
    m["source"]["path"] = "/nonexistent/kiln-model";
  });
  auto opened = OpenArtifact(stale, /*recompile_if_stale=*/true);
  ASSERT_FALSE(opened.ok());
  EXPECT_NE(opened.status().message().find("its source /nonexistent/kiln-model is gone"), std::string::npos)
      << opened.status().message();
  // The stale file is left as it was.
  auto refused = OpenArtifact(stale);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("kernel-layout version"), std::string::npos);
}

TEST_F(ArtifactRefusals, AMissingBackend) {
  const std::string other =
      Rewritten(path_, [](nlohmann::json& m) { m["backend"] = "npu-that-is-not-here"; });
  auto loaded = LoadModel(SmallOptions(other));
  ASSERT_FALSE(loaded.ok());
  EXPECT_NE(loaded.status().message().find("backend 'npu-that-is-not-here'"), std::string::npos)
      << loaded.status().message();
}

TEST_F(ArtifactRefusals, AnUnknownIsa) {
  const std::string other = Rewritten(path_, [](nlohmann::json& m) { m["isa"] = "avx1024"; });
  EXPECT_FALSE(LoadModel(SmallOptions(other)).ok());
}

TEST_F(ArtifactRefusals, FlagsThatDisagreeAreNamed) {
  auto opened = OpenArtifact(path_);
  ASSERT_TRUE(opened.ok());
  // Flags not given take the artifact's values.
  EngineOptions o;
  o.model = path_;
  std::set<std::string> none;
  ASSERT_TRUE(ApplyArtifactOptions(opened->metadata, &none, &o).ok());
  EXPECT_EQ(o.max_model_len, 64);
  EXPECT_EQ(o.max_num_batched_tokens, 16);
  // A flag given with the same value is fine, with another it is named.
  std::set<std::string> given = {"--kv-cache-dtype", "--max-model-len"};
  EngineOptions same = o;
  EXPECT_TRUE(ApplyArtifactOptions(opened->metadata, &given, &same).ok());
  EngineOptions other = o;
  other.kv_cache_dtype = DType::kF16;
  Status s = ApplyArtifactOptions(opened->metadata, &given, &other);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("--kv-cache-dtype f16"), std::string::npos) << s.message();
  // Without flags (the C API), an option away from its default counts as given.
  EngineOptions api;
  api.model = path_;
  api.backend = "testaccel";
  s = ApplyArtifactOptions(opened->metadata, nullptr, &api);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("--backend"), std::string::npos) << s.message();
  // Loading checks them too.
  EngineOptions wrong = SmallOptions(path_);
  wrong.precision = Precision::kFp32;
  auto loaded = LoadModel(wrong);
  ASSERT_FALSE(loaded.ok());
  EXPECT_NE(loaded.status().message().find("--precision"), std::string::npos) << loaded.status().message();
}

TEST_F(ArtifactRefusals, FlippedWeightBytesWithVerifyWeights) {
  auto file = ArtifactFile::Open(path_);
  ASSERT_TRUE(file.ok());
  const uint64_t at = (*file)->Find("t.3")->offset + 7;
  file->reset();
  {
    std::fstream f(path_, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(static_cast<std::streamoff>(at));
    char c = 0;
    f.read(&c, 1);
    c = static_cast<char>(c ^ 0x40);
    f.seekp(static_cast<std::streamoff>(at));
    f.write(&c, 1);
  }
  EngineOptions o = SmallOptions(path_);
  EXPECT_TRUE(LoadModel(o).ok()) << "weight sections are checked on request";
  o.verify_weights = true;
  auto loaded = LoadModel(o);
  ASSERT_FALSE(loaded.ok());
  EXPECT_NE(loaded.status().message().find("section 't.3' fails its checksum"), std::string::npos)
      << loaded.status().message();
}

}  // namespace model_artifact_tests
}  // namespace kiln
