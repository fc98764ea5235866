#include "cli/npy.h"

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "shardrt/base/element_type.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace shardrt::cli {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// A .npy file from its parts, with the header length in the width the version uses.
std::string RawNpy(int major, const std::string& header, const std::string& data) {
  std::string out("\x93NUMPY", 6);
  out.push_back(static_cast<char>(major));
  out.push_back(0);
  const size_t width = major == 1 ? 2 : 4;
  for (size_t i = 0; i < width; ++i) {
    out.push_back(static_cast<char>((header.size() >> (8 * i)) & 0xFF));
  }
  return out + header + data;
}

std::string Int32Bytes(const std::vector<int32_t>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * 4);
}

std::vector<uint8_t> ToVector(const std::string& bytes) {
  return std::vector<uint8_t>(bytes.begin(), bytes.end());
}

// What np.save writes for np.arange(6, dtype=np.int32).reshape(2, 3), byte for byte: version
// 1.0, a 118-byte header padded with spaces so the data starts at offset 128.
std::string NumpyArange6Fixture() {
  const std::string dict = "{'descr': '<i4', 'fortran_order': False, 'shape': (2, 3), }";
  std::string header = dict + std::string(118 - dict.size() - 1, ' ') + "\n";
  std::string file = std::string("\x93NUMPY\x01\x00\x76\x00", 10) + header;
  EXPECT_EQ(file.size(), 128u);
  return file + Int32Bytes({0, 1, 2, 3, 4, 5});
}

TEST(NpyTest, ParsesNumpyFixture) {
  absl::StatusOr<NpyArray> array = ParseNpy(NumpyArange6Fixture());
  ASSERT_TRUE(array.ok()) << array.status();
  EXPECT_EQ(array->type, ElementType::kS32);
  EXPECT_THAT(array->shape, ElementsAre(2, 3));
  EXPECT_EQ(array->data, ToVector(Int32Bytes({0, 1, 2, 3, 4, 5})));
}

TEST(NpyTest, SerializesLikeNumpy) {
  NpyArray array{ElementType::kS32, {2, 3}, ToVector(Int32Bytes({0, 1, 2, 3, 4, 5}))};
  absl::StatusOr<std::string> bytes = SerializeNpy(array);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_EQ(*bytes, NumpyArange6Fixture());
}

// Every supported type, ranks 0 to 4, through bytes and through a file.
TEST(NpyTest, RoundTripsEveryTypeAndRank) {
  const ElementType types[] = {ElementType::kPred, ElementType::kS8,  ElementType::kS16,
                               ElementType::kS32,  ElementType::kS64, ElementType::kU8,
                               ElementType::kU16,  ElementType::kU32, ElementType::kU64,
                               ElementType::kF16,  ElementType::kF32, ElementType::kF64};
  const std::vector<std::vector<int64_t>> shapes = {{}, {5}, {0}, {2, 3}, {3, 0, 2}, {2, 1, 3, 2}};
  std::mt19937 rng(42);
  int files = 0;
  for (const ElementType type : types) {
    for (const std::vector<int64_t>& shape : shapes) {
      NpyArray array{type, shape, {}};
      int64_t count = 1;
      for (const int64_t dim : shape) count *= dim;
      array.data.resize(static_cast<size_t>(count * ElementSizeInBytes(type)));
      for (uint8_t& byte : array.data) {
        byte = type == ElementType::kPred ? rng() % 2 : static_cast<uint8_t>(rng());
      }
      SCOPED_TRACE(absl::StrCat(ElementTypeName(type), " rank ", shape.size()));
      absl::StatusOr<std::string> bytes = SerializeNpy(array);
      ASSERT_TRUE(bytes.ok()) << bytes.status();
      EXPECT_EQ(bytes->size() - array.data.size(), 128u);  // a short header pads to 128
      EXPECT_EQ((*bytes)[6], 1);                          // version 1.0
      absl::StatusOr<NpyArray> back = ParseNpy(*bytes);
      ASSERT_TRUE(back.ok()) << back.status();
      EXPECT_EQ(back->type, type);
      EXPECT_EQ(back->shape, shape);
      EXPECT_EQ(back->data, array.data);

      const std::string path =
          absl::StrCat(::testing::TempDir(), "/npy_round_trip_", files++, ".npy");
      ASSERT_TRUE(WriteNpy(path, array).ok());
      absl::StatusOr<NpyArray> read = ReadNpy(path);
      ASSERT_TRUE(read.ok()) << read.status();
      EXPECT_EQ(read->type, type);
      EXPECT_EQ(read->shape, shape);
      EXPECT_EQ(read->data, array.data);
      std::remove(path.c_str());
    }
  }
}

