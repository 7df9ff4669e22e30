// Nesting spans by their times, and adding up each phase's steps.
#include "bench/profile_summary.h"

#include <algorithm>
#include <map>
#include <numeric>

namespace kiln::bench {
namespace {

bool IsSpan(const ProfileEvent& e) { return e.kind == ProfileEvent::Kind::kSpan; }

// The rows of `by_name`, the most time first.
std::vector<ProfileRow> Sorted(std::map<std::string, ProfileRow> by_name) {
  std::vector<ProfileRow> rows;
  for (auto& [name, row] : by_name) rows.push_back(std::move(row));
  std::stable_sort(rows.begin(), rows.end(), [](const ProfileRow& a, const ProfileRow& b) { return a.seconds > b.seconds; });
  return rows;
}

void Add(std::map<std::string, ProfileRow>& rows, const std::string& name, const ProfileEvent& e) {
  ProfileRow& r = rows[name];
  r.name = name;
  r.calls += 1;
  r.seconds += static_cast<double>(e.duration_ns) * 1e-9;
  r.bytes += e.bytes;
  r.flops += e.flops;
}

}  // namespace

Expected<std::vector<int32_t>> NestProfileEvents(const std::vector<ProfileEvent>& events) {
  std::vector<int32_t> parent(events.size(), -1);
  std::vector<int32_t> order;
  for (size_t i = 0; i < events.size(); ++i) {
    if (IsSpan(events[i])) order.push_back(static_cast<int32_t>(i));
  }
  // By track, then start, the longer (the outer) of two that start together first.
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    const ProfileEvent& x = events[static_cast<size_t>(a)];
    const ProfileEvent& y = events[static_cast<size_t>(b)];
    if (x.track != y.track) return x.track < y.track;
    if (x.start_ns != y.start_ns) return x.start_ns < y.start_ns;
    return x.duration_ns > y.duration_ns;
  });
  std::vector<int32_t> open;  // the spans holding the current one, innermost last
  uint32_t track = 0;
  for (int32_t i : order) {
    const ProfileEvent& e = events[static_cast<size_t>(i)];
    if (open.empty() || e.track != track) {
      open.clear();
      track = e.track;
    }
    while (!open.empty() && events[static_cast<size_t>(open.back())].end_ns() <= e.start_ns) open.pop_back();
    if (!open.empty()) {
      const ProfileEvent& outer = events[static_cast<size_t>(open.back())];
      if (e.end_ns() > outer.end_ns()) {
        return Internal("profile: '{}' ({} ns + {}) overlaps '{}' ({} ns + {}) without nesting in it", e.Name(),
                        e.start_ns, e.duration_ns, outer.Name(), outer.start_ns, outer.duration_ns);
      }
      parent[static_cast<size_t>(i)] = open.back();
    }
    open.push_back(i);
  }
  return parent;
}

double PhaseProfile::kernel_seconds() const {
  return std::accumulate(kernels.begin(), kernels.end(), 0.0,
                         [](double s, const ProfileRow& r) { return s + r.seconds; });
}

double PhaseProfile::other_seconds() const {
  return std::accumulate(other.begin(), other.end(), 0.0, [](double s, const ProfileRow& r) { return s + r.seconds; });
}

Expected<std::vector<PhaseProfile>> SummarizeProfile(const std::vector<ProfileEvent>& events) {
  KILN_ASSIGN_OR_RETURN(std::vector<int32_t> parent, NestProfileEvents(events));
  // Each span's step: the outermost "step" span holding it.
  std::vector<int32_t> step(events.size(), -1);
  for (size_t i = 0; i < events.size(); ++i) {
    for (int32_t p = static_cast<int32_t>(i); p >= 0; p = parent[static_cast<size_t>(p)]) {
      if (std::string_view(events[static_cast<size_t>(p)].category) == "step") step[i] = p;
    }
  }
  struct Tally {
    int64_t steps = 0;
    double step_seconds = 0;
    double children_seconds = 0;  // spans directly within steps
    double forward_seconds = 0, forward_children_seconds = 0;
    int64_t forwards = 0;
    std::map<std::string, ProfileRow> kernels, other;
  };
  std::map<ProfilePhase, Tally> tallies;
  for (size_t i = 0; i < events.size(); ++i) {
    const ProfileEvent& e = events[i];
    if (!IsSpan(e) || step[i] < 0) continue;
    const ProfileEvent& s = events[static_cast<size_t>(step[i])];
    Tally& t = tallies[s.phase];
    const double seconds = static_cast<double>(e.duration_ns) * 1e-9;
    if (step[i] == static_cast<int32_t>(i)) {
      t.steps += 1;
      t.step_seconds += seconds;
      continue;
    }
    const int32_t up = parent[i];
    const bool in_step = up == step[i];
    const bool in_forward = up >= 0 && std::string_view(events[static_cast<size_t>(up)].name) == "forward" &&
                            parent[static_cast<size_t>(up)] == step[i];
    // Kernels elsewhere (a draft model's) are part of the span they ran in.
    if (e.kernel != nullptr && in_forward) Add(t.kernels, e.kernel->op, e);
    if (in_step) {
      t.children_seconds += seconds;
      if (e.name == "forward") {
        t.forward_seconds += seconds;
        t.forwards += 1;
      } else {
        Add(t.other, e.Name(), e);
      }
    }
    if (in_forward) t.forward_children_seconds += seconds;
  }
  std::vector<PhaseProfile> out;
  for (ProfilePhase phase : {ProfilePhase::kPrefill, ProfilePhase::kDecode, ProfilePhase::kNone}) {
    auto it = tallies.find(phase);
    if (it == tallies.end() || it->second.steps == 0) continue;
    Tally& t = it->second;
    PhaseProfile p;
    p.phase = phase;
    p.name = ProfilePhaseName(phase);
    p.steps = t.steps;
    p.step_seconds = t.step_seconds;
    p.kernels = Sorted(std::move(t.kernels));
    p.other = Sorted(std::move(t.other));
    if (t.forwards > 0) {
      p.other.push_back({"forward, between kernels", t.forwards, t.forward_seconds - t.forward_children_seconds, 0, 0});
    }
    p.other.push_back({"step, between spans", t.steps, t.step_seconds - t.children_seconds, 0, 0});
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace kiln::bench
