// BlockManager: the coordinator's view of one worker group's paged KV cache. It hands out
// physical block ids (the worker's KV pool indexes them) to sequences, reference-counts blocks
// shared between sequences (prefix caching, n > 1 samples), and keeps freed full blocks cached
// by content so a later prompt with the same prefix skips recomputing them.
//
// Every resource change is a check/commit pair: CanAllocate then Allocate, CanAppend then Append.
// A commit whose check failed is a programmer error (CHECK). Not thread-safe (the Scheduler owns it).
//
// The unit handed out is a page (kvstore/kv_groups.h): one layer group's K/V of one logical block. A
// sequence's logical block takes one page per group; with one group (every model without a sliding
// window) a page is a whole block and "block" and "page" mean the same. A sliding group's pages of
// the blocks wholly before its window are released as the sequence advances (MarkComputed).
//
// Page states: used (ref > 0), cached (ref 0, holds the K/V of a hashed full block, evictable),
// free (ref 0, no content). used + cached + free == num_blocks (pages) always.
//
// Prefix caching: a full block's hash = Hash(parent block's hash, its block_size token ids), each
// group's page registered under that hash mixed with the group; the stored token ids and parent hash
// are compared on a hit, so a 64-bit collision never serves wrong K/V. A hit of k blocks takes the
// full groups' pages of all k and the sliding groups' pages of the blocks the window before
// position k * block_size covers (all must still be cached). Only blocks whose K/V have been computed (MarkComputed, after the step ran) are
// offered to other sequences. When free blocks run out, cached blocks are evicted least recently
// released first.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "coordinator/prefix_cache.h"
#include "coordinator/sequence.h"
#include "common/kv_groups.h"

namespace tpserve {

struct BlockStats {
  int32_t num_blocks = 0;
  int32_t num_used = 0;    // ref > 0
  int32_t num_cached = 0;  // ref 0, content kept for prefix hits (evictable)
  int32_t num_free = 0;    // ref 0, no content
  int64_t prefix_query_tokens = 0;  // tokens of sequences looked up at Allocate
  int64_t prefix_hit_tokens = 0;    // of those, served from the cache
  int64_t num_evictions = 0;
  int64_t num_copies = 0;           // copy-on-write copies made
  int64_t num_window_releases = 0;  // sliding groups' pages released when they fell out of the window
  double prefix_hit_rate() const {
    return prefix_query_tokens == 0 ? 0.0 : double(prefix_hit_tokens) / double(prefix_query_tokens);
  }
  // Allocated slots not holding a (scheduled) token / allocated slots, over used blocks.
  double kv_waste = 0;
};

class BlockManager {
 public:
  // num_blocks: pages. REQUIRES: num_blocks > 0, block_size > 0, groups.Validate() OK.
  BlockManager(int32_t num_blocks, int32_t block_size, bool enable_prefix_caching, KvGroups groups = {});

  int32_t num_blocks() const { return num_blocks_; }
  int32_t block_size() const { return block_size_; }
  const KvGroups& groups() const { return groups_; }
  int32_t num_groups() const { return num_groups_; }
  // Logical blocks seq holds (block_table.size() / G).
  int32_t NumLogicalBlocks(const Sequence& seq) const;
  // Blocks an allocation can take now: free + cached (evictable).
  int32_t num_available() const;
  BlockStats Stats() const;

  // --- First allocation of a sequence that holds no blocks (new or preempted). ---
  // Tokens of seq's prompt ++ output that the cache holds as leading full blocks, capped so at
  // least the last token is recomputed (its logits are needed). Pure lookup. 0 when caching is off
  // or seq.needs_prompt_logprobs() (every prompt position must be computed; vLLM does the same).
  int32_t NumCachedPrefixTokens(const Sequence& seq) const;
  // Whether Allocate(seq, num_new_tokens) can succeed now.
  // REQUIRES: seq.block_table empty, num_new_tokens >= 0,
  //           NumCachedPrefixTokens(seq) + num_new_tokens <= seq.num_tokens().
  bool CanAllocate(const Sequence& seq, int32_t num_new_tokens) const;
  // The most new tokens Allocate could take now (0 if not even the cached prefix fits).
  int32_t MaxAllocatableTokens(const Sequence& seq) const;
  // Takes the cached prefix blocks (ref++), sets seq.num_computed to NumCachedPrefixTokens(seq),
  // and adds fresh blocks so positions [0, num_computed + num_new_tokens) have slots.
  // Counts the lookup in the hit-rate stats (not for a sequence that cannot read the cache).
  // REQUIRES: CanAllocate(seq, num_new_tokens).
  void Allocate(Sequence& seq, int32_t num_new_tokens);