TEST(NpyTest, WritesDescrsAsNumpyDoes) {
  const std::pair<ElementType, std::string> cases[] = {
      {ElementType::kPred, "'|b1'"}, {ElementType::kS8, "'|i1'"},  {ElementType::kU8, "'|u1'"},
      {ElementType::kS16, "'<i2'"},  {ElementType::kU64, "'<u8'"}, {ElementType::kF16, "'<f2'"},
      {ElementType::kF32, "'<f4'"},  {ElementType::kF64, "'<f8'"},
  };
  for (const auto& [type, descr] : cases) {
    absl::StatusOr<std::string> bytes =
        SerializeNpy(NpyArray{type, {}, std::vector<uint8_t>(ElementSizeInBytes(type))});
    ASSERT_TRUE(bytes.ok());
    EXPECT_THAT(*bytes, HasSubstr("{'descr': " + descr + ", 'fortran_order': False, "
                                  "'shape': (), }"));
  }
}

TEST(NpyTest, LargeHeaderUsesVersion2) {
  NpyArray array{ElementType::kU8, std::vector<int64_t>(30000, 1), {7}};
  absl::StatusOr<std::string> bytes = SerializeNpy(array);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_EQ((*bytes)[6], 2);
  EXPECT_EQ((bytes->size() - 1) % 64, 0u);
  absl::StatusOr<NpyArray> back = ParseNpy(*bytes);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->shape.size(), 30000u);
  EXPECT_THAT(back->data, ElementsAre(7));
}

TEST(NpyTest, ReadsVersions2And3) {
  const std::string header = "{'descr': '<i4', 'fortran_order': False, 'shape': (3,), }\n";
  for (int major : {2, 3}) {
    absl::StatusOr<NpyArray> array = ParseNpy(RawNpy(major, header, Int32Bytes({7, 8, 9})));
    ASSERT_TRUE(array.ok()) << array.status();
    EXPECT_THAT(array->shape, ElementsAre(3));
    EXPECT_EQ(array->data, ToVector(Int32Bytes({7, 8, 9})));
  }
}

TEST(NpyTest, AcceptsHeaderVariants) {
  struct Case {
    std::string header;
    ElementType type;
    std::vector<int64_t> shape;
  };
  const Case cases[] = {
      // Double quotes, no trailing comma, no padding, keys in another order.
      {R"({"shape": (2,), "fortran_order": False, "descr": "<u2"})", ElementType::kU16, {2}},
      // Python 2 long integers.
      {"{'descr': '<u2', 'fortran_order': False, 'shape': (1L, 2L), }", ElementType::kU16, {1, 2}},
      // Native byte order, and one-byte types with any order mark.
      {"{'descr': '=u2', 'fortran_order': False, 'shape': (2,)}", ElementType::kU16, {2}},
      {"{'descr': '|u1', 'fortran_order': False, 'shape': (4,)}", ElementType::kU8, {4}},
      {"{'descr': '>i1', 'fortran_order': False, 'shape': (4,)}", ElementType::kS8, {4}},
      {"{'descr': '<b1', 'fortran_order': False, 'shape': (2, 2)}", ElementType::kPred, {2, 2}},
      // Spaces everywhere and a trailing comma in the shape.
      {"  { 'descr' : '<i2' , 'fortran_order' : False , 'shape' : ( 2 , ) , }  \n",
       ElementType::kS16,
       {2}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.header);
    absl::StatusOr<NpyArray> array = ParseNpy(RawNpy(1, c.header, "\1\2\3\4"));
    ASSERT_TRUE(array.ok()) << array.status();
    EXPECT_EQ(array->type, c.type);
    EXPECT_EQ(array->shape, c.shape);
  }
}

