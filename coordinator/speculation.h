// Speculative decoding, the coordinator's half: what to propose for a decoding sequence and how
// much. The worker verifies the proposals in one step (comm/step_plan.h, SequencePlan::
// num_draft_tokens) by sampling after each of them exactly as plain decoding would there; the
// Scheduler keeps the longest run of proposals equal to the sampled tokens, plus the token sampled
// after it. Since a step's logits are bitwise independent of how tokens are batched and a draw
// depends on (seed, token index, logits) alone, the kept tokens are the very tokens plain decoding
// produces: speculation changes the speed, never the output.
//
// Proposers:
// - prompt lookup (n-gram). The last n tokens of prompt ++ output (n from max_ngram down to
//   min_ngram, longest first) are looked up earlier in the same tokens; the tokens that followed the
//   latest earlier occurrence (with k tokens after it) are proposed. No model runs; it wins where the
//   output repeats its input (code editing, summaries quoting their source, retrieval-augmented answers).
// - a draft model (worker/drafting_executor.h): a small model of the same vocabulary, loaded by the
//   worker group beside the target (tpserve-worker --draft-model), proposes k tokens in the worker
//   right before the target verifies them, in the same step. The coordinator only reserves the k
//   slots and tells the worker which tokens the draft model has not seen yet
//   (SequencePlan::draft_catch_up); the proposals come back in StepResult::proposals.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "comm/client_codec.h"
#include "common/status.h"

namespace tpserve {

enum class SpeculativeMethod {
  kOff = 0,
  kNgram = 1,  // prompt lookup
  kDraft = 2,  // the worker group's draft model
};

// Most tokens proposed for one sequence in one step.
constexpr int32_t kMaxSpeculativeTokens = static_cast<int32_t>(proto::kMaxSpeculativeTokens);

struct SpeculativeConfig {
  SpeculativeMethod method = SpeculativeMethod::kOff;
  int32_t num_tokens = 0;  // k: most proposals per step, in [1, kMaxSpeculativeTokens] when on
  int32_t min_ngram = 1;   // shortest suffix looked up
  int32_t max_ngram = 4;   // longest suffix looked up
  bool enabled() const { return method != SpeculativeMethod::kOff && num_tokens > 0; }
};

// "off", "ngram" / "draft" (k = 4) or "ngram:K" / "draft:K" (proto::ParseSpeculativeRequest).
// INVALID_ARGUMENT otherwise.
StatusOr<SpeculativeConfig> ParseSpeculativeConfig(std::string_view text);
// The inverse: "off", "ngram:K" or "draft:K".
std::string SpeculativeConfigName(const SpeculativeConfig& config);
// OK, or INVALID_ARGUMENT when k or the n-gram bounds are out of range for an enabled config.
Status ValidateSpeculativeConfig(const SpeculativeConfig& config);

// Prompt lookup over prompt ++ output (read in place, not copied): for n = max_ngram down to min_ngram,
// the earlier occurrences of the last n tokens that some token follows; of those the latest followed by
// at least k tokens, or else the earliest (followed by the most). Returns up to k of the tokens after it.
// Empty when no suffix of those lengths recurs.
std::vector<int32_t> ProposeNgram(const std::vector<int32_t>& prompt, const std::vector<int32_t>& output, int32_t k,
                                  int32_t min_ngram, int32_t max_ngram);

// What a request asked for (the wire's choice) over the server's default: serverDefault takes the
// default, off is off, ngram and draft take k = num_tokens (0: 4). REQUIRES: num_tokens <= kMaxSpeculativeTokens.
SpeculativeConfig ResolveSpeculative(const proto::SpeculativeRequest& request, const SpeculativeConfig& server_default);

// One sequence's adaptive proposal length, whether it proposes at all, and its counts.
//
// A proposal costs a verified position's compute whether it is kept or not, so where the proposer is
// mostly wrong (free text), or where the batch is large enough that a verified position costs nearly
// what a token is worth (coordinator/step_cost.h), speculation is paused: `acceptance` is a running
// estimate of the fraction of proposals kept, and below the break-even acceptance of the group's
// measured step cost at its current batch the sequence decodes plainly. Prompt lookup's would-be
// proposal is still checked, for free, against the token the step then samples ("shadow"
// proposals), so it resumes as soon as the text turns repetitive again; a draft model's proposal
// is not free, so a paused draft sequence probes with one proposal every kProbeInterval steps.
struct SpeculationState {
  // The break-even acceptance while the step cost is not yet measured. A step of n tokens costs
  // about a + b n (on the 2-core CPU of bench/README "Speculative decoding", a = 11 ms, b = 16 ms at
  // SmolLM2's size), so k proposals pay for themselves at batch 1 when more than k b / (a + b), 0.6 k,
  // are kept; in a batch of B decodes the break-even rises to b / (a / B + b).
  static constexpr double kMinAcceptance = 0.6;
  // Each proposal's outcome moves the running estimate this fraction of the way (a step of p proposals
  // moves it 1 - (1 - kWeight)^p of the way to its kept fraction): a one-token probe or shadow counts
  // as one proposal, not as a whole step.
  static constexpr double kWeight = 0.2;
  static constexpr int32_t kProbeInterval = 8;

  int32_t k = 0;                   // proposals asked for in the next step (<= the config's k)
  double acceptance = 1.0;         // running estimate of the fraction of proposals kept
  int32_t shadow = -1;             // the first token of a proposal not sent (paused), or -1
  int32_t paused_steps = 0;        // decode steps since the last probe (draft model, paused)
  int64_t num_verify_steps = 0;    // steps that verified at least one proposal
  int64_t num_draft_tokens = 0;    // proposals verified
  int64_t num_accepted_tokens = 0; // of those, kept as output

  // Whether proposals cost at least what they yield at this break-even acceptance (at 1, where a
  // verified position costs what a token is worth, even a perfect record does not pay).
  bool is_paused(double min_acceptance) const { return !(acceptance > min_acceptance); }
  // After a step verified `proposed` (> 0) tokens and kept `accepted` of them: k grows by one
  // after a step that kept all it proposed, up to max_k, and otherwise shrinks to accepted + 1.
  void OnVerified(int32_t proposed, int32_t accepted, int32_t max_k);
  // After a plain step whose sequence was paused with a shadow proposal: was its first token right?
  void OnShadow(bool right);
};

}  // namespace tpserve
