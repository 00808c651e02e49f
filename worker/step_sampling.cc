#include "worker/step_sampling.h"

#include <algorithm>
#include <iterator>

#include "worker/sampler.h"
#include "worker/token_scorer.h"

namespace tpserve {
namespace {

// All ranks' logits for `num_rows` rows, gathered into full rows: out [num_rows, V].
// Vocabulary shards differ by at most one row, so each rank sends its shard padded to the largest.
Status GatherLogits(const float* shard_logits, int64_t num_rows, int64_t vocab_size, int64_t vocab_shard,
                    Communicator& comm, std::vector<float>* out) {
  const int tp_size = comm.size();
  int64_t begin = 0, end = 0;
  SplitEvenly(vocab_size, tp_size, 0, &begin, &end);
  const int64_t padded = end - begin;  // the first shard is the largest
  std::vector<float> send(num_rows * padded, 0.0f);  // [num_rows, padded]
  for (int64_t r = 0; r < num_rows; ++r) {
    std::copy(shard_logits + r * vocab_shard, shard_logits + (r + 1) * vocab_shard, send.data() + r * padded);
  }
  std::vector<float> gathered(static_cast<size_t>(tp_size) * num_rows * padded);  // [tp, num_rows, padded]
  RETURN_IF_ERROR(comm.AllGather(send.data(), send.size(), gathered.data()));
  out->assign(num_rows * vocab_size, 0.0f);
  for (int rank = 0; rank < tp_size; ++rank) {
    SplitEvenly(vocab_size, tp_size, rank, &begin, &end);
    for (int64_t r = 0; r < num_rows; ++r) {
      const float* src = gathered.data() + (rank * num_rows + r) * padded;
      std::copy(src, src + (end - begin), out->data() + r * vocab_size + begin);
    }
  }
  return OkStatus();
}

}  // namespace

Status SampleStep(const float* logits, const StepBatch& batch, const ShardPlan& shard, int64_t vocab_size,
                  bool return_logits, Communicator& comm, StepResult* result) {
  const int64_t num_rows = batch.num_sampled_rows();
  const int64_t vocab_shard = shard.vocab_shard();
  ASSIGN_OR_RETURN(result->sequences, SampleTokens(logits, num_rows, shard.vocab_begin, vocab_shard, vocab_size,
                                                   batch.sampled_seqs, comm));
  if (!batch.scored_seqs.empty()) {
    const int64_t num_scored = batch.num_logit_rows() - num_rows;
    ASSIGN_OR_RETURN(std::vector<PromptTokenLogprob> scored,
                     ScoreTokens(logits + num_rows * vocab_shard, num_scored, shard.vocab_begin, vocab_shard,
                                 vocab_size, batch.score_targets, batch.score_num_logprobs, comm));
    size_t next = 0;
    for (const SequencePlan* seq : batch.scored_seqs) {
      PromptLogprobsResult& out = result->prompt_logprobs.emplace_back();
      out.seq_id = seq->seq_id;
      const size_t n = static_cast<size_t>(seq->num_prompt_logprobs());
      out.positions.assign(std::make_move_iterator(scored.begin() + next),
                           std::make_move_iterator(scored.begin() + next + n));
      next += n;
    }
    CHECK_EQ(next, scored.size());
  }
  if (!return_logits) return OkStatus();
  std::vector<float> full;  // [num_rows, V]
  if (comm.size() == 1) {
    full.assign(logits, logits + num_rows * vocab_size);
  } else {
    RETURN_IF_ERROR(GatherLogits(logits, num_rows, vocab_size, vocab_shard, comm, &full));
  }
  for (int64_t r = 0; r < num_rows; ++r) {
    result->sequences[r].logits.assign(full.begin() + r * vocab_size, full.begin() + (r + 1) * vocab_size);
  }
  return OkStatus();
}

}  // namespace tpserve
