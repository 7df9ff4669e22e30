// Helpers for the server tests that run tiny-qwen2: engine options, a
// loaded engine, and reading greedy results of the engine alone.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "engine/llm_engine.h"
#include "testing/test_paths.h"

namespace kiln::server_test {

inline EngineOptions TinyOptions() {
  EngineOptions o;
  o.model = testing::ModelDir("tiny-qwen2");
  o.threads = 2;
  o.max_num_seqs = 64;
  o.max_num_batched_tokens = 512;
  o.kv_cache_memory.bytes = int64_t{64} << 20;
  o.seed = 1;
  return o;
}

inline std::unique_ptr<LLMEngine> TinyEngine(const EngineOptions& options = TinyOptions()) {
  auto engine = LLMEngine::Create(options);
  EXPECT_TRUE(engine.ok()) << engine.status().ToString();
  return engine.ok() ? std::move(engine).value() : nullptr;
}

}  // namespace kiln::server_test
