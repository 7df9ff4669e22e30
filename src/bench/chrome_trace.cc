// Writing the recorded events in the trace event format.
#include "bench/chrome_trace.h"

#include <algorithm>
#include <limits>
#include <map>

#include <fmt/format.h>

#include "bench/output.h"

namespace kiln::bench {

nlohmann::json ChromeTrace(const std::vector<ProfileEvent>& events,
                           const std::vector<std::pair<uint32_t, std::string>>& track_names) {
  int64_t origin = std::numeric_limits<int64_t>::max();
  for (const ProfileEvent& e : events) origin = std::min(origin, e.start_ns);
  auto micros = [](int64_t ns) { return static_cast<double>(ns) / 1e3; };
  nlohmann::json list = nlohmann::json::array();
  std::map<uint32_t, std::string> names;
  // A thread's track is named for the steps it ran, if any.
  for (const ProfileEvent& e : events) {
    if (e.track >= kRequestTrackBase) continue;
    if (std::string_view(e.category) == "step") {
      names[e.track] = "engine";
    } else {
      names.emplace(e.track, fmt::format("thread {}", e.track));
    }
  }
  for (const auto& [track, name] : track_names) names[track] = name;
  for (const auto& [track, name] : names) {
    list.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", 1}, {"tid", track}, {"args", {{"name", name}}}});
  }
  for (const ProfileEvent& e : events) {
    nlohmann::json j;
    j["name"] = e.Name();
    j["cat"] = e.category;
    j["pid"] = 1;
    j["tid"] = e.track;
    j["ts"] = micros(e.start_ns - origin);
    if (e.kind == ProfileEvent::Kind::kCounter) {
      j["ph"] = "C";
      nlohmann::json args = nlohmann::json::object();
      for (const auto& [series, value] : e.values) args[series] = value;
      j["args"] = std::move(args);
    } else {
      j["ph"] = "X";
      j["dur"] = micros(e.duration_ns);
      nlohmann::json args = nlohmann::json::object();
      if (e.phase != ProfilePhase::kNone) args["phase"] = ProfilePhaseName(e.phase);
      if (e.kernel != nullptr) {
        args["op"] = e.kernel->op;
        args["shapes"] = e.kernel->Shapes(e.env);
        args["dtype"] = e.kernel->dtype;
        args["backend"] = e.kernel->backend;
        args["bytes"] = e.bytes;
        args["flops"] = e.flops;
      }
      j["args"] = std::move(args);
    }
    list.push_back(std::move(j));
  }
  return {{"traceEvents", std::move(list)}, {"displayTimeUnit", "ms"}};
}

Status WriteChromeTrace(const std::string& path) {
  return WriteTextFile(path, ChromeTrace(ProfileEvents(), ProfileTrackNames()).dump() + "\n");
}

}  // namespace kiln::bench
