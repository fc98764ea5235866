// LlamaModel on the real model (SmolLM2-135M-Instruct) and the real plugin with 8 devices: the
// greedy tokens of fixed prompts on 8 devices and on 1 are the NumPy reference's (golden ids,
// tests/testdata/golden_smollm2_greedy.h), the weights land in the programs' layouts, a prompt
// in several chunks gives what one chunk gives, a sequence decoded in a batch (beside others
// and idle rows) gives its solo bits, sampling is seeded and bounded by top-p, and bad requests
// are refused before anything runs. (Tokens and logits of longer generations against the NumPy
// reference, 8 devices against 1: tests/model/test_generate.py.)
#include "llama/llama_model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <memory>

#include "../../testdata/golden_smollm2_greedy.h"
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

// Expects greedy generation on `model` to give each golden case's tokens: a plain prompt's 12
// and the chat answer "The capital of France is Paris." up to its <|im_end|>.
void ExpectGoldenTokens(LlamaModel& model) {
  for (const golden::GreedyCase* c : {&golden::kOnceUponATime, &golden::kCapitalOfFrance}) {
    SCOPED_TRACE(c->prompt);
    const GenerateOptions options{.max_tokens = int64_t(c->tokens.size()),
                                  .stop_tokens = {0, 2}};  // <|endoftext|>, <|im_end|>
    auto result = model.Generate(c->prompt_ids, options);
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_EQ(result->tokens, c->tokens);
  }
}

// The greedy tokens are the independent NumPy reference's, on 8 devices and on 1.
TEST_F(LlamaModelTest, GreedyTokensAreTheReferences) {
  ASSERT_EQ(kPrompt, golden::kOnceUponATime.prompt_ids);
  {
    SCOPED_TRACE("8 devices");
    ExpectGoldenTokens(*model_);
  }
  auto one = LlamaModel::Load(*file_, runtime_->client(), runtime_->executor(),
                              {.partitions = 1, .cache_len = 64, .granule = 64, .block = 64});
  ASSERT_TRUE(one.ok()) << one.status();
  SCOPED_TRACE("1 device");
  ExpectGoldenTokens(**one);
}

TEST_F(LlamaModelTest, WeightsAreInTheProgramsLayouts) {
  ASSERT_TRUE(model_->Prepare(int64_t(kPrompt.size()), 12).ok());
  auto weights = LoadWeights(*file_, model_->config(), 8, runtime_->client());
  ASSERT_TRUE(weights.ok()) << weights.status();
  ProgramShape shape{.partitions = 8, .cache_len = 128, .rows = 1, .tokens = 64, .block = 8};
  auto chunk = EmitPrefillChunk(model_->config(), shape);
  ASSERT_TRUE(chunk.ok()) << chunk.status();
  CompileRequest request{.name = "chunk", .program = chunk->mlir};
  request.options.num_partitions = 8;
  auto computation = runtime_->client().Compile(request);  // the in-memory cache's copy
  ASSERT_TRUE(computation.ok()) << computation.status();
  for (size_t i = 0; i < weights->size(); ++i) {
    EXPECT_TRUE((*weights)[i]->layout().SameAs(*(*computation)->parameter_layout(i + ChunkParameter::kFirstWeight)))
        << "weight " << i;
  }
}

// A 44-token prompt: kPrompt and then ids of ordinary words.
std::vector<int32_t> LongPrompt() {
  std::vector<int32_t> prompt = kPrompt;
  for (int32_t i = 0; i < 40; ++i) prompt.push_back(300 + 37 * i);
  return prompt;
}

