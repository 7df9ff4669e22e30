// What the C API's opaque handles hold.
#pragma once

#include <memory>

#include <nlohmann/json.hpp>

#include "capi/engine_driver.h"
#include "capi/forward_session.h"
#include "engine/engine_options.h"
#include "engine/model_loader.h"

struct kiln_model {
  kiln::LoadedModel model;           // shared with the engines and sessions built from it
  kiln::EngineOptions load_options;  // how it was loaded, for the engines built from it
  // A compiled artifact's metadata (its "options"), which engines must agree with; null otherwise.
  nlohmann::json artifact_metadata;
};

struct kiln_engine {
  std::unique_ptr<kiln::capi::EngineDriver> driver;
};

struct kiln_session {
  std::unique_ptr<kiln::capi::ForwardSession> session;
};
