// The C API's sessions: forward passes over a caller-driven KV cache.
#include <span>

#include "capi/c_boundary.h"
#include "capi/handles.h"
#include "capi/option_conversion.h"
#include "kiln/kiln.h"

using kiln::Expected;
using kiln::InvalidArgument;
using kiln::Status;
using kiln::capi::Guard;

namespace {

Expected<kiln::capi::ForwardSession*> SessionOf(const kiln_session* session) {
  if (session == nullptr) return InvalidArgument("session is NULL");
  return session->session.get();
}

Expected<kiln::capi::LogitsMode> ToLogitsMode(int mode) {
  switch (mode) {
    case KILN_LOGITS_LAST: return kiln::capi::LogitsMode::kLast;
    case KILN_LOGITS_ALL: return kiln::capi::LogitsMode::kAll;
    case KILN_LOGITS_NONE: return kiln::capi::LogitsMode::kNone;
  }
  return InvalidArgument("mode {}: expected KILN_LOGITS_LAST, KILN_LOGITS_ALL or KILN_LOGITS_NONE",
                         mode);
}

}  // namespace

extern "C" {

void kiln_session_options_init(kiln_session_options* options, size_t struct_size) {
  kiln::capi::WriteOptions(options, struct_size, kiln::capi::DefaultCSessionOptions());
}

kiln_status kiln_session_create(const kiln_model* model, int32_t max_seqs, int32_t max_tokens_per_seq,
                                const kiln_session_options* options, kiln_session** session) {
  return Guard("kiln_session_create", [&]() -> Status {
    if (model == nullptr) return InvalidArgument("model is NULL");
    if (session == nullptr) return InvalidArgument("session (the output) is NULL");
    KILN_ASSIGN_OR_RETURN(kiln::ModelSessionOptions o,
                          kiln::capi::FromCSessionOptions(max_seqs, max_tokens_per_seq, options));
    KILN_ASSIGN_OR_RETURN(std::unique_ptr<kiln::capi::ForwardSession> forward,
                          kiln::capi::ForwardSession::Create(model->model, o));
    auto handle = std::make_unique<kiln_session>();
    handle->session = std::move(forward);
    *session = handle.release();
    return Status::Ok();
  });
}

void kiln_session_destroy(kiln_session* session) {
  delete session;
}

kiln_status kiln_session_run(kiln_session* session, const int32_t* token_ids, const int32_t* positions,
                             const int32_t* seq_ids, size_t num_tokens, kiln_logits_mode mode, float* logits,
                             size_t logits_capacity, size_t* num_rows) {
  return Guard("kiln_session_run", [&]() -> Status {
    KILN_ASSIGN_OR_RETURN(kiln::capi::ForwardSession * forward, SessionOf(session));
    if (token_ids == nullptr) return InvalidArgument("token_ids is NULL");
    kiln::capi::SessionBatch batch;
    batch.token_ids = std::span<const int32_t>(token_ids, num_tokens);
    batch.positions = positions;
    batch.seq_ids = seq_ids;
    KILN_ASSIGN_OR_RETURN(batch.mode, ToLogitsMode(kiln::capi::RawEnum(mode)));
    KILN_ASSIGN_OR_RETURN(int64_t rows, forward->Run(batch, logits, logits_capacity));
    if (num_rows != nullptr) *num_rows = static_cast<size_t>(rows);
    return Status::Ok();
  });
}

kiln_status kiln_session_reset(kiln_session* session, int32_t seq_id) {
  return Guard("kiln_session_reset", [&]() -> Status {
    KILN_ASSIGN_OR_RETURN(kiln::capi::ForwardSession * forward, SessionOf(session));
    return forward->Reset(seq_id);
  });
}

kiln_status kiln_session_truncate(kiln_session* session, int32_t seq_id, int32_t length) {
  return Guard("kiln_session_truncate", [&]() -> Status {
    KILN_ASSIGN_OR_RETURN(kiln::capi::ForwardSession * forward, SessionOf(session));
    return forward->Truncate(seq_id, length);
  });
}

kiln_status kiln_session_seq_length(const kiln_session* session, int32_t seq_id, int32_t* length) {
  return Guard("kiln_session_seq_length", [&]() -> Status {
    KILN_ASSIGN_OR_RETURN(kiln::capi::ForwardSession * forward, SessionOf(session));
    if (length == nullptr) return InvalidArgument("length (the output) is NULL");
    KILN_ASSIGN_OR_RETURN(*length, forward->Length(seq_id));
    return Status::Ok();
  });
}

int32_t kiln_session_vocab_size(const kiln_session* session) {
  return session != nullptr ? session->session->vocab_size() : 0;
}

int32_t kiln_session_max_seqs(const kiln_session* session) {
  return session != nullptr ? session->session->max_seqs() : 0;
}

int32_t kiln_session_max_tokens_per_seq(const kiln_session* session) {
  return session != nullptr ? session->session->max_tokens_per_seq() : 0;
}

}  // extern "C"
