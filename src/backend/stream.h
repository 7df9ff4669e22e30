// What every device runtime orders work with. A stream runs the work
// enqueued on it in order, asynchronously to the host (an accelerator's
// queue) or inline on the caller's thread (the CPU). An event marks a point
// in a stream: another stream (or the host) waits on it before going on.
// Streams are created once per backend, per process, and shared by every
// model and request.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>

#include "core/status.h"

namespace kiln {

// A point in some stream's work. Record()ed by a stream, waited on by the
// host or by another stream. Reusable: each Record() re-arms it.
class Event {
 public:
  virtual ~Event() = default;
  // Blocks the calling thread until the recorded point has run.
  virtual void HostWait() = 0;
};

class Stream {
 public:
  virtual ~Stream() = default;

  // True when work runs on the enqueuing thread before Enqueue returns.
  virtual bool is_inline() const = 0;
  // Runs `work` after everything enqueued before it.
  virtual void Enqueue(std::function<void()> work) = 0;
  // Blocks until everything enqueued so far has run.
  virtual void Synchronize() = 0;
  // Arms `event` to complete once the work enqueued so far has run.
  // REQUIRES: `event` came from the same backend as this stream.
  virtual void Record(Event& event) = 0;
  // Work enqueued after this call starts only once `event` has completed.
  // `event` may come from any backend.
  virtual void Wait(Event& event) = 0;
  // The first error of the work run since the last call (a device runtime
  // reports failures at synchronization); call after Synchronize.
  virtual Status TakeError() { return Status::Ok(); }
};

// An event completed by a host thread (Signal), waited on with a condition
// variable. Generations let one event be re-armed every pass.
class HostEvent : public Event {
 public:
  // Arms the event: HostWait blocks until Signal of the returned
  // generation (or a later one).
  uint64_t Arm();
  void Signal(uint64_t generation);
  void HostWait() override;

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t armed_ = 0;
  uint64_t signalled_ = 0;
};

// The CPU's stream: work runs inline, so an event recorded on it is
// complete at once and waiting on another backend's event blocks the host.
class InlineStream : public Stream {
 public:
  bool is_inline() const override { return true; }
  void Enqueue(std::function<void()> work) override { work(); }
  void Synchronize() override {}
  void Record(Event& event) override;
  void Wait(Event& event) override { event.HostWait(); }
};

// The host's stream, shared by the CPU backend.
InlineStream& HostStream();

}  // namespace kiln
