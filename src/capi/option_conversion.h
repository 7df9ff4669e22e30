// The C API's options structs to and from kiln's own option types. Errors
// name the struct field at fault ("params.stop[2] is NULL").
#pragma once

#include "capi/forward_session.h"
#include "core/status.h"
#include "engine/engine_options.h"
#include "engine/model_session_options.h"
#include "engine/request.h"
#include "engine/sampling_params.h"
#include "kiln/kiln.h"

namespace kiln::capi {

// The defaults the kiln_*_init functions hand out.
kiln_model_options DefaultCModelOptions();
kiln_engine_options DefaultCEngineOptions();
kiln_session_options DefaultCSessionOptions();
kiln_request DefaultCRequest();

// `params` as the C struct. The stop strings and ids are not carried over
// (the struct cannot own them).
kiln_sampling_params ToCSamplingParams(const SamplingParams& params);

// The sampling parameters of a C struct (NULL: the defaults), checked.
Expected<SamplingParams> FromCSamplingParams(const kiln_sampling_params* params);

// Model loading options: the path plus the C struct (NULL: the defaults).
Expected<EngineOptions> FromCModelOptions(const char* path, const kiln_model_options* options);

// Engine options of a C struct (NULL: the defaults), checked.
Expected<EngineOptions> FromCEngineOptions(const kiln_engine_options* options);

// Session options of a C struct (NULL: the defaults); max_tokens_per_seq
// becomes kv_tokens_per_seq (0: the model's context).
Expected<ModelSessionOptions> FromCSessionOptions(int32_t max_seqs, int32_t max_tokens_per_seq,
                                                  const kiln_session_options* options);

// The engine request of a C request (NULL params: the defaults).
Expected<GenerationRequest> FromCRequest(const kiln_request& request);

kiln_finish_reason ToCFinishReason(FinishReason reason);

}  // namespace kiln::capi
