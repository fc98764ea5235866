#include "llama/gguf.h"
#include "llama/chat.h"
#include "llama/quants.h"

#include <unistd.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace shardrt::llama {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// ---------------------------------------------------------------------------------------------
// A small GGUF writer: the test's own encoding of the format, with knobs to break it.

template <typename T>
std::string Raw(T value) {
  std::string bytes(sizeof(T), '\0');
  std::memcpy(bytes.data(), &value, sizeof(T));
  return bytes;
}

std::string Str(const std::string& text) { return Raw<uint64_t>(text.size()) + text; }

// GGUF metadata value types.
enum : uint32_t {
  kU8 = 0,
  kI8,
  kU16,
  kI16,
  kU32,
  kI32,
  kF32,
  kBool,
  kString,
  kArray,
  kU64,
  kI64,
  kF64
};

struct TensorSpec {
  std::string name;
  std::vector<uint64_t> dims;
  uint32_t type = 0;
  std::string data;                // the tensor's bytes
  std::optional<uint64_t> offset;  // from the start of the data section; default: packed
};

class GgufWriter {
 public:
  std::string magic = "GGUF";
  uint32_t version = 3;
  std::optional<uint64_t> tensor_count;  // default: the number of tensors
  std::optional<uint64_t> kv_count;      // default: the number of keys
  uint64_t alignment = 32;               // the layout's; set general.alignment to match

  // A key of `type` whose encoded value is `payload`.
  GgufWriter& Key(const std::string& key, uint32_t type, const std::string& payload) {
    metadata_ += Str(key) + Raw<uint32_t>(type) + payload;
    ++keys_;
    return *this;
  }
  // A key/value of raw bytes (any encoding, valid or not).
  GgufWriter& RawKeyValue(const std::string& bytes) {
    metadata_ += bytes;
    ++keys_;
    return *this;
  }
  template <typename T>
  GgufWriter& Scalar(const std::string& key, uint32_t type, T value) {
    return Key(key, type, Raw<T>(value));
  }
  GgufWriter& String(const std::string& key, const std::string& value) {
    return Key(key, kString, Str(value));
  }
  GgufWriter& StringArray(const std::string& key, const std::vector<std::string>& values) {
    std::string payload = Raw<uint32_t>(kString) + Raw<uint64_t>(values.size());
    for (const std::string& value : values) payload += Str(value);
    return Key(key, kArray, payload);
  }
  template <typename T>
  GgufWriter& Array(const std::string& key, uint32_t element_type, const std::vector<T>& values) {
    std::string payload = Raw<uint32_t>(element_type) + Raw<uint64_t>(values.size());
    for (const T value : values) payload += Raw<T>(value);
    return Key(key, kArray, payload);
  }
  GgufWriter& Tensor(TensorSpec spec) {
    tensors_.push_back(std::move(spec));
    return *this;
  }

  std::string Build() const {
    std::string out = magic + Raw<uint32_t>(version) +
                      Raw<uint64_t>(tensor_count.value_or(tensors_.size())) +
                      Raw<uint64_t>(kv_count.value_or(keys_)) + metadata_;
    std::vector<uint64_t> offsets;
    uint64_t next = 0;
    for (const TensorSpec& tensor : tensors_) {
      const uint64_t offset = tensor.offset.value_or(next);
      offsets.push_back(offset);
      next = std::max(next, Align(offset + tensor.data.size()));
      out += Str(tensor.name) + Raw<uint32_t>(tensor.dims.size());
      for (const uint64_t dim : tensor.dims) out += Raw<uint64_t>(dim);
      out += Raw<uint32_t>(tensor.type) + Raw<uint64_t>(offset);
    }
    if (tensors_.empty()) return out;
    out.resize(Align(out.size()), '\0');
    // The data section ends with the end of the last tensor: no trailing padding, so that any
    // shorter prefix of the file cuts some tensor.
    std::string data;
    for (size_t i = 0; i < tensors_.size(); ++i) {
      if (offsets[i] > (uint64_t{1} << 20)) continue;  // deliberately beyond the end
      data.resize(std::max<size_t>(data.size(), offsets[i] + tensors_[i].data.size()), '\0');
      std::memcpy(data.data() + offsets[i], tensors_[i].data.data(), tensors_[i].data.size());
    }
    return out + data;
  }

 private:
  uint64_t Align(uint64_t n) const { return (n + alignment - 1) / alignment * alignment; }

  std::string metadata_;
  uint64_t keys_ = 0;
  std::vector<TensorSpec> tensors_;
};

// Writes `bytes` to a fresh file under the test temporary directory; returns its path.
std::string WriteTemp(const std::string& bytes) {
  static int counter = 0;
  std::string directory = ::testing::TempDir();
  if (!directory.empty() && directory.back() == '/') directory.pop_back();
  const std::string path =
      absl::StrCat(directory, "/gguf_test_", ::getpid(), "_", counter++, ".gguf");
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  file.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  file.close();
  EXPECT_TRUE(file.good()) << path;
  return path;
}

absl::StatusOr<std::unique_ptr<GgufFile>> OpenBytes(const std::string& bytes) {
  const std::string path = WriteTemp(bytes);
  auto file = GgufFile::Open(path);
  ::unlink(path.c_str());  // the mapping stays valid
  return file;
}

uint32_t Bits(float value) { return std::bit_cast<uint32_t>(value); }

// ---------------------------------------------------------------------------------------------
// Tensors with known contents. Scales are f16 bit patterns with their exact values.

struct Half {
  uint16_t bits;
  double value;
};
constexpr Half kScales[] = {{0x3c00, 1.0},
                            {0x3800, 0.5},
                            {0xb400, -0.25},
                            {0x3555, 0.333251953125},
                            {0x2e66, 0.0999755859375},
                            {0x0001, 5.9604644775390625e-08}};
constexpr Half kMins[] = {{0xbc00, -1.0}, {0x4200, 3.0}, {0xc500, -5.0}, {0x0000, 0.0}};

