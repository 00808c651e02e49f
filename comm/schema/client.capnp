# The client protocol of tpserve: what a client (C++ library, CLI, Python) and the coordinator say
# to each other over ZeroMQ (client DEALER -> coordinator ROUTER). One Cap'n Proto message per ZeroMQ
# frame, unpacked encoding. The coordinator answers every request with messages carrying the same
# requestId; a generate request ends with exactly one `finish` or one `error`.
#
# Generated C++ lives in tpserve::client_wire (worker.capnp has tpserve::wire; names overlap). The
# sampling settings and token logprobs are common.capnp's, shared with the worker protocol.
#
# Versioning: every message carries `version`. The coordinator accepts requests whose version equals
# kClientProtocolVersion and answers any other with an `error` of kind invalidRequest. New fields are
# only ever appended (Cap'n Proto keeps old readers working); a change old peers cannot ignore bumps
# the version. Version 2: SamplingParams.hasSeed (a version-1 client's seed would read as "none").
# Version 3: metrics, tokenize and detokenize requests; prompt logprobs; the `unavailable` error.
@0xc48070df8ad3a51a;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("tpserve::client_wire");
using Common = import "common.capnp";

const kClientProtocolVersion :UInt32 = 3;

# ---------------------------------------------------------------------------------------------
# Client -> coordinator

struct ClientMessage {
  version @0 :UInt32;        # kClientProtocolVersion
  requestId @1 :UInt64;      # chosen by the client, unique among its in-flight requests; replies echo it
  apiKey @2 :Text;           # checked only when the coordinator was started with API keys
  body :union {
    generate @3 :GenerateRequest;
    cancel @4 :Void;         # cancel the generate request with this requestId (no reply if unknown)
    health @5 :Void;         # answered with `health`
    stats @6 :Void;          # answered with `stats`
    heartbeat @7 :Void;      # "still here": keeps this client's requests alive; no reply
    metrics @8 :Void;        # answered with `metrics` (Prometheus text exposition)
    tokenize @9 :TokenizeRequest;      # answered with `tokenize`
    detokenize @10 :DetokenizeRequest; # answered with `detokenize`
  }
}

struct TokenizeRequest {
  prompt :union {
    text @0 :Text;                      # tokenized as a generate request's text prompt would be
    chat @1 :List(ChatMessage);         # rendered with the model's chat format + assistant prompt
  }
  addSpecialTokens @2 :Bool = true;     # text only: add BOS when the model asks for it
}

struct DetokenizeRequest {
  tokenIds @0 :List(Int32);             # every id in [0, V)
}

struct ChatMessage {
  role @0 :Text;             # "system" | "user" | "assistant"
  content @1 :Text;
}

struct GenerateRequest {
  prompt :union {
    text @0 :Text;                      # raw text, tokenized as is (BOS added when the model asks)
    tokenIds @1 :List(Int32);           # already tokenized: every id in [0, V)
    chat @2 :List(ChatMessage);         # rendered with the model's chat format + assistant prompt
  }
  sampling @3 :Common.SamplingParams;
  maxTokens @4 :UInt32 = 16;            # >= 1; generation stops after this many tokens (reason length)
  stop @5 :List(Text);                  # stop strings: the text ends before the first match (reason stop)
  stopTokenIds @6 :List(Int32);         # finishing tokens besides EOS (its id is reported, its text is not)
  ignoreEos @7 :Bool = false;           # keep going past EOS (benchmarks)
  stream @8 :Bool = true;               # true: token chunks as they are final; false: one chunk at the end
  numLogprobs @9 :UInt32 = 0;           # top-n logprobs per token, 0..20
  n @10 :UInt32 = 1;                    # independent samples of the same prompt (sample index 0..n-1)
  priority @11 :Int32 = 0;              # larger runs first when the scheduler must choose
  promptLogprobs @12 :Bool = false;     # also answer `promptLogprobs`: every prompt token's logprob
                                        # (and top-numLogprobs), computed during prefill
  user @13 :Text;                       # the end user, for logs (OpenAI `user`); at most 256 bytes
  speculative @14 :Speculative;         # speculative decoding: same tokens, maybe faster
  beam @15 :BeamSearch;                 # beam search instead of sampling (absent: off); n hypotheses
                                        # are returned, best first, each at the end of the search
}

# Beam search (README): `width` live hypotheses ranked by cumulative logprob, scored at the end by
# cumulativeLogprob / length^lengthPenalty. Takes greedy sampling settings, no penalties, logit bias,
# logprobs or prompt logprobs, and n <= width.
struct BeamSearch {
  width @0 :UInt32;                     # 1..8; 0: no beam search
  lengthPenalty @1 :Float32 = 1.0;      # > 0 favours longer hypotheses, < 0 shorter; in [-10, 10]
  earlyStopping @2 :EarlyStopping;
}

enum EarlyStopping {                    # Hugging Face transformers' early_stopping values
  heuristic @0;                         # false: stop when no live beam scores better than the worst finished
  whenFull @1;                          # true: stop as soon as width hypotheses have finished
  never @2;                             # "never": stop when no live beam could ever score better
}

# Speculative decoding: proposals verified in the same step as the sequence's own token; the output
# is bitwise the output without it (README). Absent: the server's default (`--speculative`).
struct Speculative {
  method @0 :SpeculativeMethod;
  numTokens @1 :UInt32;                 # k, most proposals per step, 1..16 (0: 4)
}

enum SpeculativeMethod {
  serverDefault @0;
  off @1;
  ngram @2;                             # prompt lookup: the tokens that followed the text's last n-gram
  draft @3;                             # the worker group's draft model (tpserve-worker --draft-model)
}

# ---------------------------------------------------------------------------------------------
# Coordinator -> client

