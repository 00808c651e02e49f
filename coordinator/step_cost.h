// StepCost: what an engine step costs as a function of the tokens it computes, t(n) ≈ a + b·n, fitted
// by exponentially weighted least squares over the steps' compute times (StepResult::compute_ms), and
// the acceptance speculative decoding must keep to pay for itself.
//
// A proposal costs one more verified position, b, and yields a token with probability α (the
// fraction of proposals kept), while a step of B plain decodes spends (a + b·B) / B per token: a
// proposal pays when b / α < (a + b·B) / B, i.e. α > b / (a / B + b). Where a step's fixed cost
// dominates (a ≫ b: a GPU, or one sequence) nearly any acceptance pays; where each token costs
// about as much as the step (b ≫ a / B: a CPU at a large batch) almost none does.
#pragma once

#include <cstdint>
#include <optional>

namespace tpserve {

struct StepCostFit {
  double fixed_ms = 0;      // a
  double per_token_ms = 0;  // b
};

class StepCost {
 public:
  // Each observation's weight decays by this factor per later step (a time constant of 50 steps).
  static constexpr double kDecay = 0.98;

  // One step that computed `num_tokens` positions in `compute_ms`.
  void Observe(int64_t num_tokens, double compute_ms);
  // a and b, once determined: enough steps, spread in their token counts, and b > 0 (a is clamped at 0).
  std::optional<StepCostFit> Fit() const;
  // b / (a / B + b) for B = num_decodes (at least 1); `fallback` while Fit() is undetermined.
  double BreakEvenAcceptance(int32_t num_decodes, double fallback) const;

 private:
  double weight_ = 0;  // Σ w
  double sum_n_ = 0;   // Σ w n
  double sum_t_ = 0;   // Σ w t
  double sum_nn_ = 0;  // Σ w n²
  double sum_nt_ = 0;  // Σ w n t
};

}  // namespace tpserve
