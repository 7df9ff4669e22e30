// Chat prompts through the model's template.
#include "tokenizer/chat_prompt.h"

#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace kiln {

Expected<std::string> RenderChatPrompt(const Tokenizer& tokenizer, const nlohmann::ordered_json& messages) {
  if (tokenizer.chat_template().empty()) {
    return InvalidArgument("{}: the model has no chat template; give a plain prompt instead",
                           tokenizer.source());
  }
  KILN_ASSIGN_OR_RETURN(ChatTemplate chat, ChatTemplate::Parse(tokenizer.chat_template()));
  nlohmann::ordered_json extra = nlohmann::ordered_json::object();
  extra["bos_token"] = tokenizer.bos_id() >= 0 ? tokenizer.TokenPiece(tokenizer.bos_id()) : "";
  extra["eos_token"] = tokenizer.eos_id() >= 0 ? tokenizer.TokenPiece(tokenizer.eos_id()) : "";
  return chat.Render(messages, /*add_generation_prompt=*/true, extra);
}

nlohmann::ordered_json SingleTurnChat(const std::string& user, const std::string& system) {
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  if (!system.empty()) messages.push_back({{"role", "system"}, {"content", system}});
  messages.push_back({{"role", "user"}, {"content", user}});
  return messages;
}

}  // namespace kiln
