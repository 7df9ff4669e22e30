// Scheduler: the token budget, chunked prefill, admission order, preemption,
// and a randomized run of thousands of steps checked after every step.
#include "engine/scheduler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <numeric>
#include <random>
#include <set>

#include "engine/model_session_options.h"

namespace kiln {
namespace scheduler_tests {

std::unique_ptr<Sequence> MakeSeq(RequestId id, int32_t prompt_len, int32_t first_token = 0) {
  std::vector<int32_t> tokens(static_cast<size_t>(prompt_len));
  std::iota(tokens.begin(), tokens.end(), first_token);
  return std::make_unique<Sequence>(id, std::move(tokens), SamplingParams{});
}

// What a pass does to the scheduler's view: tokens computed, a token
// sampled for each sequence that reached its end.
void RunPass(Scheduler& sched, const ScheduledBatch& batch, int32_t next_token = 7) {
  sched.OnBatchComputed(batch);
  for (const ScheduledSequence& s : batch.seqs) {
    if (s.samples) s.seq->tokens.push_back(next_token);
  }
}

TEST(SchedulerTest, SplitsALongPromptIntoChunks) {
  BlockManager bm(64, 16, true);
  Scheduler sched({.max_num_seqs = 4, .max_num_batched_tokens = 64, .max_prefill_chunk = 16}, bm);
  auto seq = MakeSeq(0, 50);
  sched.Add(seq.get());
  std::vector<int32_t> chunks;
  while (seq->num_completion_tokens() == 0) {
    ScheduledBatch batch = sched.Schedule();
    ASSERT_EQ(batch.seqs.size(), 1u);
    chunks.push_back(batch.seqs[0].num_tokens);
    EXPECT_EQ(batch.seqs[0].samples, seq->num_computed_tokens + batch.seqs[0].num_tokens == 50);
    RunPass(sched, batch);
  }
  EXPECT_EQ(chunks, (std::vector<int32_t>{16, 16, 16, 2}));
  ScheduledBatch decode = sched.Schedule();
  ASSERT_EQ(decode.seqs.size(), 1u);
  EXPECT_EQ(decode.seqs[0].num_tokens, 1);
  EXPECT_EQ(decode.seqs[0].start, 50);
  EXPECT_TRUE(decode.seqs[0].samples);
}

TEST(SchedulerTest, RunningDecodesComeBeforeNewPromptsWithinTheBudget) {
  BlockManager bm(64, 16, false);
  Scheduler sched({.max_num_seqs = 8, .max_num_batched_tokens = 32, .max_prefill_chunk = 0}, bm);
  auto a = MakeSeq(0, 20);
  auto b = MakeSeq(1, 10);
  sched.Add(a.get());
  sched.Add(b.get());
  ScheduledBatch first = sched.Schedule();
  ASSERT_EQ(first.seqs.size(), 2u);
  EXPECT_EQ(first.seqs[0].num_tokens, 20);
  EXPECT_EQ(first.seqs[1].num_tokens, 10);
  RunPass(sched, first);

  auto c = MakeSeq(2, 100);
  sched.Add(c.get());
  ScheduledBatch second = sched.Schedule();
  ASSERT_EQ(second.seqs.size(), 3u);
  EXPECT_EQ(second.seqs[0].seq, a.get());
  EXPECT_EQ(second.seqs[1].seq, b.get());
  EXPECT_EQ(second.seqs[2].seq, c.get());
  EXPECT_EQ(second.seqs[2].num_tokens, 30);  // what the budget leaves
  EXPECT_FALSE(second.seqs[2].samples);
  EXPECT_EQ(second.num_tokens, 32);
}

TEST(SchedulerTest, AdmitsNoMoreThanMaxNumSeqs) {
  BlockManager bm(64, 16, false);
  Scheduler sched({.max_num_seqs = 2, .max_num_batched_tokens = 512, .max_prefill_chunk = 0}, bm);
  std::vector<std::unique_ptr<Sequence>> seqs;
  for (int i = 0; i < 5; ++i) {
    seqs.push_back(MakeSeq(i, 3));
    sched.Add(seqs.back().get());
  }
  ScheduledBatch batch = sched.Schedule();
  EXPECT_EQ(batch.seqs.size(), 2u);
  EXPECT_EQ(sched.running().size(), 2u);
  EXPECT_EQ(sched.waiting().size(), 3u);
  RunPass(sched, batch);
  sched.Finish(seqs[0].get());
  batch = sched.Schedule();
  ASSERT_EQ(batch.seqs.size(), 2u);
  EXPECT_EQ(batch.seqs[1].seq, seqs[2].get());
}

TEST(SchedulerTest, PreemptsTheNewestAndRecomputesItLater) {
  // Four blocks of 4 tokens: two sequences of 7 prompt tokens fit, but not
  // once both grow past 8.
  BlockManager bm(4, 4, false);
  Scheduler sched({.max_num_seqs = 4, .max_num_batched_tokens = 64, .max_prefill_chunk = 0}, bm);
  auto old_seq = MakeSeq(0, 7);
  auto new_seq = MakeSeq(1, 7, 100);
  sched.Add(old_seq.get());
  sched.Add(new_seq.get());
  RunPass(sched, sched.Schedule());         // both prefilled, 8 tokens each
  RunPass(sched, sched.Schedule());         // both decode position 7, 9 tokens each
  ScheduledBatch batch = sched.Schedule();  // position 8 needs a third block each
  ASSERT_EQ(batch.preempted.size(), 1u);
  EXPECT_EQ(batch.preempted[0], new_seq.get());
  ASSERT_EQ(batch.seqs.size(), 1u);
  EXPECT_EQ(batch.seqs[0].seq, old_seq.get());
  EXPECT_EQ(new_seq->status, SequenceStatus::kWaiting);
  EXPECT_EQ(new_seq->num_computed_tokens, 0);
  EXPECT_TRUE(new_seq->block_table.empty());
  EXPECT_EQ(new_seq->stats.num_preemptions, 1);
  EXPECT_EQ(sched.waiting().front(), new_seq.get());
  EXPECT_EQ(sched.num_preemptions(), 1);
  RunPass(sched, batch);

  // Once the old one finishes, the preempted one recomputes all 9 tokens
  // (prompt and generated) in one pass and samples again.
  sched.Finish(old_seq.get());
  ScheduledBatch again = sched.Schedule();
  ASSERT_EQ(again.seqs.size(), 1u);
  EXPECT_EQ(again.seqs[0].seq, new_seq.get());
  EXPECT_EQ(again.seqs[0].start, 0);
  EXPECT_EQ(again.seqs[0].num_tokens, 9);
  EXPECT_TRUE(again.seqs[0].samples);
}

TEST(SchedulerTest, ReportsCachedPromptTokensAtFirstAdmission) {
  BlockManager bm(32, 4, true);
  Scheduler sched({.max_num_seqs = 4, .max_num_batched_tokens = 64, .max_prefill_chunk = 0}, bm);
  auto a = MakeSeq(0, 18);
  sched.Add(a.get());
  RunPass(sched, sched.Schedule());
  sched.Finish(a.get());
  auto b = MakeSeq(1, 30);  // shares a's first 18 tokens: 4 full blocks
  sched.Add(b.get());
  ScheduledBatch batch = sched.Schedule();
  ASSERT_EQ(batch.seqs.size(), 1u);
  EXPECT_EQ(batch.seqs[0].start, 16);
  EXPECT_EQ(batch.seqs[0].num_tokens, 14);
  EXPECT_EQ(b->stats.cached_tokens, 16);
}

TEST(SchedulerTest, DraftsRideWithTheLastTokenWithinTheBudget) {
  BlockManager bm(64, 4, false);
  Scheduler sched({.max_num_seqs = 4, .max_num_batched_tokens = 8, .max_prefill_chunk = 0}, bm);
  auto a = MakeSeq(0, 3);
  auto b = MakeSeq(1, 3, 10);
  sched.Add(a.get());
  sched.Add(b.get());
  RunPass(sched, sched.Schedule());  // both prefilled; each has a sampled token
  a->draft = {1, 2, 3, 4, 5, 6, 7, 8};
  b->draft = {9, 9};
  ScheduledBatch batch = sched.Schedule();
  ASSERT_EQ(batch.seqs.size(), 2u);
  // a takes its last token and as much draft as leaves one token for b.
  EXPECT_EQ(batch.seqs[0].num_tokens, 7);
  EXPECT_EQ(batch.seqs[0].num_draft_tokens, 6);
  EXPECT_EQ(a->draft, (std::vector<int32_t>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(batch.seqs[1].num_tokens, 1);
  EXPECT_EQ(batch.seqs[1].num_draft_tokens, 0);
  EXPECT_TRUE(b->draft.empty());
  EXPECT_EQ(batch.num_tokens, 8);
  // Slots for all seven positions of a.
  EXPECT_EQ(a->block_table.size(), 3u);

  // The first two draft tokens are accepted: the pass computed the last
  // token and them; the rejected rest gives its slots back.
  sched.OnBatchComputed(batch);
  EXPECT_EQ(a->num_computed_tokens, 4);
  a->tokens.insert(a->tokens.end(), {1, 2, 42});
  b->tokens.push_back(43);
  sched.OnDraftVerified(a.get(), 2);
  EXPECT_EQ(a->num_computed_tokens, 6);
  EXPECT_EQ(a->num_uncomputed_tokens(), 1);
  EXPECT_EQ(a->block_table.size(), 2u);
  EXPECT_TRUE(a->draft.empty());
}

TEST(SchedulerTest, ADraftNeverPreemptsAnyone) {
  // Three blocks of 4 tokens: two sequences of 4 prompt tokens decode into
  // a block each, and no block is left for a draft.
  BlockManager bm(3, 4, false);
  Scheduler sched({.max_num_seqs = 4, .max_num_batched_tokens = 64, .max_prefill_chunk = 0}, bm);
  auto a = MakeSeq(0, 4);
  auto b = MakeSeq(1, 3, 100);
  sched.Add(a.get());
  sched.Add(b.get());
  RunPass(sched, sched.Schedule());  // a holds 1 block, b 1 block
  a->draft = {5, 6, 7, 8};           // positions 4 to 8 would need two more blocks
  ScheduledBatch batch = sched.Schedule();
  EXPECT_TRUE(batch.preempted.empty());
  ASSERT_EQ(batch.seqs.size(), 2u);
  EXPECT_EQ(batch.seqs[0].num_tokens, 1);
  EXPECT_EQ(batch.seqs[0].num_draft_tokens, 0);
  EXPECT_TRUE(a->draft.empty());
}

TEST(SchedulerTest, VerifiedDraftsNeverReachThePrefixCache) {
  BlockManager bm(16, 4, true);
  Scheduler sched({.max_num_seqs = 4, .max_num_batched_tokens = 64, .max_prefill_chunk = 0}, bm);
  auto a = MakeSeq(0, 3);
  sched.Add(a.get());
  RunPass(sched, sched.Schedule(), /*next_token=*/3);  // tokens 0 1 2 3, 3 computed
  // Positions 4 to 8: blocks 1 and 2 filled by the draft.
  a->draft = {4, 5, 6, 7, 8};
  ScheduledBatch batch = sched.Schedule();
  ASSERT_EQ(batch.seqs[0].num_draft_tokens, 5);
  sched.OnBatchComputed(batch);
  a->tokens.push_back(99);  // the model disagreed with the first draft token
  sched.OnDraftVerified(a.get(), 0);
  EXPECT_EQ(a->num_computed_tokens, 4);
  EXPECT_EQ(a->block_table.size(), 1u);

  // A sequence whose prompt is the rejected draft finds only block 0.
  auto b = MakeSeq(1, 12);  // 0 1 ... 11
  sched.Add(b.get());
  ScheduledBatch next = sched.Schedule();
  ASSERT_EQ(next.seqs.size(), 2u);
  EXPECT_EQ(next.seqs[1].seq, b.get());
  EXPECT_EQ(next.seqs[1].start, 4);
  EXPECT_EQ(b->stats.cached_tokens, 4);
}

// ---------------------------------------------------------------------------
// The randomized run.

struct RandomConfig {
  int32_t num_blocks, block_size, max_num_seqs, budget, chunk;
  bool prefix_caching;
  int32_t max_draft = 0;  // speculative decoding: draft tokens per decoding sequence at most
  // A window pool of window_blocks blocks for layers that see the last
  // `window` positions (0: none).
  int32_t window = 0;
  int32_t window_blocks = 0;
};

class RandomizedRun {
 public:
  RandomizedRun(const RandomConfig& c, uint64_t seed)
      : config_(c),
        rng_(seed),
        blocks_(c.num_blocks, c.block_size, c.prefix_caching),
        window_blocks_(c.window > 0 ? std::make_unique<BlockManager>(c.window_blocks, c.block_size,
                                                                     c.prefix_caching, c.window)
                                    : nullptr),
        sched_({.max_num_seqs = c.max_num_seqs,
                .max_num_batched_tokens = c.budget,
                .max_prefill_chunk = c.chunk},
               blocks_, window_blocks_.get()),
        kv_(static_cast<size_t>(c.num_blocks), std::vector<int32_t>(static_cast<size_t>(c.block_size), -1)),
        window_kv_(static_cast<size_t>(std::max(c.window_blocks, 0)),
                   std::vector<int32_t>(static_cast<size_t>(c.block_size), -1)) {}

  // Runs `steps` steps with arrivals and aborts, then drains.
  void Run(int steps) {
    for (int step = 0; step < steps; ++step) {
      Arrivals();
      Aborts();
      ASSERT_NO_FATAL_FAILURE(OneStep());
    }
    int guard = 0;
    while (sched_.HasUnfinished()) {
      ASSERT_LT(++guard, 100000) << "the scheduler does not drain";
      ASSERT_NO_FATAL_FAILURE(OneStep());
    }
    for (const auto& seq : seqs_) EXPECT_TRUE(seq->finished()) << "sequence " << seq->id;
    EXPECT_EQ(blocks_.num_free_blocks(), blocks_.num_blocks());
    Status s = blocks_.CheckInvariants({});
    EXPECT_TRUE(s.ok()) << s.ToString();
    if (window_blocks_) {
      EXPECT_EQ(window_blocks_->num_free_blocks(), window_blocks_->num_blocks());
      s = window_blocks_->CheckInvariants({});
      EXPECT_TRUE(s.ok()) << s.ToString();
    }
  }

  int32_t window_blocks_peak() const { return window_blocks_peak_; }
  int64_t window_released() const { return window_released_; }

  int64_t finished() const { return finished_; }
  int64_t aborted() const { return aborted_; }
  int64_t preemptions() const { return sched_.num_preemptions(); }
  int64_t cache_hits() const { return blocks_.prefix_stats().hits; }
  int64_t drafts_scheduled() const { return drafts_scheduled_; }
  int64_t drafts_accepted() const { return drafts_accepted_; }

 private:
  int32_t Uniform(int32_t lo, int32_t hi) { return std::uniform_int_distribution<int32_t>(lo, hi)(rng_); }

  void Arrivals() {
    int n = Uniform(0, 100) < 30 ? Uniform(1, 3) : 0;
    const int32_t pool_tokens = config_.num_blocks * config_.block_size;
    for (int i = 0; i < n; ++i) {
      int32_t max_tokens = Uniform(1, 24);
      int32_t prompt_len = Uniform(1, std::max(1, std::min(96, pool_tokens - max_tokens)));
      if (prompt_len + max_tokens > pool_tokens) continue;  // the engine refuses these
      std::vector<int32_t> prompt;
      // Often reuse the beginning of an earlier prompt, so prefixes repeat.
      if (!prompts_.empty() && Uniform(0, 1) == 1) {
        const auto& earlier =
            prompts_[static_cast<size_t>(Uniform(0, static_cast<int32_t>(prompts_.size()) - 1))];
        int32_t shared = Uniform(0, std::min<int32_t>(prompt_len, static_cast<int32_t>(earlier.size())));
        prompt.assign(earlier.begin(), earlier.begin() + shared);
      }
      while (static_cast<int32_t>(prompt.size()) < prompt_len) prompt.push_back(Uniform(0, 50));
      prompts_.push_back(prompt);
      SamplingParams params;
      params.max_tokens = max_tokens;
      seqs_.push_back(std::make_unique<Sequence>(static_cast<RequestId>(seqs_.size()), prompt, params));
      sched_.Add(seqs_.back().get());
    }
  }

  void Aborts() {
    if (Uniform(0, 100) >= 3) return;
    std::vector<Sequence*> live;
    for (const auto& s : seqs_) {
      if (!s->finished()) live.push_back(s.get());
    }
    if (live.empty()) return;
    sched_.Finish(live[static_cast<size_t>(Uniform(0, static_cast<int32_t>(live.size()) - 1))]);
    ++aborted_;
  }

  // Random drafts for the running sequences that decode, as long as what
  // a pass could yield fits within max_tokens.
  void Drafts() {
    if (config_.max_draft == 0) return;
    for (Sequence* seq : sched_.running()) {
      if (seq->num_uncomputed_tokens() != 1) continue;
      int32_t room = seq->params.max_tokens - seq->num_completion_tokens() - 1;
      int32_t n = Uniform(0, std::min(config_.max_draft, room));
      seq->draft.clear();
      for (int32_t i = 0; i < n; ++i) seq->draft.push_back(Uniform(0, 50));
    }
  }

  void OneStep() {
    Drafts();
    ScheduledBatch batch = sched_.Schedule();
    if (sched_.HasUnfinished()) {
      ASSERT_FALSE(batch.empty()) << "work waits but nothing was scheduled";
    }
    if (batch.empty()) return;
    ASSERT_LE(batch.num_tokens, config_.budget);
    ASSERT_LE(static_cast<int32_t>(batch.seqs.size()), config_.max_num_seqs);
    ASSERT_LE(static_cast<int32_t>(sched_.running().size()), config_.max_num_seqs);

    // Who holds each block now.
    std::map<int32_t, int> holders, window_holders;
    for (const auto& s : seqs_) {
      for (int32_t b : s->block_table) ++holders[b];
      for (int32_t b : s->window_block_table) ++window_holders[b];
    }
    std::set<Sequence*> scheduled;
    int32_t sum = 0;
    for (const ScheduledSequence& e : batch.seqs) {
      ASSERT_TRUE(scheduled.insert(e.seq).second) << "a sequence scheduled twice in one step";
      ASSERT_EQ(e.seq->status, SequenceStatus::kRunning);
      ASSERT_EQ(e.start, e.seq->num_computed_tokens);
      const int32_t verified = e.num_tokens - e.num_draft_tokens;  // tokens before the draft
      ASSERT_GE(verified, 1);
      ASSERT_LE(e.start + verified, e.seq->num_tokens());
      if (config_.chunk > 0) {
        ASSERT_LE(verified, config_.chunk);
      }
      ASSERT_EQ(e.samples, e.start + verified == e.seq->num_tokens());
      ASSERT_EQ(e.num_draft_tokens, static_cast<int32_t>(e.seq->draft.size()));
      if (!e.samples) {
        ASSERT_EQ(e.num_draft_tokens, 0);
      }
      ASSERT_GE(static_cast<int64_t>(e.seq->block_table.size()) * config_.block_size, e.start + e.num_tokens);
      sum += e.num_tokens;
      drafts_scheduled_ += e.num_draft_tokens;
      // Write the pass's keys and values, the draft's included: never into
      // a shared block.
      for (int32_t p = e.start; p < e.start + e.num_tokens; ++p) {
        int32_t block = e.seq->block_table[static_cast<size_t>(p / config_.block_size)];
        ASSERT_EQ(holders[block], 1) << "position " << p << " written into shared block " << block;
        const int32_t token = p < e.seq->num_tokens() ? e.seq->tokens[static_cast<size_t>(p)]
                                                      : e.seq->draft[static_cast<size_t>(p - e.seq->num_tokens())];
        kv_[static_cast<size_t>(block)][static_cast<size_t>(p % config_.block_size)] = token;
        if (window_blocks_) {
          ASSERT_GE(static_cast<int64_t>(e.seq->window_block_table.size()) * config_.block_size,
                    e.start + e.num_tokens);
          const int32_t wblock = e.seq->window_block_table[static_cast<size_t>(p / config_.block_size)];
          ASSERT_GE(wblock, 0) << "position " << p << " written into a released window entry";
          ASSERT_EQ(window_holders[wblock], 1) << "position " << p << " written into shared window block " << wblock;
          window_kv_[static_cast<size_t>(wblock)][static_cast<size_t>(p % config_.block_size)] = token;
        }
      }
      // Every key the pass's queries see in the window pool is there.
      if (window_blocks_) {
        for (int32_t p = std::max(0, e.start - config_.window + 1); p < e.start; ++p) {
          const int32_t wblock = e.seq->window_block_table[static_cast<size_t>(p / config_.block_size)];
          ASSERT_GE(wblock, 0) << "sequence " << e.seq->id << " position " << p << " released but in the window";
          ASSERT_EQ(window_kv_[static_cast<size_t>(wblock)][static_cast<size_t>(p % config_.block_size)],
                    e.seq->tokens[static_cast<size_t>(p)])
              << "sequence " << e.seq->id << " position " << p << " reads window block " << wblock
              << " holding another token";
        }
      }
    }
    for (const auto& seq : seqs_) {
      if (scheduled.count(seq.get()) == 0) {
        ASSERT_TRUE(seq->draft.empty()) << "sequence " << seq->id << " keeps a draft it did not run";
      }
    }
    ASSERT_EQ(sum, batch.num_tokens);
    for (Sequence* p : batch.preempted) {
      ASSERT_EQ(p->status, SequenceStatus::kWaiting);
      ASSERT_TRUE(p->block_table.empty());
      ASSERT_EQ(scheduled.count(p), 0u);
    }
    sched_.OnBatchComputed(batch);

    for (const ScheduledSequence& e : batch.seqs) {
      if (!e.samples) continue;
      Sequence* seq = e.seq;
      // The model agrees with a random part of the draft, then adds its own
      // token; its next one is often the rejected draft token itself.
      const int32_t accepted = Uniform(0, e.num_draft_tokens);
      drafts_accepted_ += accepted;
      seq->tokens.insert(seq->tokens.end(), seq->draft.begin(), seq->draft.begin() + accepted);
      seq->tokens.push_back(Uniform(0, 50));
      if (seq->num_completion_tokens() >= seq->params.max_tokens || Uniform(0, 100) < 5) {
        sched_.Finish(seq);
        ++finished_;
      } else if (e.num_draft_tokens > 0) {
        sched_.OnDraftVerified(seq, accepted);
        ASSERT_TRUE(seq->draft.empty());
        ASSERT_EQ(seq->num_computed_tokens, seq->num_tokens() - 1);
        ASSERT_EQ(static_cast<int32_t>(seq->block_table.size()),
                  blocks_.BlocksForTokens(seq->num_computed_tokens))
            << "the rejected draft's slots are still held";
      }
    }

    // The bookkeeping, and the cache contents every live sequence relies on.
    std::vector<const Sequence*> live;
    for (const auto& s : seqs_) {
      if (s->finished()) {
        ASSERT_TRUE(s->block_table.empty());
        continue;
      }
      live.push_back(s.get());
      if (s->status == SequenceStatus::kWaiting) {
        ASSERT_TRUE(s->block_table.empty());
        ASSERT_EQ(s->num_computed_tokens, 0);
      }
      for (int32_t p = 0; p < s->num_computed_tokens; ++p) {
        int32_t block = s->block_table[static_cast<size_t>(p / config_.block_size)];
        ASSERT_EQ(kv_[static_cast<size_t>(block)][static_cast<size_t>(p % config_.block_size)],
                  s->tokens[static_cast<size_t>(p)])
            << "sequence " << s->id << " position " << p << " reads block " << block
            << " holding another token";
      }
    }
    ASSERT_EQ(sched_.running().size() + sched_.waiting().size(), live.size());
    Status s = blocks_.CheckInvariants(live);
    ASSERT_TRUE(s.ok()) << s.ToString();
    if (window_blocks_) {
      // The window pool holds -1 exactly before each window, and a
      // sequence at most the blocks of the window of its next query.
      s = window_blocks_->CheckInvariants(live);
      ASSERT_TRUE(s.ok()) << s.ToString();
      const int32_t bound = (config_.window - 1 + config_.block_size - 1) / config_.block_size + 1;
      for (const Sequence* seq : live) {
        const int32_t held = BlockManager::HeldBlocks(seq->window_block_table);
        ASSERT_LE(held, bound) << "sequence " << seq->id << " at " << seq->num_computed_tokens;
        window_blocks_peak_ = std::max(window_blocks_peak_, held);
        window_released_ += static_cast<int64_t>(seq->window_block_table.size()) - held;
      }
    }
  }

  RandomConfig config_;
  std::mt19937_64 rng_;
  BlockManager blocks_;
  std::unique_ptr<BlockManager> window_blocks_;
  Scheduler sched_;
  std::vector<std::unique_ptr<Sequence>> seqs_;
  std::vector<std::vector<int32_t>> prompts_;
  std::vector<std::vector<int32_t>> kv_;         // [block][slot]: the token whose K/V is there
  std::vector<std::vector<int32_t>> window_kv_;  // the same in the window pool
  int32_t window_blocks_peak_ = 0;
  int64_t window_released_ = 0;
  int64_t finished_ = 0;
  int64_t aborted_ = 0;
  int64_t drafts_scheduled_ = 0;
  int64_t drafts_accepted_ = 0;
};

TEST(SchedulerTest, RandomizedStepsKeepEveryInvariant) {
  std::mt19937_64 rng(20240611);
  auto pick = [&](std::initializer_list<int32_t> values) {
    std::vector<int32_t> v(values);
    return v[std::uniform_int_distribution<size_t>(0, v.size() - 1)(rng)];
  };
  int64_t total_steps = 0, preemptions = 0, hits = 0, finished = 0, aborted = 0, drafted = 0, accepted = 0;
  for (int trial = 0; trial < 60; ++trial) {
    RandomConfig c;
    c.block_size = pick({1, 2, 4, 8, 16});
    c.num_blocks =
        std::uniform_int_distribution<int32_t>(std::max(2, 48 / c.block_size), 256 / c.block_size + 8)(rng);
    c.max_num_seqs = pick({1, 2, 4, 8, 16});
    c.budget = std::max(c.max_num_seqs, pick({8, 16, 32, 64, 128}));
    c.chunk = pick({0, 1, 4, 16, 48});
    c.prefix_caching = pick({0, 1}) == 1;
    // A third of the trials speculate.
    c.max_draft = trial % 3 == 2 ? pick({1, 3, 8}) : 0;
    SCOPED_TRACE(::testing::Message()
                 << "trial " << trial << ": blocks " << c.num_blocks << " x " << c.block_size << ", max seqs "
                 << c.max_num_seqs << ", budget " << c.budget << ", chunk " << c.chunk << ", prefix caching "
                 << c.prefix_caching << ", drafts of up to " << c.max_draft);
    RandomizedRun run(c, rng());
    ASSERT_NO_FATAL_FAILURE(run.Run(/*steps=*/150));
    total_steps += 150;
    preemptions += run.preemptions();
    hits += run.cache_hits();
    finished += run.finished();
    aborted += run.aborted();
    drafted += run.drafts_scheduled();
    accepted += run.drafts_accepted();
  }
  // The run must actually have exercised what it claims to check.
  EXPECT_GT(preemptions, 0);
  EXPECT_GT(hits, 0);
  EXPECT_GT(aborted, 0);
  EXPECT_GT(finished, 100);
  EXPECT_GT(drafted, 1000);
  EXPECT_GT(accepted, 0);
  EXPECT_LT(accepted, drafted);
  RecordProperty("steps", static_cast<int>(total_steps));
}

// The same with a window pool beside the full one: every key a query sees
// is in the window pool, no sequence holds more than its window needs, and
// both pools' bookkeeping holds after every step, through preemptions,
// prefix hits (shortened where the window pool evicted) and drafts.
TEST(SchedulerTest, RandomizedStepsWithAWindowPoolKeepEveryInvariant) {
  std::mt19937_64 rng(20261204);
  auto pick = [&](std::initializer_list<int32_t> values) {
    std::vector<int32_t> v(values);
    return v[std::uniform_int_distribution<size_t>(0, v.size() - 1)(rng)];
  };
  int64_t preemptions = 0, hits = 0, released = 0, drafted = 0;
  int32_t peak = 0;
  for (int trial = 0; trial < 40; ++trial) {
    RandomConfig c;
    c.block_size = pick({1, 2, 4, 8, 16});
    c.num_blocks =
        std::uniform_int_distribution<int32_t>(std::max(2, 48 / c.block_size), 256 / c.block_size + 8)(rng);
    c.max_num_seqs = pick({1, 2, 4, 8});
    c.budget = std::max(c.max_num_seqs, pick({8, 16, 32, 64}));
    c.chunk = pick({0, 1, 4, 16});
    c.prefix_caching = trial % 4 != 3;
    c.max_draft = trial % 3 == 2 ? pick({1, 3, 8}) : 0;
    c.window = pick({1, 2, 5, 8, 16, 40});
    // Half the trials size the window pool as the engine does; the others
    // tighter, down to what one sequence needs, so that it runs out too.
    const int32_t sized = static_cast<int32_t>(
        KvWindowPoolBlocks(c.window, c.block_size, c.max_num_seqs, c.budget, 1 << 20));
    const int32_t one = (c.window - 1 + c.budget + c.block_size - 1) / c.block_size + 1;
    c.window_blocks = trial % 2 == 0 ? sized : std::uniform_int_distribution<int32_t>(one, std::max(one, sized))(rng);
    SCOPED_TRACE(::testing::Message()
                 << "trial " << trial << ": blocks " << c.num_blocks << " x " << c.block_size << ", window "
                 << c.window << " in " << c.window_blocks << " blocks, max seqs " << c.max_num_seqs << ", budget "
                 << c.budget << ", chunk " << c.chunk << ", prefix caching " << c.prefix_caching
                 << ", drafts of up to " << c.max_draft);
    RandomizedRun run(c, rng());
    ASSERT_NO_FATAL_FAILURE(run.Run(/*steps=*/150));
    preemptions += run.preemptions();
    hits += run.cache_hits();
    released += run.window_released();
    drafted += run.drafts_scheduled();
    peak = std::max(peak, run.window_blocks_peak());
  }
  EXPECT_GT(preemptions, 0);
  EXPECT_GT(hits, 0);
  EXPECT_GT(released, 1000);
  EXPECT_GT(drafted, 100);
  EXPECT_GT(peak, 1);
}

}  // namespace scheduler_tests
}  // namespace kiln
