// The profile as a Chrome trace (the JSON object format chrome://tracing
// and Perfetto open): a complete ("X") event per span with times in
// microseconds from the first event, a counter ("C") event per counter
// sample, and the tracks' names as metadata ("M") events.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "compiler/profiler.h"
#include "core/status.h"

namespace kiln::bench {

// Kernels' args: op, shapes, dtype, backend, phase, bytes, flops; other
// spans': phase (those in steps).
nlohmann::json ChromeTrace(const std::vector<ProfileEvent>& events,
                           const std::vector<std::pair<uint32_t, std::string>>& track_names);

// What the profiler recorded, written to `path`.
Status WriteChromeTrace(const std::string& path);

}  // namespace kiln::bench
