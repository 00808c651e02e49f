// Sizing the KV pool from the memory this host has free: the budget a worker passes to
// KvPool::BlocksForBudget when no explicit size is configured.
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"

namespace tpserve {

// MemAvailable of a /proc/meminfo-format text, in bytes. DATA_LOSS if the field is missing or malformed.
StatusOr<int64_t> ParseMemAvailable(const std::string& meminfo);

// MemAvailable of this host (/proc/meminfo). UNAVAILABLE if it cannot be read.
StatusOr<int64_t> HostAvailableMemoryBytes();

// The share of `available` bytes one rank may give its KV pool: fraction * available / ranks_on_host,
// minus `reserve_bytes`, never negative. REQUIRES: 0 < fraction <= 1, ranks_on_host >= 1.
int64_t KvBudgetBytes(int64_t available, double fraction, int ranks_on_host, int64_t reserve_bytes);

}  // namespace tpserve