// The quant of element k of block b (any 8-bit pattern; Q4 types use its low nibble).
uint8_t Quant(int b, int k) { return static_cast<uint8_t>(b * 37 + k * 11 + 3); }

// A quantized tensor of `rows` x `cols` (cols a multiple of 32) and its expected values,
// computed in double from the block layout and rounded once to f32.
struct Quantized {
  std::string data;
  std::vector<float> values;
};

Quantized MakeQ8_0(int rows, int cols) {
  Quantized t;
  t.values.resize(rows * cols);
  for (int b = 0; b < rows * cols / 32; ++b) {
    const Half& d = kScales[b % std::size(kScales)];
    t.data += Raw<uint16_t>(d.bits);
    for (int k = 0; k < 32; ++k) {
      t.data += static_cast<char>(Quant(b, k));
      t.values[b * 32 + k] = static_cast<float>(d.value * static_cast<int8_t>(Quant(b, k)));
    }
  }
  return t;
}

Quantized MakeQ4_0(int rows, int cols) {
  Quantized t;
  t.values.resize(rows * cols);
  for (int b = 0; b < rows * cols / 32; ++b) {
    const Half& d = kScales[b % std::size(kScales)];
    t.data += Raw<uint16_t>(d.bits);
    // Byte j holds element j (low nibble) and element j + 16 (high nibble).
    for (int j = 0; j < 16; ++j) {
      const int low = Quant(b, j) & 15, high = Quant(b, j + 16) & 15;
      t.data += static_cast<char>(low | high << 4);
      t.values[b * 32 + j] = static_cast<float>(d.value * (low - 8));
      t.values[b * 32 + j + 16] = static_cast<float>(d.value * (high - 8));
    }
  }
  return t;
}

Quantized MakeQ4_1(int rows, int cols) {
  Quantized t;
  t.values.resize(rows * cols);
  for (int b = 0; b < rows * cols / 32; ++b) {
    const Half& d = kScales[b % std::size(kScales)];
    const Half& m = kMins[b % std::size(kMins)];
    t.data += Raw<uint16_t>(d.bits) + Raw<uint16_t>(m.bits);
    for (int j = 0; j < 16; ++j) {
      const int low = Quant(b, j) & 15, high = Quant(b, j + 16) & 15;
      t.data += static_cast<char>(low | high << 4);
      t.values[b * 32 + j] = static_cast<float>(d.value * low + m.value);
      t.values[b * 32 + j + 16] = static_cast<float>(d.value * high + m.value);
    }
  }
  return t;
}

// f16 and bf16 bit patterns with the f32 bits NumPy's conversion gives (subnormals, infinities,
// signed zero, quiet and signaling NaNs with their payloads).
constexpr std::pair<uint16_t, uint32_t> kF16[] = {
    {0x3c00, 0x3f800000}, {0xc000, 0xc0000000}, {0x0001, 0x33800000}, {0x03ff, 0x387fc000},
    {0x8001, 0xb3800000}, {0x7bff, 0x477fe000}, {0x7c00, 0x7f800000}, {0xfc00, 0xff800000},
    {0x8000, 0x80000000}, {0x7e00, 0x7fc00000}, {0x7c01, 0x7f802000}, {0x0400, 0x38800000},
    {0x3555, 0x3eaaa000}, {0x0000, 0x00000000}, {0xfe01, 0xffc02000}, {0x2e66, 0x3dccc000},
};
constexpr uint16_t kBF16[] = {0x3f80, 0xc040, 0x0001, 0x7fc0, 0x8000, 0xff80, 0x7f81, 0x4049};

struct TestModel {
  std::string bytes;
  Quantized q8, q4_0, q4_1;
  std::vector<float> f32;
};

TestModel MakeTestModel(uint32_t version = 3) {
  TestModel m;
  m.q8 = MakeQ8_0(3, 64);
  m.q4_0 = MakeQ4_0(2, 96);
  m.q4_1 = MakeQ4_1(4, 64);
  std::string f32_data;
  for (int i = 0; i < 5 * 3; ++i) {
    m.f32.push_back(static_cast<float>(i) * 0.75f - 3.0f);
    f32_data += Raw<float>(m.f32.back());
  }
  std::string f16_data, bf16_data;
  for (const auto& [half, bits] : kF16) f16_data += Raw<uint16_t>(half);
  for (const uint16_t half : kBF16) bf16_data += Raw<uint16_t>(half);

  GgufWriter w;
  w.version = version;
  w.String("general.architecture", "llama")
      .Scalar<uint8_t>("u8", kU8, 200)
      .Scalar<int8_t>("i8", kI8, -100)
      .Scalar<uint16_t>("u16", kU16, 60000)
      .Scalar<int16_t>("i16", kI16, -30000)
      .Scalar<uint32_t>("u32", kU32, 4000000000u)
      .Scalar<int32_t>("i32", kI32, -2000000000)
      .Scalar<uint64_t>("u64", kU64, uint64_t{1} << 40)
      .Scalar<uint64_t>("u64_big", kU64, std::numeric_limits<uint64_t>::max())
      .Scalar<int64_t>("i64", kI64, std::numeric_limits<int64_t>::min())
      .Scalar<float>("f32", kF32, 100000.0f)
      .Scalar<double>("f64", kF64, 1e-300)
      .Scalar<uint8_t>("bool_true", kBool, 1)
      .Scalar<uint8_t>("bool_false", kBool, 0)
      .String("empty", "")
      .StringArray("strings", {"a", "", "Ġt", std::string("x\0y", 3)})
      .StringArray("no_strings", {})
      .Array<int32_t>("i32s", kI32, {3, -1, 2147483647})
      .Array<uint8_t>("u8s", kU8, {0, 255})
      .Array<uint64_t>("u64s_big", kU64, {1, std::numeric_limits<uint64_t>::max()})
      .Array<float>("f32s", kF32, {1.5f});
  // An array of two arrays: [[7], ["s"]].
  w.Key("nested", kArray,
        Raw<uint32_t>(kArray) + Raw<uint64_t>(2) + Raw<uint32_t>(kI32) + Raw<uint64_t>(1) +
            Raw<int32_t>(7) + Raw<uint32_t>(kString) + Raw<uint64_t>(1) + Str("s"));
  w.Tensor({"f32", {5, 3}, 0, f32_data})
      .Tensor({"q8", {64, 3}, 8, m.q8.data})
      .Tensor({"f16", {std::size(kF16)}, 1, f16_data})
      .Tensor({"q4_0", {96, 1, 2, 1}, 2, m.q4_0.data})
      .Tensor({"bf16", {2, 2, 2}, 30, bf16_data})
      .Tensor({"q4_1", {64, 4}, 3, m.q4_1.data});
  m.bytes = w.Build();
  return m;
}

