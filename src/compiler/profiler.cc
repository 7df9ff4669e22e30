// The profiler's one list of events, behind a mutex: recording happens on
// the engine's thread and, under serve, on the HTTP threads too.
#include "compiler/profiler.h"

#include <chrono>
#include <cmath>
#include <mutex>

#if defined(__x86_64__)
#include <cpuid.h>
#include <x86intrin.h>
#endif

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace kiln {
namespace {

int64_t SteadyNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Times are read from the x86 time-stamp counter where it runs at a
// constant rate (a read takes a third of the steady clock's), and turned
// into steady-clock nanoseconds when the profile is read, by readings of
// both clocks where recording started and where it stopped.
bool InvariantTsc() {
#if defined(__x86_64__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid(0x80000007, &a, &b, &c, &d) != 0 && (d & (1u << 8)) != 0;
#else
  return false;
#endif
}

const bool g_tsc = InvariantTsc();

int64_t Ticks() {
#if defined(__x86_64__)
  if (g_tsc) return static_cast<int64_t>(__rdtsc());
#endif
  return SteadyNs();
}

// Simultaneous readings of both clocks.
struct ClockPair {
  int64_t ticks = 0;
  int64_t ns = 0;
  static ClockPair Now() { return {Ticks(), SteadyNs()}; }
};

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
  ClockPair started, stopped;  // stopped.ticks == 0 while recording
};

// The steady-clock nanoseconds of `ticks`. REQUIRES: r.mu held.
struct TickConverter {
  ClockPair from;
  double ns_per_tick = 1;

  explicit TickConverter(const Recording& r) : from(r.started) {
    if (!g_tsc) return;
    const ClockPair to = r.stopped.ticks != 0 ? r.stopped : ClockPair::Now();
    if (to.ticks > from.ticks) {
      ns_per_tick = static_cast<double>(to.ns - from.ns) / static_cast<double>(to.ticks - from.ticks);
    }
  }
  int64_t Ns(int64_t ticks) const {
    if (!g_tsc) return ticks;
    return from.ns + std::llround(static_cast<double>(ticks - from.ticks) * ns_per_tick);
  }
  int64_t Ticks(int64_t ns) const {
    if (!g_tsc) return ns;
    return from.ticks + std::llround(static_cast<double>(ns - from.ns) / ns_per_tick);
  }
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
    r.started = ClockPair::Now();
    r.stopped = ClockPair{};
  } else if (ProfilingEnabled() && g_tsc) {
    // A rate from readings a millisecond apart at least is good to 1e-4.
    while (SteadyNs() - r.started.ns < 1000000) {
    }
    r.stopped = ClockPair::Now();
  }
  profiler_internal::g_enabled.store(enabled);
}

int64_t ProfileNow() { return Ticks(); }

void ProfileTimesOfSteadyClock(std::span<int64_t> times) {
  Recording& r = TheRecording();
  std::lock_guard<std::mutex> lock(r.mu);
  const TickConverter clock(r);
  for (int64_t& t : times) t = clock.Ticks(t);
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
  const TickConverter clock(r);
  for (ProfileEvent& e : events) {
    const int64_t end = clock.Ns(e.end_ns());
    e.start_ns = clock.Ns(e.start_ns);
    e.duration_ns = end - e.start_ns;
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
