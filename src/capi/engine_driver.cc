// The shared stepping loop behind kiln_engine_wait.
#include "capi/engine_driver.h"

#include <exception>
#include <new>

namespace kiln::capi {
namespace {

// The driver whose step this thread is running, to refuse a wait from
// inside a stream callback.
thread_local const EngineDriver* t_stepping = nullptr;

}  // namespace

// One request's result as it accumulates; guarded by the driver's mutex.
struct EngineDriver::Pending {
  GenerationResult result;
  bool want_logprobs = false;
  bool done = false;
  bool waited = false;  // a Wait() has claimed it
  Status error;         // why the engine could not run it
};

EngineDriver::EngineDriver(std::unique_ptr<LLMEngine> engine) : engine_(std::move(engine)) {}

EngineDriver::~EngineDriver() = default;

Expected<RequestId> EngineDriver::Add(GenerationRequest request, StreamFn stream) {
  auto pending = std::make_shared<Pending>();
  KILN_ASSIGN_OR_RETURN(pending->result.prompt_ids, engine_->PromptIds(request));
  request.prompt_ids = pending->result.prompt_ids;  // tokenized once
  pending->want_logprobs = request.params.logprobs || request.params.top_logprobs > 0;
  request.on_token = [this, pending, stream = std::move(stream)](const TokenEvent& event) {
    // The caller's code runs without the lock, so it may add or abort.
    const bool abort = stream && stream(event);
    if (abort && !event.finished) engine_->Abort(event.request_id);
    std::lock_guard<std::mutex> lock(mu_);
    GenerationResult& r = pending->result;
    if (event.token >= 0) {
      r.output_ids.push_back(event.token);
      if (pending->want_logprobs) r.logprobs.push_back(event.logprob);
    }
    r.text += event.text;
    if (event.finished) {
      r.stats = *event.stats;
      pending->done = true;
      if (r.stats.finish_reason == FinishReason::kError) ++failed_requests_;
    }
  };
  KILN_ASSIGN_OR_RETURN(RequestId id, engine_->AddRequest(std::move(request)));
  std::lock_guard<std::mutex> lock(mu_);
  pending->result.id = id;
  pending_.emplace(id, std::move(pending));
  return id;
}

Status EngineDriver::StepOnce() {
  const EngineDriver* outer = t_stepping;  // a callback of another engine may be stepping this one
  t_stepping = this;
  Status status;
  try {
    status = engine_->Step();
  } catch (const std::bad_alloc&) {
    status = ResourceExhausted("engine step: out of memory");
  } catch (const std::exception& e) {
    status = Internal("engine step: unexpected exception: {}", e.what());
  } catch (...) {
    status = Internal("engine step: unexpected exception");
  }
  t_stepping = outer;
  return status;
}

Expected<GenerationResult> EngineDriver::Wait(RequestId id) {
  if (t_stepping == this) {
    return InvalidArgument("request {}: waited for inside a callback of the same engine, which cannot return",
                           id);
  }
  std::unique_lock<std::mutex> lock(mu_);
  auto it = pending_.find(id);
  if (it == pending_.end()) return NotFound("request {}: unknown, or its result was already collected", id);
  std::shared_ptr<Pending> p = it->second;
  if (p->waited) return InvalidArgument("request {}: another thread is already waiting for it", id);
  p->waited = true;

  bool gave_up = false;
  while (!p->done && !gave_up) {
    if (stepping_) {
      step_done_.wait(lock);
      continue;
    }
    stepping_ = true;
    const int64_t failed_before = failed_requests_;
    lock.unlock();
    Status status = StepOnce();
    lock.lock();
    stepping_ = false;
    if (!status.ok()) {
      if (failed_requests_ > failed_before) {
        // A failed forward pass: the requests it ended carry its error.
        for (auto& [other_id, other] : pending_) {
          if (other->done && other->error.ok() && other->result.stats.finish_reason == FinishReason::kError) {
            other->error = status;
          }
        }
      } else if (p->error.ok()) {
        // The step failed without ending anything; rather than spin, end
        // this request at the next step (aborts are applied first).
        p->error = status;
        engine_->Abort(id);
      } else {
        gave_up = true;  // even the abort could not run
      }
    }
    step_done_.notify_all();
  }
  pending_.erase(id);
  if (!p->error.ok()) return p->error.WithContext(fmt::format("request {}", id));
  if (p->result.stats.finish_reason == FinishReason::kError) {
    return Internal("request {}: the engine failed while running it", id);
  }
  return std::move(p->result);
}

Status EngineDriver::Abort(RequestId id) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = pending_.find(id);
    if (it == pending_.end()) return NotFound("request {}: unknown, or its result was already collected", id);
    if (it->second->done) return Status::Ok();
  }
  engine_->Abort(id);
  return Status::Ok();
}

}  // namespace kiln::capi
