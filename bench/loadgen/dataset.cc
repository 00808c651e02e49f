#include "bench/loadgen/dataset.h"

#include <algorithm>
#include <cmath>
#include <random>

namespace tpserve::loadgen {

StatusOr<DatasetKind> ParseDatasetKind(const std::string& name) {
  if (name == "random") return DatasetKind::kRandom;
  if (name == "sharegpt-like") return DatasetKind::kShareGptLike;
  return InvalidArgument("unknown dataset '" + name + "' (random | sharegpt-like)");
}

const char* DatasetKindName(DatasetKind kind) {
  return kind == DatasetKind::kRandom ? "random" : "sharegpt-like";
}

namespace {

// A lognormal with the given mean: mu = ln(mean) - sigma^2 / 2.
int32_t DrawLogNormal(std::mt19937_64& rng, double mean, double sigma) {
  std::lognormal_distribution<double> dist(std::log(mean) - sigma * sigma / 2, sigma);
  return static_cast<int32_t>(std::lround(dist(rng)));
}

}  // namespace

StatusOr<std::vector<BenchRequest>> MakeDataset(const DatasetOptions& o) {
  if (o.vocab_size <= kFirstPlainToken) return InvalidArgument("vocabulary too small for random prompts");
  if (o.num_requests < 0 || o.input_len < 0 || o.output_len < 0 || o.shared_prefix_len < 0) {
    return InvalidArgument("counts and lengths must not be negative");
  }
  if (!(o.range_ratio >= 0 && o.range_ratio < 1)) return InvalidArgument("--range-ratio must be in [0, 1)");
  if (o.max_model_len > 0 && o.shared_prefix_len + 2 > o.max_model_len) {
    return InvalidArgument("shared prefix does not fit the model's context length");
  }
  std::mt19937_64 rng(o.seed);
  std::mt19937_64 token_rng(o.seed * 0x9E3779B97F4A7C15ull + o.token_salt * 0xD1B54A32D192ED03ull + 1);
  std::uniform_int_distribution<int32_t> token(kFirstPlainToken, o.vocab_size - 1);
  std::vector<int32_t> prefix(o.shared_prefix_len);  // [P]
  for (int32_t& t : prefix) t = token(token_rng);

  std::vector<BenchRequest> requests(o.num_requests);
  for (BenchRequest& r : requests) {
    int32_t in = 0, out = 0;
    if (o.kind == DatasetKind::kRandom) {
      const int32_t il = o.input_len > 0 ? o.input_len : 1024, ol = o.output_len > 0 ? o.output_len : 128;
      auto uniform = [&](int32_t len) {
        const int32_t lo = std::max<int32_t>(1, static_cast<int32_t>(std::floor(len * (1 - o.range_ratio))));
        const int32_t hi = std::max<int32_t>(lo, static_cast<int32_t>(std::ceil(len * (1 + o.range_ratio))));
        return std::uniform_int_distribution<int32_t>(lo, hi)(rng);
      };
      in = uniform(il);
      out = uniform(ol);
    } else {
      in = DrawLogNormal(rng, o.input_len > 0 ? o.input_len : kShareGptInputMean, kShareGptInputSigma);
      out = DrawLogNormal(rng, o.output_len > 0 ? o.output_len : kShareGptOutputMean, kShareGptOutputSigma);
    }
    in = std::max(in, 1);
    out = std::max(out, 1);
    if (o.max_model_len > 0) {  // keep prefix + input + output within the context
      const int32_t room = o.max_model_len - o.shared_prefix_len;
      out = std::min(out, room - 1);
      in = std::min(in, room - out);
    }
    r.prompt_ids = prefix;
    r.prompt_ids.reserve(prefix.size() + in);
    for (int32_t i = 0; i < in; ++i) r.prompt_ids.push_back(token(token_rng));
    r.output_len = out;
  }
  return requests;
}

}  // namespace tpserve::loadgen
