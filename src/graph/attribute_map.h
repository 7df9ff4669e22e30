// Named, typed attributes of a node: what an op needs beyond the fixed
// fields of NodeAttrs (RoPE's frequencies and scaling), in the kinds ONNX
// attributes come in: an int, a float, a string, a list of ints or floats.
// Floats are kept as double, so a float32 attribute converts exactly.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include "core/status.h"

namespace kiln {

class AttributeMap {
 public:
  using Value = std::variant<int64_t, double, std::string, std::vector<int64_t>, std::vector<double>>;

  // Sets (or replaces) attribute `name`.
  void SetInt(const std::string& name, int64_t v) { entries_[name] = v; }
  void SetFloat(const std::string& name, double v) { entries_[name] = v; }
  void SetString(const std::string& name, std::string v) { entries_[name] = std::move(v); }
  void SetInts(const std::string& name, std::vector<int64_t> v) { entries_[name] = std::move(v); }
  void SetFloats(const std::string& name, std::vector<double> v) { entries_[name] = std::move(v); }

  bool Has(const std::string& name) const { return entries_.count(name) != 0; }
  bool empty() const { return entries_.empty(); }
  const std::map<std::string, Value>& entries() const { return entries_; }

  // Attribute `name` as the named kind; errors say which attribute is
  // missing or of another kind.
  Expected<int64_t> Int(const std::string& name) const;
  Expected<double> Float(const std::string& name) const;
  Expected<std::string> String(const std::string& name) const;
  Expected<std::vector<int64_t>> Ints(const std::string& name) const;
  Expected<std::vector<double>> Floats(const std::string& name) const;

  // Adds the attributes of `other`. Returns false, changing nothing, when
  // an attribute of both has different values (so a fusion that would lose
  // one does not happen).
  bool Merge(const AttributeMap& other);

  // "name=value ..." in name order (lists in brackets); "" when empty.
  std::string ToString() const;

  bool operator==(const AttributeMap& other) const { return entries_ == other.entries_; }
  bool operator!=(const AttributeMap& other) const { return !(*this == other); }
  // An order, so that nodes can be grouped by their attributes.
  bool operator<(const AttributeMap& other) const { return entries_ < other.entries_; }

 private:
  std::map<std::string, Value> entries_;
};

}  // namespace kiln
