// The per-render state every part of the interpreter shares: the limits and
// how much of them is used, the clock strftime_now() reads, and the objects
// that must be cleared when the render ends to break reference cycles.
#pragma once

#include <cstdint>
#include <ctime>
#include <memory>
#include <vector>

#include "core/status.h"
#include "jinja/render_limits.h"
#include "jinja/value.h"

namespace kiln::jinja {

// Units charged for each value built in bulk (the pieces of a split, the
// characters of a string turned into a list), so that the step budget also
// bounds the memory such values take.
inline constexpr int64_t kValueCost = 32;

class Runtime {
 public:
  Runtime(const RenderLimits& limits, const std::tm& now) : limits_(limits), now_(now) {}
  // Clears every namespace made during the render, so that cycles through
  // them (`{% set ns.self = ns %}`) are freed.
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  const RenderLimits& limits() const { return limits_; }
  // The local time strftime_now() formats.
  const std::tm& now() const { return now_; }

  // Counts `units` of work. Fails once the render has used max_steps; every
  // later call fails too, so an exhausted budget surfaces at the next step.
  Status Charge(int64_t units = 1);
  // Counts one loop iteration against max_loop_iterations.
  Status CountIteration();
  // Fails when a string of `bytes` would exceed max_output_bytes.
  Status CheckStringSize(size_t bytes) const;
  // Enters a nested call (macro or recursive loop); fails beyond
  // max_call_depth. Every successful EnterCall is paired with LeaveCall.
  Status EnterCall();
  void LeaveCall() { --call_depth_; }

  // Records an error found where no Status can be returned (inside a
  // comparison, say); Charge reports it from then on.
  void Fail(Status status);
  // The first recorded failure, or ok.
  const Status& status() const { return failure_; }

  // Makes a fresh namespace. The runtime keeps every namespace alive until
  // it is destroyed and then clears them all, so a long chain of namespaces
  // is never freed recursively and cycles through them are broken.
  Expected<std::shared_ptr<Namespace>> NewNamespace();

 private:
  RenderLimits limits_;
  std::tm now_;
  int64_t steps_ = 0;
  int64_t iterations_ = 0;
  int call_depth_ = 0;
  Status failure_;
  std::vector<std::shared_ptr<Namespace>> namespaces_;
};

}  // namespace kiln::jinja
