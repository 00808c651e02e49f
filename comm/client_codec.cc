#include "comm/client_codec.h"

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <kj/exception.h>

#include <charconv>
#include <cstring>

#include "comm/sampling_wire.h"
#include "comm/schema/client.capnp.h"

namespace tpserve::proto {

StatusOr<SpeculativeRequest> ParseSpeculativeRequest(std::string_view text) {
  SpeculativeRequest out;
  const std::string_view method = text.substr(0, text.find(':'));
  if (method == "off" && method.size() == text.size()) {
    out.method = SpeculativeChoice::kOff;
    return out;
  }
  if (method != "ngram" && method != "draft") {
    return InvalidArgument("speculative '" + std::string(text) +
                           "' is not supported; use off, ngram, ngram:K, draft or draft:K");
  }
  out.method = method == "ngram" ? SpeculativeChoice::kNgram : SpeculativeChoice::kDraft;
  if (method.size() == text.size()) return out;
  const std::string_view k = text.substr(method.size() + 1);
  uint32_t value = 0;
  const auto [end, error] = std::from_chars(k.data(), k.data() + k.size(), value);
  if (error != std::errc() || end != k.data() + k.size() || value < 1 || value > kMaxSpeculativeTokens) {
    return InvalidArgument("speculative '" + std::string(text) + "': K must be a number in [1, " +
                           std::to_string(kMaxSpeculativeTokens) + "], as in " + std::string(method) + ":4");
  }
  out.num_tokens = value;
  return out;
}
namespace {

static_assert(kClientProtocolVersion == client_wire::K_CLIENT_PROTOCOL_VERSION,
              "client_codec.h and client.capnp disagree on the protocol version");

std::string ToBytes(capnp::MessageBuilder& builder) {
  kj::Array<capnp::word> words = capnp::messageToFlatArray(builder);
  kj::ArrayPtr<const kj::byte> bytes = words.asBytes();
  return std::string(reinterpret_cast<const char*>(bytes.begin()), bytes.size());
}

std::string ToString(capnp::Text::Reader text) { return std::string(text.cStr(), text.size()); }

// The whole string, embedded NUL bytes included (a std::string converts to Text through its
// c_str(), which would end it at the first NUL). std::string's buffer is NUL-terminated, as Text needs.
capnp::Text::Reader TextOf(const std::string& s) { return capnp::Text::Reader(s.data(), s.size()); }

// ---- encoding -------------------------------------------------------------------------------

void EncodeChat(const std::vector<ChatMessage>& messages, capnp::List<client_wire::ChatMessage>::Builder chat) {
  for (size_t i = 0; i < messages.size(); ++i) {
    chat[i].setRole(TextOf(messages[i].role));
    chat[i].setContent(TextOf(messages[i].content));
  }
}

void EncodeTokenLogprobs(const std::vector<TokenLogprobs>& in, capnp::List<client_wire::TokenLogprobs>::Builder lps) {
  for (size_t i = 0; i < in.size(); ++i) {
    lps[i].setLogprob(in[i].logprob);
    auto top = lps[i].initTop(static_cast<unsigned>(in[i].top.size()));
    for (size_t j = 0; j < in[i].top.size(); ++j) {
      top[j].setTokenId(in[i].top[j].token_id);
      top[j].setLogprob(in[i].top[j].logprob);
    }
  }
}

template <typename List>
void EncodeIds(const std::vector<int32_t>& ids, List out) {
  for (size_t i = 0; i < ids.size(); ++i) out.set(i, ids[i]);
}

void EncodeGenerate(const GenerateRequest& g, client_wire::GenerateRequest::Builder out) {
  switch (g.prompt_kind) {
    case PromptKind::kText:
      out.getPrompt().setText(TextOf(g.prompt_text));
      break;
    case PromptKind::kTokenIds:
      EncodeIds(g.prompt_ids, out.getPrompt().initTokenIds(static_cast<unsigned>(g.prompt_ids.size())));
      break;
    case PromptKind::kChat:
      EncodeChat(g.chat, out.getPrompt().initChat(static_cast<unsigned>(g.chat.size())));
      break;
  }
  sampling_wire::FillSamplingParams(g.sampling, out.initSampling());
  out.setMaxTokens(g.max_tokens);
  auto stop = out.initStop(static_cast<unsigned>(g.stop.size()));
  for (size_t i = 0; i < g.stop.size(); ++i) stop.set(i, TextOf(g.stop[i]));
  auto stop_ids = out.initStopTokenIds(static_cast<unsigned>(g.stop_token_ids.size()));
  for (size_t i = 0; i < g.stop_token_ids.size(); ++i) stop_ids.set(i, g.stop_token_ids[i]);
  out.setIgnoreEos(g.ignore_eos);
  out.setStream(g.stream);
  out.setNumLogprobs(static_cast<uint32_t>(g.sampling.num_logprobs));
  out.setN(g.n);
  out.setPriority(g.priority);
  out.setPromptLogprobs(g.prompt_logprobs);
  if (!g.user.empty()) out.setUser(TextOf(g.user));
  if (g.speculative.method != SpeculativeChoice::kServerDefault || g.speculative.num_tokens != 0) {
    auto spec = out.initSpeculative();
    switch (g.speculative.method) {
      case SpeculativeChoice::kServerDefault: spec.setMethod(client_wire::SpeculativeMethod::SERVER_DEFAULT); break;
      case SpeculativeChoice::kOff: spec.setMethod(client_wire::SpeculativeMethod::OFF); break;
      case SpeculativeChoice::kNgram: spec.setMethod(client_wire::SpeculativeMethod::NGRAM); break;
      case SpeculativeChoice::kDraft: spec.setMethod(client_wire::SpeculativeMethod::DRAFT); break;
    }
    spec.setNumTokens(g.speculative.num_tokens);
  }
  if (g.beam.enabled()) {
    auto beam = out.initBeam();
    beam.setWidth(static_cast<uint32_t>(g.beam.width));
    beam.setLengthPenalty(g.beam.length_penalty);
    beam.setEarlyStopping(g.beam.early_stopping == EarlyStopping::kWhenFull ? client_wire::EarlyStopping::WHEN_FULL
                          : g.beam.early_stopping == EarlyStopping::kNever  ? client_wire::EarlyStopping::NEVER
                                                                             : client_wire::EarlyStopping::HEURISTIC);
  }
}

void EncodeTokenize(const TokenizeRequest& t, client_wire::TokenizeRequest::Builder out) {
  if (t.prompt_kind == PromptKind::kChat) {
    EncodeChat(t.chat, out.getPrompt().initChat(static_cast<unsigned>(t.chat.size())));
  } else {
    out.getPrompt().setText(TextOf(t.prompt_text));
  }
  out.setAddSpecialTokens(t.add_special_tokens);
}

// ---- decoding (throws kj::Exception on malformed input; callers catch) ----------------------

Status CheckSize(size_t size, size_t limit, const char* what) {
  if (size > limit) {
    return InvalidArgument(std::string(what) + ": " + std::to_string(size) + " exceeds the limit " +
                           std::to_string(limit));
  }
  return OkStatus();
}

StatusOr<std::vector<ChatMessage>> DecodeChat(capnp::List<client_wire::ChatMessage>::Reader chat) {
  RETURN_IF_ERROR(CheckSize(chat.size(), kMaxChatMessages, "chat messages"));
  std::vector<ChatMessage> out;
  size_t total = 0;
  for (auto m : chat) {
    total += m.getContent().size() + m.getRole().size();
    RETURN_IF_ERROR(CheckSize(total, kMaxTextBytes, "chat text bytes"));
    out.push_back({ToString(m.getRole()), ToString(m.getContent())});
  }
  return out;
}

StatusOr<std::vector<int32_t>> DecodeIds(capnp::List<int32_t>::Reader ids, const char* what) {
  RETURN_IF_ERROR(CheckSize(ids.size(), kMaxPromptTokens, what));
  std::vector<int32_t> out;
  out.reserve(ids.size());
  for (int32_t id : ids) out.push_back(id);
  return out;
}

std::vector<TokenLogprobs> DecodeTokenLogprobs(capnp::List<client_wire::TokenLogprobs>::Reader in) {
  std::vector<TokenLogprobs> out;
  out.reserve(in.size());
  for (auto lp : in) {
    TokenLogprobs one;
    one.logprob = lp.getLogprob();
    for (auto t : lp.getTop()) one.top.push_back({t.getTokenId(), t.getLogprob()});
    out.push_back(std::move(one));
  }
  return out;
}

StatusOr<GenerateRequest> DecodeGenerate(client_wire::GenerateRequest::Reader in) {
  GenerateRequest g;
  auto prompt = in.getPrompt();
  switch (prompt.which()) {
    case client_wire::GenerateRequest::Prompt::TEXT:
      g.prompt_kind = PromptKind::kText;
      RETURN_IF_ERROR(CheckSize(prompt.getText().size(), kMaxTextBytes, "prompt text bytes"));
      g.prompt_text = ToString(prompt.getText());
      break;
    case client_wire::GenerateRequest::Prompt::TOKEN_IDS: {
      g.prompt_kind = PromptKind::kTokenIds;
      ASSIGN_OR_RETURN(g.prompt_ids, DecodeIds(prompt.getTokenIds(), "prompt token ids"));
      break;
    }
    case client_wire::GenerateRequest::Prompt::CHAT: {
      g.prompt_kind = PromptKind::kChat;
      ASSIGN_OR_RETURN(g.chat, DecodeChat(prompt.getChat()));
      break;
    }
    default:
      return InvalidArgument("generate request with an unknown prompt kind");
  }
  RETURN_IF_ERROR(CheckSize(in.getSampling().getLogitBias().size(), kMaxLogitBias, "logit_bias entries"));
  g.sampling = sampling_wire::ReadSamplingParams(in.getSampling());
  g.max_tokens = in.getMaxTokens();
  auto stop = in.getStop();
  RETURN_IF_ERROR(CheckSize(stop.size(), kMaxStopStrings, "stop strings"));
  for (auto s : stop) {
    RETURN_IF_ERROR(CheckSize(s.size(), kMaxStopStringBytes, "stop string bytes"));
    g.stop.push_back(ToString(s));
  }
  auto stop_ids = in.getStopTokenIds();
  RETURN_IF_ERROR(CheckSize(stop_ids.size(), kMaxStopTokenIds, "stop token ids"));
  for (int32_t id : stop_ids) g.stop_token_ids.push_back(id);
  g.ignore_eos = in.getIgnoreEos();
  g.stream = in.getStream();
  // Clamp before the int conversion; request_validation rejects anything above 20.
  g.sampling.num_logprobs = static_cast<int32_t>(std::min<uint32_t>(in.getNumLogprobs(), 1u << 20));
  g.n = in.getN();
  g.priority = in.getPriority();
  g.prompt_logprobs = in.getPromptLogprobs();
  RETURN_IF_ERROR(CheckSize(in.getUser().size(), kMaxUserBytes, "user bytes"));
  g.user = ToString(in.getUser());
  if (in.hasSpeculative()) {
    const auto spec = in.getSpeculative();
    switch (spec.getMethod()) {
      case client_wire::SpeculativeMethod::SERVER_DEFAULT: g.speculative.method = SpeculativeChoice::kServerDefault; break;
      case client_wire::SpeculativeMethod::OFF: g.speculative.method = SpeculativeChoice::kOff; break;
      case client_wire::SpeculativeMethod::NGRAM: g.speculative.method = SpeculativeChoice::kNgram; break;
      case client_wire::SpeculativeMethod::DRAFT: g.speculative.method = SpeculativeChoice::kDraft; break;
      default: return InvalidArgument("unknown speculative method " + std::to_string(static_cast<int>(spec.getMethod())));
    }
    g.speculative.num_tokens = spec.getNumTokens();
  }
  if (in.hasBeam()) {
    const auto beam = in.getBeam();
    // Clamped before the int conversion; request_validation rejects anything above kMaxBeamWidth.
    g.beam.width = static_cast<int32_t>(std::min<uint32_t>(beam.getWidth(), 1u << 20));
    g.beam.length_penalty = beam.getLengthPenalty();
    switch (beam.getEarlyStopping()) {
      case client_wire::EarlyStopping::HEURISTIC: g.beam.early_stopping = EarlyStopping::kHeuristic; break;
      case client_wire::EarlyStopping::WHEN_FULL: g.beam.early_stopping = EarlyStopping::kWhenFull; break;
      case client_wire::EarlyStopping::NEVER: g.beam.early_stopping = EarlyStopping::kNever; break;
      default:
        return InvalidArgument("unknown beam early_stopping " +
                               std::to_string(static_cast<int>(beam.getEarlyStopping())));
    }
  }
  return g;
}

StatusOr<TokenizeRequest> DecodeTokenize(client_wire::TokenizeRequest::Reader in) {
  TokenizeRequest t;
  auto prompt = in.getPrompt();
  switch (prompt.which()) {
    case client_wire::TokenizeRequest::Prompt::TEXT:
      RETURN_IF_ERROR(CheckSize(prompt.getText().size(), kMaxTextBytes, "prompt text bytes"));
      t.prompt_kind = PromptKind::kText;
      t.prompt_text = ToString(prompt.getText());
      break;
    case client_wire::TokenizeRequest::Prompt::CHAT: {
      t.prompt_kind = PromptKind::kChat;
      ASSIGN_OR_RETURN(t.chat, DecodeChat(prompt.getChat()));
      break;
    }
    default:
      return InvalidArgument("tokenize request with an unknown prompt kind");
  }
  t.add_special_tokens = in.getAddSpecialTokens();
  return t;
}

// Copies the bytes into word-aligned memory (ZeroMQ frames need not be aligned) and opens them
// with limits: the traversal limit is a small multiple of the message size, so a message whose
// pointers alias the same data many times cannot make the reader do unbounded work.
template <typename Fn>
auto WithReader(const void* data, size_t size, Fn&& fn) -> decltype(fn(std::declval<capnp::MessageReader&>())) {
  if (size == 0 || size % sizeof(capnp::word) != 0) {
    return InvalidArgument("message of " + std::to_string(size) + " bytes is not a whole number of words");
  }
  RETURN_IF_ERROR(CheckSize(size, kMaxClientMessageBytes, "message bytes"));
  kj::Array<capnp::word> words = kj::heapArray<capnp::word>(size / sizeof(capnp::word));
  std::memcpy(words.begin(), data, size);
  capnp::ReaderOptions options;
  options.traversalLimitInWords = 4 * words.size() + 1024;
  options.nestingLimit = kCapnpNestingLimit;
  try {
    capnp::FlatArrayMessageReader reader(words.asPtr(), options);
    return fn(reader);
  } catch (const kj::Exception& e) {
    return InvalidArgument(std::string("malformed message: ") + e.getDescription().cStr());
  }
}

ErrorKind DecodeErrorKind(client_wire::ErrorKind kind) {
  switch (kind) {
    case client_wire::ErrorKind::INTERNAL: return ErrorKind::kInternal;
    case client_wire::ErrorKind::INVALID_REQUEST: return ErrorKind::kInvalidRequest;
    case client_wire::ErrorKind::PROMPT_TOO_LONG: return ErrorKind::kPromptTooLong;
    case client_wire::ErrorKind::OVERLOADED: return ErrorKind::kOverloaded;
    case client_wire::ErrorKind::CANCELLED: return ErrorKind::kCancelled;
    case client_wire::ErrorKind::WORKER_LOST: return ErrorKind::kWorkerLost;
    case client_wire::ErrorKind::UNAUTHENTICATED: return ErrorKind::kUnauthenticated;
    case client_wire::ErrorKind::UNAVAILABLE: return ErrorKind::kUnavailable;
  }
  return ErrorKind::kInternal;  // a newer peer's kind
}

client_wire::ErrorKind EncodeErrorKind(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kInternal: return client_wire::ErrorKind::INTERNAL;
    case ErrorKind::kInvalidRequest: return client_wire::ErrorKind::INVALID_REQUEST;
    case ErrorKind::kPromptTooLong: return client_wire::ErrorKind::PROMPT_TOO_LONG;
    case ErrorKind::kOverloaded: return client_wire::ErrorKind::OVERLOADED;
    case ErrorKind::kCancelled: return client_wire::ErrorKind::CANCELLED;
    case ErrorKind::kWorkerLost: return client_wire::ErrorKind::WORKER_LOST;
    case ErrorKind::kUnauthenticated: return client_wire::ErrorKind::UNAUTHENTICATED;
    case ErrorKind::kUnavailable: return client_wire::ErrorKind::UNAVAILABLE;
  }
  return client_wire::ErrorKind::INTERNAL;
}

}  // namespace

