#include "cli/npy.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

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

// Writes `bytes` to `path`, replacing any file there.
void WriteFile(const std::string& path, const std::string& bytes) {
  std::FILE* file = std::fopen(path.c_str(), "wb");
  ASSERT_NE(file, nullptr) << path;
  ASSERT_EQ(std::fwrite(bytes.data(), 1, bytes.size(), file), bytes.size());
  ASSERT_EQ(std::fclose(file), 0);
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

// A rank far above what the reader takes still writes, with the 4-byte header length of
// version 2.0; the reader refuses the file by its rank.
TEST(NpyTest, LargeHeaderUsesVersion2) {
  NpyArray array{ElementType::kU8, std::vector<int64_t>(30000, 1), {7}};
  absl::StatusOr<std::string> bytes = SerializeNpy(array);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_EQ((*bytes)[6], 2);
  EXPECT_EQ((bytes->size() - 1) % 64, 0u);
  absl::StatusOr<NpyArray> back = ParseNpy(*bytes);
  ASSERT_FALSE(back.ok());
  EXPECT_EQ(back.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(back.status().message(), "shape has rank 30000, more than limits::kMaxRank (64)");
}

// A version 2.0 header over 64 KiB (here, padding) reads.
TEST(NpyTest, ReadsHeaderOver64KiB) {
  const std::string header = "{'descr': '|u1', 'fortran_order': False, 'shape': (2,), }" +
                             std::string(70000, ' ') + "\n";
  absl::StatusOr<NpyArray> array = ParseNpy(RawNpy(2, header, "\5\6"));
  ASSERT_TRUE(array.ok()) << array.status();
  EXPECT_THAT(array->shape, ElementsAre(2));
  EXPECT_THAT(array->data, ElementsAre(5, 6));
}

// A header of `rank` dimensions of 1 and one u8 element.
std::string OnesOfRank(int rank) {
  std::string shape = "(";
  for (int i = 0; i < rank; ++i) shape += "1, ";
  return RawNpy(1, "{'descr': '|u1', 'fortran_order': True, 'shape': " + shape + "), }\n",
                "\1");
}

TEST(NpyTest, HoldsTheRankToTheLimit) {
  absl::StatusOr<NpyArray> array = ParseNpy(OnesOfRank(64));
  ASSERT_TRUE(array.ok()) << array.status();
  EXPECT_EQ(array->shape, std::vector<int64_t>(64, 1));
  EXPECT_THAT(array->data, ElementsAre(1));
  EXPECT_EQ(ParseError(OnesOfRank(65)), "shape has rank 65, more than limits::kMaxRank (64)");
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
    // Four bytes: two u16, four u8, or four bools (so each 0 or 1).
    absl::StatusOr<NpyArray> array = ParseNpy(RawNpy(1, c.header, std::string("\1\0\1\1", 4)));
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
  EXPECT_THAT(ParseError(RawNpy(1, "{'descr': '<i4", "")), HasSubstr("unterminated string"));
  EXPECT_THAT(ParseError(RawNpy(1, header + "junk", data)), HasSubstr("unexpected text"));
}

// A .npy file of `descr` and the shape text `shape` with `data`, version 1.0, C order.
std::string WithShape(const std::string& descr, const std::string& shape,
                      const std::string& data = "") {
  return RawNpy(1, "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape + "}",
                data);
}

// limits::kMaxArrayBytes is 2^40 = 1099511627776 bytes: element size times the product of the
// nonzero dimensions must stay within it, and the check comes before the data is looked at.
TEST(NpyTest, HoldsArrayBytesToTheLimit) {
  // At the limit: refused only for the missing data.
  EXPECT_EQ(ParseError(WithShape("|u1", "(1099511627776,)")),
            "expected 1099511627776 bytes of data for u8 (1099511627776,), got 0");
  EXPECT_EQ(ParseError(WithShape("<f8", "(137438953472,)")),
            "expected 1099511627776 bytes of data for f64 (137438953472,), got 0");
  EXPECT_EQ(ParseError(WithShape("<i4", "(1024, 1024, 1024, 256)")),
            "expected 1099511627776 bytes of data for s32 (1024, 1024, 1024, 256), got 0");
  // One element more, or one element size more.
  EXPECT_EQ(ParseError(WithShape("|u1", "(1099511627777,)")),
            "u8 (1099511627777,) takes more than limits::kMaxArrayBytes (1099511627776) bytes");
  EXPECT_EQ(ParseError(WithShape("<f8", "(137438953473,)")),
            "f64 (137438953473,) takes more than limits::kMaxArrayBytes (1099511627776) bytes");
  EXPECT_EQ(ParseError(WithShape("<i4", "(1024, 1024, 1024, 257)")),
            "s32 (1024, 1024, 1024, 257) takes more than limits::kMaxArrayBytes (1099511627776) "
            "bytes");
  // Products that overflow int64 (2^96 elements; 2 x (2^63 - 1) bytes) are refused the same way.
  EXPECT_EQ(ParseError(WithShape("<i4", "(4294967296, 4294967296, 4294967296)")),
            "s32 (4294967296, 4294967296, 4294967296) takes more than limits::kMaxArrayBytes "
            "(1099511627776) bytes");
  EXPECT_EQ(ParseError(WithShape("<i2", "(9223372036854775807,)")),
            "s16 (9223372036854775807,) takes more than limits::kMaxArrayBytes (1099511627776) "
            "bytes");
  // A zero dimension does not excuse the others, wherever it stands (as in NumPy).
  EXPECT_EQ(ParseError(WithShape("<f4", "(0, 4611686018427387904)")),
            "f32 (0, 4611686018427387904) takes more than limits::kMaxArrayBytes "
            "(1099511627776) bytes (counting its nonzero dimensions, as NumPy does)");
  EXPECT_EQ(ParseError(WithShape("<f4", "(4611686018427387904, 4611686018427387904, 0)")),
            "f32 (4611686018427387904, 4611686018427387904, 0) takes more than "
            "limits::kMaxArrayBytes (1099511627776) bytes (counting its nonzero dimensions, "
            "as NumPy does)");
  EXPECT_EQ(ParseError(WithShape("<f4", "(0, 274877906944)")), "OK");  // 2^38 x 4 bytes
}

TEST(NpyTest, RefusesBoolBytesOtherThanZeroAndOne) {
  EXPECT_EQ(ParseError(WithShape("|b1", "(4,)", std::string("\0\1\2\1", 4))),
            "bool element 2 (row-major index) is 2, expected 0 or 1");
  EXPECT_EQ(ParseError(WithShape("|b1", "()", "\xff")),
            "bool element 0 (row-major index) is 255, expected 0 or 1");
  // The first bad byte of the file is named, by its row-major index.
  EXPECT_EQ(ParseError(WithShape("|b1", "(2, 2)", std::string("\1\0\x80\3", 4))),
            "bool element 2 (row-major index) is 128, expected 0 or 1");
  // Fortran order (2, 3): byte 1 of the file is element (1, 0), row-major index 3; byte 4 is
  // element (0, 2), row-major index 2.
  const std::string fortran_header =
      "{'descr': '|b1', 'fortran_order': True, 'shape': (2, 3), }\n";
  EXPECT_EQ(ParseError(RawNpy(1, fortran_header, std::string("\0\7\0\0\0\0", 6))),
            "bool element 3 (row-major index) is 7, expected 0 or 1");
  EXPECT_EQ(ParseError(RawNpy(1, fortran_header, std::string("\0\1\0\0\x09\0", 6))),
            "bool element 2 (row-major index) is 9, expected 0 or 1");
  // 0 and 1 read as they are, transposed when in Fortran order.
  absl::StatusOr<NpyArray> array =
      ParseNpy(RawNpy(1, fortran_header, std::string("\0\1\0\0\1\1", 6)));
  ASSERT_TRUE(array.ok()) << array.status();
  EXPECT_EQ(array->type, ElementType::kPred);
  EXPECT_THAT(array->data, ElementsAre(0, 0, 1, 1, 0, 1));
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

  const std::string empty = ::testing::TempDir() + "/npy_empty.npy";
  WriteFile(empty, "");
  array = ReadNpy(empty);
  EXPECT_EQ(array.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(array.status().message(), HasSubstr(empty + ": not a .npy file: bad magic ''"));
  std::remove(empty.c_str());

  absl::Status status =
      WriteNpy(::testing::TempDir() + "/no_such_dir/x.npy", NpyArray{ElementType::kU8, {}, {1}});
  EXPECT_FALSE(status.ok());
  EXPECT_THAT(status.message(), HasSubstr("no_such_dir/x.npy: cannot create"));
}

TEST(NpyTest, ReadsRegularFilesOnly) {
  // TempDir itself: a directory.
  const std::string dir = ::testing::TempDir();
  absl::StatusOr<NpyArray> array = ReadNpy(dir);
  EXPECT_EQ(array.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(array.status().message(), dir + ": expected a regular file, got a directory");

  array = ReadNpy("/dev/zero");
  EXPECT_EQ(array.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(array.status().message(), "/dev/zero: expected a regular file, got a character device");

  // A FIFO with no writer: opening it for reading would block, so it must not be opened.
  const std::string fifo = dir + "/npy_fifo.npy";
  std::remove(fifo.c_str());
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0) << std::strerror(errno);
  array = ReadNpy(fifo);
  EXPECT_EQ(array.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(array.status().message(), fifo + ": expected a regular file, got a FIFO");
  std::remove(fifo.c_str());

  // A symbolic link is followed: to a file it reads, to a directory it is refused as one.
  const std::string target = dir + "/npy_link_target.npy";
  const std::string link = dir + "/npy_link.npy";
  WriteFile(target, NumpyArange6Fixture());
  std::remove(link.c_str());
  ASSERT_EQ(::symlink(target.c_str(), link.c_str()), 0) << std::strerror(errno);
  array = ReadNpy(link);
  ASSERT_TRUE(array.ok()) << array.status();
  EXPECT_EQ(array->data, ToVector(Int32Bytes({0, 1, 2, 3, 4, 5})));
  std::remove(link.c_str());
  ASSERT_EQ(::symlink(dir.c_str(), link.c_str()), 0) << std::strerror(errno);
  array = ReadNpy(link);
  EXPECT_EQ(array.status().message(), link + ": expected a regular file, got a directory");
  std::remove(link.c_str());
  std::remove(target.c_str());
}

// limits::kMaxFileBytes is 4 GiB: a sparse file one byte larger is refused from its size,
// before anything is allocated or read.
TEST(NpyTest, RefusesFilesOverTheSizeLimit) {
  const std::string path = ::testing::TempDir() + "/npy_too_large.npy";
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  ASSERT_GE(fd, 0) << std::strerror(errno);
  const int truncated = ::ftruncate(fd, (int64_t{4} << 30) + 1);
  const int error = errno;
  ::close(fd);
  if (truncated != 0) {
    std::remove(path.c_str());
    GTEST_SKIP() << "this file system takes no 4 GiB sparse file: " << std::strerror(error);
  }
  absl::StatusOr<NpyArray> array = ReadNpy(path);
  EXPECT_EQ(array.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(array.status().message(),
            path + ": file of 4294967297 bytes exceeds limits::kMaxFileBytes (4294967296)");
  std::remove(path.c_str());
}

// A regular file whose content outgrows its reported size (procfs reports 0 bytes for files
// that hold text) is refused rather than read without a bound.
TEST(NpyTest, RefusesFilesLargerThanTheirSize) {
  const std::string path = "/proc/self/status";
  struct stat info;
  if (::stat(path.c_str(), &info) != 0 || !S_ISREG(info.st_mode) || info.st_size != 0) {
    GTEST_SKIP() << "no procfs here";
  }
  absl::StatusOr<NpyArray> array = ReadNpy(path);
  EXPECT_EQ(array.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(array.status().message(),
            path + ": expected 0 bytes (the file's size), got more: it changed while being "
                   "read, or does not report its size");
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
