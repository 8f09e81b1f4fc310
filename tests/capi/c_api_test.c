/* End-to-end test of the C API, compiled as C99 against libhqekv.so:
 *   c_api_test MODEL
 * checks bad input (NULL handles, bad specs and formats, missing files,
 * out-of-range tokens, small buffers: an error code and a message, never a
 * crash), the standalone quantizer and KV store, and prints the greedy
 * 20-token continuation of the empty prompt as `hqekv run --temp 0 -n 20 -t 1`
 * does (stdout) with its KV summary (stderr); tests/capi/capi.cmake compares
 * both with the CLI's. Exit 0 when every check holds. */
#include <hqekv/hqekv.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "c_check.h"

static void test_library(void) {
  CHECK(hqekv_api_version() == HQEKV_API_VERSION);
  CHECK(strlen(hqekv_version()) > 0);
  CHECK(strcmp(hqekv_status_name(HQEKV_ERR_SPEC), "HQEKV_ERR_SPEC") == 0);
  CHECK_ERR(hqekv_set_threads(-1), HQEKV_ERR_INVALID_ARGUMENT, "n_threads");
}

static void test_bad_model_input(const hqekv_model* model) {
  hqekv_model* m = (hqekv_model*)1;
  hqekv_context* ctx = (hqekv_context*)1;
  int32_t toks[4] = {0, 0, 0, 0};
  size_t n = 0;
  char buf[8];
  const float* logits = NULL;
  hqekv_sampler_params p = hqekv_sampler_default_params();
  hqekv_sampler* sampler = (hqekv_sampler*)1;

  CHECK_ERR(hqekv_model_load("/nonexistent/model.gguf", NULL, &m), HQEKV_ERR_LOAD, "nonexistent");
  CHECK(m == NULL);
  CHECK_ERR(hqekv_model_load(NULL, NULL, &m), HQEKV_ERR_INVALID_ARGUMENT, "path");
  CHECK_ERR(hqekv_model_load("x.gguf", NULL, NULL), HQEKV_ERR_INVALID_ARGUMENT, "out");
  /* Metadata of NULL: neutral values, no crash. */
  CHECK(hqekv_model_n_vocab(NULL) == 0 && hqekv_model_bos(NULL) == -1 &&
        strcmp(hqekv_model_name(NULL), "") == 0);

  CHECK_ERR(hqekv_context_create(NULL, "fp16", 64, &ctx), HQEKV_ERR_INVALID_ARGUMENT, "model");
  CHECK(ctx == NULL);
  CHECK_ERR(hqekv_context_create(model, "nonsense", 64, &ctx), HQEKV_ERR_SPEC, "nonsense");
  CHECK_ERR(hqekv_context_create(model, "kivi:nominal_bits=3", 64, &ctx), HQEKV_ERR_SPEC, "bits");
  CHECK_ERR(hqekv_context_create(model, "fp16", 64, NULL), HQEKV_ERR_INVALID_ARGUMENT, "out");

  CHECK_ERR(hqekv_tokenize(NULL, "a", (size_t)-1, 1, 0, toks, 4, &n), HQEKV_ERR_INVALID_ARGUMENT,
            "model");
  CHECK_ERR(hqekv_tokenize(model, NULL, 0, 1, 0, toks, 4, &n), HQEKV_ERR_INVALID_ARGUMENT, "text");
  CHECK_ERR(hqekv_tokenize(model, "Once upon a time there was", (size_t)-1, 1, 0, toks, 2, &n),
            HQEKV_ERR_BUFFER_TOO_SMALL, "tokens");
  CHECK(n > 2);
  toks[0] = hqekv_model_n_vocab(model);
  CHECK_ERR(hqekv_detokenize(model, toks, 1, -1, buf, sizeof buf, &n), HQEKV_ERR_INVALID_ARGUMENT,
            "outside");

  REQUIRE_OK(hqekv_context_create(model, "fp16", 4, &ctx));
  CHECK_ERR(hqekv_get_logits(ctx, &logits, NULL), HQEKV_ERR_STATE, "decode");
  CHECK_ERR(hqekv_decode(NULL, toks, 1), HQEKV_ERR_INVALID_ARGUMENT, "ctx");
  CHECK_ERR(hqekv_decode(ctx, NULL, 1), HQEKV_ERR_INVALID_ARGUMENT, "tokens");
  CHECK_ERR(hqekv_decode(ctx, toks, 0), HQEKV_ERR_INVALID_ARGUMENT, "n must be");
  toks[0] = -1;
  CHECK_ERR(hqekv_decode(ctx, toks, 1), HQEKV_ERR_INVALID_ARGUMENT, "outside");
  toks[0] = hqekv_model_n_vocab(model);
  CHECK_ERR(hqekv_decode(ctx, toks, 1), HQEKV_ERR_INVALID_ARGUMENT, "outside");
  toks[0] = toks[1] = toks[2] = toks[3] = 1;
  REQUIRE_OK(hqekv_decode(ctx, toks, 3));
  CHECK_ERR(hqekv_decode(ctx, toks, 2), HQEKV_ERR_CONTEXT_FULL, "context");
  CHECK(hqekv_context_n_past(ctx) == 3);

  p.top_p = 1.5f;
  CHECK_ERR(hqekv_sampler_create(&p, &sampler), HQEKV_ERR_INVALID_ARGUMENT, "top");
  CHECK(sampler == NULL);
  CHECK_ERR(hqekv_sampler_create(NULL, &sampler), HQEKV_ERR_INVALID_ARGUMENT, "params");
  CHECK_ERR(hqekv_sampler_sample(NULL, ctx, toks), HQEKV_ERR_INVALID_ARGUMENT, "sampler");
  CHECK_ERR(hqekv_generate(ctx, NULL, 4, toks, 4, &n), HQEKV_ERR_INVALID_ARGUMENT, "sampler");
  CHECK_ERR(hqekv_context_kv_stats(NULL, NULL), HQEKV_ERR_INVALID_ARGUMENT, "ctx");
  CHECK_ERR(hqekv_context_kv_report_json(ctx, buf, sizeof buf, &n), HQEKV_ERR_BUFFER_TOO_SMALL,
            "bytes");
  CHECK(n > sizeof buf && buf[sizeof buf - 1] == '\0');
  CHECK_ERR(hqekv_context_reset(NULL), HQEKV_ERR_INVALID_ARGUMENT, "ctx");
  hqekv_context_free(ctx);

  /* Freeing NULL is a no-op. */
  hqekv_model_free(NULL);
  hqekv_context_free(NULL);
  hqekv_sampler_free(NULL);
  hqekv_kv_free(NULL);
}

