// The engine requests behind one API request (n choices of each prompt),
// from submission to their last events: it submits them, passes their
// events to the HTTP thread, gives back their waiting places as they
// start, records their metrics as they finish, and aborts whatever is
// unfinished when the client leaves or the job is dropped.
#pragma once

#include <chrono>
#include <memory>
#include <vector>

#include "core/status.h"
#include "engine/request.h"
#include "server/choice_events.h"

namespace kiln::server {

class EngineLoop;
class ServerMetrics;
class WaitingLimit;

class CompletionJob {
 public:
  // Submits `requests` (choice i is requests[i]). The caller has taken one
  // place in `waiting` per request; each is given back when its request
  // first reports (or, refused, at once). When a request is refused, those
  // already submitted are aborted and the refusal is returned, its message
  // naming the choice. REQUIRES: `loop`, `metrics` and `waiting` outlive
  // the engine's last callback for these requests.
  static Expected<std::unique_ptr<CompletionJob>> Start(EngineLoop& loop, std::vector<GenerationRequest> requests,
                                                        ServerMetrics& metrics, WaitingLimit& waiting);

  // Abort().
  ~CompletionJob();
  CompletionJob(const CompletionJob&) = delete;
  CompletionJob& operator=(const CompletionJob&) = delete;

  // The events that came since the last call, waiting up to `timeout` for
  // one. Empty once done().
  std::vector<ChoiceEvent> Wait(std::chrono::milliseconds timeout);

  // True once every choice's final event has been returned by Wait().
  bool done() const { return num_finished_ == ids_.size(); }

  // Ends every unfinished choice. Their final events (reason abort) may
  // still arrive. Idempotent.
  void Abort();

  size_t num_choices() const { return ids_.size(); }

 private:
  CompletionJob(EngineLoop& loop, std::shared_ptr<ChoiceEvents> events);

  EngineLoop& loop_;
  std::shared_ptr<ChoiceEvents> events_;  // shared with the engine's callbacks
  std::vector<RequestId> ids_;
  std::vector<bool> finished_;
  size_t num_finished_ = 0;
  bool aborted_ = false;
};

}  // namespace kiln::server
