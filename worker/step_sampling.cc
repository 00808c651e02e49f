#include "worker/step_sampling.h"

#include <algorithm>

#include "worker/sampler.h"

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

StatusOr<std::vector<SequenceResult>> SampleStep(const float* logits, const StepBatch& batch, const ShardPlan& shard,
                                                 int64_t vocab_size, bool return_logits, Communicator& comm) {
  const int64_t num_rows = batch.num_logit_rows();
  const int64_t vocab_shard = shard.vocab_shard();
  ASSIGN_OR_RETURN(std::vector<SequenceResult> results, SampleTokens(logits, num_rows, shard.vocab_begin, vocab_shard,
                                                                     vocab_size, batch.sampled_seqs, comm));
  if (!return_logits) return results;
  std::vector<float> full;  // [num_rows, V]
  if (comm.size() == 1) {
    full.assign(logits, logits + num_rows * vocab_size);
  } else {
    RETURN_IF_ERROR(GatherLogits(logits, num_rows, vocab_size, vocab_shard, comm, &full));
  }
  for (int64_t r = 0; r < num_rows; ++r) {
    results[r].logits.assign(full.begin() + r * vocab_size, full.begin() + (r + 1) * vocab_size);
  }
  return results;
}

}  // namespace tpserve
