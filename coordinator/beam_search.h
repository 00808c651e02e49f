// BeamSearch: the decisions of beam search for one request, apart from any KV or scheduling. The
// Scheduler (coordinator/scheduler_beam.cc) runs its live hypotheses ("beams") as sequences that
// share KV blocks, asks the worker for each beam's 2 x width most likely next tokens (their raw
// logprobs) and hands them to Step(), which says which beams continue with which token.
//
// The rules are Hugging Face transformers' (BeamSearchScorer), as vLLM's beam search also follows:
//  - a step ranks every (beam, candidate) by the beam's cumulative logprob + the candidate's, best
//    first, ties to the lower beam slot and then to the candidate's rank in its beam (the worker's
//    order: logprob descending, ties to the lower token id), and keeps the best 2 x width;
//  - walking them in rank order, a candidate that ends the sequence (EOS or a stop token) becomes a
//    finished hypothesis when its rank is below width (else it is ignored); any other continues a
//    beam, until width beams continue;
//  - a hypothesis scores cumulative logprob / L^length_penalty, L = its generated tokens not
//    counting a final EOS or stop token (at least 1); the best `width` finished ones are kept;
//  - the search is done when width hypotheses have finished and, with
//      kHeuristic (early_stopping=false): the worst kept score >= the best live beam's score now,
//      kWhenFull  (early_stopping=true):  at once,
//      kNever     (early_stopping="never"): the worst kept score >= the best score a live beam could
//                 still reach (its cumulative logprob over max_tokens^penalty when penalty > 0);
//    or when the beams reach max_tokens (or the context), where the live beams finish as they are.
//  - the result is the best n hypotheses by score, ties to the one finished first.
// Everything is deterministic: the same candidates give the same beams, bitwise.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "comm/beam_config.h"
#include "comm/step_plan.h"
#include "common/status.h"

namespace tpserve {

// INVALID_ARGUMENT unless width is in [0, kMaxBeamWidth] and the length penalty is finite.
Status ValidateBeamConfig(const BeamConfig& config);

// A finished hypothesis, or one returned at the end.
struct BeamHypothesis {
  std::vector<int32_t> output_ids;    // generated tokens, the ending token included
  std::vector<float> output_logprobs;  // [output_ids.size()]
  double cumulative_logprob = 0;      // sum of output_logprobs, in order, in double
  double score = 0;                   // cumulative_logprob / L^length_penalty
  bool ended = false;                 // by an ending token (finish reason stop), else by length
};

class BeamSearch {
 public:
  // max_tokens: the longest output a hypothesis may reach (max_tokens, or what the context allows).
  BeamSearch(const BeamConfig& config, int32_t max_tokens);

  // A live beam as Step() reads it: its output so far and its next-token candidates.
  struct Beam {
    int32_t slot = 0;  // its place among the request's sequences (ranking tie-break)
    const std::vector<int32_t>* output_ids = nullptr;
    const std::vector<float>* output_logprobs = nullptr;
    double cumulative_logprob = 0;
    const std::vector<TokenLogprob>* candidates = nullptr;  // most likely first
  };
  // A beam of the next step: beams[parent] continued by token.
  struct Continuation {
    int32_t parent = 0;  // index into Step()'s beams
    int32_t token_id = 0;
    float logprob = 0;
  };
  // One step over the live beams (every one with its candidates): records the hypotheses that
  // finish and returns the continuations, best first (empty once done()). `ends(token)`: the token
  // ends a sequence. INVALID_ARGUMENT when candidates are missing or not finite.
  StatusOr<std::vector<Continuation>> Step(const std::vector<Beam>& beams, const std::function<bool(int32_t)>& ends);

  // No more steps: the search is done, or the continuations reached max_tokens.
  bool done() const { return done_; }
  // The best n hypotheses, best first. REQUIRES: done().
  std::vector<BeamHypothesis> Best(int32_t n) const;

  double Score(double cumulative_logprob, int32_t num_scored_tokens) const;
  const BeamConfig& config() const { return config_; }
  int32_t num_finished() const { return static_cast<int32_t>(finished_.size()); }

 private:
  void Keep(BeamHypothesis hypothesis);
  bool IsDone(double best_live_logprob, int32_t live_length) const;

  BeamConfig config_;
  int32_t max_tokens_;
  std::vector<BeamHypothesis> finished_;  // best first, at most width
  bool done_ = false;
};

}  // namespace tpserve
