// Tools in chat prompts: the template's tool-call format told from its
// text, tools rendered by templates that know them, the generic Hermes
// prompt for those that do not, and where thinking stands.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "testing/test_paths.h"
#include "tokenizer/chat_prompt.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tool_call_format.h"

namespace kiln {
namespace tool_prompt_tests {

using OJson = nlohmann::ordered_json;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

std::string SharedTemplate(const std::string& file) {
  return ReadFile(testing::SharedDir() + "/data/tokenizers/chat-templates/" + file);
}

std::string TinyQwenTemplate() {
  auto config = nlohmann::json::parse(ReadFile(testing::SharedDir() + "/models/tiny-qwen2/tokenizer_config.json"));
  return config["chat_template"].get<std::string>();
}

// A Mistral-style template written for these tests: tools before the last
// user turn, calls as a [TOOL_CALLS] list, results as [TOOL_RESULTS].
const char* kMistralStyle =
    "{{ bos_token }}{% for m in messages %}{% if m.role == 'user' %}{% if loop.last and tools %}"
    "[AVAILABLE_TOOLS] {{ tools | tojson }}[/AVAILABLE_TOOLS]{% endif %}[INST] {{ m.content }}[/INST]"
    "{% elif m.role == 'assistant' %}{% if m.tool_calls %}[TOOL_CALLS] [{% for c in m.tool_calls %}"
    "{\"name\": \"{{ c.function.name }}\", \"arguments\": {{ c.function.arguments | tojson }}}"
    "{% if not loop.last %}, {% endif %}{% endfor %}]{% else %}{{ m.content }}{% endif %}{{ eos_token }}"
    "{% elif m.role == 'tool' %}[TOOL_RESULTS] {\"content\": {{ m.content | tojson }}}[/TOOL_RESULTS]"
    "{% endif %}{% endfor %}";

OJson Tools() {
  return OJson::parse(R"([{"type": "function", "function": {"name": "get_weather", "description": "Weather now.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}])");
}

