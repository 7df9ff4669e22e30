// `kiln compile`, `-m X.kiln`, `kiln inspect X.kiln` and `kiln bench
// startup` end to end: the same greedy text as the source model, the
// refusals a user meets (an ISA this CPU lacks, a flag that disagrees, a
// truncated file, flipped weight bytes under --verify) with their messages.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "format/artifact_file.h"
#include "testing/kiln_command_for_tests.h"
#include "testing/test_paths.h"

namespace kiln {
namespace artifact_cli_tests {

using Result = testing::KilnRun;

Result Kiln(const std::vector<std::string>& args, const std::string& env = "") { return testing::RunKiln(args, env); }

const std::vector<std::string> kGenerate = {"-p", "Once upon a time", "-n", "12", "--temperature", "0",
                                            "--ignore-eos", "--threads", "2"};

std::vector<std::string> Args(std::vector<std::string> head, const std::vector<std::string>& tail) {
  head.insert(head.end(), tail.begin(), tail.end());
  return head;
}

TEST(ArtifactCli, CompiledModelsGenerateTheSameText) {
  const std::string dir = testing::MakeTempDir();
  for (const std::string& model : {testing::ModelDir("tiny-llama"),
                                   testing::SharedDir() + "/models/gguf/tiny-qwen2-Q4_0.gguf"}) {
    SCOPED_TRACE(model);
    const std::string artifact = dir + "/" + std::filesystem::path(model).stem().string() + ".kiln";
    Result c = Kiln({"compile", model, "-o", artifact, "--max-model-len", "128", "--kv-cache-dtype", "f16"});
    ASSERT_EQ(c.exit_code, 0) << c.err;
    EXPECT_NE(c.out.find("matrices in their packed layouts"), std::string::npos) << c.out;
    Result a = Kiln(Args({"generate", "-m", model, "--max-model-len", "128", "--kv-cache-dtype", "f16"}, kGenerate));
    Result b = Kiln(Args({"generate", "-m", artifact}, kGenerate));
    ASSERT_EQ(a.exit_code, 0) << a.err;
    ASSERT_EQ(b.exit_code, 0) << b.err;
    EXPECT_EQ(a.out, b.out);
    EXPECT_FALSE(a.out.empty());

    Result flag = Kiln(Args({"generate", "-m", artifact, "--kv-cache-dtype", "bf16"}, kGenerate));
    EXPECT_NE(flag.exit_code, 0);
    EXPECT_NE(flag.err.find("--kv-cache-dtype bf16: the artifact was compiled with --kv-cache-dtype f16"),
              std::string::npos)
        << flag.err;
  }
}

class ArtifactCliFile : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = testing::MakeTempDir() + "/qwen2.kiln";
    Result c = Kiln({"compile", testing::ModelDir("tiny-qwen2"), "-o", path_});
    ASSERT_EQ(c.exit_code, 0) << c.err;
  }
  std::string path_;
};

TEST_F(ArtifactCliFile, AnIsaThisCpuLacksIsRefused) {
  auto file = ArtifactFile::Open(path_);
  ASSERT_TRUE(file.ok());
  const std::string isa = testing::ReadFileBytes(path_).find("\"isa\": \"avx512\"") != std::string::npos ? "avx512" : "";
  if (isa.empty()) GTEST_SKIP() << "compiled for a lower ISA than AVX-512 here";
  Result r = Kiln(Args({"generate", "-m", path_}, kGenerate), "KILN_ISA=avx2");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("stale artifact: compiled for avx512"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("kiln compile"), std::string::npos) << r.err;
}

