// The profiler's one list of events, behind a mutex: recording happens on
// the engine's thread and, under serve, on the HTTP threads too.
#include "compiler/profiler.h"

#include <chrono>
#include <mutex>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace kiln {
namespace {

// The events live in slots constructed when recording starts, so that
// recording writes into memory already touched (no page faults, no moves
// of the list while it is short of kInitialSlots).
constexpr size_t kInitialSlots = size_t{1} << 16;

struct Recording {
  std::mutex mu;
  std::vector<ProfileEvent> events;  // the first `used` are recorded
  size_t used = 0;
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

double KernelInfo::Linear::At(const ShapeEnv& env) const {
  return constant + per_row[0] * static_cast<double>(env.tokens) +
         per_row[1] * static_cast<double>(env.output_rows) + per_row[2] * static_cast<double>(env.context_rows) +
         per_row[3] * static_cast<double>(env.score_rows);
}

double KernelInfo::Bytes(const ShapeEnv& env, double kv_element_bytes) const {
  return bytes.At(env) + kv_elements_per_context_row * static_cast<double>(env.context_rows) * kv_element_bytes;
}

double KernelInfo::Flops(const ShapeEnv& env) const {
  if (flops_per_score_row > 0) return flops_per_score_row * static_cast<double>(env.score_rows);
  return flops.At(env);
}

void EnableProfiling(bool enabled) {
  Recording& r = TheRecording();
  std::lock_guard<std::mutex> lock(r.mu);
  if (enabled) {
    r.used = 0;
    r.track_names.clear();
    if (r.events.size() < kInitialSlots) r.events.resize(kInitialSlots);
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

namespace {

// The next free slot. REQUIRES: r.mu held.
ProfileEvent& NextSlot(Recording& r) {
  if (r.used == r.events.size()) r.events.resize(2 * r.events.size());
  return r.events[r.used++];
}

}  // namespace

void RecordProfileEvent(ProfileEvent event) {
  Recording& r = TheRecording();
  std::lock_guard<std::mutex> lock(r.mu);
  if (!ProfilingEnabled()) return;  // stopped since the caller looked
  NextSlot(r) = std::move(event);
}

void RecordKernelCall(const std::shared_ptr<const KernelInfo>& kernel, const ShapeEnv& env, double kv_element_bytes,
                      int64_t start_ns) {
  const int64_t end_ns = ProfileNow();
  const uint32_t track = ProfileTrack();
  Recording& r = TheRecording();
  std::lock_guard<std::mutex> lock(r.mu);
  if (!ProfilingEnabled()) return;
  ProfileEvent& e = NextSlot(r);
  e.kind = ProfileEvent::Kind::kSpan;
  e.name.clear();
  e.category = "kernel";
  e.start_ns = start_ns;
  e.duration_ns = end_ns - start_ns;
  e.track = track;
  e.phase = r.phase.load(std::memory_order_relaxed);
  e.kernel = kernel;
  e.env = env;
  e.kv_element_bytes = kv_element_bytes;
  e.values.clear();
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
  std::vector<ProfileEvent> events(r.events.begin(), r.events.begin() + static_cast<std::ptrdiff_t>(r.used));
  for (ProfileEvent& e : events) {
    if (e.kernel == nullptr) continue;
    e.bytes = e.kernel->Bytes(e.env, e.kv_element_bytes);
    e.flops = e.kernel->Flops(e.env);
  }
  return events;
}

std::vector<std::pair<uint32_t, std::string>> ProfileTrackNames() {
  Recording& r = TheRecording();
  std::lock_guard<std::mutex> lock(r.mu);
  return r.track_names;
}

}  // namespace kiln
