// Runs an LLMEngine for callers on many threads: each adds requests and
// waits for its own, and whichever waiter finds the engine idle runs its
// steps, so that requests from all threads share the same batches.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "core/status.h"
#include "engine/llm_engine.h"

namespace kiln::capi {

// Sees each event of a request; returns true to abort it.
using StreamFn = std::function<bool(const TokenEvent&)>;

class EngineDriver {
 public:
  explicit EngineDriver(std::unique_ptr<LLMEngine> engine);
  ~EngineDriver();
  EngineDriver(const EngineDriver&) = delete;
  EngineDriver& operator=(const EngineDriver&) = delete;

  // Queues a request (checked as LLMEngine::AddRequest checks it) and
  // returns its id; `stream`, when set, sees its events on the stepping
  // thread. The result is kept until Wait collects it. Thread-safe.
  Expected<RequestId> Add(GenerationRequest request, StreamFn stream);

  // Steps the engine (or lets another waiter do so) until request `id` has
  // finished, then returns its result and forgets it. An aborted request
  // is a result with reason abort; one the engine failed to run is the
  // error of the failed step. NotFound for an id not added or already
  // collected; InvalidArgument when called from a stream callback of this
  // engine (it would wait for itself). Thread-safe.
  Expected<GenerationResult> Wait(RequestId id);

  // Ends request `id` at the next step. Ok for a finished request not yet
  // collected (nothing to do); NotFound for an unknown or collected one.
  // Thread-safe.
  Status Abort(RequestId id);

  const LLMEngine& engine() const { return *engine_; }

 private:
  struct Pending;

  // One LLMEngine::Step() with exceptions turned into a Status.
  // REQUIRES: this thread holds the stepping role.
  Status StepOnce();

  std::unique_ptr<LLMEngine> engine_;
  std::mutex mu_;
  std::condition_variable step_done_;
  bool stepping_ = false;  // some thread is inside StepOnce()
  std::unordered_map<RequestId, std::shared_ptr<Pending>> pending_;
  int64_t failed_requests_ = 0;  // requests that ended with reason error
};

}  // namespace kiln::capi
