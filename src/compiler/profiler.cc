// The profiler's one list of events, behind a mutex: recording happens on
// the engine's thread and, under serve, on the HTTP threads too.
#include "compiler/profiler.h"

#include <chrono>
#include <mutex>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace kiln {
namespace {

struct Recording {
  std::mutex mu;
  std::vector<ProfileEvent> events;
  std::vector<std::pair<uint32_t, std::string>> track_names;
  std::atomic<ProfilePhase> phase{ProfilePhase::kNone};
  std::atomic<uint32_t> next_track{0};
};

Recording& TheRecording() {
  static Recording* r = new Recording;  // never destroyed: threads may record at exit
  return *r;
}

}  // namespace

const char* ProfilePhaseName(ProfilePhase phase) {
  switch (phase) {
    case ProfilePhase::kPrefill:
      return "prefill";
    case ProfilePhase::kDecode:
      return "decode";
    case ProfilePhase::kNone:
      break;
  }
  return "run";
}

std::string KernelInfo::Shapes(const ShapeEnv& env) const {
  std::string s;
  for (const Output& o : outputs) {
    if (!s.empty()) s += ' ';
    if (o.rows == RowSpace::kFixed) {
      s += fmt::format("[{}]", fmt::join(o.dims, ","));
    } else {
      s += fmt::format("[{},{}]", env.Rows(o.rows), o.cols);
    }
  }
  return s;
}

void EnableProfiling(bool enabled) {
  Recording& r = TheRecording();
  std::lock_guard<std::mutex> lock(r.mu);
  if (enabled) {
    r.events.clear();
    r.track_names.clear();
    r.events.reserve(1 << 16);
  }
  profiler_internal::g_enabled.store(enabled);
}

int64_t ProfileNow() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

uint32_t ProfileTrack() {
  thread_local const uint32_t track = TheRecording().next_track.fetch_add(1);
  return track;
}

void SetProfilePhase(ProfilePhase phase) { TheRecording().phase.store(phase, std::memory_order_relaxed); }

ProfilePhase CurrentProfilePhase() { return TheRecording().phase.load(std::memory_order_relaxed); }

void RecordProfileEvent(ProfileEvent event) {
  Recording& r = TheRecording();
  std::lock_guard<std::mutex> lock(r.mu);
  if (!ProfilingEnabled()) return;  // stopped since the caller looked
  r.events.push_back(std::move(event));
}

void RecordProfileSpan(std::string name, const char* category, int64_t start_ns) {
  ProfileEvent e;
  e.name = std::move(name);
  e.category = category;
  e.start_ns = start_ns;
  e.duration_ns = ProfileNow() - start_ns;
  e.track = ProfileTrack();
  e.phase = CurrentProfilePhase();
  RecordProfileEvent(std::move(e));
}

void RecordProfileCounter(std::string name, std::vector<std::pair<std::string, double>> values) {
  ProfileEvent e;
  e.kind = ProfileEvent::Kind::kCounter;
  e.name = std::move(name);
  e.category = "counter";
  e.start_ns = ProfileNow();
  e.track = ProfileTrack();
  e.phase = CurrentProfilePhase();
  e.values = std::move(values);
  RecordProfileEvent(std::move(e));
}

void NameProfileTrack(uint32_t track, std::string name) {
  Recording& r = TheRecording();
  std::lock_guard<std::mutex> lock(r.mu);
  r.track_names.emplace_back(track, std::move(name));
}

std::vector<ProfileEvent> ProfileEvents() {
  Recording& r = TheRecording();
  std::lock_guard<std::mutex> lock(r.mu);
  return r.events;
}

std::vector<std::pair<uint32_t, std::string>> ProfileTrackNames() {
  Recording& r = TheRecording();
  std::lock_guard<std::mutex> lock(r.mu);
  return r.track_names;
}

}  // namespace kiln