std::vector<float> Full(const GgufFile& file, const GgufTensor& tensor) {
  std::vector<float> out(tensor.num_elements());
  EXPECT_TRUE(
      Dequantize(file, tensor, 0, tensor.num_rows(), 0, tensor.row_length(), absl::MakeSpan(out))
          .ok());
  return out;
}

// ---------------------------------------------------------------------------------------------

TEST(GgufTest, ReadsMetadataOfEveryType) {
  const TestModel model = MakeTestModel();
  auto opened = OpenBytes(model.bytes);
  ASSERT_TRUE(opened.ok()) << opened.status();
  const GgufFile& file = **opened;
  EXPECT_EQ(file.version(), 3u);

  EXPECT_EQ(*file.GetString("general.architecture"), "llama");
  EXPECT_EQ(*file.GetString("empty"), "");
  EXPECT_EQ(*file.GetInt("u8"), 200);
  EXPECT_EQ(*file.GetInt("i8"), -100);
  EXPECT_EQ(*file.GetInt("u16"), 60000);
  EXPECT_EQ(*file.GetInt("i16"), -30000);
  EXPECT_EQ(*file.GetInt("u32"), 4000000000);
  EXPECT_EQ(*file.GetInt("i32"), -2000000000);
  EXPECT_EQ(*file.GetInt("u64"), int64_t{1} << 40);
  EXPECT_EQ(*file.GetInt("i64"), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(*file.GetFloat("f32"), 100000.0);
  EXPECT_EQ(*file.GetFloat("f64"), 1e-300);
  EXPECT_TRUE(*file.GetBool("bool_true"));
  EXPECT_FALSE(*file.GetBool("bool_false"));
  EXPECT_THAT(*file.GetStringArray("strings"), ElementsAre("a", "", "Ġt", std::string("x\0y", 3)));
  EXPECT_TRUE(file.GetStringArray("no_strings")->empty());
  EXPECT_THAT(*file.GetIntArray("i32s"), ElementsAre(3, -1, 2147483647));
  EXPECT_THAT(*file.GetIntArray("u8s"), ElementsAre(0, 255));
  EXPECT_TRUE(file.HasKey("nested"));
  EXPECT_FALSE(file.HasKey("absent"));
  const std::vector<std::string> keys = file.MetadataKeys();
  ASSERT_EQ(keys.size(), 22u);
  EXPECT_EQ(keys.front(), "general.architecture");
  EXPECT_EQ(keys.back(), "nested");
}

TEST(GgufTest, GettersRejectAbsentKeysAndOtherTypes) {
  auto opened = OpenBytes(MakeTestModel().bytes);
  ASSERT_TRUE(opened.ok()) << opened.status();
  const GgufFile& file = **opened;

  const absl::Status absent = file.GetInt("absent").status();
  EXPECT_EQ(absent.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(absent.message()), HasSubstr("metadata key 'absent' not found"));
  EXPECT_THAT(std::string(absent.message()), HasSubstr("GGUF file "));

  auto expect_invalid = [](const absl::Status& status, const std::string& fragment) {
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    EXPECT_THAT(std::string(status.message()), HasSubstr(fragment));
  };
  expect_invalid(file.GetString("u32").status(),
                 "metadata key 'u32': expected a string, got uint32");
  expect_invalid(file.GetInt("f32").status(), "expected an integer, got float32");
  expect_invalid(file.GetInt("bool_true").status(), "expected an integer, got bool");
  expect_invalid(file.GetInt("u64_big").status(), "uint64 value 18446744073709551615 exceeds");
  expect_invalid(file.GetFloat("i32").status(), "expected float32 or float64, got int32");
  expect_invalid(file.GetBool("u8").status(), "expected a bool, got uint8");
  expect_invalid(file.GetStringArray("i32s").status(),
                 "expected an array of string, got an array of int32");
  expect_invalid(file.GetStringArray("empty").status(), "got string");
  expect_invalid(file.GetIntArray("strings").status(), "got an array of string");
  expect_invalid(file.GetIntArray("f32s").status(), "got an array of float32");
  expect_invalid(file.GetIntArray("nested").status(), "got an array of array");
  expect_invalid(file.GetIntArray("u64s_big").status(), "element 1 exceeds INT64_MAX");
}

TEST(GgufTest, ReadsTensorInfos) {
  for (const uint32_t version : {2u, 3u}) {
    auto opened = OpenBytes(MakeTestModel(version).bytes);
    ASSERT_TRUE(opened.ok()) << opened.status();
    const GgufFile& file = **opened;
    EXPECT_EQ(file.version(), version);
    ASSERT_EQ(file.tensors().size(), 6u);
    std::vector<std::string> names;
    for (const GgufTensor& tensor : file.tensors()) {
      names.push_back(tensor.name);
      EXPECT_EQ(tensor.offset % 32, 0u) << tensor.name;
      EXPECT_EQ(file.Find(tensor.name), &tensor);
    }
    EXPECT_THAT(names, ElementsAre("f32", "q8", "f16", "q4_0", "bf16", "q4_1"));
    EXPECT_EQ(file.Find("absent"), nullptr);

    const GgufTensor& q4_0 = *file.Find("q4_0");
    EXPECT_EQ(q4_0.type, GgufType::kQ4_0);
    EXPECT_THAT(q4_0.dims, ElementsAre(96, 1, 2, 1));
    EXPECT_EQ(q4_0.num_elements(), 192);
    EXPECT_EQ(q4_0.row_length(), 96);
    EXPECT_EQ(q4_0.num_rows(), 2);
    EXPECT_EQ(q4_0.bytes, 2u * 3 * 18);
    EXPECT_EQ(file.Find("q8")->bytes, 3u * 2 * 34);
    EXPECT_EQ(file.Find("q4_1")->bytes, 4u * 2 * 20);
    EXPECT_EQ(file.Find("f16")->bytes, 2 * std::size(kF16));
    EXPECT_EQ(file.Find("bf16")->num_rows(), 4);
    EXPECT_EQ(file.Find("f32")->bytes, 60u);
  }
  EXPECT_EQ(GgufTypeName(3), "Q4_1");
  EXPECT_EQ(GgufTypeName(12), "Q4_K");
  EXPECT_EQ(GgufTypeName(30), "BF16");
  EXPECT_EQ(GgufTypeName(1000), "type 1000");
}

TEST(GgufTest, DequantizesEveryType) {
  const TestModel model = MakeTestModel();
  auto opened = OpenBytes(model.bytes);
  ASSERT_TRUE(opened.ok()) << opened.status();
  const GgufFile& file = **opened;

  auto expect_bits = [](const std::vector<float>& got, const std::vector<float>& want,
                        const std::string& name) {
    ASSERT_EQ(got.size(), want.size()) << name;
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_EQ(Bits(got[i]), Bits(want[i]))
          << name << " element " << i << ": got " << got[i] << ", expected " << want[i];
    }
  };
  expect_bits(Full(file, *file.Find("f32")), model.f32, "f32");
  expect_bits(Full(file, *file.Find("q8")), model.q8.values, "q8");
  expect_bits(Full(file, *file.Find("q4_0")), model.q4_0.values, "q4_0");
  expect_bits(Full(file, *file.Find("q4_1")), model.q4_1.values, "q4_1");

  std::vector<float> f16_want, bf16_want;
  for (const auto& [half, bits] : kF16) f16_want.push_back(std::bit_cast<float>(bits));
  for (const uint16_t half : kBF16) {
    bf16_want.push_back(std::bit_cast<float>(static_cast<uint32_t>(half) << 16));
  }
  expect_bits(Full(file, *file.Find("f16")), f16_want, "f16");
  expect_bits(Full(file, *file.Find("bf16")), bf16_want, "bf16");

  // Spot checks against hand-computed values: Q8_0 block 0 has d = 1 and q[0] = 3; Q4_1 block
  // 1 has d = 0.5, m = 3 and element 0's nibble (40 & 15 = 8): 0.5 * 8 + 3 = 7.
  EXPECT_EQ(model.q8.values[0], 3.0f);
  EXPECT_EQ(model.q4_1.values[32], 7.0f);
}

