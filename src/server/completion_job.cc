// Submitting an API request's choices and following them to the end.
#include "server/completion_job.h"

#include <fmt/format.h>

#include "server/engine_loop.h"
#include "server/metrics.h"
#include "server/waiting_limit.h"

namespace kiln::server {

CompletionJob::CompletionJob(EngineLoop& loop, std::shared_ptr<ChoiceEvents> events)
    : loop_(loop), events_(std::move(events)) {}

Expected<std::unique_ptr<CompletionJob>> CompletionJob::Start(EngineLoop& loop,
                                                              std::vector<GenerationRequest> requests,
                                                              ServerMetrics& metrics, WaitingLimit& waiting) {
  auto job = std::unique_ptr<CompletionJob>(new CompletionJob(loop, std::make_shared<ChoiceEvents>()));
  for (size_t i = 0; i < requests.size(); ++i) {
    GenerationRequest& request = requests[i];
    const bool with_logprobs = request.params.logprobs || request.params.top_logprobs > 0;
    // Runs on the engine thread: copies what the HTTP thread needs and
    // keeps no reference to the job, which may be gone by then.
    request.on_token = [events = job->events_, &metrics, &waiting, choice = static_cast<int>(i), with_logprobs,
                        started = false](const TokenEvent& event) mutable {
      if (!started) {
        started = true;
        waiting.Release();
      }
      ChoiceEvent e;
      e.choice = choice;
      e.token = event.token;
      e.text = event.text;
      if (with_logprobs && event.token >= 0) {
        e.logprob = event.logprob;
        e.top_logprobs = event.top_logprobs;
      }
      e.finished = event.finished;
      if (event.finished && event.stats != nullptr) {
        e.stats = *event.stats;
        metrics.RecordFinished(e.stats);
      }
      events->Push(std::move(e));
    };
    Expected<RequestId> id = loop.Add(std::move(request));
    if (!id.ok()) {
      waiting.Release(static_cast<int>(requests.size() - i));  // this one and those never submitted
      job->Abort();
      std::string where = requests.size() > 1 ? fmt::format("choice {}: ", i) : "";
      return Status(id.status().code(), where + id.status().message());
    }
    job->ids_.push_back(*id);
    job->finished_.push_back(false);
  }
  return job;
}

CompletionJob::~CompletionJob() { Abort(); }

std::vector<ChoiceEvent> CompletionJob::Wait(std::chrono::milliseconds timeout) {
  if (done()) return {};
  std::vector<ChoiceEvent> events = events_->Take(timeout);
  for (const ChoiceEvent& e : events) {
    if (e.finished && !finished_[static_cast<size_t>(e.choice)]) {
      finished_[static_cast<size_t>(e.choice)] = true;
      num_finished_ += 1;
    }
  }
  return events;
}

void CompletionJob::Abort() {
  if (aborted_) return;
  aborted_ = true;
  for (size_t i = 0; i < ids_.size(); ++i) {
    if (!finished_[i]) loop_.Abort(ids_[i]);
  }
}

}  // namespace kiln::server
