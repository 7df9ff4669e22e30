// Recording linear-layer input ranges over a calibration text.
#include "engine/calibration.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "compiler/compiled_model.h"
#include "core/half.h"
#include "core/mapped_file.h"
#include "core/utf8.h"
#include "engine/model_session.h"
#include "format/weight_store.h"
#include "tokenizer/tokenizer.h"

namespace kiln {
namespace {

using nlohmann::json;

constexpr const char* kFormat = "kiln-w8a8-clips";
constexpr int kVersion = 1;

// The largest |x| of row r of a dumped value.
float RowAbsMax(const BoundValue& v, int64_t r) {
  float m = 0;
  if (v.dtype == DType::kBF16) {
    const auto* row = reinterpret_cast<const uint16_t*>(v.data) + r * v.row_stride;
    for (int64_t i = 0; i < v.cols; ++i) m = std::max(m, std::fabs(Bf16ToF32(row[i])));
  } else {
    const auto* row = reinterpret_cast<const float*>(v.data) + r * v.row_stride;
    for (int64_t i = 0; i < v.cols; ++i) m = std::max(m, std::fabs(row[i]));
  }
  return m;
}

}  // namespace

float NearestRankPercentile(std::vector<float> values, double p) {
  const auto n = static_cast<double>(values.size());
  // p * n first: 99.9 / 100 * 1000 rounds above 999.
  auto rank = static_cast<size_t>(std::ceil(p * n / 100.0 - 1e-9));
  rank = std::clamp<size_t>(rank, 1, values.size());
  std::nth_element(values.begin(), values.begin() + static_cast<int64_t>(rank - 1), values.end());
  return values[rank - 1];
}

Expected<ActivationClips> CalibrateActivationClips(const WeightStore& weights, const std::vector<int32_t>& token_ids,
                                                   const CalibrationOptions& options) {
  if (!(options.percentile > 0 && options.percentile <= 100)) {
    return InvalidArgument("calibration: percentile {} is not in (0, 100]", options.percentile);
  }
  if (options.window < 2) return InvalidArgument("calibration: window of {} tokens is too short", options.window);
  const int64_t vocab = weights.config().vocab_size;
  const int64_t count = std::min<int64_t>(static_cast<int64_t>(token_ids.size()), std::max<int64_t>(options.max_tokens, 1));
  if (count <= 0) return InvalidArgument("calibration: no tokens to calibrate on");
  for (int64_t i = 0; i < count; ++i) {
    if (token_ids[static_cast<size_t>(i)] < 0 || token_ids[static_cast<size_t>(i)] >= vocab) {
      return OutOfRange("calibration: token {} is id {}, outside the vocabulary of {}", i,
                        token_ids[static_cast<size_t>(i)], vocab);
    }
  }

  const int64_t window = std::min<int64_t>(options.window, weights.config().max_position_embeddings);
  ModelSessionOptions fp32;
  fp32.precision = Precision::kFp32;
  fp32.max_batch_tokens = window;
  fp32.max_model_len = window;
  fp32.max_seqs = 1;
  fp32.threads = options.threads;
  fp32.kv_tokens_per_seq = window;
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<ModelSession> session, ModelSession::Create(weights, fp32));

  // Which dumped values are linear inputs, and whose.
  const Graph& g = session->model().graph();
  std::unordered_map<std::string, std::vector<std::string>> weights_of_input;
  for (const Node& n : g.nodes()) {
    if (n.op != OpKind::kLinear && n.op != OpKind::kGateUpSiluMul) continue;
    std::vector<std::string>& names = weights_of_input[g.value(n.inputs[0]).name];
    for (size_t j = 0; j < n.weights.size() / 2; ++j) {
      if (n.weights[j] != nullptr && n.weights[j]->name.rfind("model.layers.", 0) == 0) {
        names.push_back(n.weights[j]->name);
      }
    }
  }
  std::unordered_map<std::string, std::vector<float>> maxima;  // by input value
  DumpFn dump = [&](const std::string& name, const BoundValue& value, int64_t rows) {
    auto it = weights_of_input.find(name);
    if (it == weights_of_input.end() || it->second.empty()) return;
    std::vector<float>& m = maxima[name];
    for (int64_t r = 0; r < rows; ++r) m.push_back(RowAbsMax(value, r));
  };

  // Each window from position 0 of an empty cache.
  for (int64_t start = 0; start < count; start += window) {
    const auto len = static_cast<size_t>(std::min(window, count - start));
    const std::span<const int32_t> ids(token_ids.data() + start, len);
    KILN_RETURN_IF_ERROR(session->ForwardSequence(ids, 0, {}, nullptr, &dump).WithContext("calibration"));
  }

