// Errors as the OpenAI API reports them: an HTTP status and a body
// {"error": {"message", "type", "param", "code"}} naming the field at fault.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace kiln::server {

struct ApiError {
  int http_status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;  // the request field at fault; "" when none (null in JSON)
  std::string code;   // a machine-readable reason; "" when none (null in JSON)

  // {"error": {...}}, with empty param and code written as null.
  nlohmann::ordered_json ToJson() const;
  // ToJson() as text.
  std::string Body() const;
};

// 400 for a bad field.
ApiError BadRequest(std::string param, std::string message);

// The HTTP form of an engine's refusal or failure: what the request got
// wrong (invalid arguments, limits, a request larger than the KV cache) is
// 400, anything else 500.
ApiError ErrorFromStatus(const Status& status, std::string param = "");

}  // namespace kiln::server
