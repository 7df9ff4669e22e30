// The engine thread: step while there is work, sleep when there is none.
#include "server/engine_loop.h"

#include <chrono>
#include <vector>

#include "compiler/profiler.h"
#include "core/log.h"
#include "engine/kv_connector.h"

namespace kiln::server {
namespace {

// Failed steps in a row after which every request is aborted: a fault that
// repeats would otherwise fail the same requests forever.
constexpr int kMaxConsecutiveFailures = 3;

}  // namespace

// How often an idle engine with KV transfers in flight steps anyway, to
// free the blocks of transfers past their time-out.
constexpr auto kKvTransferPoll = std::chrono::milliseconds(100);

EngineLoop::EngineLoop(LLMEngine& engine) : engine_(engine) {
  if (KvConnector* connector = engine_.kv_connector()) connector->SetLandedCallback([this] { Wake(); });
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

void EngineLoop::Wake() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    woken_ = true;
  }
  work_.notify_one();
}

int64_t EngineLoop::num_unfinished() const {
  std::lock_guard<std::mutex> lock(in_flight_mu_);
  return static_cast<int64_t>(in_flight_.size());
}

void EngineLoop::Stop() {
  if (!thread_.joinable()) return;
  if (KvConnector* connector = engine_.kv_connector()) connector->SetLandedCallback(nullptr);
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
      auto ready = [this] { return stopping_ || woken_ || engine_.HasUnfinishedRequests(); };
      if (engine_.HasOpenKvTransfers()) {
        work_.wait_for(lock, kKvTransferPoll, ready);
      } else {
        work_.wait(lock, ready);
      }
      woken_ = false;
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
