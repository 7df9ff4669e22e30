// Helpers for the tests that compare a workload's output with and without
// speculation (n-gram or draft model): running it batched or one request at
// a time, and counting the greedy requests whose output changed.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "engine/llm_engine.h"

namespace kiln::engine_test {

// The requests' results, all in one Generate call or one call each.
inline std::vector<GenerationResult> RunAll(LLMEngine& engine, const std::vector<GenerationRequest>& requests,
                                            bool batched) {
  std::vector<GenerationResult> out;
  if (batched) {
    auto results = engine.Generate(requests);
    EXPECT_TRUE(results.ok()) << results.status().ToString();
    if (results.ok()) out = std::move(results).value();
    return out;
  }
  for (const GenerationRequest& r : requests) {
    auto result = engine.Generate({r});
    EXPECT_TRUE(result.ok()) << result.status().ToString();
    if (!result.ok()) return out;
    out.push_back((*result)[0]);
  }
  return out;
}

// Compares everything a caller sees of the greedy requests; counts those
// that differ. Sampled requests speculate too, and rejection sampling keeps
// their distribution but not their exact tokens (rejection_sampling_test.cc
// checks the distribution): they only have to end as they may.
inline int CountMismatches(const std::vector<GenerationRequest>& requests,
                           const std::vector<GenerationResult>& expected,
                           const std::vector<GenerationResult>& actual) {
  EXPECT_EQ(expected.size(), actual.size());
  int mismatches = 0;
  for (size_t i = 0; i < std::min(expected.size(), actual.size()); ++i) {
    const GenerationResult& e = expected[i];
    const GenerationResult& a = actual[i];
    if (requests[i].params.temperature != 0) {
      EXPECT_TRUE(a.stats.finish_reason == FinishReason::kStop ||
                  a.stats.finish_reason == FinishReason::kLength);
      EXPECT_LE(a.output_ids.size(), static_cast<size_t>(requests[i].params.max_tokens));
      if (requests[i].params.ignore_eos) {
        EXPECT_EQ(a.output_ids.size(), static_cast<size_t>(requests[i].params.max_tokens));
      }
      continue;
    }
    const bool same = e.output_ids == a.output_ids && e.text == a.text && e.logprobs == a.logprobs &&
                      e.stats.finish_reason == a.stats.finish_reason &&
                      e.stats.completion_tokens == a.stats.completion_tokens;
    if (!same && ++mismatches <= 3) {
      size_t at = 0;
      while (at < std::min(e.output_ids.size(), a.output_ids.size()) &&
             e.output_ids[at] == a.output_ids[at]) {
        ++at;
      }
      ADD_FAILURE() << "request " << i << " (" << e.prompt_ids.size()
                    << " prompt tokens) differs from its output "
                    << "without speculation, first at output token " << at << " of " << e.output_ids.size();
    }
  }
  return mismatches;
}

}  // namespace kiln::engine_test
