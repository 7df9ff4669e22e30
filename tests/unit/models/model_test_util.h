// Loading the tiny models and their golden references for the model tests.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "compiler/compiled_model.h"
#include "core/mapped_file.h"
#include "format/gguf.h"
#include "format/weight_store.h"
#include "testing/test_paths.h"

namespace kiln::testing {

inline nlohmann::json LoadJson(const std::string& path) {
  auto text = ReadFileToString(path);
  EXPECT_TRUE(text.ok()) << text.status().ToString();
  return text.ok() ? nlohmann::json::parse(*text) : nlohmann::json();
}

inline std::vector<int32_t> Ids(const nlohmann::json& j) { return j.get<std::vector<int32_t>>(); }

inline std::vector<float> Floats(const nlohmann::json& j) {
  std::vector<float> v;
  for (const auto& x : j) v.push_back(static_cast<float>(x.get<double>()));
  return v;
}

inline float MaxAbsDiff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  float m = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

struct LoadedModel {
  std::unique_ptr<WeightStore> weights;
  std::unique_ptr<CompiledModel> model;
};

inline LoadedModel Load(const std::string& path, CompileOptions options = {}) {
  LoadedModel m;
  auto w = WeightStore::Open(path);
  EXPECT_TRUE(w.ok()) << w.status().ToString();
  if (!w.ok()) return m;
  m.weights = std::move(w).value();
  auto c = CompiledModel::Compile(*m.weights, options);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  if (c.ok()) m.model = std::move(c).value();
  return m;
}

inline CompileOptions Fp32(int threads = 0) {
  CompileOptions o;
  o.precision = Precision::kFp32;
  o.threads = threads;
  return o;
}

// `kiln quantize MODEL OUT --type TYPE`: the exit status, and its output
// in `log`.
inline int KilnQuantize(const std::string& model, const std::string& out, const std::string& type,
                        std::string* log) {
  const std::string cmd = KilnBinary() + " quantize " + model + " " + out + " --type " + type +
                          " --no-progress --threads 1 > " + out + ".log 2>&1";
  int status = std::system(cmd.c_str());
  auto text = ReadFileToString(out + ".log");
  *log = text.ok() ? *text : "";
  return status;
}

// Whether two Q8_0 tensors have the same scales and quants at most one
// apart: a reference script that rounds in double rather than float, as
// ggml does, can land on the other side of a tie.
inline bool SameQ8_0UpToTies(const uint8_t* a, const uint8_t* b, uint64_t nbytes) {
  constexpr uint64_t kBlock = 34;  // an f16 scale and 32 int8 quants
  if (nbytes % kBlock != 0) return false;
  for (uint64_t at = 0; at < nbytes; at += kBlock) {
    if (std::memcmp(a + at, b + at, 2) != 0) return false;
    for (uint64_t i = 2; i < kBlock; ++i) {
      if (std::abs(static_cast<int8_t>(a[at + i]) - static_cast<int8_t>(b[at + i])) > 1) return false;
    }
  }
  return true;
}

// That the GGUF file `mine` holds the tensors of `theirs` (a reference
// script's llama.cpp-layout file) and no other, bit for bit (Q8_0 ones up to
// ties, SameQ8_0UpToTies), and every one of its `arch`.* keys with the same
// value.
inline void ExpectSameTensorsAndKeys(const std::string& mine_path, const std::string& theirs_path,
                                     const std::string& arch) {
  auto mine = GgufFile::Open(mine_path);
  auto theirs = GgufFile::Open(theirs_path);
  ASSERT_TRUE(mine.ok()) << mine.status().ToString();
  ASSERT_TRUE(theirs.ok()) << theirs.status().ToString();
  EXPECT_EQ((*mine)->tensors().size(), (*theirs)->tensors().size()) << mine_path;
  for (const GgufTensorInfo& t : (*theirs)->tensors()) {
    const GgufTensorInfo* m = (*mine)->FindTensor(t.name);
    ASSERT_NE(m, nullptr) << mine_path << " " << t.name;
    EXPECT_EQ(m->dims, t.dims) << mine_path << " " << t.name;
    EXPECT_EQ(m->dtype, t.dtype) << mine_path << " " << t.name;
    ASSERT_EQ(m->nbytes, t.nbytes) << mine_path << " " << t.name;
    if (t.dtype == DType::kQ8_0) {
      EXPECT_TRUE(SameQ8_0UpToTies(m->data, t.data, t.nbytes)) << mine_path << " " << t.name;
    } else {
      EXPECT_EQ(std::memcmp(m->data, t.data, t.nbytes), 0) << mine_path << " " << t.name;
    }
  }
  for (const auto& [key, value] : (*theirs)->metadata()) {
    if (key.rfind(arch + ".", 0) != 0) continue;
    const GgufValue* v = (*mine)->Find(key);
    ASSERT_NE(v, nullptr) << mine_path << " " << key;
    if (value.AsString() != nullptr) {
      ASSERT_NE(v->AsString(), nullptr) << key;
      EXPECT_EQ(*v->AsString(), *value.AsString()) << mine_path << " " << key;
    } else {
      EXPECT_EQ(v->AsFloat(), value.AsFloat()) << mine_path << " " << key;
    }
  }
}

// The output folder of the reference script tests/tools/<script>, made once
// per version of the script and shared by the test processes (CTest runs
// each case in its own): written to a fresh folder, then renamed into
// place, which fails harmlessly for all but one. `made` is a file the
// script writes last, relative to the folder.
inline std::string ReferenceScriptOutput(const std::string& script, const std::string& made) {
  const std::string path = SourceDir() + "/tests/tools/" + script;
  auto text = ReadFileToString(path);
  EXPECT_TRUE(text.ok()) << path;
  const std::string stem = script.substr(0, script.rfind('.'));
  const std::string shared = fmt::format("{}/{}_{:016x}", BinaryDir(), stem,
                                         std::hash<std::string>()(text.ok() ? *text : std::string()));
  std::error_code ec;
  if (std::filesystem::exists(shared + "/" + made, ec)) return shared;
  const std::string fresh = MakeTempDir() + "/models";
  const std::string cmd = "OMP_WAIT_POLICY=PASSIVE OMP_NUM_THREADS=1 /usr/bin/python3 " + path + " " + fresh;
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::filesystem::rename(fresh, shared, ec);
  return std::filesystem::exists(shared + "/" + made, ec) ? shared : fresh;
}

// Every position's logits of a reference run, one row after another.
inline std::vector<float> AllLogits(const nlohmann::json& rows) {
  std::vector<float> out;
  for (const auto& row : rows) {
    auto r = Floats(row);
    out.insert(out.end(), r.begin(), r.end());
  }
  return out;
}

inline float MaxAbs(const std::vector<float>& v) {
  float m = 0;
  for (float x : v) m = std::max(m, std::fabs(x));
  return m;
}

// The reference's greedy tokens up to the first step whose top-2 margin is
// 3e-3 or less (where rounding may pick either).
inline size_t DecidedSteps(const nlohmann::json& run) {
  auto margins = Floats(run["margins"]);
  size_t n = 0;
  while (n < margins.size() && margins[n] > 3e-3f) ++n;
  return n;
}

}  // namespace kiln::testing