const char* ErrorKindName(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kInternal: return "internal";
    case ErrorKind::kInvalidRequest: return "invalid_request";
    case ErrorKind::kPromptTooLong: return "prompt_too_long";
    case ErrorKind::kOverloaded: return "overloaded";
    case ErrorKind::kCancelled: return "cancelled";
    case ErrorKind::kWorkerLost: return "worker_lost";
    case ErrorKind::kUnauthenticated: return "unauthenticated";
    case ErrorKind::kUnavailable: return "unavailable";
  }
  return "unknown";
}

ErrorKind ErrorKindFromStatus(const Status& status) {
  switch (status.code()) {
    case StatusCode::kInvalidArgument: return ErrorKind::kInvalidRequest;
    case StatusCode::kOutOfRange: return ErrorKind::kPromptTooLong;
    case StatusCode::kResourceExhausted: return ErrorKind::kOverloaded;
    case StatusCode::kCancelled: return ErrorKind::kCancelled;
    case StatusCode::kUnavailable:
    case StatusCode::kDeadlineExceeded: return ErrorKind::kWorkerLost;
    case StatusCode::kUnauthenticated: return ErrorKind::kUnauthenticated;
    default: return ErrorKind::kInternal;
  }
}

const char* FinishReasonName(FinishReason reason) {
  switch (reason) {
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kCancelled: return "cancelled";
  }
  return "unknown";
}

