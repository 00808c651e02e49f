# The coordinator <-> worker-group-leader protocol: one WorkerMessage per ZeroMQ frame, both ways.
# The group leader also MPI-broadcasts StepPlan (as its own root message) to the other ranks.
#
# Versioning: bump workerProtocolVersion on any change that an older peer could misread. Fields
# are only ever appended (never renumbered or retyped), so a decoder of version N reads version N-1.
# The coordinator refuses a Hello whose protocolVersion it does not speak.
#
# Conversation: leader connects (DEALER) -> Hello; coordinator -> Welcome (or Error + Shutdown);
# then coordinator -> StepPlan, leader -> StepResult (or Error with the stepId); either side may
# send Heartbeat at any time and the other echoes it; coordinator -> Shutdown ends every rank.
@0x950cd50db64888f7;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("tpserve::wire");
using Common = import "common.capnp";

# Version 2: SequencePlan.sampling is common.capnp's SamplingParams; numLogprobs moved to SequencePlan.
# Version 3: prompt logprobs (SequencePlan.promptLogprobs / nextPromptToken, StepResult.promptLogprobs).
# Version 4: layer groups and the KV type in Hello; block tables of one page per group.
# Version 5: speculative decoding (SequencePlan.numDraftTokens; StepResult rows per sampled position).
# Version 6: draft-model speculation (SequencePlan.draftModel / draftCatchUp / numProposals,
#            StepResult.proposals, Hello.draftModel).
const workerProtocolVersion :UInt32 = 6;

struct SequencePlan {
  seqId @0 :UInt64;
  numCached @1 :Int32;                  # position of tokenIds[0]
  tokenIds @2 :List(Int32);             # [n]
  blockTable @3 :List(Int32);           # physical KV blocks covering [0, numCached + n)
  needsToken @4 :Bool;
  sampling @5 :Common.SamplingParams;   # seed is the one to use; hasSeed is not read
  sampleIndex @6 :UInt32;
  penaltyTokens @7 :List(Int32);
  numLogprobs @8 :Int32;                # top-n logprobs to return
  # Prompt logprobs: the logprob (and top-numLogprobs) of the prompt token each position of this
  # chunk predicts: position numCached + j predicts tokenIds[j + 1], and the chunk's last position
  # predicts nextPromptToken. The answer is one StepResult.promptLogprobs entry for this sequence.
  promptLogprobs @9 :Bool;
  # The prompt token after this chunk when the prompt goes on in a later chunk; -1 when the chunk
  # ends the prompt (its last position predicts a generated token: nothing to score there).
  nextPromptToken @10 :Int32 = -1;
  # The last numDraftTokens of tokenIds are proposals: the step samples after each of the last
  # 1 + numDraftTokens tokens (StepResult.sequences holds one entry per such row, in order).
  numDraftTokens @11 :Int32;
  # Draft-model speculation (comm/step_plan.h): the draft model reads draftCatchUp (the tokens just
  # before numCached it has not seen) and tokenIds, then proposes numProposals tokens that the step
  # verifies after tokenIds (StepResult.proposals returns them).
  draftModel @12 :Bool;
  draftCatchUp @13 :List(Int32);
  numProposals @14 :Int32;
}

struct BlockCopy {
  src @0 :Int32;
  dst @1 :Int32;
}

struct StepPlan {
  stepId @0 :UInt64;
  sequences @1 :List(SequencePlan);
  blockCopies @2 :List(BlockCopy);      # copy-on-write, run before the step
  returnLogits @3 :Bool;
}

struct SequenceResult {
  seqId @0 :UInt64;
  tokenId @1 :Int32 = -1;
  logprob @2 :Float32;
  topLogprobs @3 :List(Common.TokenLogprob);
  logits @4 :List(Float32);             # [V], only when StepPlan.returnLogits
}

# The logprob of one prompt token given the tokens before it, as SequenceResult.logprob would be
# had the engine sampled (or been forced to) that token there: the same bits.
struct PromptTokenLogprob {
  tokenId @0 :Int32;                    # the prompt token scored
  logprob @1 :Float32;
  topLogprobs @2 :List(Common.TokenLogprob);  # [numLogprobs], most likely first
}

struct PromptLogprobsResult {
  seqId @0 :UInt64;
  positions @1 :List(PromptTokenLogprob);  # one per scored position of the chunk, in order
}

struct StepResult {
  stepId @0 :UInt64;
  sequences @1 :List(SequenceResult);   # one per SequencePlan with needsToken, in plan order
  computeMs @2 :Float64;
  allreduceMs @3 :Float64;
  promptLogprobs @4 :List(PromptLogprobsResult);  # one per SequencePlan with promptLogprobs, in plan order
  proposals @5 :List(DraftProposal);    # one per SequencePlan with numProposals > 0, in plan order
}

struct DraftProposal {
  seqId @0 :UInt64;
  tokenIds @1 :List(Int32);             # [numProposals]
}

# Identifies the model file without shipping it: its size and the SHA-256 of its first
# min(size, 8 MiB) bytes (the GGUF header, metadata and tensor table of any model we serve).
struct ModelFingerprint {
  fileSize @0 :UInt64;
  sha256 @1 :Data;                      # 32 bytes
}

struct Hello {
  protocolVersion @0 :UInt32;
  model @1 :ModelFingerprint;
  tpSize @2 :Int32;
  numBlocks @3 :Int32;                  # KV blocks per rank (the same on every rank)
  blockSize @4 :Int32;                  # tokens per block
  maxModelLen @5 :Int32;                # longest sequence (prompt + output) the group accepts
  vocabSize @6 :Int32;
  hostname @7 :Text;
  pid @8 :Int32;
  # The KV pages' layer groups (common/kv_groups.h): whether each group attends through a sliding
  # window of slidingWindow keys. numBlocks counts pages; a block table holds one page per group per
  # logical block (block-major), -1 for a sliding group's page that fell out of the window.
  # Protocol 4; an empty list is one full-attention group.
  kvGroupSliding @9 :List(Bool);
  slidingWindow @10 :Int32;
  kvDtype @11 :Text;                    # the KV cache's element type: f32, f16, bf16, q8_0 (empty: f32)
  draftModel @12 :ModelFingerprint;     # the draft model's file (tpserve-worker --draft-model); absent: none
}

struct Welcome {
  groupId @0 :UInt32;                   # the coordinator's name for this worker group
  heartbeatIntervalMs @1 :UInt32;       # 0: the coordinator will not expect heartbeats
}

struct Heartbeat {
  sequence @0 :UInt64;
  sentUnixMicros @1 :Int64;
  isEcho @2 :Bool;                      # an answer to the peer's heartbeat
  # Leader -> coordinator from the leader's liveness socket (a second connection, beating while a
  # step runs): the group it speaks for. 0 on the session's own connection.
  groupId @3 :UInt32;
}

struct Shutdown {
  reason @0 :Text;
}

struct Error {
  code @0 :UInt16;                      # tpserve::StatusCode numeric value
  message @1 :Text;
  stepId @2 :UInt64;                    # the step that failed (0: none)
  isFatal @3 :Bool;                     # the sender is going away
}

struct WorkerMessage {
  union {
    hello @0 :Hello;
    welcome @1 :Welcome;
    stepPlan @2 :StepPlan;
    stepResult @3 :StepResult;
    heartbeat @4 :Heartbeat;
    shutdown @5 :Shutdown;
    error @6 :Error;
  }
}
