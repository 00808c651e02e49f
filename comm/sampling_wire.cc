#include "comm/sampling_wire.h"

namespace tpserve::sampling_wire {

void FillSamplingParams(const SamplingParams& params, common_wire::SamplingParams::Builder out) {
  out.setTemperature(params.temperature);
  out.setTopK(params.top_k);
  out.setTopP(params.top_p);
  out.setMinP(params.min_p);
  out.setRepetitionPenalty(params.repetition_penalty);
  out.setPresencePenalty(params.presence_penalty);
  out.setFrequencyPenalty(params.frequency_penalty);
  out.setSeed(params.seed);
  out.setHasSeed(params.has_seed);
  if (params.logit_bias.empty()) return;
  auto bias = out.initLogitBias(static_cast<unsigned>(params.logit_bias.size()));
  for (size_t i = 0; i < params.logit_bias.size(); ++i) {
    bias[static_cast<unsigned>(i)].setTokenId(params.logit_bias[i].first);
    bias[static_cast<unsigned>(i)].setBias(params.logit_bias[i].second);
  }
}

SamplingParams ReadSamplingParams(common_wire::SamplingParams::Reader in) {
  SamplingParams params;
  params.temperature = in.getTemperature();
  params.top_k = in.getTopK();
  params.top_p = in.getTopP();
  params.min_p = in.getMinP();
  params.repetition_penalty = in.getRepetitionPenalty();
  params.presence_penalty = in.getPresencePenalty();
  params.frequency_penalty = in.getFrequencyPenalty();
  params.seed = in.getSeed();
  params.has_seed = in.getHasSeed();
  auto bias = in.getLogitBias();
  params.logit_bias.reserve(bias.size());
  for (auto b : bias) params.logit_bias.emplace_back(b.getTokenId(), b.getBias());
  return params;
}

}  // namespace tpserve::sampling_wire
