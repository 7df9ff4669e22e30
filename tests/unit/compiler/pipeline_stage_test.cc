// Pipeline parallelism's stages: the layer split, each stage's weights, the
// graph a stage builds (one stage is the whole model's graph), and that the
// stages run one after another, hidden state handed on, give the whole
// model's logits bit for bit. And what splitting a pass into micro-batches
// by sequence rests on: every row of a pass comes out with the same bits
// when its sequence runs alone (fewer rows, another kernel path).
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <memory>
#include <vector>

#include "backend/forward_batch.h"
#include "backend/kv_cache.h"
#include "compiler/compiled_model.h"
#include "compiler_test_util.h"
#include "models/decoder_builder.h"

namespace kiln {
namespace pipeline_stage_tests {

std::shared_ptr<const WeightStore> Model(Architecture arch, int64_t layers, DType dtype = DType::kF32) {
  ModelConfig c = testing::SmallConfig(arch);
  c.num_layers = layers;
  // down_proj's inputs past the linear kernel's 256-wide k-blocks.
  c.intermediate_size = 320;
  auto store = WeightStore::Dummy(c, dtype, 11);
  EXPECT_TRUE(store.ok()) << store.status().ToString();
  return store.ok() ? std::shared_ptr<const WeightStore>(std::move(store).value()) : nullptr;
}

std::unique_ptr<WeightStore> Stage(const std::shared_ptr<const WeightStore>& source, int stage, int stages) {
  auto s = WeightStore::PipelineStage(source, stage, stages);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? std::move(s).value() : nullptr;
}

TEST(PipelineStage, LayersSplitEvenlyEarlierStagesTakingTheRest) {
  auto split = [](int64_t layers, int stages) {
    std::vector<std::pair<int64_t, int64_t>> out;
    for (int s = 0; s < stages; ++s) {
      int64_t first = -1, count = -1;
      PipelineStageLayers(layers, stages, s, &first, &count);
      out.emplace_back(first, count);
    }
    return out;
  };
  using V = std::vector<std::pair<int64_t, int64_t>>;
  EXPECT_EQ(split(4, 2), (V{{0, 2}, {2, 2}}));
  EXPECT_EQ(split(4, 3), (V{{0, 2}, {2, 1}, {3, 1}}));
  EXPECT_EQ(split(5, 2), (V{{0, 3}, {3, 2}}));
  EXPECT_EQ(split(7, 4), (V{{0, 2}, {2, 2}, {4, 2}, {6, 1}}));
  EXPECT_EQ(split(3, 3), (V{{0, 1}, {1, 1}, {2, 1}}));
  EXPECT_EQ(split(3, 1), (V{{0, 3}}));
}

TEST(PipelineStage, EachStageHoldsItsLayersAndTheEndsTheirWeights) {
  for (Architecture arch : {Architecture::kQwen2, Architecture::kLlama}) {  // tied, untied
    auto source = Model(arch, 3);
    ASSERT_NE(source, nullptr);
    const bool tied = source->config().tie_word_embeddings;
    std::map<std::string, int> holders;
    int64_t bytes = 0;
    for (int s = 0; s < 2; ++s) {
      auto stage = Stage(source, s, 2);
      ASSERT_NE(stage, nullptr);
      const ModelConfig& c = stage->config();
      EXPECT_EQ(c.pipeline_stage, s);
      EXPECT_EQ(c.pipeline_stages, 2);
      EXPECT_EQ(c.num_layers, 3);
      EXPECT_EQ(c.StageLayerBegin(), s == 0 ? 0 : 2);
      EXPECT_EQ(c.StageLayerCount(), s == 0 ? 2 : 1);
      EXPECT_EQ(stage->Find(weight_names::Embedding()) != nullptr, s == 0 || tied);
      EXPECT_EQ(stage->Find(weight_names::FinalNorm()) != nullptr, s == 1);
      EXPECT_EQ(stage->Find(weight_names::LmHead()) != nullptr, s == 1 && !tied);
      for (int64_t l = 0; l < 3; ++l) {
        EXPECT_EQ(stage->Find(weight_names::Layer(l, "self_attn.q_proj.weight")) != nullptr,
                  l >= c.StageLayerBegin() && l < c.StageLayerEnd());
      }
      // Views of the source's memory, nothing copied.
      for (const Weight& w : stage->weights()) {
        EXPECT_EQ(w.data, source->Find(w.name)->data) << w.name;
        holders[w.name] += 1;
        bytes += static_cast<int64_t>(w.nbytes);
      }
    }
    // Every weight on one stage, but a tied embedding, which both ends use.
    for (const Weight& w : source->weights()) {
      EXPECT_EQ(holders[w.name], w.name == weight_names::Embedding() && tied ? 2 : 1) << w.name;
    }
    const int64_t embed = static_cast<int64_t>(source->Find(weight_names::Embedding())->nbytes);
    EXPECT_EQ(bytes, source->TotalBytes() + (tied ? embed : 0));
  }
}

TEST(PipelineStage, RefusesWhatCannotBeSplit) {
  auto source = Model(Architecture::kQwen2, 2);
  ASSERT_NE(source, nullptr);
  auto three = WeightStore::PipelineStage(source, 0, 3);
  ASSERT_FALSE(three.ok());
  EXPECT_NE(three.status().message().find("--pipeline-parallel-size 3 is more than the model's 2 decoder layers"),
            std::string::npos)
      << three.status().ToString();
  EXPECT_FALSE(WeightStore::PipelineStage(source, 2, 2).ok());
  auto stage = Stage(source, 0, 2);
  ASSERT_NE(stage, nullptr);
  EXPECT_FALSE(WeightStore::PipelineStage(std::shared_ptr<const WeightStore>(std::move(stage)), 0, 1).ok());
}

TEST(PipelineStage, OneStageBuildsTheWholeModelsGraph) {
  for (Architecture arch : {Architecture::kQwen2, Architecture::kLlama, Architecture::kQwen3}) {
    auto source = Model(arch, 3);
    ASSERT_NE(source, nullptr);
    auto whole = BuildDecoderGraph(*source);
    ASSERT_TRUE(whole.ok());
    auto stage = Stage(source, 0, 1);
    ASSERT_NE(stage, nullptr);
    auto one = BuildDecoderGraph(*stage);
    ASSERT_TRUE(one.ok()) << one.status().ToString();
    EXPECT_EQ(one->ToString(), whole->ToString());
    ASSERT_EQ(one->values().size(), whole->values().size());
    for (size_t i = 0; i < one->values().size(); ++i) {
      EXPECT_EQ(one->values()[i].name, whole->values()[i].name);
      EXPECT_EQ(one->values()[i].io_slot, -1);
      EXPECT_EQ(one->values()[i].is_output, whole->values()[i].is_output);
    }
  }
}

TEST(PipelineStage, StageGraphsTakeAndGiveTheHiddenState) {
  auto source = Model(Architecture::kQwen2, 3);
  ASSERT_NE(source, nullptr);
  for (int s = 0; s < 3; ++s) {
    auto stage = Stage(source, s, 3);
    ASSERT_NE(stage, nullptr);
    auto g = BuildDecoderGraph(*stage);
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    std::map<OpKind, int> ops;
    for (const Node& n : g->nodes()) {
      ops[n.op] += 1;
      // The stage's own cache: its one layer is layer 0 there.
      if (n.op == OpKind::kAttention || n.op == OpKind::kKvWrite) {
        EXPECT_EQ(n.attrs.layer, 0) << n.name;
      }
    }
    EXPECT_EQ(ops[OpKind::kEmbedding], s == 0 ? 1 : 0);
    EXPECT_EQ(ops[OpKind::kAttention], 1);
    EXPECT_EQ(ops[OpKind::kSelectRows], s == 2 ? 1 : 0);
    EXPECT_EQ(ops[OpKind::kTransfer], (s > 0 ? 1 : 0) + (s < 2 ? 1 : 0));
    int inputs = 0;
    for (const Value& v : g->values()) {
      if (v.is_graph_input) {
        ++inputs;
        EXPECT_EQ(v.name, "hidden_in");
        EXPECT_EQ(v.io_slot, 0);
        EXPECT_EQ(v.rows, RowSpace::kTokens);
        EXPECT_EQ(v.cols, 32);
      }
      if (v.is_output) {
        EXPECT_EQ(v.name, s == 2 ? "logits" : "hidden_out");
        EXPECT_EQ(v.rows, s == 2 ? RowSpace::kOutputRows : RowSpace::kTokens);
      }
    }
    EXPECT_EQ(inputs, s > 0 ? 1 : 0);
    // Value names stay the model's: the stage's layer is layer s.
    bool named = false;
    for (const Value& v : g->values()) named |= v.name == value_names::Layer(s, "attn_out");
    EXPECT_TRUE(named);
  }
}

CompileOptions Options(Precision precision) {
  CompileOptions o;
  o.precision = precision;
  o.threads = 1;
  o.max_batch_tokens = 32;
  o.max_seqs = 4;
  o.block_size = 4;
  return o;
}

// Passes of sequences held in their own blocks (sequence s: blocks 8s ...).
struct Pass {
  std::vector<int32_t> ids, positions, token_seq, query_start{0}, seq_lens, output_rows;
  std::vector<std::vector<int32_t>> tables;
  std::vector<const int32_t*> table_ptrs;
  ForwardBatch batch;

