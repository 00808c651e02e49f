#include "coordinator/block_manager.h"

#include <algorithm>
#include <utility>

#include "common/check.h"

namespace tpserve {
namespace {

// The token ids of logical block `index` of seq (all of it must exist).
void BlockTokens(const Sequence& seq, int32_t index, int32_t block_size, std::vector<int32_t>& out) {
  out.resize(block_size);
  for (int32_t j = 0; j < block_size; ++j) out[j] = seq.token_at(index * block_size + j);
}

int32_t CeilDiv(int32_t a, int32_t b) { return (a + b - 1) / b; }

// The key of group g's page of a block whose chained hash is `hash` (group 0: the hash itself).
uint64_t GroupKey(uint64_t hash, int32_t group) {
  return group == 0 ? hash : HashBlockTokens(hash, &group, 1);
}

}  // namespace

BlockManager::BlockManager(int32_t num_blocks, int32_t block_size, bool enable_prefix_caching, KvGroups groups)
    : num_blocks_(num_blocks),
      block_size_(block_size),
      enable_prefix_caching_(enable_prefix_caching),
      groups_(std::move(groups)),
      num_groups_(groups_.num_groups()),
      ref_count_(num_blocks, 0),
      num_filled_(num_blocks, 0),
      cache_(num_blocks, block_size) {
  CHECK_GT(num_blocks, 0);
  CHECK_GT(block_size, 0);
  CHECK(groups_.Validate().ok()) << groups_.Validate().ToString();
  // Taken from the back: page 0 first.
  free_blocks_.reserve(num_blocks);
  for (int32_t b = num_blocks - 1; b >= 0; --b) free_blocks_.push_back(b);
}

int32_t BlockManager::num_available() const {
  return static_cast<int32_t>(free_blocks_.size()) + cache_.num_evictable();
}

int32_t BlockManager::NumLogicalBlocks(const Sequence& seq) const {
  return static_cast<int32_t>(seq.block_table.size()) / num_groups_;
}

int32_t BlockManager::ref_count(int32_t page) const {
  CHECK_GE(page, 0);
  CHECK_LT(page, num_blocks_);
  return ref_count_[page];
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
  stats.num_window_releases = num_window_releases_;
  const int64_t slots = int64_t{stats.num_used} * block_size_;
  stats.kv_waste = slots == 0 ? 0.0 : double(slots - filled) / double(slots);
  return stats;
}

int32_t BlockManager::BlocksFor(int32_t num_positions, int32_t num_held) const {
  return std::max(0, CeilDiv(num_positions, block_size_) - num_held);
}

BlockManager::PrefixHit BlockManager::FindPrefix(const Sequence& seq) const {
  PrefixHit hit;
  if (!enable_prefix_caching_ || seq.needs_prompt_logprobs()) return hit;
  // At least the last token is recomputed, so its logits exist to sample from.
  const int32_t max_blocks = (seq.num_tokens() - 1) / block_size_;
  const bool any_full = groups_.num_sliding() < num_groups_;
  std::vector<int32_t> found;     // [blocks walked * G] cached page per group, or -1
  std::vector<uint64_t> hashes;   // [blocks walked]
  std::vector<bool> sliding_ok;   // [blocks walked] every sliding group's page is cached
  std::vector<int32_t> tokens;
  uint64_t parent = kRootBlockHash;
  for (int32_t i = 0; i < max_blocks; ++i) {
    BlockTokens(seq, i, block_size_, tokens);
    const uint64_t hash = HashBlockTokens(parent, tokens.data(), block_size_);
    bool full_ok = true, all_sliding = true;
    for (int32_t g = 0; g < num_groups_; ++g) {
      const int32_t page = cache_.Lookup(GroupKey(hash, g), GroupKey(parent, g), tokens.data());
      found.push_back(page);
      if (page < 0) (groups_.sliding[g] ? all_sliding : full_ok) = false;
    }
    if (any_full && !full_ok) break;
    hashes.push_back(hash);
    sliding_ok.push_back(all_sliding);
    parent = hash;
  }
  // The longest walked prefix whose window (the keys the first recomputed token reads) is cached.
  int32_t k = static_cast<int32_t>(hashes.size());
  for (; k > 0; --k) {
    const int32_t first = groups_.FirstLiveBlock(int64_t{k} * block_size_, block_size_);
    if (std::all_of(sliding_ok.begin() + first, sliding_ok.begin() + k, [](bool ok) { return ok; })) break;
  }
  const int32_t first_live = groups_.FirstLiveBlock(int64_t{k} * block_size_, block_size_);
  hit.num_blocks = k;
  hit.hashes.assign(hashes.begin(), hashes.begin() + k);
  for (int32_t i = 0; i < k; ++i) {
    for (int32_t g = 0; g < num_groups_; ++g) {
      const int32_t page = groups_.sliding[g] && i < first_live ? -1 : found[i * num_groups_ + g];
      hit.pages.push_back(page);
      if (page >= 0 && cache_.IsEvictable(page)) ++hit.num_evictable;
    }
  }
  return hit;
}

int32_t BlockManager::NumCachedPrefixTokens(const Sequence& seq) const {
  return FindPrefix(seq).num_blocks * block_size_;
}

bool BlockManager::CanAllocate(const Sequence& seq, int32_t num_new_tokens) const {
  CHECK(seq.block_table.empty()) << "seq " << seq.seq_id << " already holds blocks";
  CHECK_GE(num_new_tokens, 0);
  const PrefixHit hit = FindPrefix(seq);
  CHECK_LE(hit.num_blocks * block_size_ + num_new_tokens, seq.num_tokens());
  // A hit on an unreferenced cached page takes it out of the evictable pool.
  const int32_t needed =
      BlocksFor(hit.num_blocks * block_size_ + num_new_tokens, hit.num_blocks) * num_groups_ + hit.num_evictable;
  return needed <= num_available();
}

int32_t BlockManager::MaxAllocatableTokens(const Sequence& seq) const {
  CHECK(seq.block_table.empty()) << "seq " << seq.seq_id << " already holds blocks";
  const PrefixHit hit = FindPrefix(seq);
  const int32_t blocks = std::max(0, num_available() - hit.num_evictable) / num_groups_;
  const int64_t slots = int64_t{blocks} * block_size_;
  const int64_t left = seq.num_tokens() - int64_t{hit.num_blocks} * block_size_;
  return static_cast<int32_t>(std::min(slots, left));
}

void BlockManager::Allocate(Sequence& seq, int32_t num_new_tokens) {
  CHECK(CanAllocate(seq, num_new_tokens)) << "seq " << seq.seq_id;
  PrefixHit hit = FindPrefix(seq);
  // Claim the hits before taking fresh pages, so an eviction cannot take one of them.
  for (int32_t page : hit.pages) {
    if (page >= 0) {
      if (cache_.IsEvictable(page)) cache_.RemoveEvictable(page);
      ++ref_count_[page];
    }
    seq.block_table.push_back(page);
  }
  seq.block_hashes = std::move(hit.hashes);
  seq.num_computed = hit.num_blocks * block_size_;
  if (!seq.needs_prompt_logprobs()) {
    prefix_query_tokens_ += seq.num_tokens();
    prefix_hit_tokens_ += seq.num_computed;
  }
  const int32_t num_positions = seq.num_computed + num_new_tokens;
  const int32_t num_fresh = BlocksFor(num_positions, hit.num_blocks) * num_groups_;
  for (int32_t i = 0; i < num_fresh; ++i) seq.block_table.push_back(TakeBlock());
  NoteFilled(seq, num_positions);
}

int32_t BlockManager::NumSharedWritePages(const Sequence& seq) const {
  const int32_t index = seq.num_computed / block_size_;
  if (index >= NumLogicalBlocks(seq)) return 0;
  int32_t shared = 0;
  for (int32_t g = 0; g < num_groups_; ++g) {
    const int32_t page = seq.block_table[index * num_groups_ + g];
    CHECK_GE(page, 0) << "seq " << seq.seq_id << " writes into a released page";
    shared += ref_count_[page] > 1 ? 1 : 0;
  }
  return shared;
}

bool BlockManager::CanAppend(const Sequence& seq, int32_t num_new_tokens, int32_t num_lookahead) const {
  CHECK_GE(num_new_tokens, 0);
  CHECK_LE(seq.num_computed + num_new_tokens, seq.num_tokens() + num_lookahead);
  if (num_new_tokens == 0) return true;
  const int32_t needed = BlocksFor(seq.num_computed + num_new_tokens, NumLogicalBlocks(seq)) * num_groups_ +
                         NumSharedWritePages(seq);
  return needed <= num_available();
}

int32_t BlockManager::MaxAppendableTokens(const Sequence& seq, int32_t num_lookahead) const {
  const int64_t pages = num_available() - NumSharedWritePages(seq);
  if (pages < 0) return 0;  // no room for the private copies the next token needs
  const int64_t blocks = NumLogicalBlocks(seq) + pages / num_groups_;
  const int64_t slots = blocks * block_size_ - seq.num_computed;
  return static_cast<int32_t>(std::clamp<int64_t>(slots, 0, seq.num_uncomputed() + num_lookahead));
}

void BlockManager::Append(Sequence& seq, int32_t num_new_tokens, int32_t num_lookahead) {
  CHECK(CanAppend(seq, num_new_tokens, num_lookahead)) << "seq " << seq.seq_id;
  if (num_new_tokens == 0) return;
  const int32_t index = seq.num_computed / block_size_;
  if (NumSharedWritePages(seq) > 0) {
    // The tokens about to be computed would write into pages another sequence reads: give this
    // sequence its own copies of their filled part.
    const int32_t valid = seq.num_computed - index * block_size_;
    for (int32_t g = 0; g < num_groups_; ++g) {
      int32_t& page = seq.block_table[index * num_groups_ + g];
      if (ref_count_[page] == 1) continue;
      const int32_t copy = TakeBlock();
      if (valid > 0) {
        pending_copies_.emplace_back(page, copy);
        ++num_copies_;
      }
      num_filled_[copy] = valid;
      --ref_count_[page];  // still >= 1: it was shared
      page = copy;
    }
  }
  const int32_t num_positions = seq.num_computed + num_new_tokens;
  const int32_t num_fresh = BlocksFor(num_positions, NumLogicalBlocks(seq)) * num_groups_;
  for (int32_t i = 0; i < num_fresh; ++i) seq.block_table.push_back(TakeBlock());
  NoteFilled(seq, num_positions);
}

void BlockManager::MarkComputed(Sequence& seq) {
  const int32_t num_full = seq.num_computed / block_size_;
  CHECK_LE(num_full, NumLogicalBlocks(seq)) << "seq " << seq.seq_id;
  std::vector<int32_t> tokens;
  for (int32_t i = static_cast<int32_t>(seq.block_hashes.size()); i < num_full; ++i) {
    const uint64_t parent = i == 0 ? kRootBlockHash : seq.block_hashes[i - 1];
    BlockTokens(seq, i, block_size_, tokens);
    const uint64_t hash = HashBlockTokens(parent, tokens.data(), block_size_);
    seq.block_hashes.push_back(hash);
    if (!enable_prefix_caching_) continue;
    for (int32_t g = 0; g < num_groups_; ++g) {
      const int32_t page = seq.block_table[i * num_groups_ + g];
      // An identical page registered earlier keeps serving hits; this one stays private.
      if (page >= 0 && !cache_.IsRegistered(page)) {
        (void)cache_.Insert(page, GroupKey(hash, g), GroupKey(parent, g), tokens.data());
      }
    }
  }
  DropOutOfWindow(seq);
}

void BlockManager::DropLookahead(Sequence& seq) {
  const int32_t keep = CeilDiv(seq.num_computed, block_size_);
  while (NumLogicalBlocks(seq) > keep) {
    for (int32_t g = num_groups_ - 1; g >= 0; --g) {
      const int32_t page = seq.block_table.back();
      seq.block_table.pop_back();
      if (page >= 0) Release(page);
    }
  }
  // The last kept block's slots past num_computed held rejected proposals: not filled any more.
  if (keep == 0) return;
  const int32_t filled = seq.num_computed - (keep - 1) * block_size_;
  for (int32_t g = 0; g < num_groups_; ++g) {
    const int32_t page = seq.block_table[(keep - 1) * num_groups_ + g];
    if (page >= 0 && ref_count_[page] == 1) num_filled_[page] = std::min(num_filled_[page], filled);
  }
}

void BlockManager::DropOutOfWindow(Sequence& seq) {
  if (groups_.num_sliding() == 0) return;
  const int32_t first_live = groups_.FirstLiveBlock(seq.num_computed, block_size_);
  // A sliding group's released pages are a leading run of its column: walk back from the window.
  for (int32_t g = 0; g < num_groups_; ++g) {
    if (!groups_.sliding[g]) continue;
    for (int32_t i = first_live - 1; i >= 0; --i) {
      int32_t& page = seq.block_table[i * num_groups_ + g];
      if (page < 0) break;
      Release(page);
      page = -1;
      ++num_window_releases_;
    }
  }
}

void BlockManager::Fork(const Sequence& parent, Sequence& child) {
  CHECK(child.block_table.empty()) << "seq " << child.seq_id;
  CHECK_EQ(NumLogicalBlocks(parent), CeilDiv(parent.num_computed, block_size_))
      << "fork of seq " << parent.seq_id << " with blocks beyond its computed tokens";
  for (int32_t page : parent.block_table) {
    if (page >= 0) ++ref_count_[page];
  }
  child.block_table = parent.block_table;
  child.block_hashes = parent.block_hashes;
  child.num_computed = parent.num_computed;
}

void BlockManager::Free(Sequence& seq) {
  for (auto it = seq.block_table.rbegin(); it != seq.block_table.rend(); ++it) {
    if (*it >= 0) Release(*it);
  }
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
  for (int32_t i = seq.num_computed / block_size_; i < NumLogicalBlocks(seq); ++i) {
    const int32_t filled = std::clamp(num_positions - i * block_size_, 0, block_size_);
    for (int32_t g = 0; g < num_groups_; ++g) {
      int32_t& slot = num_filled_[seq.block_table[i * num_groups_ + g]];
      slot = std::max(slot, filled);
    }
  }
}

}  // namespace tpserve
