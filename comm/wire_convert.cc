#include "comm/wire_convert.h"

#include <algorithm>
#include <cstring>

#include <capnp/serialize.h>
#include <kj/exception.h>

#include "comm/sampling_wire.h"

namespace tpserve::wire_convert {
namespace {

template <typename T, typename ListBuilder>
void FillList(const std::vector<T>& values, ListBuilder list) {
  for (size_t i = 0; i < values.size(); ++i) list.set(static_cast<unsigned>(i), values[i]);
}

template <typename T, typename ListReader>
std::vector<T> ReadList(ListReader list) {
  std::vector<T> values;
  values.reserve(list.size());
  for (auto v : list) values.push_back(v);
  return values;
}

template <typename ListBuilder>
void FillTokenLogprobs(const std::vector<TokenLogprob>& values, ListBuilder list) {
  for (size_t j = 0; j < values.size(); ++j) {
    list[static_cast<unsigned>(j)].setTokenId(values[j].token_id);
    list[static_cast<unsigned>(j)].setLogprob(values[j].logprob);
  }
}

template <typename ListReader>
std::vector<TokenLogprob> ReadTokenLogprobs(ListReader list) {
  std::vector<TokenLogprob> values;
  values.reserve(list.size());
  for (auto t : list) values.push_back({t.getTokenId(), t.getLogprob()});
  return values;
}

}  // namespace

void FillStepPlan(const StepPlan& plan, wire::StepPlan::Builder out) {
  out.setStepId(plan.step_id);
  out.setReturnLogits(plan.return_logits);
  auto sequences = out.initSequences(static_cast<unsigned>(plan.sequences.size()));
  for (size_t i = 0; i < plan.sequences.size(); ++i) {
    const SequencePlan& seq = plan.sequences[i];
    auto s = sequences[static_cast<unsigned>(i)];
    s.setSeqId(seq.seq_id);
    s.setNumCached(seq.num_cached);
    FillList(seq.token_ids, s.initTokenIds(static_cast<unsigned>(seq.token_ids.size())));
    FillList(seq.block_table, s.initBlockTable(static_cast<unsigned>(seq.block_table.size())));
    s.setNeedsToken(seq.needs_token);
    sampling_wire::FillSamplingParams(seq.sampling, s.initSampling());
    s.setNumLogprobs(seq.sampling.num_logprobs);
    s.setSampleIndex(seq.sample_index);
    if (!seq.penalty_tokens.empty()) {
      FillList(seq.penalty_tokens, s.initPenaltyTokens(static_cast<unsigned>(seq.penalty_tokens.size())));
    }
    s.setPromptLogprobs(seq.prompt_logprobs);
    s.setNextPromptToken(seq.next_prompt_token);
    s.setNumDraftTokens(seq.num_draft_tokens);
    s.setDraftModel(seq.draft_model);
    if (!seq.draft_catch_up.empty()) {
      FillList(seq.draft_catch_up, s.initDraftCatchUp(static_cast<unsigned>(seq.draft_catch_up.size())));
    }
    s.setNumProposals(seq.num_proposals);
  }
  if (!plan.block_copies.empty()) {
    auto copies = out.initBlockCopies(static_cast<unsigned>(plan.block_copies.size()));
    for (size_t i = 0; i < plan.block_copies.size(); ++i) {
      copies[static_cast<unsigned>(i)].setSrc(plan.block_copies[i].first);
      copies[static_cast<unsigned>(i)].setDst(plan.block_copies[i].second);
    }
  }
}

StepPlan ReadStepPlan(wire::StepPlan::Reader in) {
  StepPlan plan;
  plan.step_id = in.getStepId();
  plan.return_logits = in.getReturnLogits();
  auto sequences = in.getSequences();
  plan.sequences.reserve(sequences.size());
  for (auto s : sequences) {
    SequencePlan seq;
    seq.seq_id = s.getSeqId();
    seq.num_cached = s.getNumCached();
    seq.token_ids = ReadList<int32_t>(s.getTokenIds());
    seq.block_table = ReadList<int32_t>(s.getBlockTable());
    seq.needs_token = s.getNeedsToken();
    seq.sampling = sampling_wire::ReadSamplingParams(s.getSampling());
    seq.sampling.num_logprobs = s.getNumLogprobs();
    seq.sample_index = s.getSampleIndex();
    seq.penalty_tokens = ReadList<int32_t>(s.getPenaltyTokens());
    seq.prompt_logprobs = s.getPromptLogprobs();
    seq.next_prompt_token = s.getNextPromptToken();
    seq.num_draft_tokens = s.getNumDraftTokens();
    seq.draft_model = s.getDraftModel();
    seq.draft_catch_up = ReadList<int32_t>(s.getDraftCatchUp());
    seq.num_proposals = s.getNumProposals();
    plan.sequences.push_back(std::move(seq));
  }
  for (auto c : in.getBlockCopies()) plan.block_copies.emplace_back(c.getSrc(), c.getDst());
  return plan;
}

void FillStepResult(const StepResult& result, wire::StepResult::Builder out) {
  out.setStepId(result.step_id);
  out.setComputeMs(result.compute_ms);
  out.setAllreduceMs(result.allreduce_ms);
  auto sequences = out.initSequences(static_cast<unsigned>(result.sequences.size()));
  for (size_t i = 0; i < result.sequences.size(); ++i) {
    const SequenceResult& seq = result.sequences[i];
    auto s = sequences[static_cast<unsigned>(i)];
    s.setSeqId(seq.seq_id);
    s.setTokenId(seq.token_id);
    s.setLogprob(seq.logprob);
    if (!seq.top_logprobs.empty()) {
      FillTokenLogprobs(seq.top_logprobs, s.initTopLogprobs(static_cast<unsigned>(seq.top_logprobs.size())));
    }
    if (!seq.logits.empty()) {
      FillList(seq.logits, s.initLogits(static_cast<unsigned>(seq.logits.size())));
    }
  }
  if (!result.prompt_logprobs.empty()) {
    auto prompts = out.initPromptLogprobs(static_cast<unsigned>(result.prompt_logprobs.size()));
    for (size_t i = 0; i < result.prompt_logprobs.size(); ++i) {
      const PromptLogprobsResult& seq = result.prompt_logprobs[i];
      auto p = prompts[static_cast<unsigned>(i)];
      p.setSeqId(seq.seq_id);
      auto positions = p.initPositions(static_cast<unsigned>(seq.positions.size()));
      for (size_t j = 0; j < seq.positions.size(); ++j) {
        const PromptTokenLogprob& scored = seq.positions[j];
        auto out_position = positions[static_cast<unsigned>(j)];
        out_position.setTokenId(scored.token_id);
        out_position.setLogprob(scored.logprob);
        if (!scored.top_logprobs.empty()) {
          FillTokenLogprobs(scored.top_logprobs,
                            out_position.initTopLogprobs(static_cast<unsigned>(scored.top_logprobs.size())));
        }
      }
    }
  }
  if (!result.proposals.empty()) {
    auto proposals = out.initProposals(static_cast<unsigned>(result.proposals.size()));
    for (size_t i = 0; i < result.proposals.size(); ++i) {
      proposals[static_cast<unsigned>(i)].setSeqId(result.proposals[i].seq_id);
      const std::vector<int32_t>& ids = result.proposals[i].token_ids;
      FillList(ids, proposals[static_cast<unsigned>(i)].initTokenIds(static_cast<unsigned>(ids.size())));
    }
  }
}

StepResult ReadStepResult(wire::StepResult::Reader in) {
  StepResult result;
  result.step_id = in.getStepId();
  result.compute_ms = in.getComputeMs();
  result.allreduce_ms = in.getAllreduceMs();
  auto sequences = in.getSequences();
  result.sequences.reserve(sequences.size());
  for (auto s : sequences) {
    SequenceResult seq;
    seq.seq_id = s.getSeqId();
    seq.token_id = s.getTokenId();
    seq.logprob = s.getLogprob();
    seq.top_logprobs = ReadTokenLogprobs(s.getTopLogprobs());
    seq.logits = ReadList<float>(s.getLogits());
    result.sequences.push_back(std::move(seq));
  }
  for (auto p : in.getPromptLogprobs()) {
    PromptLogprobsResult seq;
    seq.seq_id = p.getSeqId();
    seq.positions.reserve(p.getPositions().size());
    for (auto scored : p.getPositions()) {
      seq.positions.push_back({scored.getTokenId(), scored.getLogprob(), ReadTokenLogprobs(scored.getTopLogprobs())});
    }
    result.prompt_logprobs.push_back(std::move(seq));
  }
  for (auto p : in.getProposals()) result.proposals.push_back({p.getSeqId(), ReadList<int32_t>(p.getTokenIds())});
  return result;
}

std::string ToBytes(capnp::MessageBuilder& message) {
  kj::Array<capnp::word> words = capnp::messageToFlatArray(message);
  kj::ArrayPtr<const kj::byte> bytes = words.asBytes();
  return std::string(reinterpret_cast<const char*>(bytes.begin()), bytes.size());
}

Status ReadFlatMessage(std::string_view bytes, const DecodeLimits& limits,
                       const std::function<void(capnp::MessageReader&)>& read) {
  if (bytes.size() > limits.max_bytes) {
    return InvalidArgument("message of " + std::to_string(bytes.size()) + " bytes exceeds the limit of " +
                           std::to_string(limits.max_bytes));
  }
  if (bytes.empty() || bytes.size() % sizeof(capnp::word) != 0) {
    return DataLoss("message of " + std::to_string(bytes.size()) +
                    " bytes is not a whole number of 8-byte words");
  }
  // Copy into word-aligned storage: the input may sit at any address.
  const size_t num_words = bytes.size() / sizeof(capnp::word);
  kj::Array<capnp::word> words = kj::heapArray<capnp::word>(num_words);
  std::memcpy(words.begin(), bytes.data(), bytes.size());

  capnp::ReaderOptions options;
  options.traversalLimitInWords = std::max<uint64_t>(1024, num_words * limits.traversal_factor);
  options.nestingLimit = limits.nesting_limit;
  kj::Maybe<kj::Exception> error = kj::runCatchingExceptions([&]() {
    capnp::FlatArrayMessageReader reader(words.asPtr(), options);
    if (reader.getEnd() != words.end()) {
      KJ_FAIL_REQUIRE("trailing bytes after the message");
    }
    read(reader);
  });
  KJ_IF_MAYBE(e, error) {
    return DataLoss(std::string("malformed Cap'n Proto message: ") + e->getDescription().cStr());
  }
  return OkStatus();
}

}  // namespace tpserve::wire_convert
