// A node's attributes as the plugin ABI carries them: a generic key/value
// list. Both directions live here, so that what kiln writes and what a
// plugin built from kiln's sources reads cannot drift apart.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"
#include "graph/graph.h"
#include "kiln/kiln_backend.h"

namespace kiln {

// Owns the strings the kiln_attr list points at.
class AttributeList {
 public:
  // The fixed fields, then every named attribute (pointing into `named`,
  // which must outlive the list). A tensor op's attributes are all named
  // (ONNX's): the fixed fields, whose keys ONNX also uses ("group"), are
  // left out.
  AttributeList(const NodeAttrs& attrs, const AttributeMap& named, bool tensor_op = false);
  AttributeList(const AttributeList&) = delete;
  AttributeList& operator=(const AttributeList&) = delete;

  const kiln_attr* data() const { return attrs_.data(); }
  uint32_t size() const { return static_cast<uint32_t>(attrs_.size()); }

 private:
  void Int(const char* key, int64_t v);
  void Float(const char* key, double v);
  void String(const char* key, const char* v);
  void Named(const std::string& key, const AttributeMap::Value& v);
  std::vector<kiln_attr> attrs_;
};

// The reverse: the fixed fields into `fixed`, every other key into `named`;
// for a tensor op, every key into `named`.
Status AttributesFromList(const kiln_attr* attrs, uint32_t n, NodeAttrs* fixed, AttributeMap* named,
                          bool tensor_op = false);

}  // namespace kiln
