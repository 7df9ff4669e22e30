// The per-request event queue between the engine thread and an HTTP thread.
#include "server/choice_events.h"

namespace kiln::server {

void ChoiceEvents::Push(ChoiceEvent event) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(event));
  }
  ready_.notify_one();
}

std::vector<ChoiceEvent> ChoiceEvents::Take(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  ready_.wait_for(lock, timeout, [this] { return !queue_.empty(); });
  std::vector<ChoiceEvent> events;
  events.swap(queue_);
  return events;
}

}  // namespace kiln::server
