// KvGroups: how a model's layers share the pages of the paged KV cache, so that the
// layers attending through a sliding window can give back the pages that fell out of their window.
//
// A page holds `layers_per_page` layers' K and V for block_size tokens. The layers are split into
// groups of that many layers, each group all sliding-window layers or all full-attention layers, and
// every group keeps its own page per logical block of a sequence: a sequence's block table is
// [logical block][group] page ids (block-major). A sliding group's pages of blocks wholly before the
// window are released as the sequence advances (their table entries become -1), while the full
// groups keep every block. All pages are the same size and come from one pool, so memory moves freely
// between the kinds. layers_per_page is the gcd of the two kinds' layer counts (Gemma 3 270M: 15
// sliding and 3 full layers -> 3 layers per page, 6 groups); a model without sliding layers, or the
// Shared layout, has one group of every layer: a page is then the whole-model block it always was.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace tpserve {

// What the block manager needs to know: the groups' kinds and the window. Default: one full group.
struct KvGroups {
  std::vector<bool> sliding = {false};  // [G] whether group g's layers attend through the window
  int32_t window = 0;                   // keys a sliding layer's token attends, itself included

  int32_t num_groups() const { return static_cast<int32_t>(sliding.size()); }
  int32_t num_sliding() const;
  // The first logical block a sliding group's queries read once every query is at >= `position`
  // (its keys start at position - window + 1). 0 when no group slides.
  int32_t FirstLiveBlock(int64_t position, int32_t block_size) const;
  // The most pages a sequence holds at once while it has `num_positions` slots, computing at most
  // `max_step_tokens` tokens per step: every block in a full group, the window plus a step's tokens
  // (and one block of alignment) in a sliding group.
  int64_t MaxPagesHeld(int64_t num_positions, int64_t max_step_tokens, int32_t block_size) const;
  // INVALID_ARGUMENT for no group, or a sliding group without a positive window.
  Status Validate() const;
  bool operator==(const KvGroups&) const = default;
};

}  // namespace tpserve