static void test_quant(void) {
  enum { T = 32, D = 64 };
  static float src[T * D], dst[T * D];
  static uint8_t codes[T * D * 4], meta[4096];
  size_t cb = 0, mb = 0;
  int i;
  float max_err = 0;
  for (i = 0; i < T * D; ++i) src[i] = (float)sin(0.37 * i) * 2.0f;

  REQUIRE_OK(hqekv_quant_sizes("u4", T, D, &cb, &mb));
  CHECK(cb == (size_t)T * D / 2 && mb > 0);
  REQUIRE_OK(hqekv_quantize("u4", src, T, D, codes, cb, meta, mb));
  REQUIRE_OK(hqekv_dequantize("u4", codes, cb, meta, mb, T, D, dst));
  for (i = 0; i < T * D; ++i) max_err = fmaxf(max_err, fabsf(dst[i] - src[i]));
  CHECK(max_err < 4.0f / 15.0f * 0.51f + 0.01f); /* half a step of a 4-bit range of 4 */

  REQUIRE_OK(hqekv_quant_sizes("f32", T, D, &cb, &mb));
  REQUIRE_OK(hqekv_quantize("f32", src, T, D, codes, cb, meta, sizeof meta));
  REQUIRE_OK(hqekv_dequantize("f32", codes, cb, meta, mb, T, D, dst));
  CHECK(memcmp(src, dst, sizeof src) == 0);

  CHECK_ERR(hqekv_quant_sizes("u5", T, D, &cb, &mb), HQEKV_ERR_SPEC, "u5");
  CHECK_ERR(hqekv_quant_sizes(NULL, T, D, &cb, &mb), HQEKV_ERR_INVALID_ARGUMENT, "format");
  CHECK_ERR(hqekv_quant_sizes("u4", 0, D, &cb, &mb), HQEKV_ERR_INVALID_ARGUMENT, "T and D");
  CHECK_ERR(hqekv_quant_sizes("u4:g=48", T, D, &cb, &mb), HQEKV_ERR_SPEC, "u4:g=48");
  CHECK_ERR(hqekv_quantize("u4", src, T, D, codes, 3, meta, sizeof meta),
            HQEKV_ERR_INVALID_ARGUMENT, "codes");
  CHECK_ERR(hqekv_quantize("u4", NULL, T, D, codes, sizeof codes, meta, sizeof meta),
            HQEKV_ERR_INVALID_ARGUMENT, "src");
  CHECK_ERR(hqekv_dequantize("u4", codes, sizeof codes, NULL, 0, T, D, dst),
            HQEKV_ERR_INVALID_ARGUMENT, "meta");
}

