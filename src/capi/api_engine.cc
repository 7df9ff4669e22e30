// The C API's engines: requests, blocking and streamed generation, aborts.
#include <string>
#include <vector>

#include "capi/c_boundary.h"
#include "capi/handles.h"
#include "capi/option_conversion.h"
#include "engine/model_artifact.h"
#include "kiln/kiln.h"

using kiln::Expected;
using kiln::InvalidArgument;
using kiln::Status;
using kiln::capi::Guard;

namespace {

// A completion and the storage its pointers point into.
struct Completion : kiln_completion {
  std::string text_storage;
  std::vector<int32_t> token_storage;
  std::vector<int32_t> prompt_storage;
  std::vector<float> logprob_storage;
};

kiln_completion* NewCompletion(kiln::GenerationResult result) {
  auto c = std::make_unique<Completion>();
  c->text_storage = std::move(result.text);
  c->token_storage = std::move(result.output_ids);
  c->prompt_storage = std::move(result.prompt_ids);
  c->logprob_storage = std::move(result.logprobs);
  c->request_id = result.id;
  c->text = c->text_storage.c_str();
  c->text_len = c->text_storage.size();
  c->token_ids = c->token_storage.data();
  c->num_tokens = c->token_storage.size();
  c->prompt_token_ids = c->prompt_storage.data();
  c->num_prompt_tokens = c->prompt_storage.size();
  c->logprobs = c->logprob_storage.empty() ? nullptr : c->logprob_storage.data();
  c->finish_reason = kiln::capi::ToCFinishReason(result.stats.finish_reason);
  c->cached_tokens = result.stats.cached_tokens;
  c->time_to_first_token = result.stats.first_token_time >= 0 ? result.stats.ttft() : -1;
  c->time_per_output_token = result.stats.tpot();
  return c.release();
}

// A C callback as the driver's stream function.
kiln::capi::StreamFn ToStreamFn(kiln_token_callback on_token, void* user_data) {
  if (on_token == nullptr) return nullptr;
  return [on_token, user_data](const kiln::TokenEvent& event) {
    kiln_token_event e{};
    e.request_id = event.request_id;
    e.token = event.token;
    e.text = event.text.c_str();
    e.text_len = event.text.size();
    e.logprob = event.logprob;
    e.finished = event.finished ? 1 : 0;
    e.finish_reason = event.finished && event.stats != nullptr
                          ? kiln::capi::ToCFinishReason(event.stats->finish_reason)
                          : KILN_FINISH_NONE;
    return on_token(&e, user_data) != 0;
  };
}

Expected<kiln::capi::EngineDriver*> DriverOf(kiln_engine* engine) {
  if (engine == nullptr) return InvalidArgument("engine is NULL");
  return engine->driver.get();
}

Expected<int64_t> AddRequest(kiln_engine* engine, const kiln_request* given) {
  KILN_ASSIGN_OR_RETURN(kiln::capi::EngineDriver * driver, DriverOf(engine));
  if (given == nullptr) return InvalidArgument("request is NULL");
  KILN_ASSIGN_OR_RETURN(kiln_request c,
                        kiln::capi::ReadOptions(given, kiln::capi::DefaultCRequest(), "request"));
  KILN_ASSIGN_OR_RETURN(kiln::GenerationRequest request, kiln::capi::FromCRequest(c));
  return driver->Add(std::move(request), ToStreamFn(c.on_token, c.user_data));
}

// Adds a request and waits for it; the completion is optional.
Status Generate(kiln_engine* engine, const kiln_request& request, kiln_completion** completion) {
  KILN_ASSIGN_OR_RETURN(int64_t id, AddRequest(engine, &request));
  KILN_ASSIGN_OR_RETURN(kiln::GenerationResult result, engine->driver->Wait(id));
  if (completion != nullptr) *completion = NewCompletion(std::move(result));
  return Status::Ok();
}

}  // namespace