  // `tokens` new tokens of sequence `seq` after `cached` ones.
  void Add(int32_t seq, int32_t cached, int32_t tokens) {
    const int32_t s = static_cast<int32_t>(seq_lens.size());
    for (int32_t i = 0; i < tokens; ++i) {
      ids.push_back((seq * 17 + cached + i * 5 + 3) % 64);
      positions.push_back(cached + i);
      token_seq.push_back(s);
    }
    query_start.push_back(static_cast<int32_t>(ids.size()));
    seq_lens.push_back(cached + tokens);
    output_rows.push_back(static_cast<int32_t>(ids.size()) - 1);
    std::vector<int32_t> table;
    for (int32_t b = 0; b < 8; ++b) table.push_back(seq * 8 + b);
    tables.push_back(table);
  }
  const ForwardBatch& Batch() {
    table_ptrs.clear();
    for (const auto& t : tables) table_ptrs.push_back(t.data());
    batch = ForwardBatch{};
    batch.num_tokens = static_cast<int32_t>(ids.size());
    batch.token_ids = ids.data();
    batch.positions = positions.data();
    batch.token_seq = token_seq.data();
    batch.num_seqs = static_cast<int32_t>(seq_lens.size());
    batch.query_start = query_start.data();
    batch.seq_lens = seq_lens.data();
    batch.block_tables = table_ptrs.data();
    batch.num_output_rows = static_cast<int32_t>(output_rows.size());
    batch.output_rows = output_rows.data();
    return batch;
  }
};

// The whole model, or its stages one after another.
class Runner {
 public:
  Runner(const std::shared_ptr<const WeightStore>& source, int stages, Precision precision) {
    for (int s = 0; s < stages; ++s) {
      stores_.push_back(stages == 1 ? nullptr : Stage(source, s, stages));
      const WeightStore& w = stages == 1 ? *source : *stores_.back();
      auto m = CompiledModel::Compile(w, Options(precision));
      EXPECT_TRUE(m.ok()) << m.status().ToString();
      if (!m.ok()) return;
      auto kv = (*m)->AllocateKvCache(32);
      EXPECT_TRUE(kv.ok());
      EXPECT_EQ((*kv)->layout().num_layers, w.config().StageLayerCount());
      models_.push_back(std::move(m).value());
      caches_.push_back(std::move(kv).value());
    }
    vocab_ = source->config().vocab_size;
    hidden_ = source->config().hidden_size;
  }