TEST(NpyTest, TransposesFortranOrder) {
  // np.asfortranarray(np.arange(6, dtype=np.int32).reshape(2, 3)): columns stored first.
  const std::string header = "{'descr': '<i4', 'fortran_order': True, 'shape': (2, 3), }\n";
  absl::StatusOr<NpyArray> array = ParseNpy(RawNpy(1, header, Int32Bytes({0, 3, 1, 4, 2, 5})));
  ASSERT_TRUE(array.ok()) << array.status();
  EXPECT_THAT(array->shape, ElementsAre(2, 3));
  EXPECT_EQ(array->data, ToVector(Int32Bytes({0, 1, 2, 3, 4, 5})));

  // Rank 3: element (i, j, k) of shape (2, 3, 2) sits at i + 2j + 6k in Fortran order.
  std::vector<int32_t> fortran(12), row_major(12);
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 3; ++j) {
      for (int k = 0; k < 2; ++k) {
        const int value = 100 * i + 10 * j + k;
        fortran[i + 2 * j + 6 * k] = value;
        row_major[6 * i + 2 * j + k] = value;
      }
    }
  }
  const std::string header3 = "{'descr': '<i4', 'fortran_order': True, 'shape': (2, 3, 2), }\n";
  array = ParseNpy(RawNpy(1, header3, Int32Bytes(fortran)));
  ASSERT_TRUE(array.ok()) << array.status();
  EXPECT_EQ(array->data, ToVector(Int32Bytes(row_major)));
}

