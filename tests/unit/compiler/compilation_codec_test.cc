// The stored compilation: what compiling a model produced, written to bytes
// and read back as it was (encoding the decoded graph and plans gives the
// same bytes); every truncation refused; corrupt fields (a buffer too
// small for its value, a view of itself, an unknown weight or memory
// domain, another format version) refused with what is wrong named.
#include "compiler/compilation_codec.h"

#include <gtest/gtest.h>

#include <cstring>

#include "backend/backend.h"
#include "compiler/compiled_model.h"
#include "compiler_test_util.h"

namespace kiln {
namespace compilation_codec_tests {

CompileOptions Small() {
  CompileOptions o;
  o.max_batch_tokens = 8;
  o.max_model_len = 32;
  o.max_seqs = 2;
  o.threads = 1;
  o.keep_compilation = true;
  return o;
}

std::map<std::string, int32_t> DomainIds() {
  std::map<std::string, int32_t> ids;
  for (Backend* b : BackendRegistry::Get().All()) ids[b->domain().name()] = b->domain().id();
  return ids;
}

struct Compiled {
  std::unique_ptr<WeightStore> store;
  std::unique_ptr<CompiledModel> model;
};

Compiled CompileSmall(Architecture arch, const std::string& backend = "cpu") {
  Compiled c;
  c.store = testing::SmallModel(arch);
  CompileOptions o = Small();
  o.backend = backend;
  auto m = CompiledModel::Compile(*c.store, o);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  if (m.ok()) c.model = std::move(m).value();
  return c;
}

TEST(CompilationCodec, DecodingThenEncodingGivesTheSameBytes) {
  for (const char* backend : {"cpu", "testaccel-mm"}) {
    SCOPED_TRACE(backend);
    Compiled c = CompileSmall(Architecture::kQwen2, backend);
    ASSERT_NE(c.model, nullptr);
    const std::vector<uint8_t>& bytes = c.model->stored_compilation();
    ASSERT_FALSE(bytes.empty());
    auto key = CompilationKeyOf(bytes);
    ASSERT_TRUE(key.ok()) << key.status().ToString();
    CompileOptions o = Small();
    o.backend = backend;
    EXPECT_EQ(*key, CompilationKey(c.store->config(), o, 32));
    auto decoded = DecodeCompilation(bytes, *c.store, DomainIds());
    ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
    const CompileReport& report = c.model->report();
    EXPECT_FALSE(report.from_artifact);
    ASSERT_EQ(decoded->plans.size(), report.buckets.size());
    for (size_t i = 0; i < decoded->plans.size(); ++i) {
      EXPECT_EQ(decoded->plans[i].env.tokens, report.buckets[i].env.tokens);
      EXPECT_EQ(decoded->plans[i].arena_bytes, report.buckets[i].arena_bytes);
    }
    EXPECT_EQ(decoded->graph.nodes().size(), c.model->graph().nodes().size());
    EXPECT_EQ(decoded->report.fuse.fusions, report.fuse.fusions);
    EXPECT_EQ(decoded->report.layout.transfers, report.layout.transfers);
    EXPECT_EQ(decoded->report.legalize.fallbacks.size(), report.legalize.fallbacks.size());
    decoded->report.domain_names = report.domain_names;
    auto again = EncodeCompilation(*decoded, *c.store);
    ASSERT_TRUE(again.ok()) << again.status().ToString();
    EXPECT_EQ(*again, bytes);
  }
}

TEST(CompilationCodec, AModelCompiledWithoutAskingKeepsNothing) {
  auto store = testing::SmallModel(Architecture::kLlama);
  CompileOptions o = Small();
  o.keep_compilation = false;
  auto m = CompiledModel::Compile(*store, o);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_TRUE((*m)->stored_compilation().empty());
}

TEST(CompilationCodec, EveryTruncationIsRefused) {
  Compiled c = CompileSmall(Architecture::kQwen3);
  ASSERT_NE(c.model, nullptr);
  const std::vector<uint8_t>& bytes = c.model->stored_compilation();
  const size_t step = std::max<size_t>(1, bytes.size() / 400);
  for (size_t n = 0; n < bytes.size(); n += (n + 64 >= bytes.size() ? 1 : step)) {
    auto decoded = DecodeCompilation({bytes.data(), n}, *c.store, DomainIds());
    ASSERT_FALSE(decoded.ok()) << n << " of " << bytes.size() << " bytes";
    EXPECT_EQ(decoded.status().code(), StatusCode::kCorrupt) << decoded.status().ToString();
  }
  std::vector<uint8_t> longer = bytes;
  longer.push_back(0);
  auto decoded = DecodeCompilation(longer, *c.store, DomainIds());
  ASSERT_FALSE(decoded.ok());
  EXPECT_NE(decoded.status().message().find("left over"), std::string::npos) << decoded.status().message();
}

// Flipped bytes anywhere give an error or a graph that passed every check;
// never a crash (the fuzz target goes further).
TEST(CompilationCodec, FlippedBytesAreCaughtOrHarmless) {
  Compiled c = CompileSmall(Architecture::kQwen2);
  ASSERT_NE(c.model, nullptr);
  std::vector<uint8_t> bytes = c.model->stored_compilation();
  int refused = 0;
  for (size_t i = 0; i < bytes.size(); i += 13) {
    bytes[i] ^= 0xA5;
    refused += DecodeCompilation(bytes, *c.store, DomainIds()).ok() ? 0 : 1;
    bytes[i] ^= 0xA5;
  }
  EXPECT_GT(refused, 0);
}

// Decodes `bytes`, changes the result, encodes it again, and decodes that.
template <typename Edit>
Status DecodeEdited(const Compiled& c, Edit edit) {
  auto decoded = DecodeCompilation(c.model->stored_compilation(), *c.store, DomainIds());
  if (!decoded.ok()) return decoded.status();
  decoded->report.domain_names = c.model->report().domain_names;
  edit(*decoded);
  auto bytes = EncodeCompilation(*decoded, *c.store);
  if (!bytes.ok()) return bytes.status();
  return DecodeCompilation(*bytes, *c.store, DomainIds()).status();
}

TEST(CompilationCodec, ABufferTooSmallForItsValueIsNamed) {
  Compiled c = CompileSmall(Architecture::kLlama);
  ASSERT_NE(c.model, nullptr);
  std::string name;
  Status s = DecodeEdited(c, [&](StoredCompilation& d) {
    auto& [id, slot] = *d.plans.back().values.begin();
    slot.bytes = 64;
    name = d.graph.value(id).name;
  });
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kCorrupt);
  EXPECT_NE(s.message().find("the buffer of " + name), std::string::npos) << s.message();
}

TEST(CompilationCodec, ABufferOutsideItsArenaIsRefused) {
  Compiled c = CompileSmall(Architecture::kLlama);
  ASSERT_NE(c.model, nullptr);
  Status s =
      DecodeEdited(c, [](StoredCompilation& d) { d.plans[0].values.begin()->second.offset += 1 << 20; });
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("outside its arena"), std::string::npos) << s.message();
}

