// NodeAttrs <-> kiln_attr lists.
#include "backend/plugin/node_attributes.h"

#include <cstring>

namespace kiln {

void AttributeList::Int(const char* key, int64_t v) {
  kiln_attr a{};
  a.key = key;
  a.kind = KILN_ATTR_INT;
  a.i = v;
  attrs_.push_back(a);
}

void AttributeList::Float(const char* key, double v) {
  kiln_attr a{};
  a.key = key;
  a.kind = KILN_ATTR_FLOAT;
  a.f = v;
  attrs_.push_back(a);
}

void AttributeList::String(const char* key, const char* v) {
  kiln_attr a{};
  a.key = key;
  a.kind = KILN_ATTR_STRING;
  a.s = v;
  attrs_.push_back(a);
}

void AttributeList::Named(const std::string& key, const AttributeMap::Value& v) {
  kiln_attr a{};
  a.key = key.c_str();
  if (const auto* i = std::get_if<int64_t>(&v)) {
    a.kind = KILN_ATTR_INT;
    a.i = *i;
  } else if (const auto* f = std::get_if<double>(&v)) {
    a.kind = KILN_ATTR_FLOAT;
    a.f = *f;
  } else if (const auto* s = std::get_if<std::string>(&v)) {
    a.kind = KILN_ATTR_STRING;
    a.s = s->c_str();
  } else if (const auto* is = std::get_if<std::vector<int64_t>>(&v)) {
    a.kind = KILN_ATTR_INTS;
    a.ints = is->data();
    a.num_ints = static_cast<uint32_t>(is->size());
  } else if (const auto* fs = std::get_if<std::vector<double>>(&v)) {
    a.kind = KILN_ATTR_FLOATS;
    a.floats = fs->data();
    a.num_floats = static_cast<uint32_t>(fs->size());
  }
  attrs_.push_back(a);
}

AttributeList::AttributeList(const NodeAttrs& a, const AttributeMap& named, bool tensor_op) {
  if (tensor_op) {
    for (const auto& [key, value] : named.entries()) Named(key, value);
    return;
  }
  Float("eps", a.eps);
  Int("group", a.group);
  Int("layer", a.layer);
  Int("n_heads", a.n_heads);
  Int("n_kv_heads", a.n_kv_heads);
  Int("head_dim", a.head_dim);
  Int("sliding_window", a.sliding_window);
  Float("scale", a.scale);
  String("rope_style", a.rope_style == RopeStyle::kInterleaved ? "interleaved" : "half");
  Int("gelu_tanh", a.gelu_tanh ? 1 : 0);
  String("cast_to", DTypeName(a.cast_to));
  for (const auto& [key, value] : named.entries()) Named(key, value);
}

Status AttributesFromList(const kiln_attr* attrs, uint32_t n, NodeAttrs* fixed, AttributeMap* named,
                          bool tensor_op) {
  NodeAttrs& out = *fixed;
  for (uint32_t i = 0; i < n; ++i) {
    const kiln_attr& a = attrs[i];
    if (a.key == nullptr) return InvalidArgument("attribute {} has no key", i);
    auto is = [&](const char* k) { return !tensor_op && std::strcmp(a.key, k) == 0; };
    if (is("eps")) {
      out.eps = a.f;
    } else if (is("group")) {
      out.group = a.i;
    } else if (is("layer")) {
      out.layer = a.i;
    } else if (is("n_heads")) {
      out.n_heads = a.i;
    } else if (is("n_kv_heads")) {
      out.n_kv_heads = a.i;
    } else if (is("head_dim")) {
      out.head_dim = a.i;
    } else if (is("sliding_window")) {
      out.sliding_window = a.i;
    } else if (is("scale")) {
      out.scale = a.f;
    } else if (is("rope_style")) {
      out.rope_style = a.s != nullptr && std::strcmp(a.s, "interleaved") == 0 ? RopeStyle::kInterleaved
                                                                              : RopeStyle::kHalf;
    } else if (is("gelu_tanh")) {
      out.gelu_tanh = a.i != 0;
    } else if (is("cast_to")) {
      auto d = DTypeFromName(a.s != nullptr ? a.s : "");
      if (!d) return InvalidArgument("attribute cast_to: unknown dtype '{}'", a.s != nullptr ? a.s : "");
      out.cast_to = *d;
    } else if (a.kind == KILN_ATTR_INT) {
      named->SetInt(a.key, a.i);
    } else if (a.kind == KILN_ATTR_FLOAT) {
      named->SetFloat(a.key, a.f);
    } else if (a.kind == KILN_ATTR_STRING) {
      named->SetString(a.key, a.s != nullptr ? a.s : "");
    } else if (a.kind == KILN_ATTR_INTS) {
      if (a.num_ints > 0 && a.ints == nullptr) return InvalidArgument("attribute {} has no ints", a.key);
      named->SetInts(a.key, std::vector<int64_t>(a.ints, a.ints + a.num_ints));
    } else if (a.kind == KILN_ATTR_FLOATS) {
      if (a.num_floats > 0 && a.floats == nullptr) return InvalidArgument("attribute {} has no floats", a.key);
      named->SetFloats(a.key, std::vector<double>(a.floats, a.floats + a.num_floats));
    }  // a kind this build does not know (a newer kiln's) is skipped
  }
  return Status::Ok();
}

}  // namespace kiln