TEST(GgufTest, SubRectangleEqualsSliceOfFull) {
  auto opened = OpenBytes(MakeTestModel().bytes);
  ASSERT_TRUE(opened.ok()) << opened.status();
  const GgufFile& file = **opened;
  for (const GgufTensor& tensor : file.tensors()) {
    const std::vector<float> full = Full(file, tensor);
    const int64_t rows = tensor.num_rows(), cols = tensor.row_length();
    const int64_t step = tensor.type == GgufType::kF32 || tensor.type == GgufType::kF16 ||
                                 tensor.type == GgufType::kBF16
                             ? 1
                             : 32;
    for (int64_t r0 = 0; r0 <= rows; ++r0) {
      for (int64_t r1 = r0; r1 <= rows; ++r1) {
        for (int64_t c0 = 0; c0 <= cols; c0 += step) {
          for (int64_t c1 = c0; c1 <= cols; c1 += step) {
            std::vector<float> part((r1 - r0) * (c1 - c0));
            ASSERT_TRUE(Dequantize(file, tensor, r0, r1, c0, c1, absl::MakeSpan(part)).ok());
            for (int64_t r = r0; r < r1; ++r) {
              for (int64_t c = c0; c < c1; ++c) {
                ASSERT_EQ(Bits(part[(r - r0) * (c1 - c0) + (c - c0)]), Bits(full[r * cols + c]))
                    << tensor.name << " [" << r0 << ", " << r1 << ") x [" << c0 << ", " << c1
                    << ") at " << r << ", " << c;
              }
            }
          }
        }
      }
    }
  }
}

TEST(GgufTest, DequantizeRejectsBadRanges) {
  auto opened = OpenBytes(MakeTestModel().bytes);
  ASSERT_TRUE(opened.ok()) << opened.status();
  const GgufFile& file = **opened;
  const GgufTensor& q8 = *file.Find("q8");  // 3 rows of 64
  std::vector<float> out(256);
  auto error = [&](const GgufTensor& tensor, int64_t r0, int64_t r1, int64_t c0, int64_t c1,
                   size_t size) {
    const absl::Status status =
        Dequantize(file, tensor, r0, r1, c0, c1, absl::MakeSpan(out.data(), size));
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    return std::string(status.message());
  };
  EXPECT_THAT(error(q8, 0, 4, 0, 64, 256),
              HasSubstr("rows [0, 4): expected a range within [0, 3)"));
  EXPECT_THAT(error(q8, -1, 1, 0, 64, 128), HasSubstr("rows [-1, 1)"));
  EXPECT_THAT(error(q8, 2, 1, 0, 64, 0), HasSubstr("rows [2, 1)"));
  EXPECT_THAT(error(q8, 0, 1, 0, 96, 96), HasSubstr("columns [0, 96): expected a range within"));
  EXPECT_THAT(error(q8, 0, 1, 16, 48, 32), HasSubstr("expected multiples of the block size 32"));
  EXPECT_THAT(error(q8, 0, 1, 0, 64, 63), HasSubstr("output of 63 floats, expected 64"));
  // F32 columns need no block boundary.
  const GgufTensor& f32 = *file.Find("f32");
  std::vector<float> part(2 * 3);
  EXPECT_TRUE(Dequantize(file, f32, 1, 3, 1, 4, absl::MakeSpan(part)).ok());
  EXPECT_EQ(part[0], -3.0f + 0.75f * 6);
  // A tensor that does not describe this file's data.
  GgufTensor forged = q8;
  forged.offset = uint64_t{1} << 40;
  EXPECT_THAT(error(forged, 0, 1, 0, 64, 64), HasSubstr("not a tensor of this file"));
  forged = q8;
  forged.dims = {64, 300};
  EXPECT_THAT(error(forged, 0, 1, 0, 64, 64), HasSubstr("not a tensor of this file"));
}