struct ServerMessage {
  version @0 :UInt32;        # kClientProtocolVersion
  requestId @1 :UInt64;      # the request this answers (0 for errors about unparseable messages)
  body :union {
    chunk @2 :TokenChunk;
    finish @3 :Finish;
    error @4 :Error;
    health @5 :HealthReply;
    stats @6 :StatsReply;
    promptLogprobs @7 :PromptLogprobs;  # once per request that asked, before its first chunk
    metrics @8 :MetricsReply;
    tokenize @9 :TokenizeReply;
    detokenize @10 :DetokenizeReply;
  }
}

struct PromptLogprobs {
  tokenIds @0 :List(Int32);             # the whole prompt as the model saw it (BOS, chat format included)
  logprobs @1 :List(TokenLogprobs);     # one per tokenIds entry after the first (nothing predicts the first)
}

struct MetricsReply {
  text @0 :Text;                        # Prometheus text exposition format 0.0.4, names prefixed `tpserve:`
}

struct TokenizeReply {
  tokenIds @0 :List(Int32);
  maxModelLen @1 :UInt32;               # the model's context length
}

struct DetokenizeReply {
  text @0 :Text;
}

struct TokenLogprobs {
  logprob @0 :Float32;                  # of the chosen token under the model's raw distribution
  top @1 :List(Common.TokenLogprob);    # the numLogprobs most likely tokens, most likely first
}

struct TokenChunk {
  sampleIndex @0 :UInt32;               # which of the n samples
  tokenIds @1 :List(Int32);             # new generated ids, in order (may be empty when only text moved)
  text @2 :Text;                        # new final text: never retracted, stop strings already cut
  logprobs @3 :List(TokenLogprobs);     # one per tokenIds entry when numLogprobs > 0 was asked
}

enum FinishReason {
  stop @0;                              # EOS, a stop token id or a stop string
  length @1;                            # maxTokens or the model's context length
  cancelled @2;                         # the client cancelled
}

struct Usage {
  promptTokens @0 :UInt32;
  completionTokens @1 :UInt32;          # generated by this sample
  cachedPromptTokens @2 :UInt32;        # prompt tokens served from the prefix cache
}

struct Finish {
  sampleIndex @0 :UInt32;               # one finish per sample; the request ends with the last
  reason @1 :FinishReason;
  usage @2 :Usage;
  ttftMs @3 :Float64;                   # arrival -> first token of this sample
  tpotMs @4 :Float64;                   # mean time per output token after the first
  seed @5 :UInt64;                      # the request's seed (given or drawn): send it to replay
  numReplays @6 :UInt32;                # times the request was re-run after its worker group was lost
  numDraftTokens @7 :UInt32;            # speculative proposals verified for this sample
  numAcceptedTokens @8 :UInt32;         # of those, kept (acceptance rate = accepted / draft)
  beamScore @9 :Float64;                # beam search: the hypothesis's length-penalised score (else 0)
  cumulativeLogprob @10 :Float64;       # beam search: the sum of its tokens' logprobs (else 0)
}

enum ErrorKind {
  internal @0;
  invalidRequest @1;                    # a field out of range, empty prompt, unknown message, bad version
  promptTooLong @2;                     # prompt (+ maxTokens) beyond the model's context length
  overloaded @3;                        # queue full or draining: retry later
  cancelled @4;
  workerLost @5;                        # the worker group running the request went away
  unauthenticated @6;                   # missing or wrong apiKey
  unavailable @7;                       # no worker group serves (starting, draining or lost): retry later
}

struct Error {
  kind @0 :ErrorKind;
  message @1 :Text;                     # what was wrong, in words a person can act on
}

struct HealthReply {
  ok @0 :Bool;                          # at least one worker group registered and not draining
  numWorkerGroups @1 :UInt32;
  draining @2 :Bool;
  modelName @3 :Text;
  vocabSize @4 :UInt32;
  contextLength @5 :UInt32;
  # KV cache: tokens every layer can hold (pages / layer groups x block size), summed over the worker
  # groups, and the groups' element types ("f16"; distinct types joined by ",").
  kvTokens @6 :UInt64;
  kvDtype @7 :Text;
}

struct StatsReply {
  numWaiting @0 :UInt32;                # queued requests (sequences) not yet running
  numRunning @1 :UInt32;
  blocksUsed @2 :UInt32;                # KV blocks referenced by a sequence, summed over groups
  blocksFree @3 :UInt32;
  blocksCached @4 :UInt32;              # unreferenced blocks holding a reusable prefix
  blocksTotal @5 :UInt32;
  prefixHitRate @6 :Float64;            # prompt tokens served from cache / prompt tokens
  kvWaste @7 :Float64;                  # allocated slots not holding tokens / allocated slots
  tokensPerSecond @8 :Float64;          # generated tokens per second over the recent window
  numRequestsTotal @9 :UInt64;
  numRequestsFinished @10 :UInt64;
  numRequestsRejected @11 :UInt64;      # typed error replies to generate requests
  numMessagesDropped @12 :UInt64;       # malformed or oversized client messages
  numWorkerGroups @13 :UInt32;
  numStepsTotal @14 :UInt64;
  numGeneratedTokens @15 :UInt64;
  numPreemptions @16 :UInt64;           # sequences preempted (by recompute) when KV blocks ran out
  numReplays @17 :UInt64;               # requests re-run after their worker group was lost
  numRequestsWaitingForGroup @18 :UInt32;  # requests of a lost group waiting for one to serve them
  numDraftTokens @19 :UInt64;           # speculative proposals verified, summed over groups
  numAcceptedTokens @20 :UInt64;        # of those, kept as output
  numVerifySteps @21 :UInt64;           # sequence-steps that verified at least one proposal
}
