#include "worker/sampling_candidate.h"

#include <algorithm>

namespace tpserve::sampling {

std::vector<Candidate> BestOf(std::vector<Candidate> candidates, size_t n) {
  std::sort(candidates.begin(), candidates.end(), Before);
  while (!candidates.empty() && candidates.back().id < 0) candidates.pop_back();
  if (candidates.size() > n) candidates.resize(n);
  return candidates;
}

}  // namespace tpserve::sampling