TEST(GgufTest, HonoursAlignment) {
  GgufWriter w;
  w.alignment = 256;
  w.Scalar<uint32_t>("general.alignment", kU32, 256)
      .Tensor({"a", {3}, 0, std::string(12, '\1')})
      .Tensor({"b", {2}, 0, std::string(8, '\2')});
  auto opened = OpenBytes(w.Build());
  ASSERT_TRUE(opened.ok()) << opened.status();
  const GgufFile& file = **opened;
  EXPECT_EQ(file.tensors()[0].offset % 256, 0u);
  EXPECT_EQ(file.tensors()[1].offset, file.tensors()[0].offset + 256);
  std::vector<float> b(2);
  ASSERT_TRUE(Dequantize(file, file.tensors()[1], 0, 1, 0, 2, absl::MakeSpan(b)).ok());
  EXPECT_EQ(Bits(b[1]), 0x02020202u);
}

TEST(GgufTest, OpensAFileWithoutTensors) {
  GgufWriter w;
  w.String("k", "v");
  auto opened = OpenBytes(w.Build());
  ASSERT_TRUE(opened.ok()) << opened.status();
  EXPECT_TRUE((*opened)->tensors().empty());
  EXPECT_EQ(*(*opened)->GetString("k"), "v");
}

// The stop tokens come from the vocabulary's turn-end texts and the eos/eot ids, each once and
// only within the vocabulary; given the vocabulary already read, the answer is the same.
TEST(ModelStopTokensTest, TakesTurnEndTextsAndIdsWithinTheVocabulary) {
  GgufWriter w;
  const std::vector<std::string> vocabulary = {"a", "<|im_end|>", "b", "<|endoftext|>"};
  w.StringArray("tokenizer.ggml.tokens", vocabulary)
      .Scalar<uint32_t>("tokenizer.ggml.eos_token_id", kU32, 3)   // also <|endoftext|>: once
      .Scalar<uint32_t>("tokenizer.ggml.eot_token_id", kU32, 9);  // beyond the vocabulary
  auto opened = OpenBytes(w.Build());
  ASSERT_TRUE(opened.ok()) << opened.status();
  EXPECT_THAT(ModelStopTokens(**opened), ElementsAre(1, 3));
  EXPECT_THAT(ModelStopTokens(**opened, vocabulary), ElementsAre(1, 3));

  GgufWriter ids_only;  // no vocabulary: no id is within it
  ids_only.Scalar<uint32_t>("tokenizer.ggml.eos_token_id", kU32, 0);
  auto bare = OpenBytes(ids_only.Build());
  ASSERT_TRUE(bare.ok()) << bare.status();
  EXPECT_TRUE(ModelStopTokens(**bare).empty());
  EXPECT_THAT(ModelStopTokens(**bare, {"<|eot_id|>", "x"}), ElementsAre(0));
}

// Each case breaks a small valid file in one way; Open must fail with InvalidArgument, naming
// the file, with the fragment.
struct BadCase {
  std::string name;
  std::function<void(GgufWriter&)> make;
  std::string fragment;
};

