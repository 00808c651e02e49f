#include "worker/sampling_candidate.h"

#include <algorithm>

namespace tpserve::sampling {

void PushCandidate(FloatPacker& packer, const Candidate& c) {
  packer.PushFloat(c.value);
  packer.PushFloat(c.raw);
  packer.PushU32(static_cast<uint32_t>(c.id + 1));
}

Candidate PopCandidate(FloatUnpacker& unpacker) {
  Candidate c;
  c.value = unpacker.PopFloat();
  c.raw = unpacker.PopFloat();
  c.id = static_cast<int32_t>(unpacker.PopU32()) - 1;
  return c;
}

std::vector<Candidate> LocalTop(const float* values, const float* raw, int64_t vocab_begin, int64_t vocab_shard,
                                int32_t n) {
  std::vector<Candidate> heap;  // a max-heap under Before: front() is the worst kept
  heap.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < vocab_shard && n > 0; ++i) {
    if (!(values[i] > kNegInf)) continue;
    const Candidate c{values[i], raw[i], static_cast<int32_t>(vocab_begin + i)};
    if (heap.size() < static_cast<size_t>(n)) {
      heap.push_back(c);
      std::push_heap(heap.begin(), heap.end(), Before);
    } else if (Before(c, heap.front())) {
      std::pop_heap(heap.begin(), heap.end(), Before);
      heap.back() = c;
      std::push_heap(heap.begin(), heap.end(), Before);
    }
  }
  std::sort_heap(heap.begin(), heap.end(), Before);
  heap.resize(static_cast<size_t>(n));
  return heap;
}

std::vector<Candidate> BestOf(std::vector<Candidate> candidates, size_t n) {
  std::sort(candidates.begin(), candidates.end(), Before);
  while (!candidates.empty() && candidates.back().id < 0) candidates.pop_back();
  if (candidates.size() > n) candidates.resize(n);
  return candidates;
}

}  // namespace tpserve::sampling
