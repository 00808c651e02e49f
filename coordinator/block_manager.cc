#include "coordinator/block_manager.h"

#include <algorithm>

#include "common/check.h"

namespace tpserve {
namespace {

// The token ids of logical block `index` of seq (all of it must exist).
void BlockTokens(const Sequence& seq, int32_t index, int32_t block_size, std::vector<int32_t>& out) {
  out.resize(block_size);
  for (int32_t j = 0; j < block_size; ++j) out[j] = seq.token_at(index * block_size + j);
}

int32_t CeilDiv(int32_t a, int32_t b) { return (a + b - 1) / b; }

}  // namespace

BlockManager::BlockManager(int32_t num_blocks, int32_t block_size, bool enable_prefix_caching)
    : num_blocks_(num_blocks),
      block_size_(block_size),
      enable_prefix_caching_(enable_prefix_caching),
      ref_count_(num_blocks, 0),
      num_filled_(num_blocks, 0),
      cache_(num_blocks, block_size) {
  CHECK_GT(num_blocks, 0);
  CHECK_GT(block_size, 0);
  // Taken from the back: block 0 first.
  free_blocks_.reserve(num_blocks);
  for (int32_t b = num_blocks - 1; b >= 0; --b) free_blocks_.push_back(b);
}

int32_t BlockManager::num_available() const {
  return static_cast<int32_t>(free_blocks_.size()) + cache_.num_evictable();
}

int32_t BlockManager::ref_count(int32_t block) const {
  CHECK_GE(block, 0);
  CHECK_LT(block, num_blocks_);
  return ref_count_[block];
}

BlockStats BlockManager::Stats() const {
  BlockStats stats;
  stats.num_blocks = num_blocks_;
  stats.num_free = static_cast<int32_t>(free_blocks_.size());
  stats.num_cached = cache_.num_evictable();
  int64_t filled = 0;
  for (int32_t b = 0; b < num_blocks_; ++b) {
    if (ref_count_[b] > 0) {
      ++stats.num_used;
      filled += num_filled_[b];
    }
  }
  CHECK_EQ(stats.num_used + stats.num_cached + stats.num_free, num_blocks_);
  stats.prefix_query_tokens = prefix_query_tokens_;
  stats.prefix_hit_tokens = prefix_hit_tokens_;
  stats.num_evictions = num_evictions_;
  stats.num_copies = num_copies_;
  const int64_t slots = int64_t{stats.num_used} * block_size_;
  stats.kv_waste = slots == 0 ? 0.0 : double(slots - filled) / double(slots);
  return stats;
}

int32_t BlockManager::BlocksFor(int32_t num_positions, int32_t num_held) const {
  return std::max(0, CeilDiv(num_positions, block_size_) - num_held);
}

std::vector<int32_t> BlockManager::CachedPrefixBlocks(const Sequence& seq,
                                                      std::vector<uint64_t>* hashes) const {
  std::vector<int32_t> blocks;
  if (!enable_prefix_caching_ || seq.needs_prompt_logprobs()) return blocks;
  // At least the last token is recomputed, so its logits exist to sample from.
  const int32_t max_blocks = (seq.num_tokens() - 1) / block_size_;
  std::vector<int32_t> tokens;
  uint64_t parent = kRootBlockHash;
  for (int32_t i = 0; i < max_blocks; ++i) {
    BlockTokens(seq, i, block_size_, tokens);
    const uint64_t hash = HashBlockTokens(parent, tokens.data(), block_size_);
    const int32_t block = cache_.Lookup(hash, parent, tokens.data());
    if (block < 0) break;
    blocks.push_back(block);
    if (hashes != nullptr) hashes->push_back(hash);
    parent = hash;
  }
  return blocks;
}

int32_t BlockManager::NumCachedPrefixTokens(const Sequence& seq) const {
  return static_cast<int32_t>(CachedPrefixBlocks(seq, nullptr).size()) * block_size_;
}

bool BlockManager::CanAllocate(const Sequence& seq, int32_t num_new_tokens) const {
  CHECK(seq.block_table.empty()) << "seq " << seq.seq_id << " already holds blocks";
  CHECK_GE(num_new_tokens, 0);
  const std::vector<int32_t> hits = CachedPrefixBlocks(seq, nullptr);
  const int32_t num_hit = static_cast<int32_t>(hits.size());
  CHECK_LE(num_hit * block_size_ + num_new_tokens, seq.num_tokens());
  int32_t needed = BlocksFor(num_hit * block_size_ + num_new_tokens, num_hit);
  // A hit on an unreferenced cached block takes it out of the evictable pool.
  for (int32_t block : hits) needed += cache_.IsEvictable(block) ? 1 : 0;
  return needed <= num_available();
}

int32_t BlockManager::MaxAllocatableTokens(const Sequence& seq) const {
  CHECK(seq.block_table.empty()) << "seq " << seq.seq_id << " already holds blocks";
  const std::vector<int32_t> hits = CachedPrefixBlocks(seq, nullptr);
  int32_t blocks = num_available();
  for (int32_t block : hits) blocks -= cache_.IsEvictable(block) ? 1 : 0;
  const int64_t slots = int64_t{std::max(0, blocks)} * block_size_;
  const int64_t left = seq.num_tokens() - static_cast<int64_t>(hits.size()) * block_size_;
  return static_cast<int32_t>(std::min(slots, left));
}

void BlockManager::Allocate(Sequence& seq, int32_t num_new_tokens) {
  CHECK(CanAllocate(seq, num_new_tokens)) << "seq " << seq.seq_id;
  std::vector<uint64_t> hashes;
  const std::vector<int32_t> hits = CachedPrefixBlocks(seq, &hashes);
  // Claim the hits before taking fresh blocks, so an eviction cannot take one of them.
  for (int32_t block : hits) {
    if (cache_.IsEvictable(block)) cache_.RemoveEvictable(block);
    ++ref_count_[block];
    seq.block_table.push_back(block);
  }
  seq.block_hashes = std::move(hashes);
  seq.num_computed = static_cast<int32_t>(hits.size()) * block_size_;
  if (!seq.needs_prompt_logprobs()) {
    prefix_query_tokens_ += seq.num_tokens();
    prefix_hit_tokens_ += seq.num_computed;
  }
  const int32_t num_positions = seq.num_computed + num_new_tokens;
  const int32_t num_fresh = BlocksFor(num_positions, static_cast<int32_t>(seq.block_table.size()));
  for (int32_t i = 0; i < num_fresh; ++i) seq.block_table.push_back(TakeBlock());
  NoteFilled(seq, num_positions);
}

bool BlockManager::NeedsPrivateCopy(const Sequence& seq) const {
  const size_t index = static_cast<size_t>(seq.num_computed / block_size_);
  return index < seq.block_table.size() && ref_count_[seq.block_table[index]] > 1;
}

bool BlockManager::CanAppend(const Sequence& seq, int32_t num_new_tokens) const {
  CHECK_GE(num_new_tokens, 0);
  CHECK_LE(seq.num_computed + num_new_tokens, seq.num_tokens());
  if (num_new_tokens == 0) return true;
  int32_t needed = BlocksFor(seq.num_computed + num_new_tokens,
                             static_cast<int32_t>(seq.block_table.size()));
  if (NeedsPrivateCopy(seq)) ++needed;
  return needed <= num_available();
}

int32_t BlockManager::MaxAppendableTokens(const Sequence& seq) const {
  int64_t blocks = static_cast<int64_t>(seq.block_table.size()) + num_available();
  if (NeedsPrivateCopy(seq)) --blocks;
  const int64_t slots = blocks * block_size_ - seq.num_computed;
  return static_cast<int32_t>(std::clamp<int64_t>(slots, 0, seq.num_uncomputed()));
}

void BlockManager::Append(Sequence& seq, int32_t num_new_tokens) {
  CHECK(CanAppend(seq, num_new_tokens)) << "seq " << seq.seq_id;
  if (num_new_tokens == 0) return;
  if (NeedsPrivateCopy(seq)) {
    // The tokens about to be computed would write into a block another sequence reads:
    // give this sequence its own copy of the filled part.
    const size_t index = static_cast<size_t>(seq.num_computed / block_size_);
    const int32_t src = seq.block_table[index];
    const int32_t dst = TakeBlock();
    const int32_t valid = seq.num_computed - static_cast<int32_t>(index) * block_size_;
    if (valid > 0) {
      pending_copies_.emplace_back(src, dst);
      ++num_copies_;
    }
    num_filled_[dst] = valid;
    --ref_count_[src];  // still >= 1: it was shared
    seq.block_table[index] = dst;
  }
  const int32_t num_positions = seq.num_computed + num_new_tokens;
  const int32_t num_fresh = BlocksFor(num_positions, static_cast<int32_t>(seq.block_table.size()));
  for (int32_t i = 0; i < num_fresh; ++i) seq.block_table.push_back(TakeBlock());
  NoteFilled(seq, num_positions);
}

void BlockManager::MarkComputed(Sequence& seq) {
  const int32_t num_full = seq.num_computed / block_size_;
  CHECK_LE(num_full, static_cast<int32_t>(seq.block_table.size())) << "seq " << seq.seq_id;
  std::vector<int32_t> tokens;
  for (int32_t i = static_cast<int32_t>(seq.block_hashes.size()); i < num_full; ++i) {
    const uint64_t parent = i == 0 ? kRootBlockHash : seq.block_hashes[i - 1];
    BlockTokens(seq, i, block_size_, tokens);
    const uint64_t hash = HashBlockTokens(parent, tokens.data(), block_size_);
    seq.block_hashes.push_back(hash);
    const int32_t block = seq.block_table[i];
    // An identical block registered earlier keeps serving hits; this one stays private.
    if (enable_prefix_caching_ && !cache_.IsRegistered(block)) {
      (void)cache_.Insert(block, hash, parent, tokens.data());
    }
  }
}

void BlockManager::Fork(const Sequence& parent, Sequence& child) {
  CHECK(child.block_table.empty()) << "seq " << child.seq_id;
  CHECK_EQ(static_cast<int32_t>(parent.block_table.size()), CeilDiv(parent.num_computed, block_size_))
      << "fork of seq " << parent.seq_id << " with blocks beyond its computed tokens";
  for (int32_t block : parent.block_table) ++ref_count_[block];
  child.block_table = parent.block_table;
  child.block_hashes = parent.block_hashes;
  child.num_computed = parent.num_computed;
}

void BlockManager::Free(Sequence& seq) {
  for (auto it = seq.block_table.rbegin(); it != seq.block_table.rend(); ++it) Release(*it);
  seq.block_table.clear();
  seq.block_hashes.clear();
  seq.num_computed = 0;
}

std::vector<std::pair<int32_t, int32_t>> BlockManager::TakeBlockCopies() {
  std::vector<std::pair<int32_t, int32_t>> copies;
  copies.swap(pending_copies_);
  return copies;
}

void BlockManager::ResetPrefixCache() {
  for (int32_t b = 0; b < num_blocks_; ++b) CHECK_EQ(ref_count_[b], 0) << "block " << b << " in use";
  while (cache_.num_evictable() > 0) {
    const int32_t block = cache_.EvictOldest();
    num_filled_[block] = 0;
    free_blocks_.push_back(block);
  }
  cache_.Clear();
}

int32_t BlockManager::TakeBlock() {
  int32_t block;
  if (!free_blocks_.empty()) {
    block = free_blocks_.back();
    free_blocks_.pop_back();
  } else {
    block = cache_.EvictOldest();
    ++num_evictions_;
  }
  CHECK_EQ(ref_count_[block], 0);
  ref_count_[block] = 1;
  num_filled_[block] = 0;
  return block;
}

void BlockManager::Release(int32_t block) {
  CHECK_GT(ref_count_[block], 0) << "block " << block << " released twice";
  if (--ref_count_[block] > 0) return;
  if (cache_.IsRegistered(block)) {
    cache_.PushEvictable(block);  // keeps its K/V (num_filled_ stays block_size_)
  } else {
    num_filled_[block] = 0;
    free_blocks_.push_back(block);
  }
}

void BlockManager::NoteFilled(const Sequence& seq, int32_t num_positions) {
  for (size_t i = static_cast<size_t>(seq.num_computed / block_size_); i < seq.block_table.size(); ++i) {
    const int32_t filled = std::clamp(num_positions - static_cast<int32_t>(i) * block_size_, 0, block_size_);
    int32_t& slot = num_filled_[seq.block_table[i]];
    slot = std::max(slot, filled);
  }
}

}  // namespace tpserve