static void test_kv_store(void) {
  hqekv_kv_geometry g = {2, 4, 2, 8, 16}; /* layers, q heads, kv heads, D, max_ctx */
  hqekv_kv_geometry bad = {2, 3, 2, 8, 16};
  hqekv_kv* kv = (hqekv_kv*)1;
  float k[2 * 8], v[2 * 8], q[4 * 8], out[4 * 8];
  int32_t pos = 0;
  int i, l;
  hqekv_kv_stats st;
  char json[4096];
  size_t len = 0;

  CHECK_ERR(hqekv_kv_create("fp32", &bad, &kv), HQEKV_ERR_INVALID_ARGUMENT, "multiple");
  CHECK(kv == NULL);
  CHECK_ERR(hqekv_kv_create("nonsense", &g, &kv), HQEKV_ERR_SPEC, "nonsense");
  CHECK_ERR(hqekv_kv_create("fp32", NULL, &kv), HQEKV_ERR_INVALID_ARGUMENT, "geometry");
  REQUIRE_OK(hqekv_kv_create("fp32", &g, &kv));
  CHECK(strcmp(hqekv_kv_describe(kv), "fp32") == 0);
  for (i = 0; i < 16; ++i) {
    k[i] = (float)i * 0.1f;
    v[i] = (float)i - 3.0f;
  }
  for (i = 0; i < 32; ++i) q[i] = 0.05f * (float)i;
  CHECK_ERR(hqekv_kv_append(kv, 2, k, v, &pos, 1), HQEKV_ERR_INVALID_ARGUMENT, "layer");
  CHECK_ERR(hqekv_kv_append(NULL, 0, k, v, &pos, 1), HQEKV_ERR_INVALID_ARGUMENT, "kv");
  CHECK_ERR(hqekv_kv_append(kv, 0, NULL, v, &pos, 1), HQEKV_ERR_INVALID_ARGUMENT, "k or v");
  pos = 16;
  CHECK_ERR(hqekv_kv_append(kv, 0, k, v, &pos, 1), HQEKV_ERR_INVALID_ARGUMENT, "position");
  pos = 0;
  REQUIRE_OK(hqekv_kv_append(kv, 0, k, v, &pos, 1));
  CHECK_ERR(hqekv_kv_append(kv, 0, k, v, &pos, 1), HQEKV_ERR_INVALID_ARGUMENT, "greater");
  CHECK_ERR(hqekv_kv_end_batch(kv, 1, 1), HQEKV_ERR_STATE, "layer 1");
  REQUIRE_OK(hqekv_kv_append(kv, 1, k, v, &pos, 1));
  /* One kept token: attention returns its V row for every query head
   * (query head h reads KV head h / 2). */
  for (l = 0; l < 2; ++l) {
    REQUIRE_OK(hqekv_kv_attend(kv, l, q, &pos, 1, out));
    for (i = 0; i < 32; ++i) CHECK(fabsf(out[i] - v[(i / 16) * 8 + i % 8]) < 1e-6f);
  }
  REQUIRE_OK(hqekv_kv_end_batch(kv, 1, 1));
  REQUIRE_OK(hqekv_kv_stats_get(kv, &st));
  /* 2 layers x 2 KV heads x 1 token x D=8 x (K, V); fp32 payload at least 4 bytes each. */
  CHECK(st.n_layers == 2 && st.kept_elements == 2 * 2 * 8 * 2 &&
        st.bytes_payload >= st.kept_elements * 4);
  if (st.bytes_payload < st.kept_elements * 4 || st.kept_elements != 64) {
    fprintf(stderr, "kept %lld payload %lld\n", (long long)st.kept_elements,
            (long long)st.bytes_payload);
  }
  CHECK(st.bytes_total ==
        st.bytes_payload + st.bytes_metadata + st.bytes_bookkeeping + st.bytes_residual);
  REQUIRE_OK(hqekv_kv_report_json(kv, json, sizeof json, &len));
  CHECK(strstr(json, "\"layers\"") != NULL && strlen(json) == len);
  REQUIRE_OK(hqekv_kv_reset(kv));
  REQUIRE_OK(hqekv_kv_stats_get(kv, &st));
  CHECK(st.kept_elements == 0);
  REQUIRE_OK(hqekv_kv_append(kv, 0, k, v, &pos, 1)); /* position 0 again after the reset */
  hqekv_kv_free(kv);

  /* A compressing policy through the same calls. */
  REQUIRE_OK(hqekv_kv_create("kivi:nominal_bits=2", &g, &kv));
  for (pos = 0; pos < 12; ++pos) {
    for (l = 0; l < 2; ++l) {
      REQUIRE_OK(hqekv_kv_append(kv, l, k, v, &pos, 1));
      REQUIRE_OK(hqekv_kv_attend(kv, l, q, &pos, 1, out));
    }
    REQUIRE_OK(hqekv_kv_end_batch(kv, 1, pos == 0));
  }
  REQUIRE_OK(hqekv_kv_stats_get(kv, &st));
  CHECK(st.bytes_total > 0 && st.true_bits > 0);
  hqekv_kv_free(kv);
}

