// Sliding-window layers in pages of their own (ExecutorOptions::free_sliding_kv, kvstore/kv_layout.h):
// logits bitwise equal to the shared layout's while the pages that fell out of a sequence's window are
// given to another sequence of the same batches, which overwrites them; a released page the window
// still reads is refused.
#include <gtest/gtest.h>

#include <deque>
#include <set>

#include "tests/worker/engine_test_util.h"

namespace tpserve::testing {
namespace {

constexpr int kBlockSize = 4;

LocalEngine MakeEngine(const ModelFile& file, bool free_sliding_kv, int64_t num_pages) {
  LocalEngine engine;
  engine.comm = MakeLocalCommunicator();
  ExecutorOptions options;
  options.block_size = kBlockSize;
  options.num_kv_blocks = num_pages;
  options.num_threads = 2;
  options.free_sliding_kv = free_sliding_kv;
  auto executor = ModelExecutor::Create(file.config(), file.weights(), engine.comm.get(), options);
  CHECK(executor.ok()) << executor.status().ToString();
  engine.executor = std::move(executor).value();
  return engine;
}

// The block manager's rule, written plainly: a page per group per logical block, a sliding group's
// pages released once the next query's window has passed them; released pages are reused first.
class PagedSequences {
 public:
  PagedSequences(KvGroups groups, int32_t num_pages) : groups_(std::move(groups)) {
    for (int32_t p = 0; p < num_pages; ++p) free_.push_back(p);
  }

  // Gives seq pages for positions [0, end).
  void Grow(SequencePlan& seq, int32_t end) {
    const int32_t G = groups_.num_groups();
    while (static_cast<int32_t>(seq.block_table.size()) < (end + kBlockSize - 1) / kBlockSize * G) {
      CHECK(!free_.empty());
      seq.block_table.push_back(free_.front());
      free_.pop_front();
    }
  }

  // After a step: seq.num_cached is where its next query sits.
  void Release(SequencePlan& seq) {
    const int32_t G = groups_.num_groups();
    const int32_t first_live = groups_.FirstLiveBlock(seq.num_cached, kBlockSize);
    for (int32_t i = 0; i < first_live; ++i) {
      for (int32_t g = 0; g < G; ++g) {
        int32_t& page = seq.block_table[i * G + g];
        if (!groups_.sliding[g] || page < 0) continue;
        released_.insert(page);
        free_.push_front(page);
        page = -1;
      }
    }
  }

  // Pages released by one sequence and now held by another.
  int32_t NumReused(const SequencePlan& holder) const {
    int32_t n = 0;
    for (int32_t page : holder.block_table) n += released_.count(page) > 0 ? 1 : 0;
    return n;
  }

