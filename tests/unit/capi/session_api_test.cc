// The C API's sessions: logits against the references, written into the
// caller's buffer; several sequences in one pass; long runs split into
// passes; truncate and reset; and errors that change nothing.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <thread>

#include "capi_test_util.h"

namespace kiln::capi_test {
namespace session_api_tests {

constexpr int32_t kVocab = 2048;
constexpr float kSentinel = -12345.0f;

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

SessionPtr CreateSession(const kiln_model* model, int32_t max_seqs, int32_t max_tokens,
                         int32_t max_batch = 512) {
  kiln_session_options o;
  kiln_session_options_default(&o);
  o.threads = 2;
  o.precision = "fp32";
  o.max_batch_tokens = max_batch;
  kiln_session* session = nullptr;
  kiln_status s = kiln_session_create(model, max_seqs, max_tokens, &o, &session);
  EXPECT_EQ(s, KILN_OK) << kiln_last_error();
  return SessionPtr(session);
}

// Largest absolute difference between `got` and the reference row.
float MaxDiff(const float* got, const nlohmann::json& row) {
  float worst = 0;
  for (int32_t v = 0; v < kVocab; ++v) worst = std::max(worst, std::abs(got[v] - row[v].get<float>()));
  return worst;
}

int32_t Argmax(const float* row) {
  return static_cast<int32_t>(std::max_element(row, row + kVocab) - row);
}

int32_t Length(kiln_session* session, int32_t seq) {
  int32_t length = -1;
  EXPECT_EQ(kiln_session_seq_length(session, seq, &length), KILN_OK) << kiln_last_error();
  return length;
}

class CApiSession : public ::testing::TestWithParam<const char*> {};

TEST_P(CApiSession, LogitsOfEveryPositionMatchTheReference) {
  nlohmann::json ref = Reference(GetParam(), 0);
  const auto ids = ref["input_ids"].get<std::vector<int32_t>>();
  SessionPtr session = CreateSession(SharedModel(GetParam()), 1, 128);
  ASSERT_NE(session, nullptr);
  EXPECT_EQ(kiln_session_vocab_size(session.get()), kVocab);
  std::vector<float> logits((ids.size() + 1) * kVocab, kSentinel);  // one spare row
  size_t rows = 0;
  ASSERT_EQ(kiln_session_run(session.get(), ids.data(), nullptr, nullptr, ids.size(), KILN_LOGITS_ALL,
                             logits.data(), logits.size(), &rows),
            KILN_OK)
      << kiln_last_error();
  ASSERT_EQ(rows, ids.size());
  for (size_t r = 0; r < rows; ++r) {
    EXPECT_LT(MaxDiff(&logits[r * kVocab], ref["all_logits"][r]), 1e-3f) << "position " << r;
  }
  for (size_t i = rows * kVocab; i < logits.size(); ++i)
    ASSERT_EQ(logits[i], kSentinel) << "written beyond the rows";
  EXPECT_EQ(Length(session.get(), 0), static_cast<int32_t>(ids.size()));
}

TEST_P(CApiSession, AGreedyLoopReproducesTheReferenceTokens) {
  nlohmann::json ref = Reference(GetParam(), 1);
  auto ids = ref["input_ids"].get<std::vector<int32_t>>();
  const auto expected = ref["greedy"]["new_ids"].get<std::vector<int32_t>>();
  SessionPtr session = CreateSession(SharedModel(GetParam()), 1, 128);
  std::vector<float> row(kVocab);
  ASSERT_EQ(kiln_session_run(session.get(), ids.data(), nullptr, nullptr, ids.size(), KILN_LOGITS_LAST,
                             row.data(), row.size(), nullptr),
            KILN_OK)
      << kiln_last_error();
  EXPECT_LT(MaxDiff(row.data(), ref["last_logits"]), 1e-3f);
  std::vector<int32_t> got;
  for (size_t n = 0; n < expected.size(); ++n) {
    int32_t next = Argmax(row.data());
    got.push_back(next);
    int32_t position = static_cast<int32_t>(ids.size() + n);
    int32_t seq = 0;
    ASSERT_EQ(kiln_session_run(session.get(), &next, &position, &seq, 1, KILN_LOGITS_LAST, row.data(),
                               row.size(), nullptr),
              KILN_OK)
        << kiln_last_error();
  }
  EXPECT_EQ(got, expected);
}

INSTANTIATE_TEST_SUITE_P(TinyModels, CApiSession, ::testing::Values("tiny-qwen2", "tiny-llama"));

TEST(CApiSessionBatch, InterleavedSequencesEqualRunningEachAlone) {
  const kiln_model* model = SharedModel("tiny-qwen2");
  const auto a = Reference("tiny-qwen2", 0)["input_ids"].get<std::vector<int32_t>>();
  const auto b = Reference("tiny-qwen2", 1)["input_ids"].get<std::vector<int32_t>>();
  // Alone: sequence 0 of a session each.
  std::vector<float> alone_a(kVocab), alone_b(kVocab);
  SessionPtr one = CreateSession(model, 1, 128);
  ASSERT_EQ(kiln_session_run(one.get(), a.data(), nullptr, nullptr, a.size(), KILN_LOGITS_LAST,
                             alone_a.data(), kVocab, nullptr),
            KILN_OK);
  ASSERT_EQ(kiln_session_reset(one.get(), 0), KILN_OK);
  ASSERT_EQ(kiln_session_run(one.get(), b.data(), nullptr, nullptr, b.size(), KILN_LOGITS_LAST,
                             alone_b.data(), kVocab, nullptr),
            KILN_OK);

  // Together: b as sequence 3 and a as sequence 1, their tokens alternating
  // while both last, so that b's last token comes after a's.
  SessionPtr both = CreateSession(model, 4, 128);
  std::vector<int32_t> tokens, positions, seqs;
  for (size_t i = 0; i < std::max(a.size(), b.size()); ++i) {
    if (i < b.size()) {
      tokens.push_back(b[i]);
      positions.push_back(static_cast<int32_t>(i));
      seqs.push_back(3);
    }
    if (i < a.size()) {
      tokens.push_back(a[i]);
      positions.push_back(static_cast<int32_t>(i));
      seqs.push_back(1);
    }
  }
  ASSERT_GT(b.size(), a.size());
  std::vector<float> logits(2 * kVocab);
  size_t rows = 0;
  ASSERT_EQ(kiln_session_run(both.get(), tokens.data(), positions.data(), seqs.data(), tokens.size(),
                             KILN_LOGITS_LAST, logits.data(), logits.size(), &rows),
            KILN_OK)
      << kiln_last_error();
  ASSERT_EQ(rows, 2u);
  // Rows follow where each sequence's last token stands: a's, then b's.
  for (int32_t v = 0; v < kVocab; ++v) {
    ASSERT_NEAR(logits[v], alone_a[v], 1e-4f) << v;
    ASSERT_NEAR(logits[kVocab + v], alone_b[v], 1e-4f) << v;
  }
  EXPECT_EQ(Length(both.get(), 1), static_cast<int32_t>(a.size()));
  EXPECT_EQ(Length(both.get(), 3), static_cast<int32_t>(b.size()));
  EXPECT_EQ(Length(both.get(), 0), 0);
}

TEST(CApiSessionBatch, ARunLongerThanAPassIsSplit) {
  nlohmann::json ref = Reference("tiny-qwen2", 0);
  const auto ids = ref["input_ids"].get<std::vector<int32_t>>();
  SessionPtr session = CreateSession(SharedModel("tiny-qwen2"), 2, 64, /*max_batch=*/5);
  std::vector<float> logits(ids.size() * kVocab);
  size_t rows = 0;
  ASSERT_EQ(kiln_session_run(session.get(), ids.data(), nullptr, nullptr, ids.size(), KILN_LOGITS_ALL,
                             logits.data(), logits.size(), &rows),
            KILN_OK)
      << kiln_last_error();
  ASSERT_EQ(rows, ids.size());
  for (size_t r = 0; r < rows; ++r) EXPECT_LT(MaxDiff(&logits[r * kVocab], ref["all_logits"][r]), 1e-3f) << r;
}

TEST(CApiSessionBatch, TruncateRewindsASequence) {
  nlohmann::json ref = Reference("tiny-qwen2", 0);
  const auto ids = ref["input_ids"].get<std::vector<int32_t>>();
  SessionPtr session = CreateSession(SharedModel("tiny-qwen2"), 1, 64);
  std::vector<float> row(kVocab);
  ASSERT_EQ(kiln_session_run(session.get(), ids.data(), nullptr, nullptr, ids.size(), KILN_LOGITS_NONE,
                             nullptr, 0, nullptr),
            KILN_OK);
  // Replace the last five tokens with garbage, then rewind and redo them.
  const int32_t junk[] = {7, 8, 9};
  ASSERT_EQ(kiln_session_truncate(session.get(), 0, static_cast<int32_t>(ids.size()) - 5), KILN_OK);
  ASSERT_EQ(kiln_session_run(session.get(), junk, nullptr, nullptr, 3, KILN_LOGITS_NONE, nullptr, 0, nullptr),
            KILN_OK);
  ASSERT_EQ(kiln_session_truncate(session.get(), 0, static_cast<int32_t>(ids.size()) - 5), KILN_OK);
  EXPECT_EQ(Length(session.get(), 0), static_cast<int32_t>(ids.size()) - 5);
  size_t rows = 0;
  ASSERT_EQ(kiln_session_run(session.get(), ids.data() + ids.size() - 5, nullptr, nullptr, 5,
                             KILN_LOGITS_LAST, row.data(), row.size(), &rows),
            KILN_OK);
  EXPECT_EQ(rows, 1u);
  EXPECT_LT(MaxDiff(row.data(), ref["last_logits"]), 1e-3f);

  ASSERT_EQ(kiln_session_reset(session.get(), -1), KILN_OK);
  EXPECT_EQ(Length(session.get(), 0), 0);
  ASSERT_EQ(kiln_session_run(session.get(), ids.data(), nullptr, nullptr, ids.size(), KILN_LOGITS_LAST,
                             row.data(), row.size(), nullptr),
            KILN_OK);
  EXPECT_LT(MaxDiff(row.data(), ref["last_logits"]), 1e-3f);
}

TEST(CApiSessionBatch, ThreadsShareASessionOnePassAtATime) {
  const auto a = Reference("tiny-qwen2", 0)["input_ids"].get<std::vector<int32_t>>();
  SessionPtr session = CreateSession(SharedModel("tiny-qwen2"), 4, 64);
  std::vector<std::vector<float>> rows(4, std::vector<float>(kVocab));
  std::vector<kiln_status> status(4, KILN_ERROR_INTERNAL);
  std::vector<std::thread> threads;
  for (int32_t t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::vector<int32_t> seqs(a.size(), t);
      status[static_cast<size_t>(t)] =
          kiln_session_run(session.get(), a.data(), nullptr, seqs.data(), a.size(), KILN_LOGITS_LAST,
                           rows[static_cast<size_t>(t)].data(), kVocab, nullptr);
    });
  }
  for (std::thread& t : threads) t.join();
  const nlohmann::json last = Reference("tiny-qwen2", 0)["last_logits"];
  for (size_t t = 0; t < 4; ++t) {
    ASSERT_EQ(status[t], KILN_OK);
    EXPECT_LT(MaxDiff(rows[t].data(), last), 1e-3f) << t;
  }
}

