// The top-p rounds of the distributed sampler (worker/sampler.h), for the top-p rows without
// top-k, after round 2 gave each its global weight total (worker/sampling_rounds.h):
//   3. how many local nucleus candidates each rank has (one AllGather of counts);
//   4. those candidates, padded to the largest count (one AllGather). Any token of the global
//      nucleus is in its rank's local nucleus, because the weights before it on its own rank are a
//      part of those before it globally; so the walk over the gathered union with the global total
//      finds the nucleus exactly, and the row draws from it.
// No collective at all when no row needs them. Internal to the sampler.
#pragma once

#include <cstdint>
#include <vector>

#include "comm/communicator.h"
#include "common/status.h"
#include "worker/sampling_row.h"

namespace tpserve::sampling {

// Draws every row with NeedsNucleusRounds(). REQUIRES: rounds 1 and 2 unpacked; every rank passes
// the same rows' parameters. Errors: those of comm's collectives.
Status NucleusRounds(std::vector<SamplingRow>& rows, int64_t vocab_begin, int64_t vocab_shard, Communicator& comm);

}  // namespace tpserve::sampling
