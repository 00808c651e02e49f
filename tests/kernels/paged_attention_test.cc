// PagedAttention on a mixed batch (prefill chunk over a cached prefix, a decode, a fresh prefill)
// against float64 attention over contiguous K/V, with and without a sliding window, plus placement and
// batch invariance; for every KV cache type (f32, f16, bf16, q8_0: float64 over the K/V as the type
// rounds them, which the reference quantiser and dequantiser of common/dtype.h give).
#include "kernels/cpu/paged_attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "common/dtype.h"

namespace tpserve {
namespace {

struct SeqSpec {
  int32_t num_cached;  // positions already in the cache before this step
  int32_t num_new;     // tokens of this step (1 = decode)
};

struct Problem {
  int64_t H, Hkv, D, block_size;
  std::vector<SeqSpec> seqs;
  // Contiguous truth: per sequence [len, Hkv, D] for K and V.
  std::vector<std::vector<float>> k, v;
  std::vector<float> q;  // [T, H, D]
  std::vector<int32_t> token_seq, positions, kv_head_of_q;
  int64_t T = 0;
  int64_t window = 0;  // sliding window (0: none)
};

Problem MakeProblem(int64_t H, int64_t Hkv, int64_t D, int64_t block_size, std::vector<SeqSpec> seqs, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  Problem p{H, Hkv, D, block_size, std::move(seqs), {}, {}, {}, {}, {}, {}, 0};
  for (size_t s = 0; s < p.seqs.size(); ++s) {
    const int64_t len = p.seqs[s].num_cached + p.seqs[s].num_new;
    std::vector<float> k(len * Hkv * D), v(len * Hkv * D);
    for (float& x : k) x = dist(rng);
    for (float& x : v) x = dist(rng);
    p.k.push_back(std::move(k));
    p.v.push_back(std::move(v));
    for (int32_t i = 0; i < p.seqs[s].num_new; ++i) {
      p.token_seq.push_back(static_cast<int32_t>(s));
      p.positions.push_back(p.seqs[s].num_cached + i);
    }
  }
  p.T = static_cast<int64_t>(p.positions.size());
  p.q.resize(p.T * H * D);
  for (float& x : p.q) x = dist(rng);
  for (int64_t h = 0; h < H; ++h) p.kv_head_of_q.push_back(static_cast<int32_t>(h / (H / Hkv)));
  return p;
}

// The K/V as a cache of `type` holds them: rounded by the reference quantiser, read back.
Problem RoundedTo(Problem p, DType type) {
  for (std::vector<std::vector<float>>* kv : {&p.k, &p.v}) {
    for (std::vector<float>& x : *kv) {
      std::vector<uint8_t> bytes(DTypeRowBytes(type, static_cast<int64_t>(x.size())));
      QuantizeRow(type, x.data(), bytes.data(), static_cast<int64_t>(x.size()));
      DequantizeRow(type, bytes.data(), x.data(), static_cast<int64_t>(x.size()));
    }
  }
  return p;
}

// The cache of one layer with the sequences' blocks at the given physical ids.
struct PagedCache {
  DType dtype = DType::kF32;
  std::vector<uint8_t> k, v;          // [num_blocks, block_size, Hkv] rows of dtype
  std::vector<int32_t> block_tables;  // [S, max_blocks]
  int64_t max_blocks = 0;
  int64_t row_bytes = 0;              // one token's [Hkv, D]
  // Poisons a slot's K and V (all bits set: NaN in every type, q8_0's scale included).
  void Poison(int64_t slot) {
    std::fill_n(k.begin() + slot * row_bytes, row_bytes, 0xff);
    std::fill_n(v.begin() + slot * row_bytes, row_bytes, 0xff);
  }
};

PagedCache Place(const Problem& p, bool shuffle, uint32_t seed, DType dtype = DType::kF32) {
  PagedCache c;
  c.dtype = dtype;
  for (const SeqSpec& s : p.seqs) {
    c.max_blocks = std::max<int64_t>(c.max_blocks, (s.num_cached + s.num_new + p.block_size - 1) / p.block_size);
  }
  const int64_t S = static_cast<int64_t>(p.seqs.size());
  const int64_t num_blocks = S * c.max_blocks + 3;  // a few blocks nobody uses
  std::vector<int32_t> ids(num_blocks);
  std::iota(ids.begin(), ids.end(), 0);
  if (shuffle) std::shuffle(ids.begin(), ids.end(), std::mt19937(seed));
  c.block_tables.assign(S * c.max_blocks, -1);
  c.row_bytes = DTypeRowBytes(dtype, p.Hkv * p.D);
  c.k.assign(num_blocks * p.block_size * c.row_bytes, 0xff);  // unused slots poison any stray read
  c.v.assign(num_blocks * p.block_size * c.row_bytes, 0xff);
  int64_t next = 0;
  for (int64_t s = 0; s < S; ++s) {
    const int64_t len = p.seqs[s].num_cached + p.seqs[s].num_new;
    for (int64_t b = 0; b < (len + p.block_size - 1) / p.block_size; ++b) c.block_tables[s * c.max_blocks + b] = ids[next++];
    std::vector<int32_t> slots(len);
    for (int64_t pos = 0; pos < len; ++pos) {
      slots[pos] = static_cast<int32_t>(c.block_tables[s * c.max_blocks + pos / p.block_size] * p.block_size +
                                        pos % p.block_size);
    }
    WriteKvCache(p.k[s].data(), p.v[s].data(), slots.data(), len, p.Hkv, p.D, c.k.data(), c.v.data(), dtype);
  }
  return c;
}

std::vector<float> RunAttention(const Problem& p, const PagedCache& c, ThreadPool* pool, int64_t first = 0, int64_t count = -1) {
  if (count < 0) count = p.T;
  std::vector<float> out(count * p.H * p.D, NAN);
  PagedAttentionArgs a;
  a.q = p.q.data() + first * p.H * p.D;
  a.k_cache = c.k.data();
  a.v_cache = c.v.data();
  a.token_seq = p.token_seq.data() + first;
  a.positions = p.positions.data() + first;
  a.block_tables = c.block_tables.data();
  a.kv_head_of_q = p.kv_head_of_q.data();
  a.max_blocks_per_seq = c.max_blocks;
  a.num_tokens = count;
  a.num_heads = p.H;
  a.num_kv_heads = p.Hkv;
  a.head_dim = p.D;
  a.block_size = p.block_size;
  a.sliding_window = p.window;
  a.kv_dtype = c.dtype;
  a.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(p.D)));
  a.out = out.data();
  PagedAttention(a, pool);
  return out;
}

