// C API: hqekv_chat_apply_template (family names, Jinja detection, buffer
// semantics, bad input) and the rollback of a batch that fails part-way.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "capi/handles.h"
#include "hqekv/hqekv.h"

namespace hqekv {
namespace {

const std::string kStories = std::string(HQEKV_SOURCE_DIR) + "/models/stories260K.gguf";

std::string Apply(const hqekv_model* m, const char* tmpl, const std::vector<hqekv_chat_message>& c,
                  int add_assistant, hqekv_status* status = nullptr) {
  size_t len = 0;
  hqekv_status s =
      hqekv_chat_apply_template(m, tmpl, c.data(), c.size(), add_assistant, nullptr, 0, &len);
  if (s != HQEKV_ERR_BUFFER_TOO_SMALL) {
    if (status) *status = s;
    return "";
  }
  std::string out(len + 1, '\0');
  s = hqekv_chat_apply_template(m, tmpl, c.data(), c.size(), add_assistant, out.data(), out.size(),
                                &len);
  if (status) *status = s;
  out.resize(len);
  return out;
}

const std::vector<hqekv_chat_message> kConv = {
    {"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello."}, {"user", "Bye"}};

TEST(CapiChat, RendersAFamilyByName) {
  hqekv_status s;
  EXPECT_EQ(Apply(nullptr, "chatml", kConv, 1, &s),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\nHello.<|im_end|>\n<|im_start|>user\nBye<|im_end|>\n"
            "<|im_start|>assistant\n");
  EXPECT_EQ(s, HQEKV_OK);
  EXPECT_EQ(Apply(nullptr, "chatml", {{"user", "Hi"}}, 0, &s), "<|im_start|>user\nHi<|im_end|>\n");
}

TEST(CapiChat, RecognisesJinjaSource) {
  // Meta's Llama 3 template, run by the Jinja engine.
  const char* jinja =
      "{% for m in messages %}<|start_header_id|>{{ m['role'] }}<|end_header_id|>\n\n"
      "{{ m['content'] | trim }}<|eot_id|>{% endfor %}{% if add_generation_prompt %}"
      "<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}";
  hqekv_status s;
  EXPECT_EQ(Apply(nullptr, jinja, {{"user", " Hi "}}, 1, &s),
            "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
  EXPECT_EQ(s, HQEKV_OK);
}

TEST(CapiChat, BufferLengthSemantics) {
  const std::vector<hqekv_chat_message> c = {{"user", "Hi"}};
  const std::string want = "<|im_start|>user\nHi<|im_end|>\n";
  char buf[64];
  size_t len = 0;
  // Too small: truncated, NUL-terminated, full length reported.
  EXPECT_EQ(hqekv_chat_apply_template(nullptr, "chatml", c.data(), 1, 0, buf, 5, &len),
            HQEKV_ERR_BUFFER_TOO_SMALL);
  EXPECT_EQ(len, want.size());
  EXPECT_STREQ(buf, want.substr(0, 4).c_str());
  // Exactly len + 1 fits.
  EXPECT_EQ(
      hqekv_chat_apply_template(nullptr, "chatml", c.data(), 1, 0, buf, want.size() + 1, &len),
      HQEKV_OK);
  EXPECT_EQ(std::string(buf), want);
  EXPECT_EQ(hqekv_chat_apply_template(nullptr, "chatml", c.data(), 1, 0, buf, want.size(), &len),
            HQEKV_ERR_BUFFER_TOO_SMALL);
}

TEST(CapiChat, BadInputIsAnErrorWithAMessage) {
  size_t len = 0;
  const hqekv_chat_message bad_role[] = {{"tool", "x"}};
  EXPECT_EQ(hqekv_chat_apply_template(nullptr, "chatml", bad_role, 1, 1, nullptr, 0, &len),
            HQEKV_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(hqekv_last_error()).find("role 'tool'"), std::string::npos);
  const hqekv_chat_message null_content[] = {{"user", nullptr}};
  EXPECT_EQ(hqekv_chat_apply_template(nullptr, "chatml", null_content, 1, 1, nullptr, 0, &len),
            HQEKV_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(hqekv_last_error()).find("msgs[0]"), std::string::npos);
  EXPECT_EQ(hqekv_chat_apply_template(nullptr, "{{ unknown ", kConv.data(), 1, 1, nullptr, 0, &len),
            HQEKV_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(hqekv_last_error()).find("not a recognised family"), std::string::npos);
  EXPECT_EQ(hqekv_chat_apply_template(nullptr, nullptr, kConv.data(), 1, 1, nullptr, 0, &len),
            HQEKV_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(hqekv_chat_apply_template(nullptr, "chatml", nullptr, 2, 1, nullptr, 0, &len),
            HQEKV_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(hqekv_chat_apply_template(nullptr, "chatml", kConv.data(), 1, 1, nullptr, 0, nullptr),
            HQEKV_ERR_INVALID_ARGUMENT);
  // stories260K has no tokenizer.chat_template.
  hqekv_model* m = nullptr;
  ASSERT_EQ(hqekv_model_load(kStories.c_str(), nullptr, &m), HQEKV_OK);
  EXPECT_EQ(hqekv_chat_apply_template(m, nullptr, kConv.data(), 1, 1, nullptr, 0, &len),
            HQEKV_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(hqekv_last_error()).find("chat_template"), std::string::npos);
  hqekv_status s;
  EXPECT_EQ(Apply(m, "gemma", {{"user", "Hi"}}, 0, &s), "<start_of_turn>user\nHi<end_of_turn>\n");
  hqekv_model_free(m);
}

// A cache whose next Append in layer 3 fails once `fail` is set (a transient
// failure after the lower layers have appended: the batch is half-written).
class FailingCache final : public KvCache {
 public:
  explicit FailingCache(std::unique_ptr<KvCache> inner) : inner_(std::move(inner)) {}
  bool fail = false;
  bool sticky = false;  // keep failing
  const KvGeometry& geometry() const override { return inner_->geometry(); }
  std::string Describe() const override { return inner_->Describe(); }
  void Reset() override { inner_->Reset(); }
  Status Append(int layer, const float* k, const float* v, const int32_t* pos, int n) override {
    if (fail && layer == 3) {
      fail = sticky;
      return MakeError("planted failure in layer 3");
    }
    return inner_->Append(layer, k, v, pos, n);
  }
  Status Attend(int layer, const float* q, const int32_t* q_pos, int n, float* out) override {
    return inner_->Attend(layer, q, q_pos, n, out);
  }
  Status EndBatch(int n, bool is_prefill) override { return inner_->EndBatch(n, is_prefill); }
  KvStats Stats() const override { return inner_->Stats(); }

 private:
  std::unique_ptr<KvCache> inner_;
};

// Greedy tokens after prompt + 3 single decodes, with or without a failed
// 4-token batch in between.
std::vector<int32_t> Continue(bool with_failure) {
  hqekv_model* m = nullptr;
  EXPECT_EQ(hqekv_model_load(kStories.c_str(), nullptr, &m), HQEKV_OK);
  hqekv_context* ctx = nullptr;
  EXPECT_EQ(hqekv_context_create(m, "fp16", 128, &ctx), HQEKV_OK);
  auto* failing = new FailingCache(std::move(ctx->cache));
  ctx->cache.reset(failing);
  const int32_t prompt[] = {1, 403, 407, 261};
  EXPECT_EQ(hqekv_decode(ctx, prompt, 4), HQEKV_OK);
  for (int32_t t : {300, 301, 302}) EXPECT_EQ(hqekv_decode(ctx, &t, 1), HQEKV_OK);
  if (with_failure) {
    const float* logits = nullptr;
    int n_vocab = 0;
    EXPECT_EQ(hqekv_get_logits(ctx, &logits, &n_vocab), HQEKV_OK);
    const std::vector<float> before(logits, logits + n_vocab);
    const int64_t bytes_before = ctx->cache->Stats().bytes.total();
    failing->fail = true;
    const int32_t batch[] = {10, 11, 12, 13};
    EXPECT_EQ(hqekv_decode(ctx, batch, 4), HQEKV_ERR_COMPUTE);
    EXPECT_NE(std::string(hqekv_last_error()).find("planted failure"), std::string::npos);
    // As before the call: positions, logits, bytes held.
    EXPECT_EQ(hqekv_context_n_past(ctx), 7);
    EXPECT_EQ(hqekv_get_logits(ctx, &logits, &n_vocab), HQEKV_OK);
    EXPECT_EQ(std::vector<float>(logits, logits + n_vocab), before);
    EXPECT_EQ(ctx->cache->Stats().bytes.total(), bytes_before);
    EXPECT_EQ(ctx->seq.history.size(), 7u);
  }
  hqekv_sampler_params p = hqekv_sampler_greedy_params();
  hqekv_sampler* s = nullptr;
  EXPECT_EQ(hqekv_sampler_create(&p, &s), HQEKV_OK);
  std::vector<int32_t> out(40);
  size_t n = 0;
  EXPECT_EQ(hqekv_generate(ctx, s, 40, out.data(), out.size(), &n), HQEKV_OK);
  out.resize(n);
  hqekv_sampler_free(s);
  hqekv_context_free(ctx);
  hqekv_model_free(m);
  return out;
}

// A failure that persists while restoring: the context is reset, not left
// half-written.
TEST(CapiRollback, AFailedRestoreResetsTheContext) {
  hqekv_model* m = nullptr;
  ASSERT_EQ(hqekv_model_load(kStories.c_str(), nullptr, &m), HQEKV_OK);
  hqekv_context* ctx = nullptr;
  ASSERT_EQ(hqekv_context_create(m, "fp16", 64, &ctx), HQEKV_OK);
  const int64_t empty_bytes = ctx->cache->Stats().bytes.total();
  auto* failing = new FailingCache(std::move(ctx->cache));
  ctx->cache.reset(failing);
  const int32_t prompt[] = {1, 403, 407};
  ASSERT_EQ(hqekv_decode(ctx, prompt, 3), HQEKV_OK);
  failing->fail = true;
  failing->sticky = true;
  EXPECT_EQ(hqekv_decode(ctx, prompt + 1, 2), HQEKV_ERR_COMPUTE);
  EXPECT_NE(std::string(hqekv_last_error()).find("the context was reset"), std::string::npos);
  EXPECT_EQ(hqekv_context_n_past(ctx), 0);
  EXPECT_EQ(ctx->cache->Stats().bytes.total(), empty_bytes);
  EXPECT_EQ(ctx->cache->Stats().kept_elements, 0);
  const float* logits = nullptr;
  EXPECT_EQ(hqekv_get_logits(ctx, &logits, nullptr), HQEKV_ERR_STATE);
  hqekv_context_free(ctx);
  hqekv_model_free(m);
}

TEST(CapiRollback, AFailedBatchLeavesTheContextAsBefore) {
  const std::vector<int32_t> clean = Continue(false);
  ASSERT_FALSE(clean.empty());
  EXPECT_EQ(Continue(true), clean);
}

}  // namespace
}  // namespace hqekv
