// Comparing the named intermediate values of two runs of a model: per value
// the cosine similarity and the largest and mean absolute differences, and
// which value first falls below a similarity threshold.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "compiler/program.h"
#include "core/status.h"

namespace kiln {

struct TensorStats {
  double cosine = 1;    // 1 when both are all zero, 0 when only one is
  double max_abs = 0;   // max |a - b|
  double mean_abs = 0;  // mean |a - b|
  int64_t elements = 0;
};

// Statistics of a against b over n values, in double.
TensorStats CompareTensors(const float* a, const float* b, int64_t n);

// One value as a forward pass produced it, widened to float32.
struct CapturedValue {
  std::string name;
  int64_t rows = 0;
  int64_t cols = 0;
  std::vector<float> data;  // rows x cols
};

// Collects the values of one forward pass through a Program's DumpFn (the
// last write of a name wins; the order is the first write's).
class ValueCapture {
 public:
  ValueCapture();
  const DumpFn& fn() const { return fn_; }
  const std::vector<CapturedValue>& values() const { return values_; }
  // The first value that could not be widened (an unexpected dtype).
  const Status& status() const { return status_; }

 private:
  void Capture(const std::string& name, const BoundValue& value, int64_t rows);

  DumpFn fn_;
  std::vector<CapturedValue> values_;
  Status status_;
};

// The layer of "layers.<N>.<what>", or -1 for values outside the layers.
int64_t LayerOfValue(const std::string& name);

// Whether a value is comparable between differently laid out files of one
// model: per-layer outputs and everything after attention, but not the
// query/key values that a llama GGUF stores with permuted rows (q, k, their
// norms and rotations, and fused projections holding them).
bool IsLayoutInvariantValue(const std::string& name);

struct DiffRow {
  std::string name;
  int64_t layer = -1;
  int64_t rows = 0;
  int64_t cols = 0;
  TensorStats stats;
};

// The values present in both with the same shape and accepted by `keep`
// (null: all), layer by layer: those a computed before its first layer value,
// then each layer's in a's order, then the rest.
std::vector<DiffRow> DiffValues(const std::vector<CapturedValue>& a, const std::vector<CapturedValue>& b,
                                const std::function<bool(const std::string&)>& keep = nullptr);

// The index of the first row with cosine below `threshold`, or -1.
int64_t FirstBelow(const std::vector<DiffRow>& rows, double threshold);

}  // namespace kiln
