#include "kvstore/kv_layout.h"

#include <algorithm>
#include <numeric>

#include "common/check.h"

namespace tpserve {

KvLayout KvLayout::Shared(int32_t num_layers) {
  CHECK_GT(num_layers, 0);
  KvLayout layout;
  layout.layers_per_page = num_layers;
  layout.layer_group.assign(num_layers, 0);
  layout.layer_slot.resize(num_layers);
  std::iota(layout.layer_slot.begin(), layout.layer_slot.end(), 0);
  return layout;
}

KvLayout KvLayout::Windowed(const std::vector<bool>& layer_sliding, int32_t window) {
  const int32_t num_layers = static_cast<int32_t>(layer_sliding.size());
  const int32_t num_sliding = static_cast<int32_t>(std::count(layer_sliding.begin(), layer_sliding.end(), true));
  if (num_sliding == 0) return Shared(num_layers);
  CHECK_GT(window, 0);
  const int32_t num_full = num_layers - num_sliding;
  KvLayout layout;
  layout.layers_per_page = num_full == 0 ? num_sliding : std::gcd(num_sliding, num_full);
  layout.groups.sliding.clear();
  layout.groups.window = window;
  layout.layer_group.resize(num_layers);
  layout.layer_slot.resize(num_layers);
  // Each kind fills its groups in layer order; a group is opened when the kind's previous one is full.
  int32_t open_group[2] = {-1, -1}, used[2] = {0, 0};
  for (int32_t l = 0; l < num_layers; ++l) {
    const int kind = layer_sliding[l] ? 1 : 0;
    if (open_group[kind] < 0 || used[kind] == layout.layers_per_page) {
      open_group[kind] = layout.groups.num_groups();
      layout.groups.sliding.push_back(kind == 1);
      used[kind] = 0;
    }
    layout.layer_group[l] = open_group[kind];
    layout.layer_slot[l] = used[kind]++;
  }
  return layout;
}

std::string KvLayout::CapacityReport(int64_t num_pages, int32_t block_size, int64_t max_model_len) const {
  std::string report = std::to_string(num_pages) + " pages of " + std::to_string(layers_per_page) + " layers x " +
                       std::to_string(block_size) + " tokens";
  if (groups.num_sliding() == 0) report += " = " + std::to_string(num_pages * block_size / num_groups()) + " tokens";
  if (max_model_len > 0) {
    const int64_t per_seq = groups.MaxPagesHeld(max_model_len, block_size, block_size);
    report += "; a " + std::to_string(max_model_len) + "-token sequence takes " + std::to_string(per_seq) + " pages";
    if (groups.num_sliding() > 0) {
      report += " (" + std::to_string(groups.num_sliding()) + " of " + std::to_string(num_groups()) +
                " groups slide, keeping " + std::to_string(groups.window) + " tokens)";
    }
    report += ": " + std::to_string(num_pages / per_seq) + " concurrent sequences";
  }
  return report;
}

}  // namespace tpserve
