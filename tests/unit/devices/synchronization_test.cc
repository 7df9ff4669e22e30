// Forward passes through the stand-in accelerators: with every
// synchronization they equal the CPU bit for bit; with one dropped (the
// final synchronization, or the event waits between streams) they fail,
// every time, because the stand-ins poison what is not yet written.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>

#include "../models/model_test_util.h"
#include "compiler/program.h"

namespace kiln {
namespace synchronization_tests {

std::vector<int32_t> Prompt() {
  auto ref = testing::LoadJson(testing::ModelDir("tiny-qwen2") + "/reference/prompt_0.json");
  return testing::Ids(ref["input_ids"]);
}

bool BitEqual(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

bool AnyNan(const std::vector<float>& v) {
  for (float x : v) {
    if (std::isnan(x)) return true;
  }
  return false;
}

Backend& StandIn(const std::string& name) {
  Backend* b = BackendRegistry::Get().Find(name);
  EXPECT_NE(b, nullptr) << name;
  return *b;
}

void SetDelay(const std::string& name, int us) {
  EXPECT_TRUE(StandIn(name).SetOption("kernel_delay_us", std::to_string(us)).ok());
}

// One prefill pass of the prompt, driven by hand so that every buffer the
// pass reads or writes outlives it, synchronized or not.
class OnePass {
 public:
  OnePass(CompiledModel& model, std::vector<int32_t> prompt) : model_(model), ids_(std::move(prompt)) {
    const int64_t bs = model.MakeKvLayout(1).block_size;
    const int64_t blocks = (static_cast<int64_t>(ids_.size()) + bs - 1) / bs;
    auto cache = KvCache::Allocate(model.MakeKvLayout(blocks), HostMemory());
    EXPECT_TRUE(cache.ok());
    if (cache.ok()) cache_ = std::move(*cache);
    for (int32_t i = 0; i < static_cast<int32_t>(blocks); ++i) table_.push_back(i);
    tables_ = {table_.data()};
    const auto n = static_cast<int32_t>(ids_.size());
    for (int32_t i = 0; i < n; ++i) positions_.push_back(i);
    seq_.assign(ids_.size(), 0);
    query_start_ = {0, n};
    lens_ = {n};
    rows_ = {n - 1};
    logits_.assign(static_cast<size_t>(model.config().vocab_size), 0.0f);
  }

  // Runs the pass; returns the logits as the caller sees them when Forward
  // returns.
  std::vector<float> Run() {
    ForwardBatch b;
    b.num_tokens = static_cast<int32_t>(ids_.size());
    b.token_ids = ids_.data();
    b.positions = positions_.data();
    b.token_seq = seq_.data();
    b.num_seqs = 1;
    b.query_start = query_start_.data();
    b.seq_lens = lens_.data();
    b.block_tables = tables_.data();
    b.num_output_rows = 1;
    b.output_rows = rows_.data();
    batch_ = b;
    Status st = model_.Forward(batch_, *cache_, logits_.data(), model_.config().vocab_size);
    EXPECT_TRUE(st.ok()) << st.ToString();
    return logits_;
  }
  const std::vector<float>& logits() const { return logits_; }

 private:
  CompiledModel& model_;
  std::vector<int32_t> ids_, positions_, seq_, query_start_, lens_, rows_, table_;
  std::vector<const int32_t*> tables_;
  std::unique_ptr<KvCache> cache_;
  std::vector<float> logits_;
  ForwardBatch batch_;
};

class Synchronization : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    std::string dir = testing::ModelDir("tiny-qwen2");
    CompileOptions accel = testing::Fp32(2);
    accel.backend = GetParam();
    cpu_ = testing::Load(dir, testing::Fp32(2));
    dev_ = testing::Load(dir, accel);
    ASSERT_NE(cpu_.model, nullptr);
    ASSERT_NE(dev_.model, nullptr);
  }
  void TearDown() override {
    SetSyncFaultForTesting(SyncFault::kNone);
    StandIn(GetParam()).stream().Synchronize();
    SetDelay(GetParam(), 20);
  }
  // The CPU's logits, and whether the stand-in must equal them bit for bit
  // (decomposed attention sums in another order: within 1e-4).
  std::vector<float> Expected() { return OnePass(*cpu_.model, Prompt()).Run(); }
  bool exact() const { return std::string(GetParam()) == "testaccel"; }

  testing::LoadedModel cpu_, dev_;
};

TEST_P(Synchronization, EveryPassEqualsTheCpu) {
  auto expected = Expected();
  OnePass pass(*dev_.model, Prompt());
  auto first = pass.Run();
  if (exact()) {
    EXPECT_TRUE(BitEqual(first, expected));
  } else {
    EXPECT_LT(testing::MaxAbsDiff(first, expected), 1e-4f);
  }
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(BitEqual(pass.Run(), first)) << i;
}

TEST_P(Synchronization, UnsynchronizedWithoutTheFinalSynchronizationFails) {
  SetDelay(GetParam(), 2000);
  OnePass pass(*dev_.model, Prompt());
  auto good = pass.Run();
  ASSERT_FALSE(AnyNan(good));
  for (int i = 0; i < 3; ++i) {
    SetSyncFaultForTesting(SyncFault::kSkipFinalSync);
    // The logits come back from the device last: unsynchronized, the
    // caller reads the poison the pending copy left.
    EXPECT_TRUE(AnyNan(pass.Run())) << i;
    SetSyncFaultForTesting(SyncFault::kNone);
    StandIn(GetParam()).stream().Synchronize();
    EXPECT_TRUE(BitEqual(pass.logits(), good)) << i;  // and they were on their way
  }
}

TEST_P(Synchronization, UnsynchronizedWithoutTheEventWaitsFails) {
  SetDelay(GetParam(), 2000);
  OnePass pass(*dev_.model, Prompt());
  auto good = pass.Run();
  for (int i = 0; i < 3; ++i) {
    SetSyncFaultForTesting(SyncFault::kSkipEventWaits);
    // The CPU's steps read the device's values before their copies land.
    EXPECT_FALSE(BitEqual(pass.Run(), good)) << i;
    SetSyncFaultForTesting(SyncFault::kNone);
    StandIn(GetParam()).stream().Synchronize();
  }
  EXPECT_TRUE(BitEqual(pass.Run(), good));  // the same pass, synchronized, is right again
}

INSTANTIATE_TEST_SUITE_P(StandIns, Synchronization, ::testing::Values("testaccel", "testaccel-mm"),
                         [](const auto& info) {
                           std::string s = info.param;
                           for (char& c : s) {
                             if (c == '-') c = '_';
                           }
                           return s;
                         });

}  // namespace synchronization_tests
}  // namespace kiln
