// A frame of template variables. Lookups walk outwards to the parent, so a
// loop body sees the variables around it while its own assignments stay
// inside it, as jinja2 scopes them.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "jinja/value.h"

namespace kiln::jinja {

class Scope {
 public:
  explicit Scope(std::shared_ptr<Scope> parent = nullptr) : parent_(std::move(parent)) {}

  // The innermost value called `name`, or nullptr.
  const Value* Lookup(std::string_view name) const {
    for (const Scope* s = this; s; s = s->parent_.get()) {
      for (const auto& [key, value] : s->vars_) {
        if (key == name) return &value;
      }
    }
    return nullptr;
  }

  // Sets `name` in this frame, shadowing any outer one.
  void Set(std::string_view name, Value value) {
    for (auto& [key, old] : vars_) {
      if (key == name) {
        old = std::move(value);
        return;
      }
    }
    vars_.emplace_back(std::string(name), std::move(value));
  }

  // Drops this frame's variables (used to break reference cycles).
  void Clear() { vars_.clear(); }

 private:
  std::shared_ptr<Scope> parent_;
  std::vector<std::pair<std::string, Value>> vars_;
};

}  // namespace kiln::jinja
