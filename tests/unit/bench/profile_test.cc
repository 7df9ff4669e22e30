// The profiler end to end on a tiny model: every kernel of every step is
// recorded, spans nest, kernels and the rest add up to the steps, the
// table and the trace say so, and recording changes no output.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "bench/chrome_trace.h"
#include "bench/profile_summary.h"
#include "bench/profile_table.h"
#include "compiler/compiled_model.h"
#include "compiler/profiler.h"
#include "engine/llm_engine.h"
#include "testing/test_paths.h"

namespace kiln::bench {
namespace profile_tests {

EngineOptions TinyQwen2() {
  EngineOptions o;
  o.model = testing::ModelDir("tiny-qwen2");
  o.threads = 2;
  o.seed = 1;
  return o;
}

std::vector<GenerationRequest> Requests() {
  std::vector<GenerationRequest> requests;
  for (int i = 0; i < 3; ++i) {
    GenerationRequest r;
    for (int t = 0; t < 9 + 4 * i; ++t) r.prompt_ids.push_back(5 + 7 * t + i);
    r.params.temperature = 0;
    r.params.ignore_eos = true;
    r.params.max_tokens = 6;
    requests.push_back(std::move(r));
  }
  return requests;
}

std::vector<std::vector<int32_t>> Outputs(LLMEngine& engine) {
  auto results = engine.Generate(Requests());
  EXPECT_TRUE(results.ok()) << results.status().ToString();
  std::vector<std::vector<int32_t>> out;
  if (results.ok()) {
    for (const GenerationResult& r : *results) out.push_back(r.output_ids);
  }
  return out;
}

class ProfileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto engine = LLMEngine::Create(TinyQwen2());
    ASSERT_TRUE(engine.ok()) << engine.status().ToString();
    engine_ = std::move(engine).value();
    Outputs(*engine_);  // warm
  }
  void TearDown() override { EnableProfiling(false); }

  std::unique_ptr<LLMEngine> engine_;
};

TEST_F(ProfileTest, RecordingChangesNoOutputAndOffRecordsNothing) {
  EnableProfiling(true);
  EnableProfiling(false);
  const auto off = Outputs(*engine_);
  EXPECT_TRUE(ProfileEvents().empty());
  EnableProfiling(true);
  const auto on = Outputs(*engine_);
  EnableProfiling(false);
  EXPECT_EQ(off, on);
  EXPECT_FALSE(ProfileEvents().empty());
}

