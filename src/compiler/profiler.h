// The profiler: off by default, it records timed spans (each kernel call
// of a Program, and the engine's steps and their parts) and counters into
// one process-wide list that the profile table and the Chrome trace are
// made from. Off, each place that would record costs one load and a branch.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "graph/graph.h"

namespace kiln {

// Which kind of engine step a span ran in: kNone outside steps (and in
// tensor-graph runs), kPrefill for a step with any prompt tokens, kDecode
// for one that only decodes.
enum class ProfilePhase : uint8_t { kNone, kPrefill, kDecode };
const char* ProfilePhaseName(ProfilePhase phase);

// What one Program step is, fixed at bind: the node, its op, where it runs
// and its outputs' geometry (rows are resolved per call from the ShapeEnv).
struct KernelInfo {
  std::string name;  // the node's name
  std::string op;    // OpName, or the tensor op's type
  std::string backend;
  std::string dtype;  // of the first output
  struct Output {
    RowSpace rows = RowSpace::kTokens;
    int64_t cols = 0;
    std::vector<int64_t> dims;  // kFixed: the tensor's shape
  };
  std::vector<Output> outputs;

  // Bytes moved and FLOPs computed as the compiler estimates them
  // (EstimateCost), which is linear in the rows of each row space: a
  // constant and a coefficient per row space, found at bind and applied
  // when the profile is read, so that recording a call costs little.
  struct Linear {
    double constant = 0;
    double per_row[4] = {};  // kTokens, kOutputRows, kContextRows, kScoreRows
    double At(const ShapeEnv& env) const;
  };
  Linear bytes, flops;
  // Attention instead: FLOPs per (query row, context row) pair of a
  // sequence (the score rows), and the K and V elements it reads from the
  // cache per context row.
  double flops_per_score_row = 0;
  double kv_elements_per_context_row = 0;

  // "[7,896]" per output, joined by ' ', with rows at `env`.
  std::string Shapes(const ShapeEnv& env) const;
  double Bytes(const ShapeEnv& env, double kv_element_bytes) const;
  double Flops(const ShapeEnv& env) const;
};

struct ProfileEvent {
  enum class Kind : uint8_t { kSpan, kCounter };
  Kind kind = Kind::kSpan;
  std::string name;  // empty for kernels: see Name()
  const char* category = "";  // a string literal: "kernel", "step", "engine", "request"
  // Recorded on the profile's clock (ProfileNow()); as ProfileEvents()
  // returns them, nanoseconds on the steady clock.
  int64_t start_ns = 0;
  int64_t duration_ns = 0;
  uint32_t track = 0;  // a thread, or a request's own track (kRequestTrackBase + id)
  ProfilePhase phase = ProfilePhase::kNone;
  // Kernels: what ran, at which rows (and the KV cache's element size),
  // and the bytes and FLOPs that took (filled in by ProfileEvents()).
  std::shared_ptr<const KernelInfo> kernel;
  ShapeEnv env;
  double kv_element_bytes = 0;
  double bytes = 0;
  double flops = 0;
  // Counters: name and value of each series.
  std::vector<std::pair<std::string, double>> values;

  const std::string& Name() const { return kernel != nullptr ? kernel->name : name; }
  int64_t end_ns() const { return start_ns + duration_ns; }
};

// Requests' spans are on tracks of their own, numbered from here.
inline constexpr uint32_t kRequestTrackBase = 1000000;

namespace profiler_internal {
inline std::atomic<bool> g_enabled{false};
}  // namespace profiler_internal

// True while recording; the one test on every recording path.
inline bool ProfilingEnabled() { return profiler_internal::g_enabled.load(std::memory_order_relaxed); }

// Starts (clearing what was recorded) or stops recording.
void EnableProfiling(bool enabled);

// Now on the profile's clock, the time events are recorded in: a counter
// that ProfileEvents() turns into nanoseconds on the steady clock.
int64_t ProfileNow();

// Times taken on the steady clock (in nanoseconds), in place, on the
// profile's clock, for spans whose ends were timed before; one call
// converts alike, so that equal times stay equal and order is kept.
void ProfileTimesOfSteadyClock(std::span<int64_t> times);

// This thread's track (threads are numbered in the order they first ask).
uint32_t ProfileTrack();

// The phase spans recorded from now on are in (the engine sets it per step).
void SetProfilePhase(ProfilePhase phase);
ProfilePhase CurrentProfilePhase();

// Adds one event (thread-safe). REQUIRES: ProfilingEnabled().
void RecordProfileEvent(ProfileEvent event);

// A kernel call from `start_ns` to now on this thread's track, written in
// place (the one recording on every kernel's path).
void RecordKernelCall(const std::shared_ptr<const KernelInfo>& kernel, const ShapeEnv& env, double kv_element_bytes,
                      int64_t start_ns);

// A span from `start_ns` to now on this thread's track.
void RecordProfileSpan(std::string name, const char* category, int64_t start_ns);

// A counter event now: each (series, value).
void RecordProfileCounter(std::string name, std::vector<std::pair<std::string, double>> values);

// Names for tracks other than threads' ("request 3"), for the trace.
void NameProfileTrack(uint32_t track, std::string name);

// Everything recorded so far, in order of recording, with times in
// steady-clock nanoseconds and kernels with their bytes and FLOPs; and the
// track names.
std::vector<ProfileEvent> ProfileEvents();
std::vector<std::pair<uint32_t, std::string>> ProfileTrackNames();

// A span from construction to destruction (or End()) on this thread's track, recorded
// only when profiling was on at construction.
class ProfileScope {
 public:
  ProfileScope(const char* name, const char* category)
      : name_(name), category_(category), start_ns_(ProfilingEnabled() ? ProfileNow() : -1) {}
  ~ProfileScope() { End(); }
  // Ends the span now rather than at destruction.
  void End() {
    if (start_ns_ >= 0) RecordProfileSpan(name_, category_, start_ns_);
    start_ns_ = -1;
  }
  ProfileScope(const ProfileScope&) = delete;
  ProfileScope& operator=(const ProfileScope&) = delete;

 private:
  const char* name_;
  const char* category_;
  int64_t start_ns_;
};

}  // namespace kiln
