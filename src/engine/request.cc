// Names of finish reasons and the statistics derived from a request's times.
#include "engine/request.h"

namespace kiln {

const char* FinishReasonName(FinishReason reason) {
  switch (reason) {
    case FinishReason::kNone: return "";
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kAbort: return "abort";
    case FinishReason::kError: return "error";
  }
  return "";
}

double RequestStats::queue_time() const {
  return first_scheduled_time >= 0 ? first_scheduled_time - arrival_time : 0;
}

double RequestStats::ttft() const {
  return first_token_time >= 0 ? first_token_time - arrival_time : 0;
}

double RequestStats::tpot() const {
  if (completion_tokens < 2 || first_token_time < 0 || last_token_time < 0) return 0;
  return (last_token_time - first_token_time) / (completion_tokens - 1);
}

}  // namespace kiln