  // --- Growth of a sequence that holds blocks (next prefill chunk, or a decode token). ---
  // num_lookahead: slots past the sequence's tokens, for speculative proposals (Scheduler).
  // Whether positions [0, seq.num_computed + num_new_tokens) can get slots, counting a
  // copy-on-write of a shared partially filled block that the new tokens would write into.
  // REQUIRES: num_new_tokens <= seq.num_uncomputed() + num_lookahead.
  bool CanAppend(const Sequence& seq, int32_t num_new_tokens, int32_t num_lookahead = 0) const;
  // The most new tokens Append could take now (<= seq.num_uncomputed() + num_lookahead).
  int32_t MaxAppendableTokens(const Sequence& seq, int32_t num_lookahead = 0) const;
  // Makes it so. A shared (ref > 1) partial block about to be written is replaced in seq's table
  // by a private copy; the (src, dst) pair is queued for TakeBlockCopies.
  // REQUIRES: CanAppend(seq, num_new_tokens, num_lookahead).
  void Append(Sequence& seq, int32_t num_new_tokens, int32_t num_lookahead = 0);
  // Gives back the blocks past seq.num_computed's (the slots of rejected proposals), so seq holds
  // what it would hold had it computed only those tokens. Call after MarkComputed.
  void DropLookahead(Sequence& seq);

  // After a step computed seq's tokens (seq.num_computed advanced): records the content hashes of
  // its newly completed full blocks so other sequences can hit them, and releases the sliding groups'
  // pages that fell out of the window (they stay cached while registered).
  void MarkComputed(Sequence& seq);

  // child shares every block of parent (ref++) and its num_computed. REQUIRES: child holds none.
  void Fork(const Sequence& parent, Sequence& child);

  // Releases seq's blocks (ref--), clears its table and num_computed. Blocks reaching ref 0 become
  // cached (hashed full blocks) or free. Tail blocks are released first, so they are evicted first.
  void Free(Sequence& seq);

  // The copy-on-write pairs made since the last call; they go into StepPlan::block_copies.
  std::vector<std::pair<int32_t, int32_t>> TakeBlockCopies();

  // Forgets all cached content (e.g. the worker group's KV memory was lost).
  // REQUIRES: no block is used.
  void ResetPrefixCache();

  int32_t ref_count(int32_t page) const;

 private:
  // The cached pages seq can start from: its leading full blocks (capped as NumCachedPrefixTokens).
  struct PrefixHit {
    int32_t num_blocks = 0;       // logical blocks hit
    std::vector<int32_t> pages;   // [num_blocks * G]; -1: a sliding group's page the hit does not need
    std::vector<uint64_t> hashes; // [num_blocks] chained hashes
    int32_t num_evictable = 0;    // pages that are unreferenced now (taking them uses available pages)
  };
  // Logical blocks needed to give slots to positions [0, num_positions) on top of `num_held` blocks.
  int32_t BlocksFor(int32_t num_positions, int32_t num_held) const;
  PrefixHit FindPrefix(const Sequence& seq) const;
  // Pages of the block the next computed token writes into that are shared with another sequence.
  int32_t NumSharedWritePages(const Sequence& seq) const;
  // Releases the sliding groups' pages of seq's blocks before the window of position num_computed.
  void DropOutOfWindow(Sequence& seq);
  // Takes a free block, or evicts the least recently released cached one. REQUIRES: available.
  int32_t TakeBlock();
  void Release(int32_t block);
  void NoteFilled(const Sequence& seq, int32_t num_positions);

  const int32_t num_blocks_;
  const int32_t block_size_;
  const bool enable_prefix_caching_;
  const KvGroups groups_;
  const int32_t num_groups_;
  std::vector<int32_t> ref_count_;     // [num_blocks]
  std::vector<int32_t> num_filled_;    // [num_blocks] slots of the block that hold a scheduled token
  std::vector<int32_t> free_blocks_;   // ref 0 without content, taken from the back
  PrefixCache cache_;                  // hashed full blocks; LRU of the unreferenced ones
  std::vector<std::pair<int32_t, int32_t>> pending_copies_;
  int64_t prefix_query_tokens_ = 0;
  int64_t prefix_hit_tokens_ = 0;
  int64_t num_copies_ = 0;
  int64_t num_evictions_ = 0;
  int64_t num_window_releases_ = 0;
};

}  // namespace tpserve
