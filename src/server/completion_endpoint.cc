// The generation endpoints: request to engine requests, events to answers.
#include "server/completion_endpoint.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <ctime>
#include <random>

#include <fmt/format.h>

#include "engine/kv_connector.h"
#include "format/model_config.h"
#include "server/access_log.h"
#include "server/chat_output_parser.h"
#include "server/completion_job.h"
#include "server/completion_response.h"
#include "server/http_reply.h"
#include "server/peer_socket.h"
#include "server/response_format.h"
#include "server/sse.h"
#include "server/tool_call_grammar.h"
#include "server/tool_request.h"
#include "tokenizer/chat_prompt.h"
#include "tokenizer/tokenizer.h"

namespace kiln::server {
namespace {

using Json = nlohmann::ordered_json;

// How often a waiting handler looks for a client that has gone.
constexpr std::chrono::milliseconds kPollInterval(100);

std::string NewRequestId(Endpoint endpoint) {
  thread_local std::mt19937_64 rng((uint64_t{std::random_device{}()} << 32) ^ std::random_device{}());
  return fmt::format("{}-{:016x}{:08x}", endpoint == Endpoint::kChat ? "chatcmpl" : "cmpl", rng(),
                     rng() & 0xffffffffu);
}

// The engine requests of an API request, choice by choice.
struct PreparedChoices {
  std::vector<GenerationRequest> requests;  // handed to the job
  size_t num_prompts = 0;
  std::vector<int> prompt_of_choice;
  std::vector<std::string> echo_of_prompt;  // completions with echo: the prompt's text
  // Chat replies read for reasoning and tool calls, when the model thinks
  // or may call tools.
  std::optional<ChatOutputOptions> output_options;
};

// The prompt ids of one prompt, checked against the vocabulary and the
// context, and the max_tokens that fits. `where` names the prompt field.
ApiStatus FitPrompt(const LLMEngine& engine, const CompletionRequest& r, const std::string& where,
                    GenerationRequest* request) {
  Expected<std::vector<int32_t>> ids = engine.PromptIds(*request);
  if (!ids.ok()) return ErrorFromStatus(ids.status().WithContext(where), where);
  const int64_t vocab = engine.model_config().vocab_size;
  for (size_t i = 0; i < ids->size(); ++i) {
    if ((*ids)[i] >= vocab) {
      return BadRequest(where, fmt::format("{}: token {} is id {}, outside the vocabulary of {}", where, i,
                                           (*ids)[i], vocab));
    }
  }
  const int64_t context = engine.max_model_len();
  const int64_t length = static_cast<int64_t>(ids->size());
  if (length >= context) {
    return BadRequest(where, fmt::format("{}: the prompt has {} tokens and the context holds {}, with room "
                                         "needed for at least one new token",
                                         where, length, context));
  }
  if (r.max_tokens_given) {
    if (length + r.params.max_tokens > context) {
      return BadRequest("max_tokens", fmt::format("the prompt has {} tokens; with max_tokens {} that exceeds "
                                                  "the context of {} tokens",
                                                  length, r.params.max_tokens, context));
    }
  } else {
    // The model's own default (generation_config.json), within the room left.
    int64_t room = context - length;
    int64_t wanted = room;
    if (auto n = engine.generation_config().max_new_tokens; n && *n > 0) wanted = std::min<int64_t>(*n, room);
    request->params.max_tokens = static_cast<int32_t>(wanted);
  }
  request->prompt_ids = std::move(ids).value();
  return std::nullopt;
}

// The tool-call constraint of a chat request, and how its replies are read.
ApiStatus ApplyTools(const ToolRequest& tools, const ChatPrompt& prompt, GenerationRequest* g,
                     PreparedChoices* out) {
  if (tools.active()) {
    if (ApiStatus e = ApplyToolCallConstraint(tools, prompt.tool_format, prompt.thinking, &g->params)) return e;
    // Llama's <|python_tag|> and Mistral's [TOOL_CALLS] are special tokens
    // the parser must see.
    if (prompt.tool_format != ToolCallFormat::kHermes) g->params.skip_special_tokens = false;
  }
  if (tools.active() || prompt.thinking != ThinkingMode::kNone) {
    out->output_options = ChatOutputOptions{tools.active(), prompt.tool_format, prompt.thinking};
  }
  return std::nullopt;
}

ApiStatus PrepareChoices(const LLMEngine& engine, const CompletionRequest& r, const ToolRequest& tools,
                         PreparedChoices* out) {
  std::vector<GenerationRequest> prompts;
  const Tokenizer* tokenizer = engine.tokenizer();
  if (r.endpoint == Endpoint::kChat) {
    if (tokenizer == nullptr) return BadRequest("messages", "chat needs a tokenizer; this model has none");
    Expected<ChatPrompt> prompt = RenderChatPromptWithTools(*tokenizer, r.messages, tools.tools_json);
    if (!prompt.ok()) return ErrorFromStatus(prompt.status().WithContext("messages"), "messages");
    GenerationRequest g;
    g.prompt = prompt->text;
    g.add_special_tokens = false;  // the template places them
    g.params = r.params;
    if (ApiStatus e = ApplyTools(tools, *prompt, &g, out)) return e;
    if (ApiStatus e = FitPrompt(engine, r, "messages", &g)) return e;
    prompts.push_back(std::move(g));
  } else {
    for (size_t p = 0; p < r.prompts.size(); ++p) {
      const PromptInput& input = r.prompts[p];
      std::string where = r.prompts.size() > 1 ? fmt::format("prompt[{}]", p) : "prompt";
      GenerationRequest g;
      g.prompt = input.text;
      g.prompt_ids = input.ids;
      g.params = r.params;
      if (ApiStatus e = FitPrompt(engine, r, where, &g)) return e;
      if (r.echo) {
        out->echo_of_prompt.push_back(!input.text.empty() ? input.text
                                      : tokenizer        ? tokenizer->Decode(input.ids)
                                                         : std::string());
      }
      prompts.push_back(std::move(g));
    }
  }
  // n choices of each prompt, seeded seed, seed + 1, ... when a seed is given.
  out->num_prompts = prompts.size();
  for (size_t p = 0; p < prompts.size(); ++p) {
    for (int j = 0; j < r.n; ++j) {
      GenerationRequest g = prompts[p];
      if (r.params.seed) g.params.seed = *r.params.seed + static_cast<uint64_t>(j);
      out->requests.push_back(std::move(g));
      out->prompt_of_choice.push_back(static_cast<int>(p));
    }
  }
  return std::nullopt;
}

// Usage over the choices: each prompt's tokens once, every choice's
// completion tokens.
class UsageTally {
 public:
  explicit UsageTally(size_t num_prompts) : counted_(num_prompts, false) {}
  void Add(int prompt, const RequestStats& stats) {
    usage_.completion_tokens += stats.completion_tokens;
    if (counted_[static_cast<size_t>(prompt)]) return;
    counted_[static_cast<size_t>(prompt)] = true;
    usage_.prompt_tokens += stats.prompt_tokens;
    usage_.cached_tokens += stats.cached_tokens;
  }
  const Usage& usage() const { return usage_; }