TEST_F(ProfileTest, EveryKernelOfEveryStepNestedAndAddingUp) {
  EnableProfiling(true);
  Outputs(*engine_);
  EnableProfiling(false);
  const std::vector<ProfileEvent> events = ProfileEvents();
  auto parents = NestProfileEvents(events);
  ASSERT_TRUE(parents.ok()) << parents.status().ToString();
  const size_t nodes = engine_->compiled_model().graph().nodes().size();

  // Per step: its forward pass's kernels, in graph order, and the time of
  // the spans directly within it.
  std::map<int32_t, std::vector<std::string>> kernels;
  std::map<int32_t, int64_t> children_ns;
  std::map<std::string, int> phases;
  for (size_t i = 0; i < events.size(); ++i) {
    const int32_t p = (*parents)[i];
    if (events[i].kernel != nullptr) {
      ASSERT_GE(p, 0);
      const ProfileEvent& forward = events[static_cast<size_t>(p)];
      EXPECT_EQ(forward.name, "forward");
      const int32_t step = (*parents)[static_cast<size_t>(p)];
      ASSERT_GE(step, 0);
      EXPECT_STREQ(events[static_cast<size_t>(step)].category, "step");
      kernels[step].push_back(events[i].kernel->name);
      EXPECT_EQ(events[i].phase, events[static_cast<size_t>(step)].phase);
    }
    if (p >= 0 && std::string_view(events[static_cast<size_t>(p)].category) == "step") {
      children_ns[p] += events[i].duration_ns;
    }
    if (std::string_view(events[i].category) == "step") phases[ProfilePhaseName(events[i].phase)] += 1;
  }
  EXPECT_GE(phases["prefill"], 1);
  EXPECT_GE(phases["decode"], 1);
  int steps = 0;
  std::vector<double> coverage;  // of each step by its parts
  for (size_t i = 0; i < events.size(); ++i) {
    if (std::string_view(events[i].category) != "step") continue;
    ++steps;
    const auto step = static_cast<int32_t>(i);
    ASSERT_EQ(kernels[step].size(), nodes) << events[i].name;
    for (size_t k = 0; k < nodes; ++k) EXPECT_EQ(kernels[step][k], engine_->compiled_model().graph().nodes()[k].name);
    // The named parts cover the step but for the moments between them.
    EXPECT_LE(children_ns[step], events[i].duration_ns);
    coverage.push_back(static_cast<double>(children_ns[step]) / static_cast<double>(events[i].duration_ns));
  }
  EXPECT_EQ(steps, phases["prefill"] + phases["decode"]);
  // In the median step: one step may lose the core between two of its parts
  // on a loaded machine, which the time between spans then shows.
  std::sort(coverage.begin(), coverage.end());
  EXPECT_GE(coverage[coverage.size() / 2], 0.95);

  // The summary's rows add up to the steps exactly; kernels are most of them.
  auto summary = SummarizeProfile(events);
  ASSERT_TRUE(summary.ok()) << summary.status().ToString();
  ASSERT_EQ(summary->size(), 2u);
  for (const PhaseProfile& p : *summary) {
    EXPECT_NEAR(p.kernel_seconds() + p.other_seconds(), p.step_seconds, 1e-9);
    double bytes = 0, flops = 0;
    for (const ProfileRow& r : p.kernels) {
      bytes += r.bytes;
      flops += r.flops;
    }
    EXPECT_GT(bytes, 0);
    EXPECT_GT(flops, 0);
  }
  ProfilePeaks peaks;
  peaks.compute.per_second = 1e11;
  peaks.bandwidth.per_second = 1e10;
  const std::string table = FormatProfileTable(*summary, peaks);
  EXPECT_NE(table.find("prefill:"), std::string::npos) << table;
  EXPECT_NE(table.find("decode:"), std::string::npos) << table;
  EXPECT_NE(table.find("linear"), std::string::npos) << table;
  EXPECT_NE(table.find("memory"), std::string::npos) << table;
}

TEST_F(ProfileTest, KernelCostsAreTheCompilersEstimateAtThePassRows) {
  EnableProfiling(true);
  Outputs(*engine_);
  EnableProfiling(false);
  const Graph& g = engine_->compiled_model().graph();
  std::map<std::string, const Node*> nodes;
  for (const Node& n : g.nodes()) nodes[n.name] = &n;
  int checked = 0;
  for (const ProfileEvent& e : ProfileEvents()) {
    if (e.kernel == nullptr) continue;
    const Node& n = *nodes.at(e.kernel->name);
    if (n.op == OpKind::kAttention || n.op == OpKind::kEmbedding) continue;  // their own accounting
    const NodeCost c = EstimateCost(g, n, e.env);
    EXPECT_NEAR(e.bytes, c.weight_bytes + c.activation_bytes, 1e-6 * (1 + e.bytes)) << n.name;
    EXPECT_NEAR(e.flops, c.flops, 1e-6 * (1 + e.flops)) << n.name;
    ++checked;
  }
  EXPECT_GT(checked, 100);
}

