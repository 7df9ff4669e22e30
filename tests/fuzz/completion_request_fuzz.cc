// Fuzzes the server's request reading (untrusted input: any client's body):
// the bytes are read as a JSON object and then as a chat and as a text
// completions request, and for their tool fields. Nothing may crash or
// throw; an accepted request must hold values the engine can take (one
// output constraint at most, whose schema keeps its value when re-read in
// key order), and a refused one gets an error body that is valid JSON naming
// the problem.
#include <cmath>
#include <cstdint>
#include <string>

#include "server/completion_request.h"
#include "server/json_fields.h"
#include "server/response_format.h"
#include "server/tool_request.h"

namespace {

void Check(bool ok) {
  if (!ok) __builtin_trap();
}

void CheckRefusal(const kiln::server::ApiError& error) {
  Check(error.http_status >= 400 && error.http_status < 600);
  Check(!error.message.empty());
  // The body goes back to the client as it is: it must be one JSON object.
  auto body = nlohmann::json::parse(error.Body(), nullptr, /*allow_exceptions=*/false);
  Check(body.is_object() && body.contains("error"));
}

void CheckAccepted(const kiln::server::CompletionRequest& r) {
  Check(r.n >= 1 && r.n <= kiln::server::kMaxChoicesPerRequest);
  Check(std::isfinite(r.params.temperature) && r.params.temperature >= 0);
  Check(std::isfinite(r.params.top_p) && r.params.top_p > 0 && r.params.top_p <= 1);
  Check(!r.max_tokens_given || r.params.max_tokens >= 0);
  // One constraint at most, and the field it came from is known.
  const kiln::SamplingParams& p = r.params;
  Check((p.grammar.empty() ? 0 : 1) + (p.json_schema.empty() ? 0 : 1) + (p.json_object ? 1 : 0) <= 1);
  Check(p.constrained() == !r.constraint_field.empty());
}

void Read(const std::string& text, const nlohmann::json& body, bool chat) {
  kiln::server::CompletionRequest request;
  kiln::server::ApiStatus status = chat ? kiln::server::ParseChatRequest(body, &request)
                                        : kiln::server::ParseCompletionRequest(body, &request);
  if (status.has_value()) {
    CheckRefusal(*status);
  } else {
    CheckAccepted(request);
    // The schema re-read in key order is the same schema.
    const std::string schema = request.params.json_schema;
    kiln::server::KeepSchemaKeyOrder(text, request.constraint_field, &request.params);
    if (!schema.empty()) {
      Check(nlohmann::json::parse(request.params.json_schema, nullptr, false) ==
            nlohmann::json::parse(schema, nullptr, false));
    } else {
      Check(request.params.json_schema.empty());
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  nlohmann::json body;
  kiln::server::ApiStatus parsed = kiln::server::ParseJsonObject(text, &body);
  if (parsed.has_value()) {
    CheckRefusal(*parsed);
    return 0;
  }
  Read(text, body, /*chat=*/true);
  Read(text, body, /*chat=*/false);
  // The tool fields, read from the same bytes with keys in order.
  kiln::server::ToolRequest tools;
  kiln::server::ApiStatus tool_status =
      kiln::server::ParseToolRequest(nlohmann::ordered_json::parse(text, nullptr, false), &tools);
  if (tool_status.has_value()) {
    CheckRefusal(*tool_status);
  } else {
    Check(tools.tools.size() <= kiln::server::kMaxTools);
    bool named_is_declared = tools.choice != kiln::server::ToolChoiceMode::kNamed;
    for (const kiln::server::ToolFunction& t : tools.tools) {
      Check(!t.name.empty() && t.parameters.is_object());
      named_is_declared = named_is_declared || t.name == tools.choice_name;
    }
    Check(named_is_declared);
  }
  return 0;
}