void ExpectMatchesFloat64(const Problem& p, const std::vector<float>& out) {
  const double scale = 1.0 / std::sqrt(static_cast<double>(p.D));
  for (int64_t t = 0; t < p.T; ++t) {
    const int64_t s = p.token_seq[t], end = p.positions[t] + 1;
    const int64_t first = p.window > 0 ? std::max<int64_t>(0, end - p.window) : 0;
    for (int64_t h = 0; h < p.H; ++h) {
      const int64_t kvh = h / (p.H / p.Hkv);
      const float* q = p.q.data() + (t * p.H + h) * p.D;
      std::vector<double> w(end, -INFINITY);
      double max = -INFINITY, sum = 0;
      for (int64_t j = first; j < end; ++j) {
        const float* k = p.k[s].data() + (j * p.Hkv + kvh) * p.D;
        double dot = 0;
        for (int64_t d = 0; d < p.D; ++d) dot += static_cast<double>(q[d]) * k[d];
        w[j] = dot * scale;
        max = std::max(max, w[j]);
      }
      for (double& x : w) sum += (x = std::exp(x - max));
      for (int64_t d = 0; d < p.D; ++d) {
        double want = 0;
        for (int64_t j = first; j < end; ++j) want += w[j] / sum * p.v[s][(j * p.Hkv + kvh) * p.D + d];
        ASSERT_NEAR(out[(t * p.H + h) * p.D + d], want, 2e-5) << "token " << t << " head " << h << " dim " << d;
      }
    }
  }
}

// A prefill chunk over 5 cached tokens, a decode at position 40, a fresh 3-token prefill, a decode at 0,
// and a 37-token chunk over 3 cached ones (more than two runs of paged_attention.cc's longest item).
const std::vector<SeqSpec> kMixed = {{5, 9}, {40, 1}, {0, 3}, {0, 1}, {3, 37}};

TEST(PagedAttentionTest, MixedBatchMatchesFloat64ForGqaShapes) {
  struct Shape {
    int64_t H, Hkv, D, block_size;
  };
  for (const Shape& sh : {Shape{9, 3, 64, 16}, Shape{4, 1, 64, 5}, Shape{2, 2, 24, 16}, Shape{4, 2, 128, 7}}) {
    const Problem p = MakeProblem(sh.H, sh.Hkv, sh.D, sh.block_size, kMixed, 11);
    const PagedCache c = Place(p, /*shuffle=*/true, 3);
    ThreadPool pool(2);
    ExpectMatchesFloat64(p, RunAttention(p, c, &pool));
  }
}

// A multi-query model, 64 query heads to one KV head: a lone decode on 2 threads splits the heads between
// the threads, 32 each, more than one item holds (kMaxGroupHeads); a prefill chunk of 20 tokens beside it.
TEST(PagedAttentionTest, ManyQueryHeadsToOneKvHeadMatchFloat64) {
  for (const std::vector<SeqSpec>& seqs : {std::vector<SeqSpec>{{40, 1}}, std::vector<SeqSpec>{{3, 20}}}) {
    const Problem p = MakeProblem(64, 1, 64, 16, seqs, 17);
    const PagedCache c = Place(p, /*shuffle=*/true, 8);
    for (int threads : {1, 2}) {
      ThreadPool pool(threads);
      ExpectMatchesFloat64(p, RunAttention(p, c, &pool));
    }
  }
}

