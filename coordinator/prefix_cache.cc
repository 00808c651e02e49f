#include "coordinator/prefix_cache.h"

#include <algorithm>

#include "common/check.h"

namespace tpserve {
namespace {

// splitmix64's finaliser: a bijection with full avalanche.
uint64_t Mix(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

}  // namespace

uint64_t HashBlockTokens(uint64_t parent_hash, const int32_t* tokens, int32_t num_tokens) {
  uint64_t h = Mix(parent_hash ^ 0x9e3779b97f4a7c15ull);
  for (int32_t i = 0; i < num_tokens; ++i) {
    h = Mix(h + 0x9e3779b97f4a7c15ull + static_cast<uint32_t>(tokens[i]));
  }
  return Mix(h ^ static_cast<uint64_t>(num_tokens));
}

PrefixCache::PrefixCache(int32_t num_blocks, int32_t block_size)
    : block_size_(block_size),
      registered_(num_blocks, false),
      hash_(num_blocks, 0),
      parent_hash_(num_blocks, 0),
      tokens_(static_cast<size_t>(num_blocks) * block_size, 0),
      prev_(num_blocks, -1),
      next_(num_blocks, -1),
      in_lru_(num_blocks, false) {
  CHECK_GT(num_blocks, 0);
  CHECK_GT(block_size, 0);
}

int32_t PrefixCache::Lookup(uint64_t hash, uint64_t parent_hash, const int32_t* tokens) const {
  auto it = block_of_hash_.find(hash);
  if (it == block_of_hash_.end()) return -1;
  const int32_t block = it->second;
  if (parent_hash_[block] != parent_hash) return -1;
  const int32_t* stored = &tokens_[static_cast<size_t>(block) * block_size_];
  if (!std::equal(stored, stored + block_size_, tokens)) return -1;  // a 64-bit collision
  return block;
}

bool PrefixCache::Insert(int32_t block, uint64_t hash, uint64_t parent_hash, const int32_t* tokens) {
  CHECK(!registered_[block]) << "block " << block;
  if (!block_of_hash_.emplace(hash, block).second) return false;
  registered_[block] = true;
  hash_[block] = hash;
  parent_hash_[block] = parent_hash;
  std::copy(tokens, tokens + block_size_, &tokens_[static_cast<size_t>(block) * block_size_]);
  return true;
}

void PrefixCache::PushEvictable(int32_t block) {
  CHECK(registered_[block]) << "block " << block;
  CHECK(!in_lru_[block]) << "block " << block;
  in_lru_[block] = true;
  prev_[block] = tail_;
  next_[block] = -1;
  if (tail_ >= 0) next_[tail_] = block;
  tail_ = block;
  if (head_ < 0) head_ = block;
  ++num_evictable_;
}

void PrefixCache::RemoveEvictable(int32_t block) {
  CHECK(in_lru_[block]) << "block " << block;
  in_lru_[block] = false;
  if (prev_[block] >= 0) next_[prev_[block]] = next_[block];
  else head_ = next_[block];
  if (next_[block] >= 0) prev_[next_[block]] = prev_[block];
  else tail_ = prev_[block];
  prev_[block] = next_[block] = -1;
  --num_evictable_;
}

int32_t PrefixCache::EvictOldest() {
  CHECK_GE(head_, 0) << "nothing to evict";
  const int32_t block = head_;
  RemoveEvictable(block);
  Unregister(block);
  return block;
}

void PrefixCache::Clear() {
  while (head_ >= 0) EvictOldest();
  CHECK(block_of_hash_.empty()) << "a referenced block is still registered";
}

void PrefixCache::Unregister(int32_t block) {
  CHECK(registered_[block]);
  block_of_hash_.erase(hash_[block]);
  registered_[block] = false;
}

}  // namespace tpserve