  std::vector<float> Run(const ForwardBatch& b) {
    std::vector<float> logits(static_cast<size_t>(b.num_output_rows * vocab_));
    std::vector<float> in, out;
    for (size_t s = 0; s < models_.size(); ++s) {
      const bool last = s + 1 == models_.size();
      out.assign(last ? logits.size() : static_cast<size_t>(b.num_tokens * hidden_), 0.f);
      Status st = models_[s]->Forward(b, *caches_[s], out.data(), last ? vocab_ : hidden_, nullptr,
                                      s == 0 ? nullptr : in.data());
      EXPECT_TRUE(st.ok()) << st.ToString();
      in.swap(out);
    }
    return in;
  }

  bool ok() const { return !models_.empty(); }

 private:
  std::vector<std::unique_ptr<WeightStore>> stores_;
  std::vector<std::unique_ptr<CompiledModel>> models_;
  std::vector<std::unique_ptr<KvCache>> caches_;
  int64_t vocab_ = 0, hidden_ = 0;
};

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

struct Case {
  Architecture arch;
  DType dtype;
  Precision precision;
};

const Case kCases[] = {
    {Architecture::kQwen2, DType::kF32, Precision::kFp32},
    {Architecture::kLlama, DType::kBF16, Precision::kMixed},
    {Architecture::kQwen3, DType::kQ8_0, Precision::kMixed},
};

// Two prefill passes (the second chunked after the first) and decode
// steps of two sequences, 20 rows then 2.
std::vector<Pass> Passes() {
  std::vector<Pass> passes(3);
  passes[0].Add(0, 0, 12);
  passes[0].Add(1, 0, 8);
  passes[1].Add(0, 12, 1);
  passes[1].Add(1, 8, 3);
  passes[2].Add(0, 13, 1);
  passes[2].Add(1, 11, 1);
  return passes;
}

TEST(PipelineStage, StagesInTurnGiveTheWholeModelsLogitsBitForBit) {
  for (const Case& c : kCases) {
    auto source = Model(c.arch, 3, c.dtype);
    ASSERT_NE(source, nullptr);
    Runner whole(source, 1, c.precision), two(source, 2, c.precision), three(source, 3, c.precision);
    ASSERT_TRUE(whole.ok() && two.ok() && three.ok());
    for (Pass& p : Passes()) {
      const std::vector<float> a = whole.Run(p.Batch());
      EXPECT_TRUE(SameBits(a, two.Run(p.Batch()))) << ArchitectureName(c.arch);
      EXPECT_TRUE(SameBits(a, three.Run(p.Batch()))) << ArchitectureName(c.arch);
    }
  }
}

// Micro-batches: a pass's rows equal, bit for bit, those of its sequences
// each run alone in a pass of its own.
TEST(PipelineStage, ARowsResultDoesNotDependOnTheOtherRowsOfItsPass) {
  for (const Case& c : kCases) {
    auto source = Model(c.arch, 2, c.dtype);
    ASSERT_NE(source, nullptr);
    Runner together(source, 1, c.precision), alone(source, 1, c.precision);
    ASSERT_TRUE(together.ok() && alone.ok());
    for (Pass& p : Passes()) {
      const std::vector<float> both = together.Run(p.Batch());
      const int64_t vocab = source->config().vocab_size;
      for (int32_t s = 0; s < 2; ++s) {
        Pass single;
        single.Add(s, p.positions[static_cast<size_t>(p.query_start[static_cast<size_t>(s)])],
                   p.query_start[static_cast<size_t>(s) + 1] - p.query_start[static_cast<size_t>(s)]);
        const std::vector<float> one = alone.Run(single.Batch());
        const std::vector<float> row(both.begin() + s * vocab, both.begin() + (s + 1) * vocab);
        EXPECT_TRUE(SameBits(one, row)) << ArchitectureName(c.arch) << " sequence " << s << " of a pass of "
                                        << p.ids.size() << " tokens";
      }
    }
  }
}

}  // namespace pipeline_stage_tests
}  // namespace kiln