  ActivationClips clips;
  clips.percentile = options.percentile;
  clips.tokens = count;
  for (const auto& [input, names] : weights_of_input) {
    auto it = maxima.find(input);
    if (it == maxima.end() || it->second.empty()) continue;
    const float clip = NearestRankPercentile(it->second, options.percentile);
    for (const std::string& name : names) clips.by_weight[name] = clip;
  }
  return clips;
}

Expected<ActivationClips> CalibrateFromTextFile(const WeightStore& weights, const Tokenizer& tokenizer,
                                                const std::string& text_path, const CalibrationOptions& options) {
  KILN_ASSIGN_OR_RETURN(std::string text, ReadFileToString(text_path));
  if (size_t bad = FirstInvalidUtf8(text); bad < text.size()) {
    return InvalidArgument("{}: the calibration text is not UTF-8 (invalid byte 0x{:02x} at offset {})", text_path,
                           static_cast<unsigned char>(text[bad]), bad);
  }
  std::vector<int32_t> ids = tokenizer.Encode(text, /*add_special=*/false, /*parse_special=*/false);
  if (ids.empty()) return InvalidArgument("{}: the calibration text has no tokens", text_path);
  auto clips = CalibrateActivationClips(weights, ids, options);
  if (!clips.ok()) return clips.status().WithContext(text_path);
  return clips;
}

Expected<std::map<std::string, float>> ResolveActivationClips(const WeightStore& weights, const Tokenizer* tokenizer,
                                                              const std::string& calibration_text,
                                                              const std::string& clips_file,
                                                              const CalibrationOptions& options) {
  if (!calibration_text.empty()) {
    if (tokenizer == nullptr) {
      return InvalidArgument("{}: calibration needs the model's tokenizer, and there is none", calibration_text);
    }
    KILN_ASSIGN_OR_RETURN(ActivationClips clips, CalibrateFromTextFile(weights, *tokenizer, calibration_text, options));
    if (!clips_file.empty()) KILN_RETURN_IF_ERROR(WriteActivationClips(clips, clips_file));
    return clips.by_weight;
  }
  if (!clips_file.empty()) {
    KILN_ASSIGN_OR_RETURN(ActivationClips clips, ReadActivationClips(clips_file));
    return clips.by_weight;
  }
  return std::map<std::string, float>();
}

Status WriteActivationClips(const ActivationClips& clips, const std::string& path) {
  json j;
  j["format"] = kFormat;
  j["version"] = kVersion;
  j["percentile"] = clips.percentile;
  j["tokens"] = clips.tokens;
  j["clips"] = json::object();
  for (const auto& [name, clip] : clips.by_weight) j["clips"][name] = clip;
  const std::string text = j.dump(2) + "\n";
  const std::string temporary = path + ".tmp";
  std::FILE* f = std::fopen(temporary.c_str(), "wb");
  if (f == nullptr) return IoError("{}: cannot create", temporary);
  bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  ok &= std::fclose(f) == 0;
  std::error_code ec;
  if (ok) std::filesystem::rename(temporary, path, ec);
  if (!ok || ec) {
    std::filesystem::remove(temporary, ec);
    return IoError("{}: cannot write the activation clips", path);
  }
  return Status::Ok();
}

Expected<ActivationClips> ReadActivationClips(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return Corrupt("{}: not a JSON object", path);
  if (!j.contains("format") || j["format"] != kFormat) return Corrupt("{}: \"format\" is not \"{}\"", path, kFormat);
  if (!j.contains("version") || j["version"] != kVersion) return Unsupported("{}: \"version\" is not {}", path, kVersion);
  ActivationClips clips;
  if (j.contains("percentile") && j["percentile"].is_number()) clips.percentile = j["percentile"].get<double>();
  if (j.contains("tokens") && j["tokens"].is_number_integer()) clips.tokens = j["tokens"].get<int64_t>();
  if (!j.contains("clips") || !j["clips"].is_object()) return Corrupt("{}: \"clips\" should be an object", path);
  for (const auto& [name, value] : j["clips"].items()) {
    if (!value.is_number()) return Corrupt("{}: clips.{} should be a number", path, name);
    auto clip = value.get<double>();
    if (!std::isfinite(clip) || clip <= 0 || clip > 3.0e38) {
      return Corrupt("{}: clips.{} = {} is not a finite positive number", path, name, clip);
    }
    clips.by_weight[name] = static_cast<float>(clip);
  }
  return clips;
}

}  // namespace kiln
