// The hand-over from the engine thread to the HTTP thread serving one
// request: the engine's token callbacks queue events here, the HTTP thread
// takes them in batches and writes them out.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "engine/request.h"

namespace kiln::server {

// One sampled token of one choice, or the end of the choice.
struct ChoiceEvent {
  int choice = 0;
  int32_t token = -1;  // -1 when the event only reports the end
  std::string text;
  float logprob = 0;
  std::vector<TokenLogprob> top_logprobs;
  bool finished = false;
  RequestStats stats;  // final when finished
};

class ChoiceEvents {
 public:
  // Queues an event and wakes the waiting thread. Thread-safe.
  void Push(ChoiceEvent event);

  // Returns every queued event, in order, waiting up to `timeout` for the
  // first; empty when none came. Thread-safe.
  std::vector<ChoiceEvent> Take(std::chrono::milliseconds timeout);

 private:
  std::mutex mu_;
  std::condition_variable ready_;
  std::vector<ChoiceEvent> queue_;
};

}  // namespace kiln::server
