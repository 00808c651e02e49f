#include "coordinator/step_cost.h"

#include <algorithm>

namespace tpserve {
namespace {

constexpr double kMinWeight = 4;          // about four steps' worth
constexpr double kMinTokenVariance = 0.25;  // token counts that differ at all

}  // namespace

void StepCost::Observe(int64_t num_tokens, double compute_ms) {
  const double n = static_cast<double>(num_tokens);
  weight_ = kDecay * weight_ + 1;
  sum_n_ = kDecay * sum_n_ + n;
  sum_t_ = kDecay * sum_t_ + compute_ms;
  sum_nn_ = kDecay * sum_nn_ + n * n;
  sum_nt_ = kDecay * sum_nt_ + n * compute_ms;
}

std::optional<StepCostFit> StepCost::Fit() const {
  if (weight_ < kMinWeight) return std::nullopt;
  const double mean_n = sum_n_ / weight_, mean_t = sum_t_ / weight_;
  const double variance = sum_nn_ / weight_ - mean_n * mean_n;
  if (variance < kMinTokenVariance) return std::nullopt;
  const double b = (sum_nt_ / weight_ - mean_n * mean_t) / variance;
  if (!(b > 0)) return std::nullopt;
  return StepCostFit{std::max(0.0, mean_t - b * mean_n), b};
}

double StepCost::BreakEvenAcceptance(int32_t num_decodes, double fallback) const {
  const std::optional<StepCostFit> fit = Fit();
  if (!fit) return fallback;
  const double b = fit->per_token_ms;
  return b / (fit->fixed_ms / std::max(1, num_decodes) + b);
}

}  // namespace tpserve