/* The greedy continuation of the empty prompt, printed as `hqekv run` does;
 * then the same after a reset and after the model handle is freed. */
static void test_generate(hqekv_model* model) {
  hqekv_context* ctx = NULL;
  hqekv_sampler* sampler = NULL;
  hqekv_sampler_params p = hqekv_sampler_greedy_params();
  int32_t prompt[1], out[20], again[20];
  size_t n_out = 0, n_again = 0, len = 0;
  char text[1024];
  const float* logits = NULL;
  int n_vocab = 0;
  hqekv_kv_stats st;

  CHECK(hqekv_model_n_vocab(model) == 512 && hqekv_model_n_layers(model) > 0);
  CHECK(strcmp(hqekv_model_arch(model), "llama") == 0 && strlen(hqekv_model_identity(model)) == 16);
  prompt[0] = hqekv_model_bos(model);
  CHECK(prompt[0] >= 0 && hqekv_model_is_eog(model, hqekv_model_eos(model)));
  REQUIRE_OK(hqekv_context_create(model, NULL, 0, &ctx));
  CHECK(hqekv_context_n_ctx(ctx) > 20);
  REQUIRE_OK(hqekv_decode(ctx, prompt, 1));
  REQUIRE_OK(hqekv_get_logits(ctx, &logits, &n_vocab));
  CHECK(logits != NULL && n_vocab == 512);
  REQUIRE_OK(hqekv_sampler_create(&p, &sampler));
  REQUIRE_OK(hqekv_generate(ctx, sampler, 20, out, 20, &n_out));
  CHECK(n_out == 20);
  CHECK(hqekv_context_n_past(ctx) == 20); /* BOS + 19: the last token is not decoded */
  REQUIRE_OK(hqekv_detokenize(model, out, n_out, prompt[0], text, sizeof text, &len));
  fwrite(text, 1, len, stdout);
  fputc('\n', stdout);
  REQUIRE_OK(hqekv_context_kv_stats(ctx, &st));
  fprintf(stderr, "[c_api_test] KV %lld bytes held, %.3f true bits/element\n",
          (long long)st.bytes_total, st.true_bits);

  /* Reset, free the model handle (the context keeps the weights), again. */
  REQUIRE_OK(hqekv_context_reset(ctx));
  CHECK(hqekv_context_n_past(ctx) == 0);
  hqekv_model_free(model);
  hqekv_sampler_free(sampler);
  REQUIRE_OK(hqekv_sampler_create(&p, &sampler));
  REQUIRE_OK(hqekv_decode(ctx, prompt, 1));
  REQUIRE_OK(hqekv_generate(ctx, sampler, 20, again, 20, &n_again));
  CHECK(n_again == n_out && memcmp(out, again, sizeof out) == 0);
  hqekv_sampler_free(sampler);
  hqekv_context_free(ctx);
}

int main(int argc, char** argv) {
  hqekv_model* model = NULL;
  if (argc != 2) {
    fprintf(stderr, "usage: c_api_test MODEL\n");
    return 2;
  }
  REQUIRE_OK(hqekv_set_threads(1));
  test_library();
  test_quant();
  test_kv_store();
  REQUIRE_OK(hqekv_model_load(argv[1], NULL, &model));
  test_bad_model_input(model);
  test_generate(model); /* frees the model */
  if (failures) fprintf(stderr, "c_api_test: %d check(s) failed\n", failures);
  return failures ? 1 : 0;
}
