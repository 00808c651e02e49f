# Types both tpserve protocols carry: the client protocol (client.capnp) and the coordinator <->
# worker-group protocol (worker.capnp) import them, so a request's sampling settings have one wire
# shape and one converter (comm/sampling_wire.h) from the client to the sampler.
#
# Fields are only ever appended; a change that an older peer could misread bumps the version of
# both protocols that import it.
@0x9f34ec8434849cda;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("tpserve::common_wire");

struct LogitBias {
  tokenId @0 :Int32;         # 0 <= tokenId < vocabulary size
  bias @1 :Float32;          # added to the token's logit before any other processing
}

struct SamplingParams {
  temperature @0 :Float32 = 0.0;        # 0: greedy (argmax, ties to the lowest id); else > 0, <= 100
  topK @1 :Int32 = 0;                   # 0: off; else keep the k most likely tokens
  topP @2 :Float32 = 1.0;               # (0, 1]; 1: off
  minP @3 :Float32 = 0.0;               # [0, 1]; 0: off; keep tokens with p >= minP * p_max
  repetitionPenalty @4 :Float32 = 1.0;  # > 0; 1: off
  presencePenalty @5 :Float32 = 0.0;    # [-2, 2]
  frequencyPenalty @6 :Float32 = 0.0;   # [-2, 2]
  seed @7 :UInt64 = 0;                  # the draw is a function of (seed, sample index, step) only
  logitBias @8 :List(LogitBias);
  # false: no seed was given; the coordinator draws a fresh one per request and reports it in each
  # Finish. In step plans (worker.capnp) seed is always the one to use and hasSeed is not read.
  hasSeed @9 :Bool = false;
}

struct TokenLogprob {
  tokenId @0 :Int32;
  logprob @1 :Float32;
}
