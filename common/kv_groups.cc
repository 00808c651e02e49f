#include "common/kv_groups.h"

#include <algorithm>

namespace tpserve {
namespace {

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

int32_t KvGroups::num_sliding() const { return static_cast<int32_t>(std::count(sliding.begin(), sliding.end(), true)); }

int32_t KvGroups::FirstLiveBlock(int64_t position, int32_t block_size) const {
  if (num_sliding() == 0) return 0;
  return static_cast<int32_t>(std::max<int64_t>(0, position - window + 1) / block_size);
}

int64_t KvGroups::MaxPagesHeld(int64_t num_positions, int64_t max_step_tokens, int32_t block_size) const {
  const int64_t blocks = CeilDiv(num_positions, block_size);
  const int64_t live = std::min(blocks, CeilDiv(window - 1 + max_step_tokens, block_size) + 1);
  const int64_t sliding_groups = num_sliding();
  return (num_groups() - sliding_groups) * blocks + sliding_groups * live;
}

Status KvGroups::Validate() const {
  if (sliding.empty()) return InvalidArgument("KV layout has no group");
  if (num_sliding() > 0 && window <= 0) return InvalidArgument("KV layout slides without a positive window");
  if (window < 0) return InvalidArgument("KV layout has a negative window");
  return OkStatus();
}

}  // namespace tpserve