std::vector<BadCase> BadCases() {
  const std::string q8_row = MakeQ8_0(1, 32).data;
  // An F32 tensor's data has its size (up to 4 KiB); others get 16 bytes.
  auto tensor = [](std::string name, std::vector<uint64_t> dims, uint32_t type = 0,
                   std::optional<uint64_t> offset = std::nullopt) {
    uint64_t elements = 1;
    for (const uint64_t dim : dims) elements = dim > 1024 ? 4096 : elements * dim;
    const size_t bytes = type == 0 && elements <= 1024 ? elements * 4 : 16;
    return TensorSpec{std::move(name), std::move(dims), type, std::string(bytes, '\0'), offset};
  };
  auto alignment = [](uint32_t type, std::string payload) {
    return [type, payload](GgufWriter& w) { w.Key("general.alignment", type, payload); };
  };
  return {
      {"BadMagic", [](GgufWriter& w) { w.magic = "GGUG"; },
       "bad magic: expected 'GGUF', got 'GGUG'"},
      {"Version1", [](GgufWriter& w) { w.version = 1; },
       "unsupported version: expected 2 or 3, got 1"},
      {"Version4", [](GgufWriter& w) { w.version = 4; },
       "unsupported version: expected 2 or 3, got 4"},
      {"HugeTensorCount", [](GgufWriter& w) { w.tensor_count = uint64_t{1} << 40; },
       "tensor_count: expected at most 1048576"},
      {"TensorCountBeyondFile", [](GgufWriter& w) { w.tensor_count = 1000; }, "tensor_count"},
      {"HugeKvCount", [](GgufWriter& w) { w.kv_count = ~uint64_t{0}; },
       "kv_count: expected at most 1048576"},
      {"KvCountBeyondFile", [](GgufWriter& w) { w.kv_count = 1000; }, "kv_count"},
      {"MissingKey", [](GgufWriter& w) { w.kv_count = 3; }, "truncated at metadata key #1"},
      {"HugeKeyLength",
       [](GgufWriter& w) { w.RawKeyValue(Raw<uint64_t>(uint64_t{1} << 62) + "abc"); },
       "truncated at metadata key #1: expected 4611686018427387904 bytes"},
      {"DuplicateEmptyKey", [](GgufWriter& w) { w.String("", "a").String("", "b"); },
       "duplicate metadata key ''"},
      {"HugeStringValue",
       [](GgufWriter& w) { w.Key("s", kString, Raw<uint64_t>(uint64_t{1} << 62)); },
       "truncated at metadata key 's': expected 4611686018427387904 bytes"},
      {"HugeArray",
       [](GgufWriter& w) {
         w.Key("a", kArray, Raw<uint32_t>(kU32) + Raw<uint64_t>(uint64_t{1} << 61));
       },
       "metadata key 'a': array of 2305843009213693952 uint32 elements needs at least 4 bytes"},
      {"HugeStringArray",
       [](GgufWriter& w) { w.Key("a", kArray, Raw<uint32_t>(kString) + Raw<uint64_t>(1000)); },
       "array of 1000 string elements"},
      {"UnknownValueType", [](GgufWriter& w) { w.Key("x", 13, "1234"); },
       "metadata key 'x': unknown value type 13"},
      {"UnknownArrayElementType",
       [](GgufWriter& w) { w.Key("x", kArray, Raw<uint32_t>(99) + Raw<uint64_t>(0)); },
       "unknown array element type 99"},
      {"DeeplyNestedArrays",
       [](GgufWriter& w) {
         std::string payload;
         for (int i = 0; i < 9; ++i) payload += Raw<uint32_t>(kArray) + Raw<uint64_t>(1);
         w.Key("deep", kArray, payload + Raw<uint32_t>(kU8) + Raw<uint64_t>(0));
       },
       "arrays nested more than 8 deep"},
      {"DuplicateKey", [](GgufWriter& w) { w.String("k", "a").Scalar<uint8_t>("k", kU8, 1); },
       "duplicate metadata key 'k' (keys #1 and #2)"},
      {"AlignmentNotPowerOfTwo", alignment(kU32, Raw<uint32_t>(48)),
       "general.alignment: expected a nonzero power of two, got 48"},
      {"AlignmentZero", alignment(kU32, Raw<uint32_t>(0)), "nonzero power of two, got 0"},
      {"AlignmentNotUint32", alignment(kU64, Raw<uint64_t>(64)),
       "general.alignment: expected type uint32, got uint64"},
      {"TensorBeyondEof", [=](GgufWriter& w) { w.Tensor(tensor("far", {4}, 0, 1 << 24)); },
       "tensor 'far': data at offset 16777216"},
      {"TensorOffsetOverflow",
       [=](GgufWriter& w) { w.Tensor(tensor("far", {4}, 0, ~uint64_t{0} - 31)); },
       "extends beyond the end of the file"},
      {"MisalignedOffset", [=](GgufWriter& w) { w.Tensor(tensor("odd", {4}, 0, 8)); },
       "tensor 'odd': offset: expected a multiple of the alignment 32, got 8"},
      {"OverlappingTensors",
       [=](GgufWriter& w) { w.Tensor(tensor("a", {4}, 0, 0)).Tensor(tensor("b", {2}, 0, 0)); },
       "tensors 'a' (file bytes ["},
      {"OverlappingTensorsPartly",
       [=](GgufWriter& w) { w.Tensor(tensor("a", {16}, 0, 0)).Tensor(tensor("b", {2}, 0, 32)); },
       "overlap"},
      {"UnknownTensorType", [=](GgufWriter& w) { w.Tensor(tensor("t", {4}, 1000)); },
       "tensor 't': unknown type 1000 is not supported"},
      {"UnsupportedTensorType", [=](GgufWriter& w) { w.Tensor(tensor("t", {256}, 13)); },
       "tensor 't': type Q5_K (13) is not supported"},
      {"ZeroDims", [=](GgufWriter& w) { w.Tensor(tensor("t", {})); },
       "tensor 't': n_dims: expected 1 to 4, got 0"},
      {"FiveDims",
       [=](GgufWriter& w) {
         w.Tensor(tensor("t", {1, 1, 1, 1, 1}));
       },
       "n_dims: expected 1 to 4, got 5"},
      {"ZeroDim",
       [=](GgufWriter& w) {
         w.Tensor(tensor("t", {4, 0}));
       },
       "tensor 't': dims[1]: expected 1 to INT64_MAX, got 0"},
      {"HugeDim", [=](GgufWriter& w) { w.Tensor(tensor("t", {~uint64_t{0}})); },
       "dims[0]: expected 1 to INT64_MAX, got 18446744073709551615"},
      {"ElementCountOverflow",
       [=](GgufWriter& w) {
         w.Tensor(tensor("t", {uint64_t{1} << 32, uint64_t{1} << 32}));
       },
       "element count of dims [4294967296, 4294967296]... overflows int64"},
      {"ByteCountOverflow", [=](GgufWriter& w) { w.Tensor(tensor("t", {uint64_t{1} << 62})); },
       "is larger than the file"},
      {"TensorLargerThanFile",
       [=](GgufWriter& w) {
         w.Tensor(tensor("t", {1024, 1024}));
       },
       "tensor 't': data of F32 dims [1024, 1024] is larger than the file"},
      {"QuantizedRowNotBlocks",
       [=](GgufWriter& w) {
         w.Tensor(TensorSpec{"q", {48}, 8, q8_row + q8_row});
       },
       "tensor 'q': dims[0] of a Q8_0 tensor: expected a multiple of 32, got 48"},
      {"DuplicateTensor",
       [=](GgufWriter& w) { w.Tensor(tensor("t", {4})).Tensor(tensor("t", {4})); },
       "duplicate tensor name 't' (tensors #0 and #1)"},
  };
}

void PrintTo(const BadCase& bad, std::ostream* os) { *os << bad.name; }

class GgufBadFileTest : public ::testing::TestWithParam<BadCase> {};

TEST_P(GgufBadFileTest, FailsCleanly) {
  GgufWriter w;
  w.String("general.architecture", "llama");
  GetParam().make(w);
  const std::string path = WriteTemp(w.Build());
  const auto opened = GgufFile::Open(path);
  ::unlink(path.c_str());
  ASSERT_FALSE(opened.ok());
  EXPECT_EQ(opened.status().code(), absl::StatusCode::kInvalidArgument) << opened.status();
  EXPECT_THAT(std::string(opened.status().message()), HasSubstr("GGUF file " + path + ": "));
  EXPECT_THAT(std::string(opened.status().message()), HasSubstr(GetParam().fragment));
}

