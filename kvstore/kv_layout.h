// KvLayout: where each layer of a model lives in the KV pool's pages (common/kv_groups.h has the
// paging scheme); the worker's side of KvGroups.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/kv_groups.h"

namespace tpserve {

// The worker's side: the groups plus where each layer lives in a page.
struct KvLayout {
  KvGroups groups;
  int32_t layers_per_page = 0;       // the KV pool's layers
  std::vector<int32_t> layer_group;  // [L] the group holding layer l
  std::vector<int32_t> layer_slot;   // [L] its layer within the group's pages, [0, layers_per_page)

  // One group holding every layer: nothing is freed before the sequence ends.
  static KvLayout Shared(int32_t num_layers);
  // Sliding layers and full layers in groups of their own kind (Shared when none slides).
  // REQUIRES: window > 0 if any layer slides.
  static KvLayout Windowed(const std::vector<bool>& layer_sliding, int32_t window);

  int32_t num_groups() const { return groups.num_groups(); }
  // "N pages of 3 layers x 16 tokens; a 32768-token sequence takes P pages (sliding layers keep their
  // 512-token window): K concurrent sequences"
  std::string CapacityReport(int64_t num_pages, int32_t block_size, int64_t max_model_len) const;
};

}  // namespace tpserve