 private:
  std::vector<bool> counted_;
  Usage usage_;
};

// The answer for a choice that ended without finishing: aborted (the
// server is stopping, or the engine gave up) or failed.
ApiError EndedEarly(const ServerState& state, FinishReason reason) {
  ApiError e;
  e.type = "server_error";
  if (reason == FinishReason::kError) {
    e.http_status = 500;
    e.message = "the engine failed while generating this request";
  } else {
    e.http_status = 503;
    e.message = state.draining() ? "the server is shutting down" : "the request was aborted by the engine";
  }
  return e;
}

void NoteTokens(const Usage& usage) {
  AccessRecord& record = CurrentAccessRecord();
  record.prompt_tokens = usage.prompt_tokens;
  record.completion_tokens = usage.completion_tokens;
}

// Everything a stream needs between calls of its content provider, which
// the HTTP library makes until the stream is done or the client is gone.
class CompletionStream {
 public:
  CompletionStream(ServerState& state, std::unique_ptr<CompletionJob> job, ResponseFormatter formatter,
                   PreparedChoices choices, bool include_usage, int peer_fd, std::shared_ptr<void> in_flight)
      : state_(state),
        job_(std::move(job)),
        formatter_(std::move(formatter)),
        choices_(std::move(choices)),
        include_usage_(include_usage),
        peer_fd_(peer_fd),
        in_flight_(std::move(in_flight)),
        usage_(choices_.num_prompts),
        text_offset_(job_->num_choices(), 0) {
    formatter_.set_usage_null_in_chunks(include_usage_);
    if (choices_.output_options) parsers_.assign(job_->num_choices(), ChatOutputParser(*choices_.output_options));
  }