TEST(CompilationCodec, AViewOfItselfIsRefused) {
  Compiled c = CompileSmall(Architecture::kLlama);
  ASSERT_NE(c.model, nullptr);
  Status s = DecodeEdited(c, [](StoredCompilation& d) { d.graph.values()[3].view_of = 3; });
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("no storage"), std::string::npos) << s.message();
}

TEST(CompilationCodec, AnInputReadBeforeItIsProducedIsRefused) {
  Compiled c = CompileSmall(Architecture::kLlama);
  ASSERT_NE(c.model, nullptr);
  Status s = DecodeEdited(c, [](StoredCompilation& d) {
    std::swap(d.graph.nodes()[1], d.graph.nodes()[2]);  // a reader before its producer
  });
  EXPECT_FALSE(s.ok());
}

TEST(CompilationCodec, AWeightTheModelLacksIsNamed) {
  Compiled qwen2 = CompileSmall(Architecture::kQwen2);  // q/k/v biases
  ASSERT_NE(qwen2.model, nullptr);
  auto llama = testing::SmallModel(Architecture::kLlama);
  auto decoded = DecodeCompilation(qwen2.model->stored_compilation(), *llama, DomainIds());
  ASSERT_FALSE(decoded.ok());
  EXPECT_NE(decoded.status().message().find("bias, which the model lacks"), std::string::npos)
      << decoded.status().message();
}

TEST(CompilationCodec, AMemoryDomainNoBackendHasIsNamed) {
  Compiled c = CompileSmall(Architecture::kLlama);
  ASSERT_NE(c.model, nullptr);
  std::map<std::string, int32_t> ids = DomainIds();
  ids.erase(HostMemory().name());
  auto decoded = DecodeCompilation(c.model->stored_compilation(), *c.store, ids);
  ASSERT_FALSE(decoded.ok());
  EXPECT_EQ(decoded.status().code(), StatusCode::kNotFound);
  EXPECT_NE(decoded.status().message().find("'" + HostMemory().name() + "'"), std::string::npos)
      << decoded.status().message();
}

TEST(CompilationCodec, AnotherFormatVersionIsUnsupportedNotCorrupt) {
  Compiled c = CompileSmall(Architecture::kLlama);
  ASSERT_NE(c.model, nullptr);
  std::vector<uint8_t> bytes = c.model->stored_compilation();
  bytes[4] += 1;
  auto key = CompilationKeyOf(bytes);
  ASSERT_FALSE(key.ok());
  EXPECT_EQ(key.status().code(), StatusCode::kUnsupported);
  bytes[0] ^= 1;
  EXPECT_EQ(CompilationKeyOf(bytes).status().code(), StatusCode::kCorrupt);
}

TEST(CompilationCodec, ScratchSmallerThanTheKernelsNeedIsNamed) {
  Compiled c = CompileSmall(Architecture::kLlama);
  ASSERT_NE(c.model, nullptr);
  auto decoded = DecodeCompilation(c.model->stored_compilation(), *c.store, DomainIds());
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  std::vector<std::vector<size_t>> scratch(decoded->plans.size(),
                                           std::vector<size_t>(decoded->graph.nodes().size(), 0));
  EXPECT_TRUE(CheckStoredScratch(decoded->graph, decoded->plans, scratch).ok());
  scratch[0][1] = size_t{1} << 30;
  Status s = CheckStoredScratch(decoded->graph, decoded->plans, scratch);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find(decoded->graph.nodes()[1].name), std::string::npos) << s.message();
}

}  // namespace compilation_codec_tests
}  // namespace kiln
