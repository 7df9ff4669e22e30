// `kiln quantize` end to end: the file it writes, its progress bar and
// fallback lines on stderr, its summary, and its refusals.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "format/gguf.h"
#include "quantize/quantize_progress.h"
#include "testing/test_paths.h"

namespace kiln {
namespace quantize_cli_tests {

std::string ShellQuote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string ReadAll(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

struct RunResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// Runs `kiln quantize ARGS`, output captured beside `dir`'s files.
RunResult Quantize(const std::vector<std::string>& args, const std::string& capture_dir) {
  std::string cmd = ShellQuote(testing::KilnBinary()) + " quantize";
  for (const std::string& a : args) cmd += " " + ShellQuote(a);
  cmd += " >" + ShellQuote(capture_dir + "/stdout") + " 2>" + ShellQuote(capture_dir + "/stderr");
  int status = std::system(cmd.c_str());
  RunResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = ReadAll(capture_dir + "/stdout");
  r.err = ReadAll(capture_dir + "/stderr");
  return r;
}

int CountOf(const std::string& text, const std::string& part) {
  int n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

TEST(QuantizeCli, WritesTheFileShowsProgressAndFallbacks) {
  std::string capture = testing::MakeTempDir();
  std::string out_dir = capture + "/out";
  std::filesystem::create_directories(out_dir);
  std::string output = out_dir + "/tiny-llama-Q4_K_M.gguf";
  RunResult r = Quantize({testing::ModelDir("tiny-llama"), output, "--type", "Q4_K_M", "--threads", "2"}, capture);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("wrote " + output + ": q4_k_m, 39 tensors (9 f32, 25 q5_0, 5 q8_0)"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("29 fallbacks"), std::string::npos) << r.out;
  EXPECT_EQ(CountOf(r.err, "falling back to"), 29) << r.err;
  EXPECT_NE(r.err.find("kiln quantize: blk.3.ffn_down.weight: 352 columns are not a multiple of q6_k's block of "
                       "256, falling back to q8_0"),
            std::string::npos)
      << r.err;
  // Not a terminal: the bar is printed every tenth of the way, then done.
  EXPECT_NE(r.err.find("39/39 tensors"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("done in"), std::string::npos) << r.err;
  EXPECT_GE(CountOf(r.err, " tensors  "), 2) << r.err;

  auto file = GgufFile::Open(output);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_EQ((*file)->FileTypeName(), "Q4_K_M");
  EXPECT_EQ((*file)->GetString("tokenizer.ggml.model"), "llama");
  // Written atomically: only the file itself is in its folder.
  int entries = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(out_dir)) ++entries;
  EXPECT_EQ(entries, 1);

  // --no-progress keeps stderr to the fallback lines.
  RunResult quiet = Quantize({testing::ModelDir("tiny-qwen3"), out_dir + "/q.gguf", "--type", "q8_0", "--no-progress"},
                             capture);
  ASSERT_EQ(quiet.exit_code, 0) << quiet.err;
  EXPECT_EQ(quiet.err, "");
}

TEST(QuantizeCli, Refusals) {
  std::string capture = testing::MakeTempDir();
  RunResult bad_type = Quantize({testing::ModelDir("tiny-qwen2"), capture + "/x.gguf", "--type", "q3_k_xl"}, capture);
  EXPECT_EQ(bad_type.exit_code, 2);
  EXPECT_NE(bad_type.err.find("q4_k_m"), std::string::npos) << bad_type.err;

  RunResult missing = Quantize({capture + "/no-such-model", capture + "/x.gguf", "--type", "q8_0"}, capture);
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find("no-such-model"), std::string::npos) << missing.err;

  RunResult no_dir = Quantize({testing::ModelDir("tiny-qwen2"), capture + "/missing/x.gguf", "--type", "q8_0",
                               "--no-progress"},
                              capture);
  EXPECT_EQ(no_dir.exit_code, 1);
  EXPECT_FALSE(std::filesystem::exists(capture + "/missing"));
  // Said before any tensor is converted: no progress, no fallback lines.
  EXPECT_NE(no_dir.err.find(capture + "/missing/x.gguf: the folder"), std::string::npos) << no_dir.err;
  EXPECT_EQ(no_dir.err.find("tensors"), std::string::npos) << no_dir.err;

  std::filesystem::create_directories(capture + "/a-folder");
  RunResult folder = Quantize({testing::ModelDir("tiny-qwen2"), capture + "/a-folder", "--type", "q8_0"}, capture);
  EXPECT_EQ(folder.exit_code, 2);
  EXPECT_NE(folder.err.find("a-folder: is a folder"), std::string::npos) << folder.err;

  // The input is never overwritten.
  std::string copy = capture + "/model.gguf";
  std::filesystem::copy_file(testing::SharedDir() + "/models/gguf/tiny-qwen2-Q8_0.gguf", copy);
  RunResult same = Quantize({copy, copy, "--type", "q4_0"}, capture);
  EXPECT_EQ(same.exit_code, 2);
  EXPECT_EQ(std::filesystem::file_size(copy), std::filesystem::file_size(testing::SharedDir() +
                                                                         "/models/gguf/tiny-qwen2-Q8_0.gguf"));
}

TEST(QuantizeProgress, LineShowsTensorsBytesAndTimeLeft) {
  QuantizeProgress p;
  p.tensors_total = 46;
  p.tensors_done = 12;
  p.bytes_total = 4 << 20;
  p.bytes_done = 1 << 20;
  p.elapsed_seconds = 10;
  EXPECT_EQ(QuantizeProgressLine(p, 8), "[##......] 12/46 tensors  1.0/4.0 MiB  0:30 left");
  p.bytes_done = 0;
  EXPECT_EQ(QuantizeProgressLine(p, 4), "[....] 12/46 tensors  0.0/4.0 MiB  --:-- left");
  p.tensors_done = 46;
  p.bytes_done = p.bytes_total;
  p.elapsed_seconds = 3725;
  EXPECT_EQ(QuantizeProgressLine(p, 4), "[####] 46/46 tensors  4.0/4.0 MiB  done in 1:02:05");
  EXPECT_EQ(FormatDuration(59.6), "1:00");
  EXPECT_EQ(FormatDuration(-3), "0:00");
}

}  // namespace quantize_cli_tests
}  // namespace kiln
