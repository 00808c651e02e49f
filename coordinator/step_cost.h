// StepCost: what a decode step costs as a function of the positions it computes, t(n) ≈ a + b·n,
// fitted by exponentially weighted least squares over the compute times (StepResult::compute_ms) of
// steps without prefill chunks, and the acceptance speculative decoding must keep to pay for itself.
// A draft model's time is in the step's, so it counts in b as proposals raise n.
//
// A proposal costs one more verified position, b, and yields a token with probability α (the
// fraction of proposals kept), while a step of B plain decodes spends (a + b·B) / B per token: a
// proposal pays when b / α < (a + b·B) / B, i.e. α > b / (a / B + b). Where a step's fixed cost
// dominates (a ≫ b: a GPU, or one sequence) nearly any acceptance pays; where each token costs
// about as much as the step (b ≫ a / B: a CPU at a large batch) almost none does. Where the fit puts a
// below 0 (a position costs more than the average token, as a costly draft model makes it) it is 0,
// and the break-even 1: nothing pays.
//
// The line is not the same at every batch: a step of one sequence that reads every weight once costs
// little more for a few more positions, while one of many sequences is already compute-bound. So
// there is one fit per batch class, the steps of 1, 2-3, 4-7, 8-15, ... sequences.
#pragma once

#include <array>
#include <cstdint>
#include <optional>

namespace tpserve {

struct StepCostFit {
  double fixed_ms = 0;      // a
  double per_token_ms = 0;  // b
};

class StepCost {
 public:
  // Each observation's weight decays by this factor per later step of its class (a time constant of
  // 20 steps: the load changes, and the line with it).
  static constexpr double kDecay = 0.95;

  // One decode step of `num_sequences` sequences that computed `num_tokens` positions in `compute_ms`.
  void Observe(int32_t num_sequences, int64_t num_tokens, double compute_ms);
  // a and b of the steps of about `num_sequences` sequences, once determined: enough steps, spread in
  // their token counts, and b > 0 (a is clamped at 0).
  std::optional<StepCostFit> Fit(int32_t num_sequences) const;
  // b / (a / B + b) for B = num_decodes (at least 1); `fallback` while Fit(B) is undetermined.
  double BreakEvenAcceptance(int32_t num_decodes, double fallback) const;

 private:
  struct Sums {
    double weight = 0;  // Σ w
    double n = 0;       // Σ w n
    double t = 0;       // Σ w t
    double nn = 0;      // Σ w n²
    double nt = 0;      // Σ w n t
  };
  static int Class(int32_t num_sequences);
  std::array<Sums, 32> classes_;
};

}  // namespace tpserve
