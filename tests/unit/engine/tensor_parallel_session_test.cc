// Tensor parallelism inside one process: T ranks as threads, each a
// ModelSession over its shard (WeightStore::TensorParallelShard) whose
// all_reduce_sum nodes meet in an in-process Collective. Their logits equal
// the whole model's within 1e-4 x max(1, max |logit|) (the summation order
// changes); a model that is not split has no all-reduce in its graph.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "backend/collective.h"
#include "compiler/compiled_model.h"
#include "engine/model_session.h"
#include "format/weight_store.h"
#include "testing/test_paths.h"

namespace kiln {
namespace tensor_parallel_session_tests {

// T threads' all-reduce: each adds its rows into a shared sum, the last to
// arrive publishes it, every one copies it back.
class ThreadGroup {
 public:
  explicit ThreadGroup(int size) : size_(size) {}

  Status AllReduceSum(float* data, int64_t n) {
    std::unique_lock<std::mutex> lock(mu_);
    const uint64_t round = round_;
    if (arrived_ == 0) sum_.assign(static_cast<size_t>(n), 0.0f);
    if (static_cast<int64_t>(sum_.size()) != n) return Internal("ranks reduce {} and {} floats", sum_.size(), n);
    for (int64_t i = 0; i < n; ++i) sum_[static_cast<size_t>(i)] += data[i];
    if (++arrived_ == size_) {
      result_ = sum_;
      arrived_ = 0;
      ++round_;
      cv_.notify_all();
    } else {
      cv_.wait(lock, [&] { return round_ != round; });
    }
    std::copy(result_.begin(), result_.end(), data);
    return Status::Ok();
  }

 private:
  const int size_;
  std::mutex mu_;
  std::condition_variable cv_;
  int arrived_ = 0;
  uint64_t round_ = 0;
  std::vector<float> sum_, result_;
};

class ThreadCollective : public Collective {
 public:
  ThreadCollective(std::shared_ptr<ThreadGroup> group, int rank, int size)
      : group_(std::move(group)), rank_(rank), size_(size) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  Status AllReduceSum(float* data, int64_t n) override { return group_->AllReduceSum(data, n); }

 private:
  std::shared_ptr<ThreadGroup> group_;
  int rank_, size_;
};

ModelSessionOptions Options() {
  ModelSessionOptions o;
  o.threads = 1;
  o.max_batch_tokens = 32;
  o.max_model_len = 64;
  o.max_seqs = 1;
  o.kv_num_blocks = 4;
  return o;
}

const std::vector<int32_t> kIds = {1, 17, 42, 99, 7, 300, 12, 5, 64, 28};

// Logits of every token of kIds (one pass), then of one more token
// decoded over the cache.
std::vector<float> RunSequence(ModelSession& s) {
  const int64_t vocab = s.config().vocab_size;
  std::vector<int32_t> rows(kIds.size());
  for (size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<int32_t>(i);
  std::vector<float> logits((kIds.size() + 1) * static_cast<size_t>(vocab));
  Status st = s.ForwardSequence(kIds, 0, rows, logits.data());
  EXPECT_TRUE(st.ok()) << st.ToString();
  const int32_t next = 3, row = 0;
  st = s.ForwardSequence({&next, 1}, static_cast<int32_t>(kIds.size()), {&row, 1},
                         logits.data() + kIds.size() * static_cast<size_t>(vocab));
  EXPECT_TRUE(st.ok()) << st.ToString();
  return logits;
}

int CountAllReduces(const ModelSession& s) {
  int n = 0;
  for (const Node& node : s.model().graph().nodes()) n += node.op == OpKind::kAllReduceSum ? 1 : 0;
  return n;
}

void CheckSplit(const std::string& path, int size) {
  auto opened = WeightStore::Open(path);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  std::shared_ptr<const WeightStore> full = std::move(opened).value();
  auto whole = ModelSession::Create(*full, Options());
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();
  EXPECT_EQ(CountAllReduces(**whole), 0);
  const std::vector<float> expected = RunSequence(**whole);

  auto group = std::make_shared<ThreadGroup>(size);
  std::vector<std::vector<float>> got(static_cast<size_t>(size));
  std::vector<int> all_reduces(static_cast<size_t>(size));
  std::vector<std::thread> ranks;
  for (int r = 0; r < size; ++r) {
    ranks.emplace_back([&, r] {
      auto shard = WeightStore::TensorParallelShard(full, r, size);
      ASSERT_TRUE(shard.ok()) << shard.status().ToString();
      ModelSessionOptions o = Options();
      o.collective = std::make_shared<ThreadCollective>(group, r, size);
      auto session = ModelSession::Create(**shard, o);
      ASSERT_TRUE(session.ok()) << session.status().ToString();
      all_reduces[static_cast<size_t>(r)] = CountAllReduces(**session);
      got[static_cast<size_t>(r)] = RunSequence(**session);
    });
  }
  for (std::thread& t : ranks) t.join();
  const int64_t layers = full->config().num_layers;
  float max_abs = 0;
  for (float v : expected) max_abs = std::max(max_abs, std::abs(v));
  const float tolerance = 1e-4f * std::max(1.0f, max_abs);
  for (int r = 0; r < size; ++r) {
    EXPECT_EQ(all_reduces[static_cast<size_t>(r)], 2 * layers);
    const std::vector<float>& g = got[static_cast<size_t>(r)];
    ASSERT_EQ(g.size(), expected.size());
    float worst = 0;
    for (size_t i = 0; i < g.size(); ++i) worst = std::max(worst, std::abs(g[i] - expected[i]));
    EXPECT_LE(worst, tolerance) << "rank " << r;
  }
}

TEST(TensorParallelSession, TwoRanksMatchTheWholeModel) { CheckSplit(testing::ModelDir("tiny-qwen2"), 2); }

TEST(TensorParallelSession, TwoRanksOfQ8_0MatchTheWholeModel) {
  CheckSplit(testing::SharedDir() + "/models/gguf/tiny-qwen2-Q8_0.gguf", 2);
}

}  // namespace tensor_parallel_session_tests
}  // namespace kiln