 private:
  KvGroups groups_;
  std::deque<int32_t> free_;
  std::set<int32_t> released_;
};

struct SlidingCase {
  const char* preset;
  int32_t num_groups;  // of the windowed layout
};

class SlidingKvTest : public ::testing::TestWithParam<SlidingCase> {};

// Sequence a runs 44 steps (prefill 6, then decodes); b joins at step 10 with a 7-token prefill chunk
// and decodes with it. Both engines see the same tokens; only the block tables differ.
TEST_P(SlidingKvTest, WindowedPagesGiveBitwiseTheSharedLayoutsLogits) {
  std::unique_ptr<ModelFile> file = OpenSyntheticGguf(GetParam().preset, DType::kF32, 3, "sliding_kv");
  const ModelConfig& config = file->config();
  ASSERT_GT(config.sliding_window, 0);
  LocalEngine shared = MakeEngine(*file, false, 64);
  LocalEngine windowed = MakeEngine(*file, true, 64 * GetParam().num_groups);
  const KvGroups groups = windowed.executor->kv_layout().groups;
  ASSERT_EQ(groups.num_groups(), GetParam().num_groups);
  ASSERT_GT(groups.num_sliding(), 0);

  const std::vector<int32_t> tokens_a = RandomTokens(50, config.vocab_size, 1);
  const std::vector<int32_t> tokens_b = RandomTokens(40, config.vocab_size, 2);
  PagedSequences pages(groups, 64 * GetParam().num_groups);
  SequencePlan wa = SeqStep(1, 0, {}, {}), wb = SeqStep(2, 0, {}, {});
  int32_t done_a = 0, done_b = 0;
  for (int step = 0; step < 44; ++step) {
    std::vector<SequencePlan> shared_seqs, windowed_seqs;
    // One sequence's n tokens from position `done` in both engines: fixed blocks from first_block in the shared
    // layout, pages from the window rule in the other.
    auto add = [&](SequencePlan& seq, const std::vector<int32_t>& tokens, int32_t done, int32_t n, int32_t first_block) {
      shared_seqs.push_back(
          SeqStep(seq.seq_id, done, {tokens.begin() + done, tokens.begin() + done + n}, Iota(first_block, 16)));
      seq.num_cached = done;
      seq.token_ids = shared_seqs.back().token_ids;
      pages.Grow(seq, done + n);
      windowed_seqs.push_back(seq);
    };
    const int32_t n_a = step == 0 ? 6 : 1;
    add(wa, tokens_a, done_a, n_a, 0);
    const int32_t n_b = step < 10 ? 0 : step == 10 ? 7 : 1;
    if (n_b > 0) add(wb, tokens_b, done_b, n_b, 16);
    const StepResult want = RunStep(*shared.executor, shared_seqs, step);
    const StepResult got = RunStep(*windowed.executor, windowed_seqs, step);
    ASSERT_EQ(got.sequences.size(), want.sequences.size());
    for (size_t s = 0; s < want.sequences.size(); ++s) {
      ASSERT_EQ(got.sequences[s].logits, want.sequences[s].logits) << "step " << step << " sequence " << s;
    }
    done_a += n_a;
    done_b += n_b;
    wa.num_cached = done_a;
    wb.num_cached = done_b;
    pages.Release(wa);
    if (step >= 10) pages.Release(wb);
  }
  // b's pages include pages a released, which b overwrote while a kept reading its window.
  EXPECT_GT(pages.NumReused(wb), 0);
  EXPECT_LT(std::count_if(wa.block_table.begin(), wa.block_table.end(), [](int32_t p) { return p >= 0; }),
            static_cast<long>(wa.block_table.size()) / 2);
}

TEST_P(SlidingKvTest, AReleasedPageInsideTheWindowIsRefused) {
  std::unique_ptr<ModelFile> file = OpenSyntheticGguf(GetParam().preset, DType::kF32, 3, "sliding_kv_refused");
  LocalEngine windowed = MakeEngine(*file, true, 64 * GetParam().num_groups);
  const KvGroups groups = windowed.executor->kv_layout().groups;
  const int32_t G = groups.num_groups();
  int32_t sliding_group = 0;
  while (!groups.sliding[sliding_group]) ++sliding_group;
  // Prefill 12 tokens (3 blocks), then a decode at position 12.
  const std::vector<int32_t> tokens = RandomTokens(13, file->config().vocab_size, 4);
  SequencePlan seq = SeqStep(1, 0, {tokens.begin(), tokens.begin() + 12}, Iota(0, 4 * G));
  RunStep(*windowed.executor, {seq});
  seq.num_cached = 12;
  seq.token_ids = {tokens[12]};
  const int32_t first_live = groups.FirstLiveBlock(12, kBlockSize);
  ASSERT_GT(first_live, 0);
  // Released before the window: accepted.
  SequencePlan before = seq;
  before.block_table[(first_live - 1) * G + sliding_group] = -1;
  StepPlan ok_plan;
  ok_plan.sequences = {before};
  EXPECT_TRUE(windowed.executor->Execute(ok_plan).ok());
  // Released inside the window, or a full group's page: refused, and nothing is computed.
  SequencePlan inside = seq;
  inside.block_table[first_live * G + sliding_group] = -1;
  StepPlan bad_plan;
  bad_plan.sequences = {inside};
  auto refused = windowed.executor->Execute(bad_plan);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  for (int32_t g = 0; g < G; ++g) {
    if (groups.sliding[g]) continue;
    SequencePlan full = seq;
    full.block_table[g] = -1;
    bad_plan.sequences = {full};
    EXPECT_EQ(windowed.executor->Execute(bad_plan).status().code(), StatusCode::kInvalidArgument);
  }
}

// gemma3-tiny: 5 sliding layers and 1 full (window 4) -> 6 groups of one layer; mistral-tiny: every layer
// slides (window 5) -> one sliding group.
INSTANTIATE_TEST_SUITE_P(Presets, SlidingKvTest,
                         ::testing::Values(SlidingCase{"gemma3-tiny", 6}, SlidingCase{"mistral-tiny", 1}),
                         [](const auto& info) {
                           std::string name = info.param.preset;
                           for (char& c : name) c = c == '-' ? '_' : c;
                           return name;
                         });

}  // namespace
}  // namespace tpserve::testing