std::string EncodeClientMessage(const ClientMessage& m) {
  capnp::MallocMessageBuilder builder;
  auto root = builder.initRoot<client_wire::ClientMessage>();
  root.setVersion(m.version);
  root.setRequestId(m.request_id);
  if (!m.api_key.empty()) root.setApiKey(TextOf(m.api_key));
  auto body = root.initBody();
  switch (m.kind) {
    case ClientMessageKind::kGenerate: EncodeGenerate(m.generate, body.initGenerate()); break;
    case ClientMessageKind::kCancel: body.setCancel(); break;
    case ClientMessageKind::kHealth: body.setHealth(); break;
    case ClientMessageKind::kStats: body.setStats(); break;
    case ClientMessageKind::kHeartbeat: body.setHeartbeat(); break;
    case ClientMessageKind::kMetrics: body.setMetrics(); break;
    case ClientMessageKind::kTokenize: EncodeTokenize(m.tokenize, body.initTokenize()); break;
    case ClientMessageKind::kDetokenize: {
      const auto& ids = m.detokenize.token_ids;
      EncodeIds(ids, body.initDetokenize().initTokenIds(static_cast<unsigned>(ids.size())));
      break;
    }
  }
  return ToBytes(builder);
}

StatusOr<ClientMessage> DecodeClientMessage(const void* data, size_t size) {
  return WithReader(data, size, [](capnp::MessageReader& reader) -> StatusOr<ClientMessage> {
    auto root = reader.getRoot<client_wire::ClientMessage>();
    ClientMessage m;
    m.version = root.getVersion();
    m.request_id = root.getRequestId();
    RETURN_IF_ERROR(CheckSize(root.getApiKey().size(), 1024, "api key bytes"));
    m.api_key = ToString(root.getApiKey());
    auto body = root.getBody();
    switch (body.which()) {
      case client_wire::ClientMessage::Body::GENERATE: {
        m.kind = ClientMessageKind::kGenerate;
        ASSIGN_OR_RETURN(m.generate, DecodeGenerate(body.getGenerate()));
        break;
      }
      case client_wire::ClientMessage::Body::CANCEL: m.kind = ClientMessageKind::kCancel; break;
      case client_wire::ClientMessage::Body::HEALTH: m.kind = ClientMessageKind::kHealth; break;
      case client_wire::ClientMessage::Body::STATS: m.kind = ClientMessageKind::kStats; break;
      case client_wire::ClientMessage::Body::HEARTBEAT: m.kind = ClientMessageKind::kHeartbeat; break;
      case client_wire::ClientMessage::Body::METRICS: m.kind = ClientMessageKind::kMetrics; break;
      case client_wire::ClientMessage::Body::TOKENIZE: {
        m.kind = ClientMessageKind::kTokenize;
        ASSIGN_OR_RETURN(m.tokenize, DecodeTokenize(body.getTokenize()));
        break;
      }
      case client_wire::ClientMessage::Body::DETOKENIZE: {
        m.kind = ClientMessageKind::kDetokenize;
        ASSIGN_OR_RETURN(m.detokenize.token_ids, DecodeIds(body.getDetokenize().getTokenIds(), "detokenize ids"));
        break;
      }
      default: return InvalidArgument("unknown client message kind");
    }
    return m;
  });
}

