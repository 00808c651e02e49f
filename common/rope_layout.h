// How rotary position embedding pairs the dimensions of a head.
#pragma once

namespace tpserve {

enum class RopeLayout {
  kInterleaved,  // pairs (2i, 2i+1): GGUF llama files, whose Q/K rows were permuted at conversion
  kHalf,         // pairs (i, i + D/2): Hugging Face / NeoX checkpoints
};

}  // namespace tpserve
