#include "coordinator/step_cost.h"

#include <algorithm>
#include <bit>

namespace tpserve {
namespace {

constexpr double kMinWeight = 4;            // about four steps' worth
constexpr double kMinTokenVariance = 0.25;  // token counts that differ at all

}  // namespace

int StepCost::Class(int32_t num_sequences) {
  return std::bit_width(static_cast<uint32_t>(std::max(1, num_sequences))) - 1;  // 1 -> 0, 2-3 -> 1, ...
}

void StepCost::Observe(int32_t num_sequences, int64_t num_tokens, double compute_ms) {
  Sums& s = classes_[Class(num_sequences)];
  const double n = static_cast<double>(num_tokens);
  s.weight = kDecay * s.weight + 1;
  s.n = kDecay * s.n + n;
  s.t = kDecay * s.t + compute_ms;
  s.nn = kDecay * s.nn + n * n;
  s.nt = kDecay * s.nt + n * compute_ms;
}

std::optional<StepCostFit> StepCost::Fit(int32_t num_sequences) const {
  const Sums& s = classes_[Class(num_sequences)];
  if (s.weight < kMinWeight) return std::nullopt;
  const double mean_n = s.n / s.weight, mean_t = s.t / s.weight;
  const double variance = s.nn / s.weight - mean_n * mean_n;
  if (variance < kMinTokenVariance) return std::nullopt;
  const double b = (s.nt / s.weight - mean_n * mean_t) / variance;
  if (!(b > 0)) return std::nullopt;
  return StepCostFit{std::max(0.0, mean_t - b * mean_n), b};
}

double StepCost::BreakEvenAcceptance(int32_t num_decodes, double fallback) const {
  const std::optional<StepCostFit> fit = Fit(num_decodes);
  if (!fit) return fallback;
  const double b = fit->per_token_ms;
  return b / (fit->fixed_ms / std::max(1, num_decodes) + b);
}

}  // namespace tpserve
