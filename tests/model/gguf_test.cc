// GgufWriter -> GgufFile round trips, slices, and corrupt files made in the test.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <unistd.h>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "model/gguf_file.h"
#include "model/gguf_writer.h"
#include "tests/model/gguf_test_util.h"

namespace tpserve {
namespace {

using testing_gguf::RandomTensor;
using testing_gguf::SameBytes;
using testing_gguf::TempPath;

constexpr DType kAllTypes[] = {DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0, DType::kQ4_0, DType::kQ4_1};

std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void WriteBytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// "t<k>" (built by appending: GCC 12's -Wrestrict misfires on "literal" + std::string at -O2).
std::string NumberedName(uint32_t k) {
  std::string s = "t";
  s += std::to_string(k);
  return s;
}

// A small file with metadata of every kind and one 2-D tensor per type plus a 1-D norm.
struct SmallFile {
  std::string path;
  std::vector<HostTensor> tensors;  // in file order: one per kAllTypes, then "norm"
};

SmallFile WriteSmallFile(const std::string& name, uint32_t version = 3, uint32_t alignment = 32) {
  SmallFile f;
  f.path = TempPath(name);
  GgufWriter w;
  w.set_version(version);
  if (alignment != 32) w.set_alignment(alignment);
  w.SetString("general.architecture", "llama");
  w.SetString("general.name", "tiny test");
  w.SetU32("llama.block_count", 2);
  w.SetI32("some.i32", -7);
  w.SetU64("some.u64", 1ull << 40);
  w.SetF32("some.f32", 0.25f);
  w.SetBool("some.bool", true);
  w.SetStringArray("tokenizer.ggml.tokens", {"<unk>", "a", "", "\xE2\x96\x81the"});
  w.SetF32Array("tokenizer.ggml.scores", {0.0f, -1.5f, 2.0f, 3.25f});
  w.SetI32Array("tokenizer.ggml.token_type", {2, 1, 1, 1});
  uint32_t seed = 1;
  for (DType t : kAllTypes) {
    f.tensors.push_back(RandomTensor(t, 5, 96, seed++));
    w.AddTensor(std::string("w.") + DTypeName(t), t, {5, 96});
  }
  f.tensors.push_back(RandomTensor(DType::kF32, 1, 7, seed++));
  w.AddTensor("norm", DType::kF32, {7});
  EXPECT_TRUE(w.Open(f.path).ok());
  for (const HostTensor& t : f.tensors) EXPECT_TRUE(w.WriteTensor(t).ok());
  EXPECT_TRUE(w.Finish().ok());
  return f;
}

TEST(GgufTest, RoundTripsMetadataAndEveryTensorType) {
  for (uint32_t version : {2u, 3u}) {
    SmallFile f = WriteSmallFile("roundtrip_v" + std::to_string(version), version);
    StatusOr<std::unique_ptr<GgufFile>> file = GgufFile::Open(f.path);
    ASSERT_TRUE(file.ok()) << file.status().ToString();
    const GgufFile& g = **file;
    EXPECT_EQ(g.version(), version);
    EXPECT_EQ(*g.GetString("general.name"), "tiny test");
    EXPECT_EQ(*g.GetInt("llama.block_count"), 2);
    EXPECT_EQ(*g.GetInt("some.i32"), -7);
    EXPECT_EQ(*g.GetInt("some.u64"), int64_t{1} << 40);
    EXPECT_EQ(*g.GetFloat("some.f32"), 0.25);
    EXPECT_EQ(*g.GetInt("some.bool"), 1);
    EXPECT_EQ(g.GetInt("general.name").status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(g.GetString("llama.block_count").status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(g.GetInt("absent").status().code(), StatusCode::kNotFound);
    const GgufValue* tokens = g.Get("tokenizer.ggml.tokens");
    ASSERT_NE(tokens, nullptr);
    EXPECT_EQ(tokens->type, GgufValue::Type::kArray);
    EXPECT_EQ(tokens->array_type, GgufValue::Type::kString);
    EXPECT_EQ(tokens->strings, (std::vector<std::string>{"<unk>", "a", "", "\xE2\x96\x81the"}));
    EXPECT_EQ(g.Get("tokenizer.ggml.scores")->floats, (std::vector<double>{0.0, -1.5, 2.0, 3.25}));
    EXPECT_EQ(g.Get("tokenizer.ggml.token_type")->ints, (std::vector<int64_t>{2, 1, 1, 1}));

    ASSERT_EQ(g.Names().size(), f.tensors.size());
    for (size_t k = 0; k < std::size(kAllTypes); ++k) {
      const std::string name = std::string("w.") + DTypeName(kAllTypes[k]);
      const TensorInfo* info = g.Find(name);
      ASSERT_NE(info, nullptr) << name;
      EXPECT_EQ(info->type, kAllTypes[k]);
      EXPECT_EQ(info->shape, (std::vector<int64_t>{5, 96}));
      EXPECT_EQ(info->offset % 32, 0u);
      EXPECT_EQ(info->nbytes, static_cast<uint64_t>(f.tensors[k].nbytes()));
      StatusOr<HostTensor> t = g.Read(name);
      ASSERT_TRUE(t.ok()) << t.status().ToString();
      EXPECT_EQ(t->rows, 5);
      EXPECT_EQ(t->cols, 96);
      EXPECT_TRUE(SameBytes(*t, f.tensors[k].data.get(), f.tensors[k].nbytes())) << name;
      EXPECT_EQ(t->ToF32(), f.tensors[k].ToF32()) << name;
    }
    const TensorInfo* norm = g.Find("norm");
    ASSERT_NE(norm, nullptr);
    EXPECT_EQ(norm->shape, (std::vector<int64_t>{7}));
    StatusOr<HostTensor> n = g.Read("norm");
    ASSERT_TRUE(n.ok());
    EXPECT_EQ(n->rows, 1);
    EXPECT_EQ(n->cols, 7);
    EXPECT_TRUE(SameBytes(*n, f.tensors.back().data.get(), 28));
    std::remove(f.path.c_str());
  }
}

TEST(GgufTest, HonoursNonDefaultAlignment) {
  SmallFile f = WriteSmallFile("align", 3, 64);
  StatusOr<std::unique_ptr<GgufFile>> file = GgufFile::Open(f.path);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  for (const std::string& name : (*file)->Names()) {
    EXPECT_EQ((*file)->Find(name)->offset % 64, 0u) << name;
  }
  EXPECT_TRUE(SameBytes(*(*file)->Read("w.Q4_1"), f.tensors[5].data.get(), f.tensors[5].nbytes()));
  std::remove(f.path.c_str());
}

TEST(GgufTest, SlicesEqualTheSameRowsAndColumnsOfTheWholeTensor) {
  SmallFile f = WriteSmallFile("slices");
  StatusOr<std::unique_ptr<GgufFile>> file = GgufFile::Open(f.path);
  ASSERT_TRUE(file.ok());
  const GgufFile& g = **file;
  for (size_t k = 0; k < std::size(kAllTypes); ++k) {
    const std::string name = std::string("w.") + DTypeName(kAllTypes[k]);
    const std::vector<float> full = f.tensors[k].ToF32();  // [5, 96]
    const int64_t step = DTypeBlockElems(kAllTypes[k]) == 1 ? 7 : 32;
    for (int64_t r0 = 0; r0 <= 5; ++r0) {
      for (int64_t r1 = r0; r1 <= 5; r1 += 2) {
        for (int64_t c0 = 0; c0 <= 96; c0 += step) {
          for (int64_t c1 = c0; c1 <= 96; c1 += step) {
            StatusOr<HostTensor> s = g.ReadSlice(name, r0, r1, c0, c1);
            ASSERT_TRUE(s.ok()) << name << " " << s.status().ToString();
            ASSERT_EQ(s->rows, r1 - r0);
            ASSERT_EQ(s->cols, c1 - c0);
            if (r1 == r0 || c1 == c0) continue;  // empty slices are valid; nothing to compare
            const std::vector<float> got = s->ToF32();
            for (int64_t r = r0; r < r1; ++r) {
              for (int64_t c = c0; c < c1; ++c) {
                ASSERT_EQ(got[(r - r0) * (c1 - c0) + (c - c0)], full[r * 96 + c]) << name << " " << r << "," << c;
              }
            }
          }
        }
      }
    }
    EXPECT_TRUE(SameBytes(*g.ReadRows(name, 2, 4), f.tensors[k].data.get() + 2 * f.tensors[k].row_bytes(),
                          2 * f.tensors[k].row_bytes()));
  }
  // Bad ranges are INVALID_ARGUMENT; quantised columns must be block aligned.
  EXPECT_EQ(g.ReadSlice("w.F32", 0, 6, 0, 96).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(g.ReadSlice("w.F32", 3, 2, 0, 96).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(g.ReadSlice("w.F32", -1, 2, 0, 96).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(g.ReadSlice("w.F32", 0, 2, 0, 97).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(g.ReadSlice("w.Q8_0", 0, 2, 16, 48).status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(g.ReadSlice("w.F16", 0, 2, 16, 48).ok());
  EXPECT_EQ(g.ReadSlice("nope", 0, 1, 0, 1).status().code(), StatusCode::kNotFound);
  std::remove(f.path.c_str());
}

// A file truncated while open (a checkpoint rewritten under a running worker): every read that
// reaches past the new end is DATA_LOSS naming the file, the tensor and the offset, never a SIGBUS,
// whether slices are views of the mapping (populated as handed out) or read (--no-mmap); a tensor
// still wholly inside reads as before.
class GgufLoadingTest : public ::testing::TestWithParam<WeightLoading> {};

TEST_P(GgufLoadingTest, TruncatedWhileOpenReadsAreDataLossNotACrash) {
  SmallFile f = WriteSmallFile("truncated");
  StatusOr<std::unique_ptr<GgufFile>> file = GgufFile::Open(f.path, GetParam());
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  const GgufFile& g = **file;
  const TensorInfo* first = g.Find("w.F32");
  ASSERT_NE(first, nullptr);
  for (const std::string& name : g.Names()) ASSERT_LE(first->offset, g.Find(name)->offset) << name;
  ASSERT_EQ(::truncate(f.path.c_str(), static_cast<off_t>(first->offset + first->nbytes)), 0);

  StatusOr<HostTensor> kept = g.Read("w.F32");
  ASSERT_TRUE(kept.ok()) << kept.status().ToString();
  EXPECT_TRUE(SameBytes(*kept, f.tensors[0].data.get(), f.tensors[0].nbytes()));
  const auto expect_data_loss = [&](const StatusOr<HostTensor>& t, const std::string& name) {
    ASSERT_FALSE(t.ok()) << name << " read past the end of the file";
    EXPECT_EQ(t.status().code(), StatusCode::kDataLoss) << t.status().ToString();
    EXPECT_NE(t.status().message().find(f.path), std::string::npos) << t.status().message();
    EXPECT_NE(t.status().message().find("tensor " + name), std::string::npos) << t.status().message();
    EXPECT_NE(t.status().message().find("offset " + std::to_string(g.Find(name)->offset)), std::string::npos)
        << t.status().message();
  };
  expect_data_loss(g.Read("w.Q4_1"), "w.Q4_1");           // whole rows: one read
  expect_data_loss(g.ReadRows("norm", 0, 1), "norm");      // the last tensor
  const StatusOr<HostTensor> cols = g.ReadCols("w.F16", 32, 64);  // a column slice, row by row
  ASSERT_FALSE(cols.ok());
  EXPECT_EQ(cols.status().code(), StatusCode::kDataLoss) << cols.status().ToString();
  EXPECT_NE(cols.status().message().find("tensor w.F16"), std::string::npos) << cols.status().message();

  ASSERT_EQ(::truncate(f.path.c_str(), 0), 0);
  EXPECT_EQ(g.Read("w.F32").status().code(), StatusCode::kDataLoss);
  std::remove(f.path.c_str());
}

// A mapped file hands out whole-row slices as views of the mapping (the same bytes at the same address
// each time), bitwise what --no-mmap reads; slices starting off a 32-byte boundary are copies.
TEST_P(GgufLoadingTest, MappedSlicesAreBitwiseTheReadOnes) {
  SmallFile f = WriteSmallFile("mapped");
  StatusOr<std::unique_ptr<GgufFile>> read = GgufFile::Open(f.path, WeightLoading::kRead);
  StatusOr<std::unique_ptr<GgufFile>> loaded = GgufFile::Open(f.path, GetParam());
  ASSERT_TRUE(read.ok() && loaded.ok());
  for (const std::string& name : (*loaded)->Names()) {
    const TensorInfo* info = (*loaded)->Find(name);
    for (int64_t begin : {int64_t{0}, info->rows() / 2}) {
      StatusOr<HostTensor> a = (*read)->ReadRows(name, begin, info->rows());
      StatusOr<HostTensor> b = (*loaded)->ReadRows(name, begin, info->rows());
      ASSERT_TRUE(a.ok() && b.ok()) << name;
      ASSERT_EQ(a->nbytes(), b->nbytes()) << name;
      EXPECT_TRUE(SameBytes(*b, a->data.get(), a->nbytes())) << name;
      EXPECT_EQ(reinterpret_cast<uintptr_t>(b->data.get()) % 32, 0u) << name;
      StatusOr<HostTensor> again = (*loaded)->ReadRows(name, begin, info->rows());
      ASSERT_TRUE(again.ok());
      // A view wherever the slice's data is 32-byte aligned in the file (the mapping starts on a page).
      const uint64_t at = info->offset + static_cast<uint64_t>(begin * DTypeRowBytes(info->type, info->cols()));
      // (The default maps a file under 4 MiB: no 2 MiB page to ask the page cache about.)
      EXPECT_EQ(again->data.get() == b->data.get(), GetParam() != WeightLoading::kRead && at % 32 == 0) << name;
    }
  }
  // A view outlives its file.
  StatusOr<HostTensor> kept = (*loaded)->Read("w.F32");
  ASSERT_TRUE(kept.ok());
  loaded->reset();
  EXPECT_TRUE(SameBytes(*kept, f.tensors[0].data.get(), f.tensors[0].nbytes()));
  std::remove(f.path.c_str());
}

INSTANTIATE_TEST_SUITE_P(MapAndRead, GgufLoadingTest,
                         ::testing::Values(WeightLoading::kAuto, WeightLoading::kMap, WeightLoading::kRead),
                         [](const ::testing::TestParamInfo<WeightLoading>& p) {
                           return std::string(p.param == WeightLoading::kAuto ? "Default"
                                              : p.param == WeightLoading::kMap ? "Map"
                                                                                 : "NoMmap");
                         });

// The header is read through a window of the file: metadata longer than the window (one string
// and one string array each over 1 MiB) and the tensor table after it read back exactly.
TEST(GgufTest, HeaderLargerThanTheReadWindowRoundTrips) {
  const std::string path = TempPath("big_header");
  std::string long_string(3u << 20, 'x');
  for (size_t i = 0; i < long_string.size(); i += 4099) long_string[i] = static_cast<char>('a' + i % 26);
  std::vector<std::string> many;
  for (int i = 0; i < 200000; ++i) many.push_back(NumberedName(static_cast<uint32_t>(i)));
  const HostTensor t = RandomTensor(DType::kQ8_0, 3, 64, 9);
  GgufWriter w;
  w.SetString("general.architecture", "llama");
  w.SetString("long", long_string);
  w.SetStringArray("many", many);
  w.AddTensor("t", DType::kQ8_0, {3, 64});
  ASSERT_TRUE(w.Open(path).ok());
  ASSERT_TRUE(w.WriteTensor(t).ok());
  ASSERT_TRUE(w.Finish().ok());
  StatusOr<std::unique_ptr<GgufFile>> file = GgufFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_EQ(*(*file)->GetString("long"), long_string);
  EXPECT_EQ((*file)->Get("many")->strings, many);
  StatusOr<HostTensor> read = (*file)->Read("t");
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_TRUE(SameBytes(*read, t.data.get(), t.nbytes()));
  std::remove(path.c_str());
}

TEST(GgufTest, StreamsTensorDataInArbitraryPieces) {
  SmallFile f = WriteSmallFile("whole");
  const std::string path = TempPath("pieces");
  GgufWriter w;
  std::string all;
  uint32_t k = 0;
  for (const HostTensor& t : f.tensors) {
    w.AddTensor(NumberedName(k++), t.type, t.rows == 1 ? std::vector<int64_t>{t.cols}
                                                                 : std::vector<int64_t>{t.rows, t.cols});
    all.append(reinterpret_cast<const char*>(t.data.get()), t.nbytes());
  }
  ASSERT_TRUE(w.Open(path).ok());
  // Pieces of 1..97 bytes that straddle tensor boundaries.
  std::mt19937 rng(3);
  for (size_t pos = 0; pos < all.size();) {
    const size_t n = std::min<size_t>(all.size() - pos, 1 + rng() % 97);
    ASSERT_TRUE(w.WriteTensorData(all.data() + pos, n).ok());
    pos += n;
  }
  EXPECT_EQ(w.WriteTensorData("x", 1).code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(w.Finish().ok());
  StatusOr<std::unique_ptr<GgufFile>> file = GgufFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  for (k = 0; k < f.tensors.size(); ++k) {
    EXPECT_TRUE(SameBytes(*(*file)->Read(NumberedName(k)), f.tensors[k].data.get(), f.tensors[k].nbytes()));
  }
  std::remove(path.c_str());
  std::remove(f.path.c_str());
}

TEST(GgufTest, FinishWithoutAllDataFails) {
  const std::string path = TempPath("partial");
  GgufWriter w;
  w.AddTensor("a", DType::kF32, {4});
  w.AddTensor("b", DType::kF32, {4});
  ASSERT_TRUE(w.Open(path).ok());
  ASSERT_TRUE(w.WriteTensorData("\0\0\0\0\0\0\0\0\0\0", 10).ok());  // a and half of b
  EXPECT_EQ(w.Finish().code(), StatusCode::kFailedPrecondition);
  std::remove(path.c_str());
}

// --- corrupt files ---

class GgufCorruptTest : public ::testing::Test {
 protected:
  void SetUp() override {
    good_ = WriteSmallFile("corrupt_base");
    bytes_ = ReadBytes(good_.path);
    // Thousands of small files are written below: use memory-backed /dev/shm where it exists.
    const bool have_shm = std::ofstream("/dev/shm/gguf_test_probe").good();
    std::remove("/dev/shm/gguf_test_probe");
    path_ = have_shm ? "/dev/shm/gguf_test_corrupt_" + std::to_string(::getpid()) : TempPath("corrupt");
  }
  void TearDown() override {
    std::remove(good_.path.c_str());
    std::remove(path_.c_str());
  }

  // Position of the first occurrence of `s` in the file.
  size_t Find(const std::string& s) const {
    const size_t pos = bytes_.find(s);
    EXPECT_NE(pos, std::string::npos) << s;
    return pos;
  }
  template <typename T>
  std::string With(size_t pos, T value) const {
    std::string b = bytes_;
    std::memcpy(b.data() + pos, &value, sizeof(T));
    return b;
  }
  // Opens `bytes` and expects DATA_LOSS whose message names the file and contains `what`.
  void ExpectDataLoss(const std::string& bytes, const std::string& what) {
    WriteBytes(path_, bytes);
    StatusOr<std::unique_ptr<GgufFile>> f = GgufFile::Open(path_);
    ASSERT_FALSE(f.ok()) << "accepted a file that should fail with: " << what;
    EXPECT_EQ(f.status().code(), StatusCode::kDataLoss) << f.status().ToString();
    EXPECT_NE(f.status().message().find(path_), std::string::npos) << f.status().message();
    EXPECT_NE(f.status().message().find(what), std::string::npos) << f.status().message();
  }
  // Offset of tensor `name`'s entry fields in the tensor table.
  size_t TensorDims(const std::string& name) const { return Find(name) + name.size(); }
  size_t TensorType(const std::string& name, int dims) const { return TensorDims(name) + 4 + 8 * dims; }
  size_t TensorOffset(const std::string& name, int dims) const { return TensorType(name, dims) + 4; }

  SmallFile good_;
  std::string bytes_;
  std::string path_;
};

TEST_F(GgufCorruptTest, BaseFileOpens) {
  WriteBytes(path_, bytes_);
  EXPECT_TRUE(GgufFile::Open(path_).ok());
}

TEST_F(GgufCorruptTest, MissingFileIsNotFound) {
  EXPECT_EQ(GgufFile::Open(path_ + ".absent").status().code(), StatusCode::kNotFound);
}

TEST_F(GgufCorruptTest, EveryTruncationFails) {
  // Every length through the header and the first tensor, then a stride through the data.
  const size_t dense = Find("norm") + 200;
  for (size_t len = 0; len < bytes_.size(); len += len < dense ? 1 : 61) {
    WriteBytes(path_, bytes_.substr(0, len));
    StatusOr<std::unique_ptr<GgufFile>> f = GgufFile::Open(path_);
    ASSERT_FALSE(f.ok()) << "truncated to " << len << " bytes was accepted";
    ASSERT_EQ(f.status().code(), StatusCode::kDataLoss) << len;
  }
}

TEST_F(GgufCorruptTest, BadMagicAndVersion) {
  ExpectDataLoss(With<uint8_t>(0, 'X'), "bad magic");
  ExpectDataLoss(With<uint32_t>(4, 1), "unsupported GGUF version 1");
  ExpectDataLoss(With<uint32_t>(4, 4), "unsupported GGUF version 4");
  ExpectDataLoss(With<uint32_t>(4, 0x03000000), "unsupported GGUF version");  // big-endian file
}

TEST_F(GgufCorruptTest, OversizedCounts) {
  ExpectDataLoss(With<uint64_t>(8, uint64_t{1} << 60), "tensor count");
  ExpectDataLoss(With<uint64_t>(16, uint64_t{1} << 60), "metadata count");
  ExpectDataLoss(With<uint64_t>(16, ~uint64_t{0}), "metadata count");
  // Plausible but wrong counts run off the end or misparse: still DATA_LOSS.
  WriteBytes(path_, With<uint64_t>(8, 9));
  EXPECT_EQ(GgufFile::Open(path_).status().code(), StatusCode::kDataLoss);
  WriteBytes(path_, With<uint64_t>(16, 11));
  EXPECT_EQ(GgufFile::Open(path_).status().code(), StatusCode::kDataLoss);
}

TEST_F(GgufCorruptTest, OversizedStringAndArrayLengths) {
  const size_t key = Find("general.name");
  ExpectDataLoss(With<uint64_t>(key - 8, uint64_t{1} << 50), "length");
  ExpectDataLoss(With<uint64_t>(key - 8, ~uint64_t{0}), "length");
  // The value string of general.name: key, then u32 type, then u64 length.
  ExpectDataLoss(With<uint64_t>(key + 12 + 4, uint64_t{1} << 40), "length");
  // tokenizer.ggml.tokens: key, u32 type (array), u32 element type, u64 count.
  const size_t tokens = Find("tokenizer.ggml.tokens") + 21;
  ExpectDataLoss(With<uint64_t>(tokens + 8, uint64_t{1} << 61), "array length");
  ExpectDataLoss(With<uint32_t>(tokens + 4, 99), "unknown array element type");
  ExpectDataLoss(With<uint32_t>(tokens + 4, 9), "nested arrays");
  const size_t scores = Find("tokenizer.ggml.scores") + 21;
  ExpectDataLoss(With<uint64_t>(scores + 8, uint64_t{1} << 62), "array length");
  ExpectDataLoss(With<uint32_t>(key + 12, 13), "unknown type");
}

// A type ggml defines but tpserve cannot compute with is a valid file: UNIMPLEMENTED, named.
TEST_F(GgufCorruptTest, UnsupportedTypesAreUnimplementedAndNamed) {
  for (auto [id, name] : {std::pair<uint32_t, const char*>{9, "Q8_1"}, {23, "IQ4_XS"}, {16, "IQ2_XXS"}, {28, "F64"}}) {
    WriteBytes(path_, With<uint32_t>(TensorType("w.F16", 2), id));
    StatusOr<std::unique_ptr<GgufFile>> f = GgufFile::Open(path_);
    ASSERT_EQ(f.status().code(), StatusCode::kUnimplemented) << f.status().ToString();
    const std::string expected = std::string("w.F16 has type ") + name + " (id " + std::to_string(id) +
                                 "), which is not supported; supported: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, "
                                 "Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K";
    EXPECT_NE(f.status().message().find(expected), std::string::npos) << f.status().ToString();
  }
}

TEST_F(GgufCorruptTest, BadTensorEntries) {
  ExpectDataLoss(With<uint32_t>(TensorDims("w.F16"), 0), "dimensions");
  ExpectDataLoss(With<uint32_t>(TensorDims("w.F16"), 5), "dimensions");
  ExpectDataLoss(With<uint32_t>(TensorType("w.F16", 2), 1000), "unknown type 1000");
  ExpectDataLoss(With<uint64_t>(TensorOffset("w.BF16", 2), 33), "alignment");
  ExpectDataLoss(With<uint64_t>(TensorOffset("w.BF16", 2), uint64_t{1} << 40), "past the end");
  ExpectDataLoss(With<uint64_t>(TensorOffset("w.BF16", 2), ~uint64_t{31}), "past the end");
  ExpectDataLoss(With<uint64_t>(TensorOffset("w.BF16", 2), 0), "overlap");
  // Shapes: a zero dimension, a product that overflows, a size past the file, a quantised row
  // that is not whole blocks.
  ExpectDataLoss(With<uint64_t>(TensorDims("w.F32") + 4, 0), "shape");
  std::string overflow = With<uint64_t>(TensorDims("w.F32") + 4, uint64_t{1} << 40);
  std::memcpy(overflow.data() + TensorDims("w.F32") + 12, "\0\0\0\0\0\0\x10\0", 8);  // 2^52 rows
  ExpectDataLoss(overflow, "overflow");
  ExpectDataLoss(With<uint64_t>(TensorDims("w.F32") + 12, 1 << 20), "past the end");
  ExpectDataLoss(With<uint64_t>(TensorDims("w.Q8_0") + 4, 80), "block");
  // Duplicate tensor name: rename w.F16 to w.F32.
  std::string dup = bytes_;
  std::memcpy(dup.data() + Find("w.F16"), "w.F32", 5);
  ExpectDataLoss(dup, "duplicate tensor name");
  // Duplicate metadata key.
  std::string dup_key = bytes_;
  std::memcpy(dup_key.data() + Find("some.i32"), "some.u64", 8);
  WriteBytes(path_, dup_key);
  EXPECT_EQ(GgufFile::Open(path_).status().code(), StatusCode::kDataLoss);
}

TEST_F(GgufCorruptTest, BadAlignmentKey) {
  GgufWriter w;
  w.SetU32("general.alignment", 24);
  w.AddTensor("a", DType::kF32, {4});
  ASSERT_TRUE(w.Open(path_).ok());
  ASSERT_TRUE(w.WriteTensorData("0123456789abcdef", 16).ok());
  ASSERT_TRUE(w.Finish().ok());
  StatusOr<std::unique_ptr<GgufFile>> f = GgufFile::Open(path_);
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("general.alignment"), std::string::npos);
}

// Random byte corruption of the header region: every outcome is an error or a valid file, never
// a crash, hang or huge allocation (ASan builds catch out-of-bounds reads).
TEST_F(GgufCorruptTest, RandomHeaderCorruptionNeverCrashes) {
  const size_t header_end = good_.tensors.empty() ? bytes_.size() : TensorOffset("norm", 1) + 8;
  std::mt19937 rng(11);
  int failures = 0;
  for (int trial = 0; trial < 1000; ++trial) {
    std::string b = bytes_;
    const int flips = 1 + rng() % 4;
    for (int k = 0; k < flips; ++k) {
      const size_t pos = rng() % header_end;
      if (rng() % 2) {
        b[pos] = static_cast<char>(b[pos] ^ (1 << (rng() % 8)));
      } else {
        b[pos] = static_cast<char>(rng());
      }
    }
    WriteBytes(path_, b);
    StatusOr<std::unique_ptr<GgufFile>> f = GgufFile::Open(path_);
    if (!f.ok()) {
      ++failures;
      // A flipped type id can name another ggml type: a well-formed file of an unsupported type.
      if (f.status().code() != StatusCode::kUnimplemented) {
        EXPECT_EQ(f.status().code(), StatusCode::kDataLoss) << f.status().ToString();
      }
      continue;
    }
    // Whatever was accepted must be readable within the file.
    for (const std::string& name : (*f)->Names()) {
      const TensorInfo* info = (*f)->Find(name);
      EXPECT_LE(info->offset + info->nbytes, (*f)->file_size());
      if (info->shape.size() <= 2) {
        EXPECT_TRUE((*f)->Read(name).ok());
      }
    }
  }
  EXPECT_GT(failures, 100);
}

}  // namespace
}  // namespace tpserve
