// Helpers for the engine tests that run the tiny models: loading a model
// once, building engines over it, and reading the reference files.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/mapped_file.h"
#include "engine/llm_engine.h"
#include "engine/model_loader.h"
#include "testing/test_paths.h"

namespace kiln::engine_test {

inline const char* const kTinyModels[] = {"tiny-llama", "tiny-qwen2", "tiny-qwen3"};

// Engine options for a tiny model folder; small enough for quick tests.
inline EngineOptions TinyOptions(const std::string& model) {
  EngineOptions o;
  o.model = testing::ModelDir(model);
  o.threads = 2;
  o.max_num_seqs = 64;
  o.max_num_batched_tokens = 512;
  o.seed = 1;
  return o;
}

inline LoadedModel LoadOrDie(const EngineOptions& options) {
  auto loaded = LoadModel(options);
  EXPECT_TRUE(loaded.ok()) << loaded.status().ToString();
  return loaded.ok() ? std::move(loaded).value() : LoadedModel{};
}

inline std::unique_ptr<LLMEngine> EngineOrDie(const LoadedModel& model, const EngineOptions& options) {
  auto engine = LLMEngine::Create(model, options);
  EXPECT_TRUE(engine.ok()) << engine.status().ToString();
  return engine.ok() ? std::move(engine).value() : nullptr;
}

inline nlohmann::json ReadJson(const std::string& path) {
  auto text = ReadFileToString(path);
  EXPECT_TRUE(text.ok()) << text.status().ToString();
  return text.ok() ? nlohmann::json::parse(*text) : nlohmann::json();
}

inline nlohmann::json Reference(const std::string& model, int prompt) {
  return ReadJson(testing::ModelDir(model) + "/reference/prompt_" + std::to_string(prompt) + ".json");
}

// Token ids of the model's held-out text (16384 of them), for prompts of
// any length made of real text.
inline std::vector<int32_t> HeldoutIds(const std::string& model) {
  return ReadJson(testing::ModelDir(model) + "/reference/heldout_ppl.json")["token_ids"]
      .get<std::vector<int32_t>>();
}

inline GenerationRequest GreedyIds(std::vector<int32_t> ids, int32_t max_tokens, bool ignore_eos = true) {
  GenerationRequest r;
  r.prompt_ids = std::move(ids);
  r.params.temperature = 0;
  r.params.max_tokens = max_tokens;
  r.params.ignore_eos = ignore_eos;
  return r;
}

}  // namespace kiln::engine_test