OJson ToolConversation() {
  return OJson::parse(R"([
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Weather in Bern and Chur?"},
    {"role": "assistant", "content": "", "tool_calls": [
      {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Bern"}}},
      {"id": "call_2", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Chur"}}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
    {"role": "tool", "tool_call_id": "call_2", "content": "rain"}])");
}

ChatPrompt Render(const std::string& source, const OJson& messages, const OJson& tools,
                  OJson variables = {{"bos_token", "<s>"}, {"eos_token", "</s>"}}) {
  Expected<ChatTemplate> chat = ChatTemplate::Parse(source);
  EXPECT_TRUE(chat.ok()) << chat.status().ToString();
  Expected<ChatPrompt> prompt = RenderChatPromptWithTools(*chat, variables, messages, tools);
  EXPECT_TRUE(prompt.ok()) << prompt.status().ToString();
  return prompt.ok() ? *prompt : ChatPrompt();
}

TEST(ToolPromptTest, FormatsOfTheRealTemplates) {
  EXPECT_EQ(DetectToolCallFormat(SharedTemplate("Qwen-Qwen2.5-7B-Instruct.jinja")), ToolCallFormat::kHermes);
  EXPECT_EQ(DetectToolCallFormat(SharedTemplate("Qwen-Qwen3-0.6B.jinja")), ToolCallFormat::kHermes);
  EXPECT_EQ(DetectToolCallFormat(SharedTemplate("Qwen-QwQ-32B.jinja")), ToolCallFormat::kHermes);
  EXPECT_EQ(DetectToolCallFormat(SharedTemplate("meta-llama-Llama-3.1-8B-Instruct.jinja")),
            ToolCallFormat::kLlama3Json);
  EXPECT_EQ(DetectToolCallFormat(SharedTemplate("meta-llama-Llama-3.2-3B-Instruct.jinja")),
            ToolCallFormat::kLlama3Json);
  EXPECT_EQ(DetectToolCallFormat(kMistralStyle), ToolCallFormat::kMistral);
  EXPECT_EQ(DetectToolCallFormat(TinyQwenTemplate()), ToolCallFormat::kHermes);
  EXPECT_STREQ(ToolCallFormatName(ToolCallFormat::kLlama3Json), "llama3_json");
}

TEST(ToolPromptTest, TemplatesThatKnowToolsRenderThem) {
  ChatPrompt qwen3 = Render(SharedTemplate("Qwen-Qwen3-0.6B.jinja"), ToolConversation(), Tools());
  EXPECT_FALSE(qwen3.generic_tool_prompt);
  EXPECT_EQ(qwen3.tool_format, ToolCallFormat::kHermes);
  EXPECT_EQ(qwen3.thinking, ThinkingMode::kOptional);
  EXPECT_NE(qwen3.text.find("<tools>\n{\"type\": \"function\""), std::string::npos) << qwen3.text;
  EXPECT_NE(qwen3.text.find("{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Chur\"}}"), std::string::npos)
      << qwen3.text;
  EXPECT_NE(qwen3.text.find("<tool_response>\nrain\n</tool_response>"), std::string::npos) << qwen3.text;

  ChatPrompt llama = Render(SharedTemplate("meta-llama-Llama-3.1-8B-Instruct.jinja"),
                            OJson::parse(R"([{"role": "user", "content": "Weather in Bern?"}])"), Tools(),
                            {{"bos_token", "<|begin_of_text|>"}, {"eos_token", "<|eot_id|>"}});
  EXPECT_FALSE(llama.generic_tool_prompt);
  EXPECT_EQ(llama.tool_format, ToolCallFormat::kLlama3Json);
  EXPECT_EQ(llama.thinking, ThinkingMode::kNone);
  EXPECT_NE(llama.text.find("\"name\": \"get_weather\""), std::string::npos) << llama.text;

  OJson conversation = ToolConversation();
  conversation.push_back({{"role", "user"}, {"content", "And tomorrow?"}});
  ChatPrompt mistral = Render(kMistralStyle, conversation, Tools());
  EXPECT_FALSE(mistral.generic_tool_prompt);
  EXPECT_EQ(mistral.tool_format, ToolCallFormat::kMistral);
  EXPECT_NE(mistral.text.find("[TOOL_CALLS] [{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Bern\"}}, "),
            std::string::npos)
      << mistral.text;

  ChatPrompt r1 = Render(SharedTemplate("deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja"),
                         OJson::parse(R"([{"role": "user", "content": "Hi"}])"), OJson::array());
  EXPECT_EQ(r1.thinking, ThinkingMode::kInside);
}

TEST(ToolPromptTest, TemplatesThatIgnoreToolsGetTheGenericPrompt) {
  const std::string tiny = TinyQwenTemplate();
  ChatPrompt plain = Render(tiny, OJson::parse(R"([{"role": "user", "content": "Hi"}])"), OJson::array());
  EXPECT_FALSE(plain.generic_tool_prompt);
  EXPECT_EQ(plain.thinking, ThinkingMode::kNone);

  ChatPrompt p = Render(tiny, ToolConversation(), Tools());
  EXPECT_TRUE(p.generic_tool_prompt);
  EXPECT_EQ(p.tool_format, ToolCallFormat::kHermes);
  const std::string system = "<|im_start|>system\nBe brief.\n\n" + GenericToolSystemPrompt(Tools()) + "<|im_end|>\n";
  EXPECT_EQ(p.text.rfind(system, 0), 0u) << p.text;
  EXPECT_NE(p.text.find("<|im_start|>assistant\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
                        "{\"city\":\"Bern\"}}\n</tool_call>\n<tool_call>"),
            std::string::npos)
      << p.text;
  EXPECT_NE(p.text.find("<|im_start|>user\n<tool_response>\nsunny\n</tool_response>\n<tool_response>\nrain\n"
                        "</tool_response><|im_end|>\n<|im_start|>assistant\n"),
            std::string::npos)
      << p.text;
  EXPECT_NE(GenericToolSystemPrompt(Tools()).find("<tools>\n{\"type\":\"function\""), std::string::npos);

  // Without a system message one is made for the tools.
  ChatPrompt q = Render(tiny, OJson::parse(R"([{"role": "user", "content": "Hi"}])"), Tools());
  EXPECT_EQ(q.text.rfind("<|im_start|>system\n" + GenericToolSystemPrompt(Tools()) + "<|im_end|>\n", 0), 0u)
      << q.text;
}

}  // namespace tool_prompt_tests
}  // namespace kiln