std::string EncodeServerMessage(const ServerMessage& m) {
  capnp::MallocMessageBuilder builder;
  auto root = builder.initRoot<client_wire::ServerMessage>();
  root.setVersion(m.version);
  root.setRequestId(m.request_id);
  auto body = root.initBody();
  switch (m.kind) {
    case ServerMessageKind::kChunk: {
      auto c = body.initChunk();
      c.setSampleIndex(m.chunk.sample_index);
      EncodeIds(m.chunk.token_ids, c.initTokenIds(static_cast<unsigned>(m.chunk.token_ids.size())));
      c.setText(TextOf(m.chunk.text));
      EncodeTokenLogprobs(m.chunk.logprobs, c.initLogprobs(static_cast<unsigned>(m.chunk.logprobs.size())));
      break;
    }
    case ServerMessageKind::kPromptLogprobs: {
      auto p = body.initPromptLogprobs();
      const PromptLogprobs& in = m.prompt_logprobs;
      EncodeIds(in.token_ids, p.initTokenIds(static_cast<unsigned>(in.token_ids.size())));
      EncodeTokenLogprobs(in.logprobs, p.initLogprobs(static_cast<unsigned>(in.logprobs.size())));
      break;
    }
    case ServerMessageKind::kMetrics: body.initMetrics().setText(TextOf(m.metrics.text)); break;
    case ServerMessageKind::kTokenize: {
      auto t = body.initTokenize();
      EncodeIds(m.tokenize.token_ids, t.initTokenIds(static_cast<unsigned>(m.tokenize.token_ids.size())));
      t.setMaxModelLen(m.tokenize.max_model_len);
      break;
    }
    case ServerMessageKind::kDetokenize: body.initDetokenize().setText(TextOf(m.detokenize.text)); break;
    case ServerMessageKind::kFinish: {
      auto f = body.initFinish();
      f.setSampleIndex(m.finish.sample_index);
      f.setReason(m.finish.reason == FinishReason::kStop     ? client_wire::FinishReason::STOP
                  : m.finish.reason == FinishReason::kLength ? client_wire::FinishReason::LENGTH
                                                             : client_wire::FinishReason::CANCELLED);
      auto u = f.initUsage();
      u.setPromptTokens(m.finish.usage.prompt_tokens);
      u.setCompletionTokens(m.finish.usage.completion_tokens);
      u.setCachedPromptTokens(m.finish.usage.cached_prompt_tokens);
      f.setTtftMs(m.finish.ttft_ms);
      f.setTpotMs(m.finish.tpot_ms);
      f.setSeed(m.finish.seed);
      f.setNumReplays(m.finish.num_replays);
      f.setNumDraftTokens(m.finish.num_draft_tokens);
      f.setNumAcceptedTokens(m.finish.num_accepted_tokens);
      f.setBeamScore(m.finish.beam_score);
      f.setCumulativeLogprob(m.finish.cumulative_logprob);
      break;
    }
    case ServerMessageKind::kError: {
      auto e = body.initError();
      e.setKind(EncodeErrorKind(m.error.kind));
      e.setMessage(TextOf(m.error.message));
      break;
    }
    case ServerMessageKind::kHealth: {
      auto h = body.initHealth();
      h.setOk(m.health.ok);
      h.setNumWorkerGroups(m.health.num_worker_groups);
      h.setDraining(m.health.draining);
      h.setModelName(TextOf(m.health.model_name));
      h.setVocabSize(m.health.vocab_size);
      h.setContextLength(m.health.context_length);
      h.setKvTokens(m.health.kv_tokens);
      h.setKvDtype(TextOf(m.health.kv_dtype));
      break;
    }
    case ServerMessageKind::kStats: {
      auto s = body.initStats();
      const StatsReply& r = m.stats;
      s.setNumWaiting(r.num_waiting);
      s.setNumRunning(r.num_running);
      s.setBlocksUsed(r.blocks_used);
      s.setBlocksFree(r.blocks_free);
      s.setBlocksCached(r.blocks_cached);
      s.setBlocksTotal(r.blocks_total);
      s.setPrefixHitRate(r.prefix_hit_rate);
      s.setKvWaste(r.kv_waste);
      s.setTokensPerSecond(r.tokens_per_second);
      s.setNumRequestsTotal(r.num_requests_total);
      s.setNumRequestsFinished(r.num_requests_finished);
      s.setNumRequestsRejected(r.num_requests_rejected);
      s.setNumMessagesDropped(r.num_messages_dropped);
      s.setNumWorkerGroups(r.num_worker_groups);
      s.setNumStepsTotal(r.num_steps_total);
      s.setNumGeneratedTokens(r.num_generated_tokens);
      s.setNumPreemptions(r.num_preemptions);
      s.setNumReplays(r.num_replays);
      s.setNumRequestsWaitingForGroup(r.num_requests_waiting_for_group);
      s.setNumDraftTokens(r.num_draft_tokens);
      s.setNumAcceptedTokens(r.num_accepted_tokens);
      s.setNumVerifySteps(r.num_verify_steps);
      break;
    }
  }
  return ToBytes(builder);
}