// Chunks of 16 (16 + 16 + 12 tokens, each attending to the cache the earlier ones wrote) give
// the tokens and, to rounding, the logits of one chunk of 64.
TEST_F(LlamaModelTest, APromptInSeveralChunksGivesWhatOneChunkGives) {
  auto chunked = LlamaModel::Load(*file_, runtime_->client(), runtime_->executor(),
                                  {.partitions = 8, .cache_len = 128, .granule = 8, .chunk = 16,
                                   .block = 8});
  ASSERT_TRUE(chunked.ok()) << chunked.status();
  EXPECT_EQ((*chunked)->ChunkTokens(0, 44), 16);
  EXPECT_EQ((*chunked)->ChunkTokens(32, 12), 12);
  const GenerateOptions options{.max_tokens = 6, .keep_logits = true};
  auto one = model_->Generate(LongPrompt(), options);
  auto several = (*chunked)->Generate(LongPrompt(), options);
  ASSERT_TRUE(one.ok() && several.ok()) << one.status() << several.status();
  EXPECT_EQ(several->tokens, one->tokens);
  ASSERT_EQ(several->logits.size(), one->logits.size());
  for (size_t t = 0; t < one->logits.size(); ++t) {
    float scale = 0, diff = 0;
    for (size_t i = 0; i < one->logits[t].size(); ++i) {
      scale = std::max(scale, std::abs(one->logits[t][i]));
      diff = std::max(diff, std::abs(one->logits[t][i] - several->logits[t][i]));
    }
    EXPECT_LT(diff, 1e-3f * scale) << "token " << t;
  }
}

// The logits of `data` (f32[B, vocab]) on the host.
std::vector<float> HostLogits(ComputationClient& client, const DataPtr& data) {
  auto values = HostValues<float>(client, data);
  EXPECT_TRUE(values.ok()) << values.status();
  return values.ok() ? *std::move(values) : std::vector<float>{};
}

// A sequence's decode step has the same bits alone (B = 1), beside another sequence (B = 2)
// and beside idle rows (B = 8, rows 2 to 7 at position -1: the products' other path, taken
// from 8 rows on, is off in decode steps).
TEST_F(LlamaModelTest, ASequenceDecodedInABatchGivesItsSoloBits) {
  ComputationClient& client = runtime_->client();
  const std::vector<int32_t> a = LongPrompt(), b = kPrompt;
  const int64_t vocab = model_->config().vocab;
  // Prefills `prompt` into `row` of `caches`: its first token.
  auto prefill = [&](KvCaches& caches, int64_t row, const std::vector<int32_t>& prompt) {
    int64_t run = 0;
    auto out = model_->ScheduleChunk(std::move(caches), row, prompt, 0, &run);
    EXPECT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(run, int64_t(prompt.size()));
    caches = std::move(out->caches);
    const std::vector<float> logits = HostLogits(client, out->logits);
    return int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
  };
  std::vector<std::vector<float>> rows_of_a;
  for (const int64_t batch : {1, 2, 8}) {
    SCOPED_TRACE(batch);
    auto caches = model_->NewCaches(8);
    ASSERT_TRUE(caches.ok()) << caches.status();
    const int32_t first_a = prefill(*caches, 0, a);
    std::vector<int32_t> tokens = {first_a}, positions = {int32_t(a.size())};
    if (batch >= 2) {
      tokens.push_back(prefill(*caches, 1, b));
      positions.push_back(int32_t(b.size()));
    }
    while (int64_t(tokens.size()) < batch) {
      tokens.push_back(0);
      positions.push_back(-1);
    }
    auto step = model_->ScheduleDecode(std::move(*caches), tokens, positions);
    ASSERT_TRUE(step.ok()) << step.status();
    const std::vector<float> logits = HostLogits(client, step->logits);
    ASSERT_EQ(int64_t(logits.size()), batch * vocab);
    rows_of_a.emplace_back(logits.begin(), logits.begin() + vocab);
    ASSERT_TRUE(std::all_of(logits.begin(), logits.begin() + vocab,
                            [](float x) { return std::isfinite(x); }));
  }
  EXPECT_TRUE(rows_of_a[1] == rows_of_a[0]) << "beside another sequence";
  EXPECT_TRUE(rows_of_a[2] == rows_of_a[0]) << "beside idle rows";
  // Steps out of range are refused before anything runs.
  auto caches = model_->NewCaches(2);
  ASSERT_TRUE(caches.ok());
  const std::vector<int32_t> three = {1, 2, 3}, far = {1000, 0, -1};
  EXPECT_FALSE(model_->ScheduleDecode(*caches, three, far).ok());  // B = 3 > 2 rows
  const std::vector<int32_t> one = {1}, beyond = {128};
  EXPECT_FALSE(model_->ScheduleDecode(*caches, one, beyond).ok());
  int64_t run = 0;
  EXPECT_FALSE(model_->ScheduleChunk(*caches, 2, kPrompt, 0, &run).ok());
  EXPECT_FALSE(model_->ScheduleChunk(*caches, 0, kPrompt, 3, &run).ok());
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
