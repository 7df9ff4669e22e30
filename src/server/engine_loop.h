// The one thread that runs the model: it steps the engine while any request
// is unfinished and sleeps on a condition variable otherwise, so every
// request is batched with the others and no HTTP thread ever runs a
// forward pass.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <unordered_set>

#include "core/status.h"
#include "engine/llm_engine.h"

namespace kiln::server {

class EngineLoop {
 public:
  // Starts the engine thread. REQUIRES: `engine` outlives this object and
  // no one else calls its Step().
  explicit EngineLoop(LLMEngine& engine);
  // Stop().
  ~EngineLoop();
  EngineLoop(const EngineLoop&) = delete;
  EngineLoop& operator=(const EngineLoop&) = delete;

  // Queues a request (see LLMEngine::AddRequest for its checks) and wakes
  // the engine thread. The request's callback runs on the engine thread.
  // Thread-safe.
  Expected<RequestId> Add(GenerationRequest request);

  // Ends a request at the next step. Thread-safe.
  void Abort(RequestId id);

  // Ends every request added and not yet finished. Thread-safe.
  void AbortAll();

  // Wakes the engine thread for work that is not a request: KV blocks that
  // landed from a prefill instance. Thread-safe.
  void Wake();

  // Requests added and not yet finished. Thread-safe.
  int64_t num_unfinished() const;

  // Aborts whatever is unfinished, lets the engine deliver those ends, and
  // joins the thread. Idempotent.
  void Stop();

  LLMEngine& engine() { return engine_; }
  const LLMEngine& engine() const { return engine_; }

 private:
  void Run();

  LLMEngine& engine_;
  mutable std::mutex mu_;
  std::condition_variable work_;
  bool stopping_ = false;
  bool woken_ = false;  // Wake() was called since the last step
  // Held while a request is added, so that its finishing callback (which
  // erases it) cannot run before it is recorded.
  mutable std::mutex in_flight_mu_;
  std::unordered_set<RequestId> in_flight_;
  std::thread thread_;
};

}  // namespace kiln::server