TEST_F(ProfileTest, TraceHasEveryKernelWithItsArgsAndRequestsAndCounters) {
  EnableProfiling(true);
  Outputs(*engine_);
  EnableProfiling(false);
  const std::vector<ProfileEvent> events = ProfileEvents();
  const nlohmann::json trace =
      nlohmann::json::parse(ChromeTrace(events, ProfileTrackNames()).dump());  // as written
  ASSERT_TRUE(trace.contains("traceEvents"));
  size_t complete = 0, kernels = 0, counters = 0;
  std::set<std::string> requests;
  for (const nlohmann::json& e : trace["traceEvents"]) {
    const std::string ph = e.at("ph");
    if (ph == "X") {
      ++complete;
      EXPECT_GE(e.at("ts").get<double>(), 0);
      EXPECT_GE(e.at("dur").get<double>(), 0);
      if (e.at("cat") == "kernel") {
        ++kernels;
        for (const char* key : {"op", "shapes", "dtype", "backend", "bytes", "flops", "phase"}) {
          EXPECT_TRUE(e.at("args").contains(key)) << key;
        }
      }
      if (e.at("cat") == "request" && e.at("name").get<std::string>().rfind("request ", 0) == 0) {
        requests.insert(e.at("name").get<std::string>());
      }
    } else if (ph == "C") {
      ++counters;
      for (const char* key : {"kv_blocks_used", "batch_size", "queue_length"}) {
        EXPECT_TRUE(e.at("args").contains(key)) << key;
      }
    }
  }
  size_t spans = 0, recorded_kernels = 0;
  for (const ProfileEvent& e : events) {
    spans += e.kind == ProfileEvent::Kind::kSpan;
    recorded_kernels += e.kernel != nullptr;
  }
  EXPECT_EQ(complete, spans);
  EXPECT_EQ(kernels, recorded_kernels);
  EXPECT_GT(counters, 0u);
  EXPECT_EQ(requests.size(), 3u);
}

ProfileEvent Span(const char* name, const char* category, int64_t start, int64_t duration) {
  ProfileEvent e;
  e.name = name;
  e.category = category;
  e.start_ns = start;
  e.duration_ns = duration;
  e.phase = ProfilePhase::kDecode;
  return e;
}

TEST(ProfileSummaryTest, RowsAddUpAndOverlapsAreRejected) {
  auto kernel = std::make_shared<KernelInfo>();
  kernel->name = "layers.0.q_proj";
  kernel->op = "linear";
  ProfileEvent k1 = Span("", "kernel", 120, 300);
  k1.kernel = kernel;
  k1.bytes = 3000;
  k1.flops = 600;
  ProfileEvent k2 = k1;
  k2.start_ns = 450;
  k2.duration_ns = 100;
  std::vector<ProfileEvent> events = {Span("schedule", "engine", 10, 50), k1, k2,
                                      Span("forward", "engine", 100, 500), Span("sample", "engine", 650, 200),
                                      Span("decode step", "step", 0, 1000)};
  auto summary = SummarizeProfile(events);
  ASSERT_TRUE(summary.ok()) << summary.status().ToString();
  ASSERT_EQ(summary->size(), 1u);
  const PhaseProfile& p = summary->front();
  EXPECT_EQ(p.name, "decode");
  ASSERT_EQ(p.kernels.size(), 1u);
  EXPECT_EQ(p.kernels[0].calls, 2);
  EXPECT_DOUBLE_EQ(p.kernels[0].seconds, 400e-9);
  EXPECT_DOUBLE_EQ(p.kernels[0].bytes, 6000);
  std::map<std::string, double> other;
  for (const ProfileRow& r : p.other) other[r.name] = r.seconds;
  EXPECT_DOUBLE_EQ(other["sample"], 200e-9);
  EXPECT_DOUBLE_EQ(other["schedule"], 50e-9);
  EXPECT_DOUBLE_EQ(other["forward, between kernels"], 100e-9);
  EXPECT_DOUBLE_EQ(other["step, between spans"], 250e-9);
  EXPECT_NEAR(p.kernel_seconds() + p.other_seconds(), p.step_seconds, 1e-15);

  // 3000 B and 600 FLOP in 300 ns: 10 GB/s, below a ridge of 10 FLOP/B.
  ProfilePeaks peaks;
  peaks.compute.per_second = 1e11;
  peaks.bandwidth.per_second = 1e10;
  EXPECT_EQ(BoundOf(600, 3000, peaks), "memory");
  EXPECT_EQ(BoundOf(60000, 3000, peaks), "compute");
  EXPECT_DOUBLE_EQ(RooflineFraction(p.kernels[0], peaks), 6000 / 400e-9 / 1e10);

  events.push_back(Span("late", "engine", 900, 200));  // crosses the step's end
  EXPECT_FALSE(NestProfileEvents(events).ok());
}

}  // namespace profile_tests
}  // namespace kiln::bench