extern "C" {

void kiln_engine_options_init(kiln_engine_options* options, size_t struct_size) {
  kiln::capi::WriteOptions(options, struct_size, kiln::capi::DefaultCEngineOptions());
}

void kiln_sampling_params_init(kiln_sampling_params* params, size_t struct_size) {
  kiln::capi::WriteOptions(params, struct_size, kiln::capi::ToCSamplingParams(kiln::SamplingParams{}));
}

void kiln_request_init(kiln_request* request, size_t struct_size) {
  kiln::capi::WriteOptions(request, struct_size, kiln::capi::DefaultCRequest());
}

kiln_status kiln_engine_create(const kiln_model* model, const kiln_engine_options* options,
                               kiln_engine** engine) {
  return Guard("kiln_engine_create", [&]() -> Status {
    if (model == nullptr) return InvalidArgument("model is NULL");
    if (engine == nullptr) return InvalidArgument("engine (the output) is NULL");
    KILN_ASSIGN_OR_RETURN(kiln::EngineOptions o, kiln::capi::FromCEngineOptions(options));
    // Where the model came from, as the engine's own checks expect it.
    o.model = model->load_options.model;
    o.load_format = model->load_options.load_format;
    o.preset = model->load_options.preset;
    o.tokenizer = model->load_options.tokenizer;
    o.dummy_dtype = model->load_options.dummy_dtype;
    o.dummy_seed = model->load_options.dummy_seed;
    if (!model->artifact_metadata.is_null()) {
      // A compiled artifact runs with its compile options; one set otherwise is an error.
      KILN_RETURN_IF_ERROR(kiln::ApplyArtifactOptions(model->artifact_metadata, nullptr, &o));
    }
    KILN_ASSIGN_OR_RETURN(std::unique_ptr<kiln::LLMEngine> llm, kiln::LLMEngine::Create(model->model, o));
    auto handle = std::make_unique<kiln_engine>();
    handle->driver = std::make_unique<kiln::capi::EngineDriver>(std::move(llm));
    *engine = handle.release();
    return Status::Ok();
  });
}

void kiln_engine_destroy(kiln_engine* engine) {
  delete engine;
}

int32_t kiln_engine_max_model_len(const kiln_engine* engine) {
  return engine != nullptr ? static_cast<int32_t>(engine->driver->engine().max_model_len()) : 0;
}

const char* kiln_finish_reason_name(kiln_finish_reason reason) {
  switch (kiln::capi::RawEnum(reason)) {
    case KILN_FINISH_NONE: return "";
    case KILN_FINISH_STOP: return "stop";
    case KILN_FINISH_LENGTH: return "length";
    case KILN_FINISH_ABORT: return "abort";
    case KILN_FINISH_ERROR: return "error";
  }
  return "";
}

void kiln_completion_free(kiln_completion* completion) {
  delete static_cast<Completion*>(completion);
}

kiln_status kiln_engine_add_request(kiln_engine* engine, const kiln_request* request, int64_t* request_id) {
  return Guard("kiln_engine_add_request", [&]() -> Status {
    if (request_id == nullptr) return InvalidArgument("request_id (the output) is NULL");
    KILN_ASSIGN_OR_RETURN(*request_id, AddRequest(engine, request));
    return Status::Ok();
  });
}

kiln_status kiln_engine_wait(kiln_engine* engine, int64_t request_id, kiln_completion** completion) {
  return Guard("kiln_engine_wait", [&]() -> Status {
    KILN_ASSIGN_OR_RETURN(kiln::capi::EngineDriver * driver, DriverOf(engine));
    if (completion == nullptr) return InvalidArgument("completion (the output) is NULL");
    KILN_ASSIGN_OR_RETURN(kiln::GenerationResult result, driver->Wait(request_id));
    *completion = NewCompletion(std::move(result));
    return Status::Ok();
  });
}

kiln_status kiln_engine_abort(kiln_engine* engine, int64_t request_id) {
  return Guard("kiln_engine_abort", [&]() -> Status {
    KILN_ASSIGN_OR_RETURN(kiln::capi::EngineDriver * driver, DriverOf(engine));
    return driver->Abort(request_id);
  });
}

kiln_status kiln_generate(kiln_engine* engine, const char* prompt, const kiln_sampling_params* params,
                          kiln_completion** completion) {
  return Guard("kiln_generate", [&]() -> Status {
    if (prompt == nullptr) return InvalidArgument("prompt is NULL");
    if (completion == nullptr) return InvalidArgument("completion (the output) is NULL");
    kiln_request request = kiln::capi::DefaultCRequest();
    request.prompt = prompt;
    request.params = params;
    return Generate(engine, request, completion);
  });
}

kiln_status kiln_generate_stream(kiln_engine* engine, const char* prompt, const kiln_sampling_params* params,
                                 kiln_token_callback on_token, void* user_data,
                                 kiln_completion** completion) {
  return Guard("kiln_generate_stream", [&]() -> Status {
    if (prompt == nullptr) return InvalidArgument("prompt is NULL");
    if (on_token == nullptr) return InvalidArgument("on_token is NULL");
    kiln_request request = kiln::capi::DefaultCRequest();
    request.prompt = prompt;
    request.params = params;
    request.on_token = on_token;
    request.user_data = user_data;
    return Generate(engine, request, completion);
  });
}

}  // extern "C"