TEST(CApiSessionErrors, BadRunsAreNamedAndChangeNothing) {
  SessionPtr session = CreateSession(SharedModel("tiny-qwen2"), 2, 16);
  kiln_session* s = session.get();
  const int32_t ids[] = {10, 11, 12, 13};
  std::vector<float> logits(4 * kVocab);
  ASSERT_EQ(kiln_session_run(s, ids, nullptr, nullptr, 2, KILN_LOGITS_LAST, logits.data(), kVocab, nullptr),
            KILN_OK);

  const int32_t wrong_positions[] = {2, 4};
  EXPECT_EQ(
      kiln_session_run(s, ids, wrong_positions, nullptr, 2, KILN_LOGITS_LAST, logits.data(), kVocab, nullptr),
      KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(Contains(kiln_last_error(), "kiln_session_run: token 1: position 4 in sequence 0, expected 3"))
      << kiln_last_error();

  const int32_t bad_seqs[] = {0, 2};
  EXPECT_EQ(
      kiln_session_run(s, ids, nullptr, bad_seqs, 2, KILN_LOGITS_LAST, logits.data(), 2 * kVocab, nullptr),
      KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(Contains(kiln_last_error(), "token 1: sequence id 2 outside [0, 2)")) << kiln_last_error();

  const int32_t bad_ids[] = {10, -3};
  EXPECT_EQ(
      kiln_session_run(s, bad_ids, nullptr, nullptr, 2, KILN_LOGITS_LAST, logits.data(), kVocab, nullptr),
      KILN_ERROR_OUT_OF_RANGE);
  EXPECT_TRUE(Contains(kiln_last_error(), "token 1: id -3 outside the vocabulary")) << kiln_last_error();

  EXPECT_EQ(
      kiln_session_run(s, ids, nullptr, nullptr, 4, KILN_LOGITS_ALL, logits.data(), 3 * kVocab, nullptr),
      KILN_ERROR_OUT_OF_RANGE);
  EXPECT_TRUE(Contains(kiln_last_error(), "logits buffer holds 6144 floats; 4 rows of 2048 need 8192"))
      << kiln_last_error();
  EXPECT_EQ(kiln_session_run(s, ids, nullptr, nullptr, 4, KILN_LOGITS_LAST, nullptr, 0, nullptr),
            KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(Contains(kiln_last_error(), "logits is NULL")) << kiln_last_error();
  EXPECT_EQ(kiln_session_run(s, ids, nullptr, nullptr, 4, static_cast<kiln_logits_mode>(7), logits.data(),
                             logits.size(), nullptr),
            KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(Contains(kiln_last_error(), "mode 7")) << kiln_last_error();
  EXPECT_EQ(kiln_session_run(s, nullptr, nullptr, nullptr, 4, KILN_LOGITS_NONE, nullptr, 0, nullptr),
            KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(kiln_session_run(s, ids, nullptr, nullptr, 0, KILN_LOGITS_NONE, nullptr, 0, nullptr),
            KILN_ERROR_INVALID_ARGUMENT);

  // Beyond max_tokens_per_seq (16): 2 in the cache + 15 more.
  std::vector<int32_t> many(15, 10);
  EXPECT_EQ(
      kiln_session_run(s, many.data(), nullptr, nullptr, many.size(), KILN_LOGITS_NONE, nullptr, 0, nullptr),
      KILN_ERROR_OUT_OF_RANGE);
  EXPECT_TRUE(Contains(kiln_last_error(), "token 14: sequence 0 would grow beyond the session's 16 tokens"))
      << kiln_last_error();

  EXPECT_EQ(Length(s, 0), 2);  // none of the failed runs changed it
  EXPECT_EQ(Length(s, 1), 0);
  // And the cache still continues correctly.
  ASSERT_EQ(
      kiln_session_run(s, ids + 2, nullptr, nullptr, 2, KILN_LOGITS_LAST, logits.data(), kVocab, nullptr),
      KILN_OK);
  std::vector<float> fresh(kVocab);
  SessionPtr other = CreateSession(SharedModel("tiny-qwen2"), 1, 16);
  ASSERT_EQ(kiln_session_run(other.get(), ids, nullptr, nullptr, 4, KILN_LOGITS_LAST, fresh.data(), kVocab,
                             nullptr),
            KILN_OK);
  for (int32_t v = 0; v < kVocab; ++v) ASSERT_NEAR(logits[v], fresh[v], 1e-4f);

  EXPECT_EQ(kiln_session_truncate(s, 0, 5), KILN_ERROR_OUT_OF_RANGE);
  EXPECT_TRUE(Contains(kiln_last_error(), "sequence 0: length 5 outside [0, 4]")) << kiln_last_error();
  EXPECT_EQ(kiln_session_reset(s, 9), KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(Contains(kiln_last_error(), "sequence id 9 outside [0, 2)")) << kiln_last_error();
  int32_t length = 0;
  EXPECT_EQ(kiln_session_seq_length(s, -1, &length), KILN_ERROR_INVALID_ARGUMENT);
}

TEST(CApiSessionErrors, BadCreationArgumentsAreNamed) {
  const kiln_model* model = SharedModel("tiny-qwen2");
  kiln_session* session = nullptr;
  EXPECT_EQ(kiln_session_create(model, 0, 16, nullptr, &session), KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(Contains(kiln_last_error(), "kiln_session_create: max_seqs must be in [1, 65536], got 0"))
      << kiln_last_error();
  EXPECT_EQ(kiln_session_create(model, 1, 5000, nullptr, &session), KILN_ERROR_OUT_OF_RANGE);
  EXPECT_TRUE(Contains(kiln_last_error(), "max_tokens_per_seq 5000 beyond the model's context of 1024"))
      << kiln_last_error();
  EXPECT_EQ(kiln_session_create(model, 1, -1, nullptr, &session), KILN_ERROR_INVALID_ARGUMENT);
  kiln_session_options options;
  kiln_session_options_default(&options);
  options.precision = "fp4";
  EXPECT_EQ(kiln_session_create(model, 1, 16, &options, &session), KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(Contains(kiln_last_error(), "options.precision")) << kiln_last_error();
  kiln_session_options_default(&options);
  options.max_batch_tokens = 0;
  EXPECT_EQ(kiln_session_create(model, 1, 16, &options, &session), KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(Contains(kiln_last_error(), "max_batch_tokens")) << kiln_last_error();
  EXPECT_EQ(session, nullptr);

  // The whole context for every sequence, by default.
  ASSERT_EQ(kiln_session_create(model, 2, 0, nullptr, &session), KILN_OK) << kiln_last_error();
  SessionPtr owned(session);
  EXPECT_EQ(kiln_session_max_tokens_per_seq(session), 1024);
  EXPECT_EQ(kiln_session_max_seqs(session), 2);
}

TEST(CApiSessionLifetime, ASessionOutlivesItsModelHandle) {
  ModelPtr model = LoadModel("tiny-qwen2");
  SessionPtr session = CreateSession(model.get(), 1, 32);
  model.reset();
  nlohmann::json ref = Reference("tiny-qwen2", 0);
  const auto ids = ref["input_ids"].get<std::vector<int32_t>>();
  std::vector<float> row(kVocab);
  ASSERT_EQ(kiln_session_run(session.get(), ids.data(), nullptr, nullptr, ids.size(), KILN_LOGITS_LAST,
                             row.data(), row.size(), nullptr),
            KILN_OK);
  EXPECT_LT(MaxDiff(row.data(), ref["last_logits"]), 1e-3f);
}

}  // namespace session_api_tests
}  // namespace kiln::capi_test
