// The functions every template can call: jinja2's globals (range, dict,
// namespace, joiner) under its sandbox's limits, and the two that
// Hugging Face adds for chat templates (raise_exception, strftime_now).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "jinja/value.h"

namespace kiln::jinja {

// The global functions, by name.
std::vector<std::pair<std::string, Value>> GlobalFunctions();

// jinja2's sandbox refuses range() objects longer than this.
inline constexpr int64_t kMaxRange = 100000;

}  // namespace kiln::jinja
