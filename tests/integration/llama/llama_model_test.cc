// LlamaModel on the real model (SmolLM2-135M-Instruct) and the real plugin with 8 devices: the
// weights land in the programs' layouts, sampling is seeded and bounded by top-p, and bad
// requests are refused before anything runs. (Token and logit agreement with an independent
// NumPy implementation, 8 devices against 1: tests/model/test_generate.py.)
#include "llama/llama_model.h"

#include <filesystem>
#include <memory>

#include "gtest/gtest.h"
#include "llama/llama_weights.h"
#include "llama/quant_ffi.h"
#include "test_env.h"

namespace shardrt::llama {
namespace {

class LlamaModelTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!std::filesystem::exists(SHARDRT_MODEL_PATH)) return;
    runtime_ = testing::MakeTestRuntime().release();
    ASSERT_TRUE(RegisterModelKernels(*runtime_).ok());
    auto file = GgufFile::Open(SHARDRT_MODEL_PATH);
    ASSERT_TRUE(file.ok()) << file.status();
    file_ = file->release();
    auto model = LlamaModel::Load(*file_, runtime_->client(), runtime_->executor(),
                                    {.partitions = 8, .cache_len = 128, .granule = 64,
                                     .block = 8});
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = model->release();
  }
  static void TearDownTestSuite() {
    delete model_;
    delete file_;
    delete runtime_;
  }
  void SetUp() override {
    if (model_ == nullptr) GTEST_SKIP() << "no model file (scripts/bootstrap.sh fetches it)";
  }

  static inline Runtime* runtime_ = nullptr;
  static inline GgufFile* file_ = nullptr;
  static inline LlamaModel* model_ = nullptr;
};

// "Once upon a time" in SmolLM2's vocabulary.
const std::vector<int32_t> kPrompt = {6403, 1980, 253, 655};

TEST_F(LlamaModelTest, WeightsAreInTheProgramsLayouts) {
  ASSERT_TRUE(model_->Prepare(int64_t(kPrompt.size()), 12).ok());
  auto weights = LoadWeights(*file_, model_->config(), 8, runtime_->client());
  ASSERT_TRUE(weights.ok()) << weights.status();
  ProgramShape shape{.partitions = 8, .cache_len = 128, .tokens = 64};
  auto prefill = EmitPrefill(model_->config(), shape);
  ASSERT_TRUE(prefill.ok());
  CompileRequest request{.name = "prefill", .program = prefill->mlir};
  request.options.num_partitions = 8;
  auto computation = runtime_->client().Compile(request);  // the in-memory cache's copy
  ASSERT_TRUE(computation.ok()) << computation.status();
  for (size_t i = 0; i < weights->size(); ++i) {
    EXPECT_TRUE((*weights)[i]->layout().SameAs(*(*computation)->parameter_layout(i + 2)))
        << "weight " << i;
  }
}

TEST_F(LlamaModelTest, SamplingIsSeededAndTopPOfAlmostZeroIsGreedy) {
  GenerateOptions greedy{.max_tokens = 12};
  auto expected = model_->Generate(kPrompt, greedy);
  ASSERT_TRUE(expected.ok()) << expected.status();
  ASSERT_EQ(expected->tokens.size(), 12u);

  GenerateOptions narrow = greedy;
  narrow.sampling = {.temperature = 0.8, .top_p = 1e-6, .seed = 7};
  auto nucleus_of_one = model_->Generate(kPrompt, narrow);
  ASSERT_TRUE(nucleus_of_one.ok()) << nucleus_of_one.status();
  EXPECT_EQ(nucleus_of_one->tokens, expected->tokens);

  GenerateOptions hot = greedy;
  hot.sampling = {.temperature = 1.5, .top_p = 1.0, .seed = 1};
  auto a = model_->Generate(kPrompt, hot);
  auto b = model_->Generate(kPrompt, hot);
  hot.sampling.seed = 2;
  auto c = model_->Generate(kPrompt, hot);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(a->tokens, b->tokens);
  EXPECT_NE(a->tokens, c->tokens);  // 12 tokens at temperature 1.5: a collision is ~impossible
  EXPECT_NE(a->tokens, expected->tokens);
}

TEST_F(LlamaModelTest, StopsAtAStopTokenAndKeepsLogitsPerToken) {
  GenerateOptions options{.max_tokens = 10, .keep_logits = true};
  auto full = model_->Generate(kPrompt, options);
  ASSERT_TRUE(full.ok()) << full.status();
  ASSERT_EQ(full->logits.size(), 10u);
  for (size_t i = 0; i < full->tokens.size(); ++i) {
    const std::vector<float>& l = full->logits[i];
    ASSERT_EQ(int64_t(l.size()), model_->config().vocab);
    EXPECT_EQ(std::max_element(l.begin(), l.end()) - l.begin(), full->tokens[i]) << i;
  }
  options.stop_tokens = {full->tokens[3]};
  auto stopped = model_->Generate(kPrompt, options);
  ASSERT_TRUE(stopped.ok()) << stopped.status();
  const auto first = std::find(full->tokens.begin(), full->tokens.end(), full->tokens[3]);
  EXPECT_EQ(stopped->tokens, std::vector<int32_t>(full->tokens.begin(), first + 1));
}

TEST_F(LlamaModelTest, RefusesBadRequests) {
  auto message = [](const absl::StatusOr<GenerateResult>& r) {
    EXPECT_FALSE(r.ok());
    return r.ok() ? std::string("OK") : std::string(r.status().message());
  };
  EXPECT_EQ(message(model_->Generate({}, {})), "the prompt has no tokens");
  EXPECT_EQ(message(model_->Generate({1, 49152}, {})),
            "prompt token 1 is 49152, outside the vocabulary [0, 49152)");
  EXPECT_EQ(message(model_->Generate(kPrompt, {.max_tokens = 126})),
            "a prompt of 4 tokens and 126 generated tokens need 129 cache positions; the cache "
            "holds 128");
  GenerateOptions bad{.max_tokens = 4};
  bad.sampling.temperature = 1;
  bad.sampling.top_p = 0;
  EXPECT_NE(message(model_->Generate(kPrompt, bad)).find("top-p 0"), std::string::npos);
}

}  // namespace
}  // namespace shardrt::llama