INSTANTIATE_TEST_SUITE_P(Malformed, GgufBadFileTest, ::testing::ValuesIn(BadCases()),
                         [](const auto& info) { return info.param.name; });

TEST(GgufTest, EveryTruncationFails) {
  const std::string bytes = MakeTestModel().bytes;
  ASSERT_TRUE(OpenBytes(bytes).ok());
  for (size_t size = 0; size < bytes.size(); ++size) {
    const auto opened = OpenBytes(bytes.substr(0, size));
    ASSERT_FALSE(opened.ok()) << "prefix of " << size << " bytes";
    ASSERT_EQ(opened.status().code(), absl::StatusCode::kInvalidArgument)
        << size << ": " << opened.status();
  }
  EXPECT_THAT(
      std::string(OpenBytes(bytes.substr(0, 2)).status().message()),
      HasSubstr("truncated at the magic: expected 4 bytes at offset 0, the file has 2 left"));
  EXPECT_THAT(std::string(OpenBytes(bytes.substr(0, bytes.size() - 1)).status().message()),
              HasSubstr("tensor 'q4_1': data at offset"));
}

TEST(GgufTest, OpenErrorsNameThePath) {
  const std::string missing = ::testing::TempDir() + "/no_such_model.gguf";
  const absl::Status status = GgufFile::Open(missing).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(status.message()), HasSubstr(missing));
  const absl::Status directory = GgufFile::Open(::testing::TempDir()).status();
  EXPECT_EQ(directory.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(directory.message()),
              HasSubstr("expected a regular file, got a directory"));
}

// ---------------------------------------------------------------------------------------------
// The real model (skipped where it has not been downloaded).

#ifndef SHARDRT_MODEL_PATH
#define SHARDRT_MODEL_PATH ""
#endif

std::unique_ptr<GgufFile> OpenModel() {
  if (::access(SHARDRT_MODEL_PATH, R_OK) != 0) return nullptr;
  auto opened = GgufFile::Open(SHARDRT_MODEL_PATH);
  EXPECT_TRUE(opened.ok()) << opened.status();
  return opened.ok() ? std::move(*opened) : nullptr;
}

TEST(GgufModelTest, ReadsSmolLM2) {
  const std::unique_ptr<GgufFile> file = OpenModel();
  if (file == nullptr) GTEST_SKIP() << "no model file at '" << SHARDRT_MODEL_PATH << "'";
  EXPECT_EQ(file->version(), 3u);
  EXPECT_EQ(file->tensors().size(), 272u);
  EXPECT_EQ(file->MetadataKeys().size(), 33u);
  EXPECT_EQ(*file->GetString("general.architecture"), "llama");
  EXPECT_EQ(*file->GetInt("llama.block_count"), 30);
  EXPECT_EQ(*file->GetInt("llama.embedding_length"), 576);
  EXPECT_EQ(*file->GetInt("llama.attention.head_count"), 9);
  EXPECT_EQ(*file->GetInt("llama.attention.head_count_kv"), 3);
  EXPECT_EQ(*file->GetFloat("llama.rope.freq_base"), 100000.0);
  EXPECT_FALSE(*file->GetBool("tokenizer.ggml.add_bos_token"));
  const std::vector<std::string> tokens = *file->GetStringArray("tokenizer.ggml.tokens");
  ASSERT_EQ(tokens.size(), 49152u);
  EXPECT_EQ(tokens[0], "<|endoftext|>");
  EXPECT_EQ(tokens[1], "<|im_start|>");
  const std::vector<std::string> merges = *file->GetStringArray("tokenizer.ggml.merges");
  ASSERT_EQ(merges.size(), 48900u);
  EXPECT_EQ(merges[0], "Ġ t");
  const std::vector<int64_t> token_type = *file->GetIntArray("tokenizer.ggml.token_type");
  ASSERT_EQ(token_type.size(), 49152u);
  EXPECT_EQ(token_type[0], 3);

  int q4_1 = 0, q8_0 = 0, f32 = 0;
  for (const GgufTensor& tensor : file->tensors()) {
    q4_1 += tensor.type == GgufType::kQ4_1;
    q8_0 += tensor.type == GgufType::kQ8_0;
    f32 += tensor.type == GgufType::kF32;
  }
  EXPECT_EQ(q4_1, 210);
  EXPECT_EQ(q8_0, 1);
  EXPECT_EQ(f32, 61);
  const GgufTensor* embedding = file->Find("token_embd.weight");
  ASSERT_NE(embedding, nullptr);
  EXPECT_EQ(embedding->type, GgufType::kQ8_0);
  EXPECT_THAT(embedding->dims, ElementsAre(576, 49152));
}

TEST(GgufModelTest, ConcurrentDequantizeMatchesSequential) {
  const std::unique_ptr<GgufFile> file = OpenModel();
  if (file == nullptr) GTEST_SKIP() << "no model file at '" << SHARDRT_MODEL_PATH << "'";
  const std::vector<std::string> names = {"token_embd.weight", "blk.0.ffn_down.weight",
                                          "blk.29.attn_q.weight", "blk.3.ffn_norm.weight"};
  std::vector<std::vector<float>> sequential, concurrent(names.size());
  for (const std::string& name : names) sequential.push_back(Full(*file, *file->Find(name)));
  std::vector<std::thread> threads;
  for (size_t i = 0; i < names.size(); ++i) {
    threads.emplace_back([&, i] { concurrent[i] = Full(*file, *file->Find(names[i])); });
  }
  for (std::thread& thread : threads) thread.join();
  for (size_t i = 0; i < names.size(); ++i) {
    EXPECT_EQ(0, std::memcmp(sequential[i].data(), concurrent[i].data(),
                             sequential[i].size() * sizeof(float)))
        << names[i];
  }
}