// A window of 6 keys (inside and across blocks of 4); the positions before every token's window are
// poisoned in the cache, so reading one would turn the output into NaN.
TEST(PagedAttentionTest, SlidingWindowMatchesFloat64AndReadsNothingBefore) {
  Problem p = MakeProblem(4, 1, 32, 4, {{5, 9}, {40, 1}, {0, 3}}, 14);
  p.window = 6;
  PagedCache c = Place(p, /*shuffle=*/true, 5);
  for (size_t s = 0; s < p.seqs.size(); ++s) {
    const int64_t first_attended = std::max<int64_t>(0, p.seqs[s].num_cached + 1 - p.window);
    for (int64_t pos = 0; pos < first_attended; ++pos) {
      c.Poison(c.block_tables[s * c.max_blocks + pos / p.block_size] * p.block_size + pos % p.block_size);
    }
  }
  ThreadPool pool(2);
  ExpectMatchesFloat64(p, RunAttention(p, c, &pool));
}

TEST(PagedAttentionTest, ShuffledPlacementEqualsContiguousPlacementBitwise) {
  const Problem p = MakeProblem(9, 3, 64, 4, kMixed, 12);
  ThreadPool pool(2);
  const std::vector<float> contiguous = RunAttention(p, Place(p, false, 0), &pool);
  for (uint32_t seed : {1u, 2u, 3u}) {
    const std::vector<float> shuffled = RunAttention(p, Place(p, true, seed), &pool);
    ASSERT_EQ(0, std::memcmp(contiguous.data(), shuffled.data(), contiguous.size() * sizeof(float))) << seed;
  }
}

TEST(PagedAttentionTest, EachTokenAloneEqualsTheBatchBitwiseForAnyThreadCount) {
  const Problem p = MakeProblem(9, 3, 64, 16, kMixed, 13);
  const PagedCache c = Place(p, true, 4);
  ThreadPool one(1);
  const std::vector<float> batch = RunAttention(p, c, &one);
  const int64_t row = p.H * p.D;
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    const std::vector<float> again = RunAttention(p, c, &pool);
    ASSERT_EQ(0, std::memcmp(batch.data(), again.data(), batch.size() * sizeof(float))) << threads;
    for (int64_t t = 0; t < p.T; ++t) {
      const std::vector<float> alone = RunAttention(p, c, &pool, t, 1);
      ASSERT_EQ(0, std::memcmp(batch.data() + t * row, alone.data(), row * sizeof(float)))
          << "token " << t << ", " << threads << " threads";
    }
  }
}

class PagedAttentionKvTypeTest : public ::testing::TestWithParam<DType> {};

TEST_P(PagedAttentionKvTypeTest, MatchesFloat64OverTheRoundedKvAndReadsNothingOutsideItsKeys) {
  for (int64_t D : {32, 64, 128}) {
    Problem p = MakeProblem(6, 2, D, 5, kMixed, 21);
    p.window = D == 32 ? 7 : 0;
    PagedCache c = Place(p, /*shuffle=*/true, 6, GetParam());
    for (size_t s = 0; s < p.seqs.size() && p.window > 0; ++s) {
      for (int64_t pos = 0; pos < std::max<int64_t>(0, p.seqs[s].num_cached + 1 - p.window); ++pos) {
        c.Poison(c.block_tables[s * c.max_blocks + pos / p.block_size] * p.block_size + pos % p.block_size);
      }
    }
    ThreadPool pool(2);
    ExpectMatchesFloat64(RoundedTo(p, GetParam()), RunAttention(p, c, &pool));
  }
}

TEST_P(PagedAttentionKvTypeTest, PlacementAndBatchDoNotChangeABit) {
  const Problem p = MakeProblem(9, 3, 64, 4, kMixed, 22);
  ThreadPool pool(2);
  const PagedCache contiguous = Place(p, false, 0, GetParam());
  const std::vector<float> batch = RunAttention(p, contiguous, &pool);
  const std::vector<float> shuffled = RunAttention(p, Place(p, true, 7, GetParam()), &pool);
  ASSERT_EQ(0, std::memcmp(batch.data(), shuffled.data(), batch.size() * sizeof(float)));
  const int64_t row = p.H * p.D;
  for (int64_t t = 0; t < p.T; ++t) {
    const std::vector<float> alone = RunAttention(p, contiguous, &pool, t, 1);
    ASSERT_EQ(0, std::memcmp(batch.data() + t * row, alone.data(), row * sizeof(float))) << "token " << t;
  }
}

INSTANTIATE_TEST_SUITE_P(KvTypes, PagedAttentionKvTypeTest,
                         ::testing::Values(DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0),
                         [](const auto& info) { return std::string(DTypeName(info.param)); });

}  // namespace
}  // namespace tpserve