TEST_F(ArtifactCliFile, AnIsaThisCpuLacksIsRebuiltWithRecompileIfStale) {
  if (testing::ReadFileBytes(path_).find("\"isa\": \"avx512\"") == std::string::npos) {
    GTEST_SKIP() << "compiled for a lower ISA than AVX-512 here";
  }
  Result r = Kiln(Args({"generate", "-m", path_, "--recompile-if-stale"}, kGenerate), "KILN_ISA=avx2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("was stale (compiled for avx512"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("rebuilt from " + testing::ModelDir("tiny-qwen2")), std::string::npos) << r.err;
  // The file now holds the AVX2 build, and runs as its source does there.
  EXPECT_NE(testing::ReadFileBytes(path_).find("\"isa\": \"avx2\""), std::string::npos);
  Result source = Kiln(Args({"generate", "-m", testing::ModelDir("tiny-qwen2")}, kGenerate), "KILN_ISA=avx2");
  ASSERT_EQ(source.exit_code, 0) << source.err;
  EXPECT_EQ(r.out, source.out);
  Result again = Kiln(Args({"generate", "-m", path_, "--recompile-if-stale"}, kGenerate), "KILN_ISA=avx2");
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(again.err.find("was stale"), std::string::npos) << "rebuilt once, not at every load";
}

TEST_F(ArtifactCliFile, TruncatedFileIsRefused) {
  const std::string bytes = testing::ReadFileBytes(path_);
  const std::string cut = path_ + ".cut.kiln";
  std::ofstream(cut, std::ios::binary) << bytes.substr(0, bytes.size() / 3);
  Result r = Kiln(Args({"generate", "-m", cut}, kGenerate));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("truncated"), std::string::npos) << r.err;
}

TEST_F(ArtifactCliFile, InspectPrintsProvenanceAndTheStoredPlan) {
  Result r = Kiln({"inspect", path_, "--plan"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* expected : {"compiled by: kiln", "kernel-layout version", "backend: cpu", "model.safetensors",
                               "xxh64", "options: --backend cpu", "compile plan: target cpu", "[3 layout]"}) {
    EXPECT_NE(r.out.find(expected), std::string::npos) << expected << "\n" << r.out;
  }
}

TEST_F(ArtifactCliFile, InspectVerifyCatchesFlippedWeightBytes) {
  Result ok = Kiln({"inspect", path_, "--verify"});
  ASSERT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_NE(ok.out.find("verified"), std::string::npos);
  auto file = ArtifactFile::Open(path_);
  ASSERT_TRUE(file.ok());
  std::string packed;
  uint64_t at = 0;
  for (const ArtifactSection& s : (*file)->sections()) {
    if (s.name.rfind("p.", 0) == 0 && s.bytes > 100) {
      packed = s.name;
      at = s.offset + 100;
      break;
    }
  }
  ASSERT_FALSE(packed.empty());
  file->reset();
  std::string bytes = testing::ReadFileBytes(path_);
  bytes[at] = static_cast<char>(bytes[at] ^ 1);
  std::ofstream(path_, std::ios::binary) << bytes;
  Result bad = Kiln({"inspect", path_, "--verify"});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("section '" + packed + "' fails its checksum"), std::string::npos) << bad.err;
}

TEST_F(ArtifactCliFile, BenchStartupMeasuresModelsSideBySide) {
  Result r = Kiln({"bench", "startup", "-m", testing::ModelDir("tiny-qwen2"), "-m", path_, "--runs", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("first token (median s)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("qwen2.kiln"), std::string::npos) << r.out;
}

// `--serve` times kiln serve to its ready line and stops it.
TEST_F(ArtifactCliFile, BenchStartupTimesServeToReady) {
  Result r = Kiln({"bench", "startup", "-m", path_, "--runs", "1", "--serve"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("start-up to ready (kiln serve)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("ready (median s)"), std::string::npos) << r.out;
  // A model serve cannot load is an error, not a hang.
  Result bad = Kiln({"bench", "startup", "-m", path_ + ".missing.kiln", "--runs", "1", "--serve"});
  EXPECT_NE(bad.exit_code, 0);
}

// A cold page cache: the artifact is dropped from it before the run, and
// what the run read of it is reported; its packed forms come before the
// rows they were made from, so the run reads the packed forms (and little
// of the rows) whatever the kernel reads ahead.
TEST_F(ArtifactCliFile, BenchStartupWithAColdPageCache) {
  Result r = Kiln({"bench", "startup", "-m", path_, "--runs", "1", "--cold"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("cold page cache"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("read MiB (median)"), std::string::npos) << r.out;
  auto file = ArtifactFile::Open(path_);
  ASSERT_TRUE(file.ok());
  uint64_t first_row_of_packed = UINT64_MAX, last_packed = 0;
  for (const ArtifactSection& s : (*file)->sections()) {
    if (s.name.rfind("p.", 0) == 0) {
      last_packed = std::max(last_packed, s.offset);
      const std::string tensor = "t." + s.name.substr(2, s.name.find('.', 2) - 2);
      first_row_of_packed = std::min(first_row_of_packed, (*file)->Find(tensor)->offset);
    }
  }
  EXPECT_GT(last_packed, 0u);
  EXPECT_LT(last_packed, first_row_of_packed) << "the rows of packed matrices come last";
}

}  // namespace artifact_cli_tests
}  // namespace kiln