StatusOr<ServerMessage> DecodeServerMessage(const void* data, size_t size) {
  return WithReader(data, size, [](capnp::MessageReader& reader) -> StatusOr<ServerMessage> {
    auto root = reader.getRoot<client_wire::ServerMessage>();
    ServerMessage m;
    m.version = root.getVersion();
    m.request_id = root.getRequestId();
    auto body = root.getBody();
    switch (body.which()) {
      case client_wire::ServerMessage::Body::CHUNK: {
        m.kind = ServerMessageKind::kChunk;
        auto c = body.getChunk();
        m.chunk.sample_index = c.getSampleIndex();
        ASSIGN_OR_RETURN(m.chunk.token_ids, DecodeIds(c.getTokenIds(), "chunk token ids"));
        m.chunk.text = ToString(c.getText());
        m.chunk.logprobs = DecodeTokenLogprobs(c.getLogprobs());
        break;
      }
      case client_wire::ServerMessage::Body::PROMPT_LOGPROBS: {
        m.kind = ServerMessageKind::kPromptLogprobs;
        auto p = body.getPromptLogprobs();
        ASSIGN_OR_RETURN(m.prompt_logprobs.token_ids, DecodeIds(p.getTokenIds(), "prompt logprob ids"));
        m.prompt_logprobs.logprobs = DecodeTokenLogprobs(p.getLogprobs());
        break;
      }
      case client_wire::ServerMessage::Body::METRICS:
        m.kind = ServerMessageKind::kMetrics;
        m.metrics.text = ToString(body.getMetrics().getText());
        break;
      case client_wire::ServerMessage::Body::TOKENIZE: {
        m.kind = ServerMessageKind::kTokenize;
        ASSIGN_OR_RETURN(m.tokenize.token_ids, DecodeIds(body.getTokenize().getTokenIds(), "tokenize ids"));
        m.tokenize.max_model_len = body.getTokenize().getMaxModelLen();
        break;
      }
      case client_wire::ServerMessage::Body::DETOKENIZE:
        m.kind = ServerMessageKind::kDetokenize;
        m.detokenize.text = ToString(body.getDetokenize().getText());
        break;
      case client_wire::ServerMessage::Body::FINISH: {
        m.kind = ServerMessageKind::kFinish;
        auto f = body.getFinish();
        m.finish.sample_index = f.getSampleIndex();
        switch (f.getReason()) {
          case client_wire::FinishReason::STOP: m.finish.reason = FinishReason::kStop; break;
          case client_wire::FinishReason::LENGTH: m.finish.reason = FinishReason::kLength; break;
          case client_wire::FinishReason::CANCELLED: m.finish.reason = FinishReason::kCancelled; break;
          default: return InvalidArgument("unknown finish reason");
        }
        m.finish.usage.prompt_tokens = f.getUsage().getPromptTokens();
        m.finish.usage.completion_tokens = f.getUsage().getCompletionTokens();
        m.finish.usage.cached_prompt_tokens = f.getUsage().getCachedPromptTokens();
        m.finish.ttft_ms = f.getTtftMs();
        m.finish.tpot_ms = f.getTpotMs();
        m.finish.seed = f.getSeed();
        m.finish.num_replays = f.getNumReplays();
        m.finish.num_draft_tokens = f.getNumDraftTokens();
        m.finish.num_accepted_tokens = f.getNumAcceptedTokens();
        m.finish.beam_score = f.getBeamScore();
        m.finish.cumulative_logprob = f.getCumulativeLogprob();
        break;
      }
      case client_wire::ServerMessage::Body::ERROR: {
        m.kind = ServerMessageKind::kError;
        m.error.kind = DecodeErrorKind(body.getError().getKind());
        m.error.message = ToString(body.getError().getMessage());
        break;
      }
      case client_wire::ServerMessage::Body::HEALTH: {
        m.kind = ServerMessageKind::kHealth;
        auto h = body.getHealth();
        m.health.ok = h.getOk();
        m.health.num_worker_groups = h.getNumWorkerGroups();
        m.health.draining = h.getDraining();
        m.health.model_name = ToString(h.getModelName());
        m.health.vocab_size = h.getVocabSize();
        m.health.context_length = h.getContextLength();
        m.health.kv_tokens = h.getKvTokens();
        m.health.kv_dtype = ToString(h.getKvDtype());
        break;
      }
      case client_wire::ServerMessage::Body::STATS: {
        m.kind = ServerMessageKind::kStats;
        auto s = body.getStats();
        StatsReply& r = m.stats;
        r.num_waiting = s.getNumWaiting();
        r.num_running = s.getNumRunning();
        r.blocks_used = s.getBlocksUsed();
        r.blocks_free = s.getBlocksFree();
        r.blocks_cached = s.getBlocksCached();
        r.blocks_total = s.getBlocksTotal();
        r.prefix_hit_rate = s.getPrefixHitRate();
        r.kv_waste = s.getKvWaste();
        r.tokens_per_second = s.getTokensPerSecond();
        r.num_requests_total = s.getNumRequestsTotal();
        r.num_requests_finished = s.getNumRequestsFinished();
        r.num_requests_rejected = s.getNumRequestsRejected();
        r.num_messages_dropped = s.getNumMessagesDropped();
        r.num_worker_groups = s.getNumWorkerGroups();
        r.num_steps_total = s.getNumStepsTotal();
        r.num_generated_tokens = s.getNumGeneratedTokens();
        r.num_preemptions = s.getNumPreemptions();
        r.num_replays = s.getNumReplays();
        r.num_requests_waiting_for_group = s.getNumRequestsWaitingForGroup();
        r.num_draft_tokens = s.getNumDraftTokens();
        r.num_accepted_tokens = s.getNumAcceptedTokens();
        r.num_verify_steps = s.getNumVerifySteps();
        break;
      }
      default: return InvalidArgument("unknown server message kind");
    }
    return m;
  });
}

ServerMessage MakeErrorMessage(uint64_t request_id, ErrorKind kind, std::string message) {
  ServerMessage m;
  m.request_id = request_id;
  m.kind = ServerMessageKind::kError;
  m.error.kind = kind;
  m.error.message = std::move(message);
  return m;
}

}  // namespace tpserve::proto