// The message of the error ParseNpy gives for `bytes`, or "OK".
std::string ParseError(const std::string& bytes) {
  absl::StatusOr<NpyArray> array = ParseNpy(bytes);
  if (array.ok()) return "OK";
  EXPECT_EQ(array.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(array.status().message());
}

std::string WithDescr(const std::string& descr, const std::string& data = std::string(4, '\0')) {
  return RawNpy(1, "{'descr': '" + descr + "', 'fortran_order': False, 'shape': (1,), }\n",
                data);
}

TEST(NpyTest, RejectsMalformedFiles) {
  const std::string header = "{'descr': '<i4', 'fortran_order': False, 'shape': (2, 3), }\n";
  const std::string data = Int32Bytes({0, 1, 2, 3, 4, 5});
  EXPECT_THAT(ParseError(""), HasSubstr("bad magic"));
  EXPECT_THAT(ParseError("\x93NUMP"), HasSubstr("bad magic"));
  EXPECT_THAT(ParseError("PK\3\4 a zip file, maybe an .npz"), HasSubstr("bad magic"));
  EXPECT_THAT(ParseError(RawNpy(4, header, data)), HasSubstr("unsupported .npy format version 4.0"));
  EXPECT_THAT(ParseError(std::string("\x93NUMPY\x01\x00\x05", 9)), HasSubstr("truncated header"));
  EXPECT_THAT(ParseError(RawNpy(1, header, data).substr(0, 40)),
              HasSubstr("truncated header: expected 60 bytes, got 30"));
  EXPECT_THAT(ParseError(RawNpy(1, header, data.substr(0, 20))),
              HasSubstr("expected 24 bytes of data for s32 (2, 3), got 20"));
  EXPECT_THAT(ParseError(RawNpy(1, header, data + "xx")),
              HasSubstr("expected 24 bytes of data for s32 (2, 3), got 26"));
  EXPECT_THAT(ParseError(RawNpy(1, "[1, 2]", "")), HasSubstr("malformed header: expected '{'"));
  EXPECT_THAT(ParseError(RawNpy(1, "{'descr': '<i4', 'shape': (1,)}", std::string(4, '\0'))),
              HasSubstr("lacks the key 'fortran_order'"));
  EXPECT_THAT(
      ParseError(RawNpy(1, "{'descr': '<i4', 'descr': '<i4', 'fortran_order': False}", "")),
      HasSubstr("duplicate key 'descr'"));
  EXPECT_THAT(ParseError(RawNpy(1, "{'descr': '<i4', 'fortran_order': False, 'shape': (1,), "
                                   "'extra': 1}",
                                std::string(4, '\0'))),
              HasSubstr("unexpected key 'extra'"));
  EXPECT_THAT(ParseError(RawNpy(1, "{'descr': '<i4', 'fortran_order': 0, 'shape': (1,)}", "")),
              HasSubstr("expected True or False"));
  EXPECT_THAT(ParseError(RawNpy(1, "{'descr': '<i4', 'fortran_order': False, 'shape': (-1,)}", "")),
              HasSubstr("negative dimension"));
  EXPECT_THAT(ParseError(RawNpy(1, "{'descr': '<i4', 'fortran_order': False, 'shape': (2 3)}", "")),
              HasSubstr("expected ',' or ')'"));
  EXPECT_THAT(ParseError(RawNpy(1, "{'descr': '<i4', 'fortran_order': False, 'shape': "
                                   "(99999999999999999999,)}",
                                "")),
              HasSubstr("dimension too large"));
  EXPECT_THAT(ParseError(RawNpy(1, "{'descr': '<i4', 'fortran_order': False, 'shape': "
                                   "(4294967296, 4294967296, 4294967296)}",
                                "")),
              HasSubstr("too large"));
  EXPECT_THAT(ParseError(RawNpy(1, "{'descr': '<i4", "")), HasSubstr("unterminated string"));
  EXPECT_THAT(ParseError(RawNpy(1, header + "junk", data)), HasSubstr("unexpected text"));
}

TEST(NpyTest, RejectsUnsupportedDtypes) {
  EXPECT_THAT(ParseError(WithDescr("<c8", std::string(8, '\0'))),
              HasSubstr("unsupported dtype '<c8'"));
  EXPECT_THAT(ParseError(WithDescr("<f16")), HasSubstr("unsupported dtype '<f16'"));
  EXPECT_THAT(ParseError(WithDescr("<M8[ns]")), HasSubstr("unsupported dtype '<M8[ns]'"));
  EXPECT_THAT(ParseError(WithDescr("<U3")), HasSubstr("unsupported dtype '<U3'"));
  EXPECT_THAT(ParseError(WithDescr("")), HasSubstr("unsupported dtype ''"));
  EXPECT_THAT(ParseError(WithDescr(">f4")), HasSubstr("big-endian dtype '>f4' is not supported"));
  EXPECT_THAT(ParseError(WithDescr("|f4")), HasSubstr("no byte order"));
  EXPECT_THAT(ParseError(WithDescr("<V2", std::string(2, '\0'))), HasSubstr("bf16 .npy files are not supported"));
  EXPECT_THAT(ParseError(RawNpy(1, "{'descr': [('a', '<i4')], 'fortran_order': False, "
                                   "'shape': (1,)}",
                                "")),
              HasSubstr("structured dtypes"));
}

TEST(NpyTest, RefusesToWriteBf16) {
  NpyArray array{ElementType::kBF16, {2}, {0, 0, 0, 0}};
  absl::StatusOr<std::string> bytes = SerializeNpy(array);
  ASSERT_FALSE(bytes.ok());
  EXPECT_THAT(bytes.status().message(), HasSubstr("bf16 .npy files are not supported"));
  EXPECT_THAT(bytes.status().message(), HasSubstr("f32"));
  const std::string path = ::testing::TempDir() + "/npy_bf16.npy";
  absl::Status status = WriteNpy(path, array);
  EXPECT_THAT(status.message(), HasSubstr(path));
  EXPECT_THAT(status.message(), HasSubstr("bf16"));
}

TEST(NpyTest, RefusesInconsistentArrays) {
  EXPECT_THAT(SerializeNpy(NpyArray{ElementType::kF32, {2, 3}, std::vector<uint8_t>(20)})
                  .status()
                  .message(),
              HasSubstr("data holds 20 bytes, but f32 (2, 3) needs 6 x 4"));
  EXPECT_THAT(SerializeNpy(NpyArray{ElementType::kF32, {-1}, {}}).status().message(),
              HasSubstr("negative dimension -1"));
  EXPECT_FALSE(SerializeNpy(NpyArray{ElementType::kInvalid, {}, {}}).ok());
}

TEST(NpyTest, FileErrorsNameThePath) {
  const std::string missing = ::testing::TempDir() + "/npy_no_such_file.npy";
  absl::StatusOr<NpyArray> array = ReadNpy(missing);
  EXPECT_EQ(array.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(array.status().message(), HasSubstr(missing));

  const std::string bad = ::testing::TempDir() + "/npy_bad_magic.npy";
  std::FILE* file = std::fopen(bad.c_str(), "wb");
  ASSERT_NE(file, nullptr);
  std::fputs("not numpy", file);
  std::fclose(file);
  array = ReadNpy(bad);
  EXPECT_EQ(array.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(array.status().message(), HasSubstr(bad + ": not a .npy file: bad magic"));
  std::remove(bad.c_str());

  absl::Status status =
      WriteNpy(::testing::TempDir() + "/no_such_dir/x.npy", NpyArray{ElementType::kU8, {}, {1}});
  EXPECT_FALSE(status.ok());
  EXPECT_THAT(status.message(), HasSubstr("no_such_dir/x.npy: cannot create"));
}

// Whatever the bytes, ParseNpy returns (a value or an error) without reading out of bounds.
TEST(NpyTest, SurvivesTruncationsAndMutations) {
  const std::string valid = NumpyArange6Fixture();
  for (size_t size = 0; size < valid.size(); ++size) {
    EXPECT_FALSE(ParseNpy(valid.substr(0, size)).ok()) << size;
  }
  std::mt19937 rng(1234);
  const char interesting[] = {'\0', '\'', '"', '(', ')', ',', ':', '{', '}', '<', '>', '|', '=',
                              '9',  '-',  'L', 'T', 'F', ' ', '\n', '\\', '[', '\x93', '\xff'};
  int parsed = 0;
  for (int trial = 0; trial < 20000; ++trial) {
    std::string bytes = valid;
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      // Mostly the header (first 128 bytes), where the parser works.
      const size_t pos = rng() % (rng() % 4 == 0 ? bytes.size() : 128);
      switch (rng() % 3) {
        case 0: bytes[pos] = interesting[rng() % sizeof(interesting)]; break;
        case 1: bytes[pos] = static_cast<char>(rng()); break;
        case 2: bytes.erase(pos, 1 + rng() % 8); break;
      }
      if (bytes.empty()) break;
    }
    absl::StatusOr<NpyArray> array = ParseNpy(bytes);
    if (array.ok()) {
      ++parsed;
      int64_t count = 1;
      for (const int64_t dim : array->shape) count *= dim;
      EXPECT_EQ(array->data.size(), static_cast<size_t>(count * ElementSizeInBytes(array->type)));
    }
  }
  EXPECT_GT(parsed, 0);  // padding edits leave some files valid
}

TEST(NpyTest, EmptyArrayHasNoData) {
  absl::StatusOr<NpyArray> array =
      ParseNpy(RawNpy(1, "{'descr': '<f8', 'fortran_order': True, 'shape': (0, 4), }\n", ""));
  ASSERT_TRUE(array.ok()) << array.status();
  EXPECT_THAT(array->data, IsEmpty());
  EXPECT_THAT(array->shape, ElementsAre(0, 4));
}

}  // namespace
}  // namespace shardrt::cli