  // One call of the provider: writes what is ready; false ends the
  // connection (the client is gone).
  bool Provide(httplib::DataSink& sink) {
    std::string out;
    if (!started_) {
      started_ = true;
      for (size_t i = 0; i < job_->num_choices(); ++i) out += Opening(static_cast<int>(i));
    }
    std::vector<ChoiceEvent> events = job_->Wait(kPollInterval);
    if (events.empty() && out.empty()) {
      if (PeerClosed(peer_fd_)) return ClientGone();  // nothing to write, so the socket is the only sign
      return true;
    }
    for (const ChoiceEvent& e : events) out += Chunks(e);
    const bool done = job_->done();
    if (done) {
      if (include_usage_) out += SseEvent(formatter_.UsageChunk(usage_.usage()));
      out += kSseDone;
      NoteTokens(usage_.usage());
    }
    // Never an empty write: the library takes one as the end of the stream.
    if (!out.empty() && !sink.write(out.data(), out.size())) return ClientGone();
    if (done) sink.done();
    return true;
  }

 private:
  // A choice's first chunk: the role (chat), or the echoed prompt (completions).
  std::string Opening(int choice) {
    if (formatter_.endpoint() == Endpoint::kChat) return SseEvent(formatter_.RoleChunk(choice));
    if (choices_.echo_of_prompt.empty()) return "";
    const std::string& echo =
        choices_.echo_of_prompt[static_cast<size_t>(choices_.prompt_of_choice[static_cast<size_t>(choice)])];
    text_offset_[static_cast<size_t>(choice)] = echo.size();
    return SseEvent(formatter_.TextChunk(choice, echo, nullptr));
  }

  std::string Chunks(const ChoiceEvent& e) {
    std::string out;
    const bool logprobs = e.token >= 0 && formatter_.logprobs();
    ChatOutputParser* parser = parsers_.empty() ? nullptr : &parsers_[static_cast<size_t>(e.choice)];
    if (parser != nullptr) {
      // Read for reasoning and tool calls: the text goes out as it is understood.
      std::vector<ChatDelta> deltas = parser->Feed(e.text);
      if (e.finished) {
        std::vector<ChatDelta> rest = parser->Finish();
        deltas.insert(deltas.end(), rest.begin(), rest.end());
      }
      TokenLogprobs lp;
      if (logprobs) {
        lp.token_ids = {e.token};
        lp.logprobs = {e.logprob};
        lp.top = {e.top_logprobs};
      }
      for (const auto& chunk : formatter_.DeltaChunks(e.choice, deltas, logprobs ? &lp : nullptr)) {
        out += SseEvent(chunk);
      }
    } else if (!e.text.empty() || logprobs) {
      TokenLogprobs lp;
      if (logprobs) {
        lp.token_ids = {e.token};
        lp.logprobs = {e.logprob};
        lp.top = {e.top_logprobs};
        lp.text_offset = text_offset_[static_cast<size_t>(e.choice)];
        text_offset_[static_cast<size_t>(e.choice)] += formatter_.TokenText(e.token).size();
      }
      out += SseEvent(formatter_.TextChunk(e.choice, e.text, logprobs ? &lp : nullptr));
    }
    if (e.finished) {
      usage_.Add(choices_.prompt_of_choice[static_cast<size_t>(e.choice)], e.stats);
      FinishReason reason = e.stats.finish_reason;
      if (reason == FinishReason::kStop || reason == FinishReason::kLength) {
        out += SseEvent(formatter_.FinishChunk(e.choice, reason, parser != nullptr && parser->num_tool_calls() > 0));
      } else {
        out += SseEvent(EndedEarly(state_, reason).ToJson());
      }
    }
    return out;
  }

  bool ClientGone() {
    job_->Abort();
    CurrentAccessRecord().note = "client disconnected";
    return false;
  }

