// PrefixCache: the content index of a BlockManager. It maps the chained hash of a full KV block
// to the physical block holding it, keeps the block's token ids to rule out hash collisions, and
// orders the unreferenced cached blocks least recently released first for eviction.
// Knows nothing of reference counts; the BlockManager tells it when a block becomes evictable.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

namespace tpserve {

// Hash of the first block of a sequence's chain.
constexpr uint64_t kRootBlockHash = 0x6a09e667f3bcc908ull;
// hash(parent block hash, the block's token ids): 64-bit, order-sensitive.
uint64_t HashBlockTokens(uint64_t parent_hash, const int32_t* tokens, int32_t num_tokens);

class PrefixCache {
 public:
  PrefixCache(int32_t num_blocks, int32_t block_size);

  // The block registered under `hash` whose stored parent hash and tokens [block_size] equal
  // these, or -1.
  int32_t Lookup(uint64_t hash, uint64_t parent_hash, const int32_t* tokens) const;
  // Registers block's content under `hash`. False (nothing recorded) when the hash is already
  // registered (an identical block computed twice, or a collision). REQUIRES: !IsRegistered(block).
  bool Insert(int32_t block, uint64_t hash, uint64_t parent_hash, const int32_t* tokens);
  bool IsRegistered(int32_t block) const { return registered_[block]; }

  // The LRU of registered blocks that no sequence references.
  void PushEvictable(int32_t block);    // REQUIRES: registered, not evictable
  void RemoveEvictable(int32_t block);  // REQUIRES: evictable
  bool IsEvictable(int32_t block) const { return in_lru_[block]; }
  int32_t num_evictable() const { return num_evictable_; }
  // Unregisters the least recently released evictable block and returns it. REQUIRES: one exists.
  int32_t EvictOldest();
  // Unregisters every block and empties the LRU. REQUIRES: every registered block is evictable.
  void Clear();

 private:
  void Unregister(int32_t block);

  const int32_t block_size_;
  std::unordered_map<uint64_t, int32_t> block_of_hash_;
  std::vector<bool> registered_;        // [num_blocks]
  std::vector<uint64_t> hash_;          // [num_blocks]
  std::vector<uint64_t> parent_hash_;   // [num_blocks]
  std::vector<int32_t> tokens_;         // [num_blocks * block_size]
  // Doubly linked LRU over block ids; head_ is the oldest. -1 ends.
  std::vector<int32_t> prev_, next_;    // [num_blocks]
  std::vector<bool> in_lru_;            // [num_blocks]
  int32_t head_ = -1, tail_ = -1;
  int32_t num_evictable_ = 0;
};

}  // namespace tpserve
