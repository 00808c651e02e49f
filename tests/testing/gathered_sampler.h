// GatheredSample: the reference for SampleTokens (worker/sampler.h). It sees one row's whole
// logits vector and follows the semantics written in worker/sampler.h as plainly as possible:
// full sorts for top-k and top-p, an explicit softmax in double for the logprobs, and a
// Gumbel draw for every allowed token (the same CounterGumbel draws, so seeded results match).
// It shares no code with the sampler beyond worker/counter_rng.h.
#pragma once

#include <vector>

#include "comm/step_plan.h"

namespace tpserve::testing {

// logits: [V] one row. REQUIRES: the parameters are valid and some token is allowed.
SequenceResult GatheredSample(const std::vector<float>& logits, const SequencePlan& plan);

}  // namespace tpserve::testing
