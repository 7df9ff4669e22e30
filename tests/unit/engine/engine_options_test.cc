// Engine options: the --kv-cache-memory syntax and option checks.
#include "engine/engine_options.h"

#include <gtest/gtest.h>

#include "engine/model_loader.h"

namespace kiln {
namespace engine_options_tests {

TEST(KvCacheMemoryTest, ParsesSizesWithUnits) {
  EXPECT_EQ(ParseKvCacheMemory("512MiB")->bytes, 512ll << 20);
  EXPECT_EQ(ParseKvCacheMemory("2G")->bytes, 2ll << 30);
  EXPECT_EQ(ParseKvCacheMemory("2GB")->bytes, 2ll << 30);
  EXPECT_EQ(ParseKvCacheMemory("1.5g")->bytes, 3ll << 29);
  EXPECT_EQ(ParseKvCacheMemory("64k")->bytes, 64ll << 10);
  EXPECT_EQ(ParseKvCacheMemory("1073741824")->bytes, 1ll << 30);
  EXPECT_EQ(ParseKvCacheMemory("300 M")->bytes, 300ll << 20);
}

TEST(KvCacheMemoryTest, PlainNumbersUpToOneAreFractions) {
  auto m = ParseKvCacheMemory("0.2");
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->bytes, 0);
  EXPECT_DOUBLE_EQ(m->fraction, 0.2);
  EXPECT_DOUBLE_EQ(ParseKvCacheMemory("1")->fraction, 1.0);
}

TEST(KvCacheMemoryTest, RejectsNonsense) {
  for (const char* bad : {"", "abc", "-1G", "0", "1.2.3G", "12X", "G", "0MiB", "nan"}) {
    auto m = ParseKvCacheMemory(bad);
    EXPECT_FALSE(m.ok()) << bad;
    if (!m.ok()) {
      EXPECT_EQ(m.status().code(), StatusCode::kInvalidArgument) << bad;
    }
  }
}

TEST(EngineOptionsTest, ValidateNamesTheBadOption) {
  EngineOptions o;
  o.model = "m";
  EXPECT_TRUE(o.Validate().ok());
  o.max_num_batched_tokens = 8;
  o.max_num_seqs = 16;
  Status s = o.Validate();
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("max-num-batched-tokens"), std::string::npos) << s.message();
  o = EngineOptions();
  o.load_format = "dummy";
  EXPECT_FALSE(o.Validate().ok());  // neither a preset nor a folder
  o.preset = "qwen2.5-0.5b";
  EXPECT_TRUE(o.Validate().ok());
  o.block_size = 0;
  EXPECT_FALSE(o.Validate().ok());
  o = EngineOptions();
  EXPECT_FALSE(o.Validate().ok());  // no model
}

TEST(EngineOptionsTest, SpeculativeDecodingOptionsAreChecked) {
  EngineOptions o;
  o.model = "m";
  o.spec_method = "ngram";
  EXPECT_TRUE(o.Validate().ok());
  auto message = [](const EngineOptions& bad) {
    Status s = bad.Validate();
    EXPECT_FALSE(s.ok());
    return s.message();
  };
  EngineOptions bad = o;
  bad.spec_method = "medusa";
  EXPECT_NE(message(bad).find("spec method"), std::string::npos);
  bad = o;
  bad.spec_tokens = 0;
  EXPECT_NE(message(bad).find("spec-tokens"), std::string::npos);
  bad = o;
  bad.spec_ngram_min = 5;
  bad.spec_ngram_max = 3;
  EXPECT_NE(message(bad).find("spec-ngram-min"), std::string::npos);
  bad = o;
  bad.spec_ngram_min = 0;
  EXPECT_NE(message(bad).find("spec-ngram-min"), std::string::npos);
}

}  // namespace engine_options_tests
}  // namespace kiln

namespace kiln {
namespace engine_options_tests {

TEST(EngineOptionsTest, ModelParallelismChecks) {
  EngineOptions o;
  o.model = "m";
  o.pipeline_parallel_size = 2;
  EXPECT_TRUE(o.Validate().ok());
  o.tensor_parallel_size = 2;
  EXPECT_TRUE(o.Validate().ok());
  o.tensor_parallel_size = 1;
  o.spec_method = "draft";
  o.draft_model = "self";
  EXPECT_NE(o.Validate().message().find("a draft model is not split over ranks"), std::string::npos);
  o.spec_method = "none";
  o.draft_model.clear();
  o.pipeline_parallel_size = 1;
  o.tensor_parallel_size = 2;
  EXPECT_TRUE(o.Validate().ok());
  o.spec_method = "draft";
  o.draft_model = "self";
  EXPECT_NE(o.Validate().message().find("a draft model is not split over ranks"), std::string::npos);
  o.spec_method = "none";
  o.collective_timeout_seconds = 0;
  EXPECT_NE(o.Validate().message().find("--collective-timeout"), std::string::npos);
  o.collective_timeout_seconds = 60;
  o.tensor_parallel_size = 0;
  EXPECT_FALSE(o.Validate().ok());
}

TEST(EngineOptionsTest, TensorParallelismOutsideAGroupIsRefusedAtLoad) {
  // LoadModel is where the shard is made; without the MPI group it says how
  // to start one (the CLI does, under mpirun).
  EngineOptions o;
  o.load_format = "dummy";
  o.preset = "qwen2.5-0.5b";
  o.tensor_parallel_size = 2;
  auto loaded = LoadModel(o);
  ASSERT_FALSE(loaded.ok());
  EXPECT_NE(loaded.status().message().find("mpirun -np 2 kiln"), std::string::npos) << loaded.status().ToString();
  o.tensor_parallel_size = 1;
  o.pipeline_parallel_size = 2;
  loaded = LoadModel(o);
  ASSERT_FALSE(loaded.ok());
  EXPECT_NE(loaded.status().message().find("--pipeline-parallel-size 2 needs as many processes"), std::string::npos)
      << loaded.status().ToString();
}

}  // namespace engine_options_tests
}  // namespace kiln
