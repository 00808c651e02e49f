// BeamConfig: a request's beam search settings, as the client protocol carries them and the
// coordinator's BeamSearch (coordinator/beam_search.h) runs them.
#pragma once

#include <cstdint>

namespace tpserve {

// When a search with `width` finished hypotheses stops (Hugging Face's early_stopping values).
enum class EarlyStopping {
  kHeuristic = 0,  // false: when no live beam scores better now than the worst finished one
  kWhenFull,       // true: as soon as width hypotheses have finished
  kNever,          // "never": when no live beam could ever score better
};

struct BeamConfig {
  int32_t width = 0;  // live hypotheses; 0: no beam search
  float length_penalty = 1.0f;
  EarlyStopping early_stopping = EarlyStopping::kHeuristic;
  bool enabled() const { return width > 0; }
};

inline constexpr int32_t kMaxBeamWidth = 8;  // its 2 x width candidates fit the 20 logprobs a row returns

}  // namespace tpserve
