// The engine thread: step while there is work, sleep when there is none.
#include "server/engine_loop.h"

#include <vector>

#include "compiler/profiler.h"
#include "core/log.h"

namespace kiln::server {
namespace {

// Failed steps in a row after which every request is aborted: a fault that
// repeats would otherwise fail the same requests forever.
constexpr int kMaxConsecutiveFailures = 3;

}  // namespace

EngineLoop::EngineLoop(LLMEngine& engine) : engine_(engine) {
  thread_ = std::thread([this] { Run(); });
}

EngineLoop::~EngineLoop() { Stop(); }

Expected<RequestId> EngineLoop::Add(GenerationRequest request) {
  TokenCallback user = std::move(request.on_token);
  request.on_token = [this, user = std::move(user)](const TokenEvent& event) {
    if (event.finished) {  // first, so that whoever the callback wakes sees it gone
      std::lock_guard<std::mutex> lock(in_flight_mu_);
      in_flight_.erase(event.request_id);
    }
    if (user) user(event);
  };
  Expected<RequestId> id = [&]() -> Expected<RequestId> {
    std::lock_guard<std::mutex> lock(in_flight_mu_);
    KILN_ASSIGN_OR_RETURN(RequestId added, engine_.AddRequest(std::move(request)));
    in_flight_.insert(added);
    return added;
  }();
  if (id.ok()) {
    // Taking the lock orders this wake-up after the engine thread's check
    // for work, so it cannot be lost between the check and the wait.
    { std::lock_guard<std::mutex> lock(mu_); }
    work_.notify_one();
  }
  return id;
}

void EngineLoop::Abort(RequestId id) {
  engine_.Abort(id);
  { std::lock_guard<std::mutex> lock(mu_); }
  work_.notify_one();
}

void EngineLoop::AbortAll() {
  std::vector<RequestId> ids;
  {
    std::lock_guard<std::mutex> lock(in_flight_mu_);
    ids.assign(in_flight_.begin(), in_flight_.end());
  }
  for (RequestId id : ids) Abort(id);
}

int64_t EngineLoop::num_unfinished() const {
  std::lock_guard<std::mutex> lock(in_flight_mu_);
  return static_cast<int64_t>(in_flight_.size());
}

void EngineLoop::Stop() {
  if (!thread_.joinable()) return;
  AbortAll();
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  work_.notify_one();
  thread_.join();
}

void EngineLoop::Run() {
  int failures = 0;
  while (true) {
    {
      ProfileScope waiting("wait for requests", "engine");
      std::unique_lock<std::mutex> lock(mu_);
      work_.wait(lock, [this] { return stopping_ || engine_.HasUnfinishedRequests(); });
      // When stopping, the aborted requests still get their final step.
      if (stopping_ && !engine_.HasUnfinishedRequests()) return;
    }
    Status status = engine_.Step();
    if (status.ok()) {
      failures = 0;
      continue;
    }
    KILN_LOG_ERROR("engine: {}", status.ToString());
    if (++failures >= kMaxConsecutiveFailures) {
      KILN_LOG_ERROR("engine: {} failed steps in a row; aborting every request", failures);
      AbortAll();
      failures = 0;
    }
  }
}

}  // namespace kiln::server
