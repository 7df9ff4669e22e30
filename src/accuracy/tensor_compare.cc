// Value capture and comparison for `kiln diff`.
#include "accuracy/tensor_compare.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <utility>

#include "quant/dequantize.h"

namespace kiln {

TensorStats CompareTensors(const float* a, const float* b, int64_t n) {
  TensorStats s;
  s.elements = n;
  double dot = 0, aa = 0, bb = 0, sum_abs = 0, max_abs = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double x = a[i], y = b[i];
    dot += x * y;
    aa += x * x;
    bb += y * y;
    const double d = std::fabs(x - y);
    sum_abs += d;
    if (d > max_abs || std::isnan(d)) max_abs = d;
  }
  s.max_abs = max_abs;
  s.mean_abs = n > 0 ? sum_abs / static_cast<double>(n) : 0.0;
  if (aa == 0 && bb == 0) {
    s.cosine = 1;
  } else if (aa == 0 || bb == 0) {
    s.cosine = 0;
  } else {
    s.cosine = dot / (std::sqrt(aa) * std::sqrt(bb));
  }
  return s;
}

ValueCapture::ValueCapture() {
  fn_ = [this](const std::string& name, const BoundValue& value, int64_t rows) { Capture(name, value, rows); };
}

void ValueCapture::Capture(const std::string& name, const BoundValue& value, int64_t rows) {
  if (value.data == nullptr || rows <= 0 || value.cols <= 0 || value.rows == RowSpace::kNone) return;
  CapturedValue v;
  v.name = name;
  v.rows = rows;
  v.cols = value.cols;
  v.data.resize(static_cast<size_t>(rows * value.cols));
  const size_t row_bytes = DTypeBytes(value.dtype, static_cast<uint64_t>(value.row_stride)).value_or(0);
  for (int64_t r = 0; r < rows; ++r) {
    Status s = DequantizeRow(value.dtype, value.data + static_cast<size_t>(r) * row_bytes,
                             v.data.data() + r * value.cols, value.cols);
    if (!s.ok()) {
      if (status_.ok()) status_ = s.WithContext(name);
      return;
    }
  }
  for (CapturedValue& old : values_) {
    if (old.name == name) {
      old = std::move(v);
      return;
    }
  }
  values_.push_back(std::move(v));
}

int64_t LayerOfValue(const std::string& name) {
  const std::string prefix = "layers.";
  if (name.compare(0, prefix.size(), prefix) != 0) return -1;
  char* end = nullptr;
  const long layer = std::strtol(name.c_str() + prefix.size(), &end, 10);
  if (end == name.c_str() + prefix.size() || *end != '.') return -1;
  return layer;
}

bool IsLayoutInvariantValue(const std::string& name) {
  if (name.find('{') != std::string::npos) return false;  // a fused projection (q and k among its columns)
  const size_t dot = name.rfind('.');
  std::string what = dot == std::string::npos ? name : name.substr(dot + 1);
  if (what == "bf16") {  // a cast's copy: judge by the value it copies
    const std::string base = name.substr(0, dot);
    const size_t d2 = base.rfind('.');
    what = d2 == std::string::npos ? base : base.substr(d2 + 1);
  }
  return what != "q" && what != "k" && what != "q_norm" && what != "k_norm" && what != "q_rope" && what != "k_rope";
}

std::vector<DiffRow> DiffValues(const std::vector<CapturedValue>& a, const std::vector<CapturedValue>& b,
                                const std::function<bool(const std::string&)>& keep) {
  std::map<std::string, const CapturedValue*> by_name;
  for (const CapturedValue& v : b) by_name[v.name] = &v;
  std::vector<DiffRow> rows;
  for (const CapturedValue& va : a) {
    if (keep && !keep(va.name)) continue;
    auto it = by_name.find(va.name);
    if (it == by_name.end()) continue;
    const CapturedValue& vb = *it->second;
    if (vb.rows != va.rows || vb.cols != va.cols) continue;
    DiffRow r;
    r.name = va.name;
    r.layer = LayerOfValue(va.name);
    r.rows = va.rows;
    r.cols = va.cols;
    r.stats = CompareTensors(va.data.data(), vb.data.data(), va.rows * va.cols);
    rows.push_back(std::move(r));
  }
  // Fusion can compute a value of layer i + 1 before the last of layer i (a
  // residual add fused into the next norm); a reader expects layer order.
  // Values outside the layers stay before them (embeddings) or after them
  // (final norm, logits), as they ran.
  bool seen_layer = false;
  std::vector<std::pair<int64_t, size_t>> keys;
  for (size_t i = 0; i < rows.size(); ++i) {
    seen_layer |= rows[i].layer >= 0;
    const int64_t key = rows[i].layer >= 0 ? rows[i].layer : (seen_layer ? INT64_MAX : -1);
    keys.emplace_back(key, i);
  }
  std::stable_sort(keys.begin(), keys.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
  std::vector<DiffRow> ordered;
  ordered.reserve(rows.size());
  for (const auto& [key, i] : keys) ordered.push_back(std::move(rows[i]));
  return ordered;
}

int64_t FirstBelow(const std::vector<DiffRow>& rows, double threshold) {
  for (size_t i = 0; i < rows.size(); ++i) {
    if (!(rows[i].stats.cosine >= threshold)) return static_cast<int64_t>(i);
  }
  return -1;
}

}  // namespace kiln
