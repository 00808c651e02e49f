#include "coordinator/beam_search.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "common/check.h"

namespace tpserve {

Status ValidateBeamConfig(const BeamConfig& config) {
  if (config.width < 0 || config.width > kMaxBeamWidth) {
    return InvalidArgument("beam width " + std::to_string(config.width) + " is outside [1, " +
                           std::to_string(kMaxBeamWidth) + "] (0: no beam search)");
  }
  if (!std::isfinite(config.length_penalty) || std::abs(config.length_penalty) > 10.0f) {
    return InvalidArgument("beam length_penalty = " + std::to_string(config.length_penalty) +
                           " is outside [-10, 10]");
  }
  return OkStatus();
}

BeamSearch::BeamSearch(const BeamConfig& config, int32_t max_tokens) : config_(config), max_tokens_(max_tokens) {
  CHECK(config.enabled());
  CHECK_GT(max_tokens, 0);
}

double BeamSearch::Score(double cumulative_logprob, int32_t num_scored_tokens) const {
  return cumulative_logprob / std::pow(static_cast<double>(std::max(num_scored_tokens, 1)),
                                       static_cast<double>(config_.length_penalty));
}

void BeamSearch::Keep(BeamHypothesis hypothesis) {
  // After the hypotheses of equal score already kept: ties go to the one finished first.
  auto it = std::upper_bound(finished_.begin(), finished_.end(), hypothesis.score,
                             [](double score, const BeamHypothesis& h) { return score > h.score; });
  finished_.insert(it, std::move(hypothesis));
  if (static_cast<int32_t>(finished_.size()) > config_.width) finished_.pop_back();
}

bool BeamSearch::IsDone(double best_live_logprob, int32_t live_length) const {
  if (static_cast<int32_t>(finished_.size()) < config_.width) return false;
  const double worst = finished_.back().score;
  switch (config_.early_stopping) {
    case EarlyStopping::kWhenFull:
      return true;
    case EarlyStopping::kHeuristic:
      return worst >= Score(best_live_logprob, live_length);
    case EarlyStopping::kNever: {
      // A live beam's cumulative logprob only falls; with a positive penalty its best score is at
      // the longest length, otherwise at the length it has.
      const int32_t length = config_.length_penalty > 0 ? max_tokens_ : live_length;
      return worst >= Score(best_live_logprob, length);
    }
  }
  return false;
}

StatusOr<std::vector<BeamSearch::Continuation>> BeamSearch::Step(const std::vector<Beam>& beams,
                                                                 const std::function<bool(int32_t)>& ends) {
  CHECK(!done_);
  CHECK(!beams.empty());
  const int32_t width = config_.width;
  struct Ranked {
    double cumulative;
    int32_t beam;  // index into beams
    int32_t rank;  // within the beam's candidates
  };
  std::vector<Ranked> ranked;
  for (int32_t b = 0; b < static_cast<int32_t>(beams.size()); ++b) {
    const std::vector<TokenLogprob>& candidates = *beams[b].candidates;
    if (candidates.empty()) return InvalidArgument("beam slot " + std::to_string(beams[b].slot) + " has no candidates");
    for (int32_t r = 0; r < static_cast<int32_t>(candidates.size()) && r < 2 * width; ++r) {
      if (std::isnan(candidates[r].logprob) || candidates[r].logprob > 0) {
        return InvalidArgument("beam slot " + std::to_string(beams[b].slot) + ": candidate logprob " +
                               std::to_string(candidates[r].logprob) + " is not a logprob");
      }
      ranked.push_back({beams[b].cumulative_logprob + static_cast<double>(candidates[r].logprob), b, r});
    }
  }
  std::stable_sort(ranked.begin(), ranked.end(), [&](const Ranked& x, const Ranked& y) {
    if (x.cumulative != y.cumulative) return x.cumulative > y.cumulative;
    if (beams[x.beam].slot != beams[y.beam].slot) return beams[x.beam].slot < beams[y.beam].slot;
    return x.rank < y.rank;
  });
  if (static_cast<int32_t>(ranked.size()) > 2 * width) ranked.resize(2 * width);

  auto extend = [&](const Ranked& r, bool ended) {
    const Beam& beam = beams[r.beam];
    const TokenLogprob& c = (*beam.candidates)[r.rank];
    BeamHypothesis h;
    h.output_ids = *beam.output_ids;
    h.output_ids.push_back(c.token_id);
    h.output_logprobs = *beam.output_logprobs;
    h.output_logprobs.push_back(c.logprob);
    h.cumulative_logprob = r.cumulative;
    h.ended = ended;
    const int32_t length = static_cast<int32_t>(h.output_ids.size());
    h.score = Score(h.cumulative_logprob, ended ? length - 1 : length);
    return h;
  };
  std::vector<Continuation> next;
  std::vector<const Ranked*> continued;  // next's entries of `ranked`
  for (int32_t i = 0; i < static_cast<int32_t>(ranked.size()) && static_cast<int32_t>(next.size()) < width; ++i) {
    const Ranked& r = ranked[i];
    const TokenLogprob& c = (*beams[r.beam].candidates)[r.rank];
    if (ends(c.token_id)) {
      if (i < width) Keep(extend(r, true));
      continue;
    }
    next.push_back({r.beam, c.token_id, c.logprob});
    continued.push_back(&r);
  }
  const int32_t length = static_cast<int32_t>(beams[0].output_ids->size()) + 1;
  if (next.empty()) {
    done_ = true;
    return next;
  }
  // `next` is in rank order: its first is the best live beam.
  if (IsDone(continued[0]->cumulative, length)) {
    done_ = true;
    next.clear();
  } else if (length >= max_tokens_) {
    for (const Ranked* r : continued) Keep(extend(*r, false));
    done_ = true;
    next.clear();
  }
  return next;
}

std::vector<BeamHypothesis> BeamSearch::Best(int32_t n) const {
  CHECK(done_);
  return {finished_.begin(), finished_.begin() + std::min<size_t>(finished_.size(), static_cast<size_t>(n))};
}

}  // namespace tpserve