TEST(GgufModelTest, ReleasedPagesReadBackTheSameValues) {
  const std::unique_ptr<GgufFile> file = OpenModel();
  if (file == nullptr) GTEST_SKIP() << "no model file at '" << SHARDRT_MODEL_PATH << "'";
  const GgufTensor& tensor = *file->Find("blk.7.ffn_up.weight");
  const std::vector<float> before = Full(*file, tensor);
  // Released while another thread reads: both reads, and the one after, see the file's values.
  std::vector<float> during;
  std::thread reader([&] { during = Full(*file, tensor); });
  for (int i = 0; i < 20; ++i) file->ReleasePages();
  reader.join();
  file->ReleasePages();
  const std::vector<float> after = Full(*file, tensor);
  ASSERT_EQ(before.size(), after.size());
  EXPECT_EQ(0, std::memcmp(before.data(), during.data(), before.size() * sizeof(float)));
  EXPECT_EQ(0, std::memcmp(before.data(), after.data(), before.size() * sizeof(float)));
}

}  // namespace
}  // namespace shardrt::llama

namespace shardrt::llama {
namespace {

// Q8_0 blocks of 32 values: d (f16) then 32 int8.
std::string Q8Block(uint16_t half_scale, int8_t q) {
  std::string block(34, char(q));
  block[0] = char(half_scale & 0xff);
  block[1] = char(half_scale >> 8);
  return block;
}

TEST(GgufTest, CopyBlocksGivesTheStoredBytesOfWholeBlocks) {
  // 2 rows of 64 values: 2 Q8_0 blocks a row, each block its own scale and quant.
  const std::string data = Q8Block(0x3c00, 1) + Q8Block(0x4000, 2) + Q8Block(0x3800, 3) +
                           Q8Block(0x3c00, -4);
  GgufWriter w;
  w.Tensor({"q8", {64, 2}, 8, data});
  auto opened = OpenBytes(w.Build());
  ASSERT_TRUE(opened.ok()) << opened.status();
  const GgufFile& file = **opened;
  const GgufTensor& q8 = *file.Find("q8");
  std::vector<std::byte> all(data.size());
  ASSERT_TRUE(CopyBlocks(file, q8, 0, 2, 0, 64, absl::MakeSpan(all)).ok());
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(all.data()), all.size()), data);
  // The second block of each row.
  std::vector<std::byte> part(2 * 34);
  ASSERT_TRUE(CopyBlocks(file, q8, 0, 2, 32, 64, absl::MakeSpan(part)).ok());
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(part.data()), part.size()),
            data.substr(34, 34) + data.substr(102, 34));
  std::vector<std::byte> wrong(33);
  EXPECT_THAT(CopyBlocks(file, q8, 0, 1, 0, 32, absl::MakeSpan(wrong)).message(),
              HasSubstr("output of 33 bytes, expected 34"));
  EXPECT_THAT(CopyBlocks(file, q8, 0, 1, 0, 16, absl::MakeSpan(wrong)).message(),
              HasSubstr("expected multiples of the block size 32"));
}

// The model loader's check of float weights: the test model's F16 values hold an infinity at
// index 6 (0x7c00); its BF16 values a NaN at index 3 (0x7fc0); its F32 values are all finite.
TEST(GgufTest, CheckFiniteValuesNamesTheFirstValueThatIsNot) {
  const TestModel model = MakeTestModel();
  auto opened = OpenBytes(model.bytes);
  ASSERT_TRUE(opened.ok()) << opened.status();
  const GgufFile& file = **opened;
  const GgufTensor& f16 = *file.Find("f16");
  absl::Status status = CheckFiniteValues(file, f16, 0, 1, 0, f16.row_length());
  EXPECT_THAT(std::string(status.message()),
              testing::HasSubstr("tensor 'f16': row 0, column 6: the value is not finite"));
  EXPECT_TRUE(CheckFiniteValues(file, f16, 0, 1, 0, 6).ok());
  const GgufTensor& bf16 = *file.Find("bf16");
  status = CheckFiniteValues(file, bf16, 0, bf16.num_rows(), 0, bf16.row_length());
  EXPECT_THAT(std::string(status.message()), testing::HasSubstr("row 1, column 1"));
  const GgufTensor& f32 = *file.Find("f32");
  EXPECT_TRUE(CheckFiniteValues(file, f32, 0, f32.num_rows(), 0, f32.row_length()).ok());
  // Block types pass (their scales are Dequantize's to check); a range outside is an error.
  const GgufTensor& q8 = *file.Find("q8");
  EXPECT_TRUE(CheckFiniteValues(file, q8, 0, q8.num_rows(), 0, q8.row_length()).ok());
  EXPECT_FALSE(CheckFiniteValues(file, f32, 0, f32.num_rows() + 1, 0, 1).ok());
}

TEST(GgufTest, ABlockWithANonFiniteScaleIsAnErrorNamingIt) {
  for (const uint16_t bad : {uint16_t{0x7e00}, uint16_t{0x7c00}, uint16_t{0xfc00}}) {
    SCOPED_TRACE(bad);
    GgufWriter w;
    w.Tensor({"q8", {64, 2}, 8,
              Q8Block(0x3c00, 1) + Q8Block(0x3c00, 1) + Q8Block(0x3c00, 1) + Q8Block(bad, 1)});
    auto opened = OpenBytes(w.Build());
    ASSERT_TRUE(opened.ok()) << opened.status();
    const GgufFile& file = **opened;
    const GgufTensor& q8 = *file.Find("q8");
    std::vector<float> values(128);
    const absl::Status dequantized = Dequantize(file, q8, 0, 2, 0, 64, absl::MakeSpan(values));
    EXPECT_EQ(dequantized.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(dequantized.message(), HasSubstr("tensor 'q8': row 1, block 1: its scale is not "
                                                 "finite"));
    std::vector<std::byte> bytes(4 * 34);
    EXPECT_THAT(CopyBlocks(file, q8, 0, 2, 0, 64, absl::MakeSpan(bytes)).message(),
                HasSubstr("row 1, block 1: its scale is not finite"));
    // The rows and blocks before it read.
    std::vector<float> first(64);
    EXPECT_TRUE(Dequantize(file, q8, 0, 1, 0, 64, absl::MakeSpan(first)).ok());
  }
}

}  // namespace
}  // namespace shardrt::llama