  ServerState& state_;
  std::unique_ptr<CompletionJob> job_;
  ResponseFormatter formatter_;
  PreparedChoices choices_;
  bool include_usage_;
  int peer_fd_;
  std::shared_ptr<void> in_flight_;
  UsageTally usage_;
  std::vector<size_t> text_offset_;
  std::vector<ChatOutputParser> parsers_;  // per choice, when replies are read
  bool started_ = false;
};

// Waits for every choice and answers with the whole response.
void ServeWhole(ServerState& state, CompletionJob& job, const ResponseFormatter& formatter,
                const PreparedChoices& choices, int peer_fd, httplib::Response& res) {
  std::vector<ChoiceOutput> outputs(job.num_choices());
  UsageTally usage(choices.num_prompts);
  FinishReason failure = FinishReason::kNone;
  for (size_t i = 0; i < outputs.size() && !choices.echo_of_prompt.empty(); ++i) {
    outputs[i].text = choices.echo_of_prompt[static_cast<size_t>(choices.prompt_of_choice[i])];
  }
  auto next_check = std::chrono::steady_clock::now() + kPollInterval;
  while (!job.done()) {
    std::vector<ChoiceEvent> events = job.Wait(kPollInterval);
    // Nothing is written until the end, so the socket is watched instead,
    // whether or not tokens are coming.
    const auto now = std::chrono::steady_clock::now();
    const bool check = events.empty() || now >= next_check;
    if (check) next_check = now + kPollInterval;
    if (check && PeerClosed(peer_fd)) {
      job.Abort();
      CurrentAccessRecord().note = "client disconnected";
      res.status = 499;  // nginx's "client closed request": nobody reads it, the log does
      return;
    }
    for (ChoiceEvent& e : events) {
      ChoiceOutput& out = outputs[static_cast<size_t>(e.choice)];
      out.text += e.text;
      if (e.token >= 0) {
        out.token_ids.push_back(e.token);
        out.logprobs.push_back(e.logprob);
        out.top_logprobs.push_back(std::move(e.top_logprobs));
      }
      if (e.finished) {
        out.finish_reason = e.stats.finish_reason;
        usage.Add(choices.prompt_of_choice[static_cast<size_t>(e.choice)], e.stats);
        if (out.finish_reason != FinishReason::kStop && out.finish_reason != FinishReason::kLength) {
          failure = out.finish_reason;
        }
      }
    }
  }
  NoteTokens(usage.usage());
  if (failure != FinishReason::kNone) return ReplyError(res, EndedEarly(state, failure));
  if (choices.output_options) {
    for (ChoiceOutput& out : outputs) out.parsed = ParseChatOutput(*choices.output_options, out.text);
  }
  ReplyJson(res, 200, formatter.Complete(outputs, usage.usage()));
}

// Ids unique across prefill instances feeding one decode instance: a random
// start per process, counted up from there (0 means no transfer).
uint64_t NewKvTransferId() {
  static std::atomic<uint64_t> next{(uint64_t{std::random_device{}()} << 32) | std::random_device{}()};
  uint64_t id = 0;
  while (id == 0) id = next.fetch_add(1);
  return id;
}

// Waits until the decode instance has every transfer's blocks, then says so
// in the answer ("kv_transfer": {"landed": true}); else answers 502.
void AwaitKvLanded(ServerState& state, KvConnector& connector, const std::vector<uint64_t>& transfers,
                   httplib::Response& res) {
  for (uint64_t id : transfers) {
    Status landed = connector.WaitAcknowledged(id, state.options().kv_transfer_timeout_seconds);
    if (!landed.ok()) {
      return ReplyError(res, ApiError{502, fmt::format("KV transfer to the decode instance: {}", landed.message()),
                                      "server_error", "", "kv_transfer_failed"});
    }
  }
  nlohmann::ordered_json reply = nlohmann::ordered_json::parse(res.body, nullptr, /*allow_exceptions=*/false);
  if (reply.is_discarded()) return;
  reply["kv_transfer"] = {{"landed", true}, {"transfers", transfers.size()}};
  ReplyJson(res, 200, reply);
}

}  // namespace

void ServeCompletion(ServerState& state, Endpoint endpoint, const httplib::Request& req, const std::string& body,
                     httplib::Response& res) {
  std::shared_ptr<void> in_flight = state.EnterRequest();
  CurrentAccessRecord().in_flight = in_flight;
  EngineLoop* loop = state.engine_loop();
  if (state.draining()) {
    res.set_header("Connection", "close");
    return ReplyError(res, ApiError{503, "the server is shutting down", "server_error", "", ""});
  }
  if (loop == nullptr) return ReplyError(res, ApiError{503, "the model is still loading", "server_error", "", ""});
  const LLMEngine& engine = loop->engine();

  nlohmann::json json;
  if (ApiStatus e = ParseJsonObject(body, &json)) return ReplyError(res, *e);
  CompletionRequest request;
  request.params = engine.generation_config().DefaultSamplingParams();
  ApiStatus parsed =
      endpoint == Endpoint::kChat ? ParseChatRequest(json, &request) : ParseCompletionRequest(json, &request);
  if (parsed) return ReplyError(res, *parsed);
  KeepSchemaKeyOrder(body, request.constraint_field, &request.params);
  ToolRequest tools;
  if (endpoint == Endpoint::kChat &&
      (json.contains("tools") || json.contains("tool_choice") || json.contains("parallel_tool_calls"))) {
    // Read again with keys in order: the schemas' order shows in the prompt
    // and decides the order in which arguments are written.
    nlohmann::ordered_json ordered = nlohmann::ordered_json::parse(body, nullptr, /*allow_exceptions=*/false);
    if (ApiStatus e = ParseToolRequest(ordered, &tools)) return ReplyError(res, *e);
  }
  if (!request.model.empty() && request.model != state.model_name()) {
    return ReplyError(res, ApiError{404, fmt::format("The model `{}` does not exist.", request.model),
                                    "invalid_request_error", "model", "model_not_found"});
  }
  if (request.echo && request.params.logprobs) {
    return ReplyError(res, BadRequest("echo", "echo together with logprobs is not supported"));
  }

  PreparedChoices choices;
  if (ApiStatus e = PrepareChoices(engine, request, tools, &choices)) return ReplyError(res, *e);
  // A prefill instance runs the prompt and one token; the prompt's KV
  // blocks go to the decode instance, and the answer waits until they have
  // landed there (so that whoever asked can send the request on).
  std::vector<uint64_t> kv_transfers;
  const bool prefill_only = state.options().role == "prefill";
  if (prefill_only) {
    if (engine.kv_connector() == nullptr) {
      return ReplyError(res, ApiError{503, "no KV connector", "server_error", "", ""});
    }
    request.stream = false;
    for (GenerationRequest& g : choices.requests) {
      g.params.max_tokens = 1;
      g.params.min_tokens = 0;
      g.kv_transfer_id = NewKvTransferId();
      kv_transfers.push_back(g.kv_transfer_id);
    }
  }
  const int num_choices = static_cast<int>(choices.requests.size());
  if (!state.waiting().TryAcquire(num_choices)) {
    return ReplyError(res, ApiError{503,
                                    fmt::format("too many requests are waiting ({} of at most {}); retry shortly",
                                                state.waiting().count(), state.waiting().limit()),
                                    "server_error", "", "queue_full"});
  }
  Expected<std::unique_ptr<CompletionJob>> job =
      CompletionJob::Start(*loop, std::move(choices.requests), state.metrics(), state.waiting());
  if (!job.ok()) {
    const Status& refused = job.status();
    return ReplyError(res, ErrorFromStatus(refused, ConstraintErrorField(refused, request.constraint_field)));
  }

  const std::string id = NewRequestId(endpoint);
  CurrentAccessRecord().request_id = id;
  const bool logprobs = request.params.logprobs || request.params.top_logprobs > 0;
  ResponseFormatter formatter(endpoint, id, static_cast<int64_t>(std::time(nullptr)), state.model_name(),
                              engine.tokenizer(), logprobs);
  const int peer_fd = FindConnectionSocket(AddressOf(req));

  if (prefill_only) {
    ServeWhole(state, **job, formatter, choices, peer_fd, res);
    if (res.status == 200) AwaitKvLanded(state, *engine.kv_connector(), kv_transfers, res);
    return;
  }
  if (!request.stream) {
    return ServeWhole(state, **job, formatter, choices, peer_fd, res);
  }
  res.status = 200;
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");  // proxies pass events on as they come
  auto stream = std::make_shared<CompletionStream>(state, std::move(job).value(), std::move(formatter),
                                                   std::move(choices), request.include_usage, peer_fd,
                                                   std::move(in_flight));
  res.set_chunked_content_provider("text/event-stream", [stream](size_t /*offset*/, httplib::DataSink& sink) {
    return stream->Provide(sink);
  });
}

}  // namespace kiln::server
