// Turning a conversation into prompt text with the model's chat template.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace kiln {

class Tokenizer;

// Renders `messages` ([{"role", "content"}, ...]) with the tokenizer's chat
// template and the generation prompt, passing bos_token and eos_token. A
// tokenizer without a template is an InvalidArgument error saying so.
// Encode the result without adding special tokens: the template places them.
Expected<std::string> RenderChatPrompt(const Tokenizer& tokenizer, const nlohmann::ordered_json& messages);

// The conversation of one user message, after an optional system message.
nlohmann::ordered_json SingleTurnChat(const std::string& user, const std::string& system = "");

}  // namespace kiln
