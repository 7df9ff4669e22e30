// Typed reads, merging and printing of node attributes.
#include "graph/attribute_map.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace kiln {
namespace {

// Names of the kinds, in the variant's order.
const char* KindName(size_t index) {
  static const char* const kNames[] = {"int", "float", "string", "int list", "float list"};
  return index < std::size(kNames) ? kNames[index] : "?";
}

template <typename T>
Expected<T> Get(const std::map<std::string, AttributeMap::Value>& entries, const std::string& name,
                size_t want) {
  auto it = entries.find(name);
  if (it == entries.end()) return NotFound("attribute '{}' is missing", name);
  if (it->second.index() != want) {
    return InvalidArgument("attribute '{}' is a {}, expected a {}", name, KindName(it->second.index()),
                           KindName(want));
  }
  return std::get<T>(it->second);
}

struct Printer {
  std::string operator()(int64_t v) const { return fmt::format("{}", v); }
  std::string operator()(double v) const { return fmt::format("{}", v); }
  std::string operator()(const std::string& v) const { return fmt::format("\"{}\"", v); }
  std::string operator()(const std::vector<int64_t>& v) const { return fmt::format("[{}]", fmt::join(v, ", ")); }
  std::string operator()(const std::vector<double>& v) const { return fmt::format("[{}]", fmt::join(v, ", ")); }
};

}  // namespace

Expected<int64_t> AttributeMap::Int(const std::string& name) const { return Get<int64_t>(entries_, name, 0); }
Expected<double> AttributeMap::Float(const std::string& name) const { return Get<double>(entries_, name, 1); }
Expected<std::string> AttributeMap::String(const std::string& name) const {
  return Get<std::string>(entries_, name, 2);
}
Expected<std::vector<int64_t>> AttributeMap::Ints(const std::string& name) const {
  return Get<std::vector<int64_t>>(entries_, name, 3);
}
Expected<std::vector<double>> AttributeMap::Floats(const std::string& name) const {
  return Get<std::vector<double>>(entries_, name, 4);
}

bool AttributeMap::Merge(const AttributeMap& other) {
  for (const auto& [name, value] : other.entries_) {
    auto it = entries_.find(name);
    if (it != entries_.end() && it->second != value) return false;
  }
  for (const auto& [name, value] : other.entries_) entries_.emplace(name, value);
  return true;
}

std::string AttributeMap::ToString() const {
  std::string s;
  for (const auto& [name, value] : entries_) {
    s += (s.empty() ? "" : " ") + name + "=" + std::visit(Printer{}, value);
  }
  return s;
}

}  // namespace kiln
