// Mistral's sliding-window attention against an independent PyTorch
// implementation (tests/tools/mistral_reference.py), with a window shorter
// than the prompt; the paged kernel and the decomposed path both.
#include <gtest/gtest.h>

#include <cstdlib>

#include "model_test_util.h"
#include "testing/model_runner_for_tests.h"

namespace kiln {
namespace mistral_window_tests {

std::string MakeModel() {
  std::string dir = testing::MakeTempDir();
  std::string cmd = "OMP_WAIT_POLICY=PASSIVE OMP_NUM_THREADS=1 /usr/bin/python3 " + testing::SourceDir() +
                    "/tests/tools/mistral_reference.py " + dir;
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  return dir;
}

TEST(MistralSlidingWindow, LogitsMatchPyTorch) {
  std::string dir = MakeModel();
  auto ref = testing::LoadJson(dir + "/reference.json");
  auto ids = testing::Ids(ref["input_ids"]);
  std::vector<float> expected;
  for (const auto& row : ref["logits"]) {
    auto r = testing::Floats(row);
    expected.insert(expected.end(), r.begin(), r.end());
  }
  for (const char* backend : {"cpu", "testaccel-mm"}) {
    CompileOptions o = testing::Fp32();
    o.backend = backend;
    auto m = testing::Load(dir, o);
    ASSERT_NE(m.model, nullptr);
    EXPECT_EQ(m.model->config().arch, Architecture::kMistral);
    EXPECT_EQ(m.model->config().sliding_window, ref["window"].get<int64_t>());
    for (int64_t chunk : {1, 4, 64}) {
      testing::DirectRunner runner(*m.model, 1, 64);
      auto logits = runner.Prefill({ids}, chunk, true);
      EXPECT_LT(testing::MaxAbsDiff(logits[0], expected), 1e-4f) << backend << " chunk " << chunk;
    }
  }
}

}  // namespace mistral_window_tests
}  // namespace kiln
