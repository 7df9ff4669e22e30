// OpenAI-shaped error bodies and the mapping from kiln's status codes.
#include "server/api_error.h"

#include "server/sse.h"

namespace kiln::server {

nlohmann::ordered_json ApiError::ToJson() const {
  nlohmann::ordered_json error;
  error["message"] = message;
  error["type"] = type;
  error["param"] = param.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(param);
  error["code"] = code.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(code);
  nlohmann::ordered_json body;
  body["error"] = std::move(error);
  return body;
}

std::string ApiError::Body() const {
  return JsonText(ToJson());  // a message may quote a client's bytes, UTF-8 or not
}

ApiError BadRequest(std::string param, std::string message) {
  ApiError e;
  e.http_status = 400;
  e.param = std::move(param);
  e.message = std::move(message);
  return e;
}

ApiError ErrorFromStatus(const Status& status, std::string param) {
  ApiError e;
  e.message = status.message();
  e.param = std::move(param);
  switch (status.code()) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kOutOfRange:
    case StatusCode::kNotFound:
    case StatusCode::kUnsupported:
    case StatusCode::kResourceExhausted:  // the engine's only such refusal: a request larger than the KV cache
      e.http_status = 400;
      break;
    default:
      e.http_status = 500;
      e.type = "server_error";
      break;
  }
  return e;
}

}  // namespace kiln::server
