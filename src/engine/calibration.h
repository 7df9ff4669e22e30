// Calibration of W8A8's static activation scales: the model runs in fp32
// over a text, the largest |x| of every token is recorded at the input of
// every linear layer, and a high percentile of those maxima becomes the
// input's clip (scale = clip / 127). The clips can be kept in a small JSON
// file beside the model and read back.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/status.h"

namespace kiln {

class Tokenizer;
class WeightStore;

struct CalibrationOptions {
  double percentile = 99.9;  // of the per-token maxima, in (0, 100]
  int64_t window = 512;      // tokens per forward pass, each from position 0
  int64_t max_tokens = 16384;  // of the text, from its start
  int threads = 0;             // 0: one per physical core
};

// The clip of each linear layer's input, by weight name (the weights of a
// fused projection share their input, hence their clip).
struct ActivationClips {
  double percentile = 99.9;
  int64_t tokens = 0;  // calibration tokens the clips were measured on
  std::map<std::string, float> by_weight;
};

// Runs `weights` over `token_ids` in windows of options.window and returns
// the clip of every decoder-layer linear input. Errors when there are no
// tokens, a token is outside the vocabulary, or the percentile is not in
// (0, 100].
Expected<ActivationClips> CalibrateActivationClips(const WeightStore& weights, const std::vector<int32_t>& token_ids,
                                                   const CalibrationOptions& options);

// The same over the text of `text_path` (encoded without special tokens).
// Errors name the file.
Expected<ActivationClips> CalibrateFromTextFile(const WeightStore& weights, const Tokenizer& tokenizer,
                                                const std::string& text_path, const CalibrationOptions& options);

// The static clips of a W8A8 run (--calibration / --w8a8-clips): calibrated
// on the text of `calibration_text` when it is set (and then saved to
// `clips_file` when that is set too), else read from `clips_file` when it is
// set, else none (every input quantized per token). Calibration needs the
// tokenizer; errors say which file failed.
Expected<std::map<std::string, float>> ResolveActivationClips(const WeightStore& weights, const Tokenizer* tokenizer,
                                                              const std::string& calibration_text,
                                                              const std::string& clips_file,
                                                              const CalibrationOptions& options);

// The p-th percentile of `values` by nearest rank: the smallest value with
// at least p% of the values at or below it. REQUIRES: values not empty,
// 0 < p <= 100.
float NearestRankPercentile(std::vector<float> values, double p);

// Saves the clips as JSON ({"format": "kiln-w8a8-clips", "version": 1,
// "percentile": ..., "tokens": ..., "clips": {"<weight>": clip, ...}}),
// atomically.
Status WriteActivationClips(const ActivationClips& clips, const std::string& path);

// Reads a file WriteActivationClips wrote. Errors name the file and the
// field; clips must be finite and positive.
Expected<ActivationClips> ReadActivationClips(const std::string& path);

}  // namespace kiln
