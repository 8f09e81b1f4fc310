/* Greedy text generation through the hqekv C API, printing what
 * `hqekv run --temp 0 -t 1` prints: the prompt and the generated text on
 * stdout, one summary line (KV bytes, true bits) on stderr.
 *
 *   generate MODEL [PROMPT [N_PREDICT [KV_SPEC]]]
 *
 * Build against an installed hqekv:
 *   cc generate.c $(pkg-config --cflags --libs hqekv)
 * or in CMake: find_package(hqekv) + target_link_libraries(app hqekv::hqekv). */
#include <hqekv/hqekv.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(const char* what, hqekv_status s) {
  fprintf(stderr, "generate: %s failed: %s: %s\n", what, hqekv_status_name(s), hqekv_last_error());
  return 1;
}

int main(int argc, char** argv) {
  const char* path = argc > 1 ? argv[1] : "models/stories260K.gguf";
  const char* prompt = argc > 2 ? argv[2] : "";
  const int n_predict = argc > 3 ? atoi(argv[3]) : 20;
  const char* kv_spec = argc > 4 ? argv[4] : "fp16";
  hqekv_model* model = NULL;
  hqekv_context* ctx = NULL;
  hqekv_sampler* sampler = NULL;
  hqekv_sampler_params params = hqekv_sampler_greedy_params();
  int32_t* prompt_ids = NULL;
  int32_t* out = NULL;
  char* text = NULL;
  size_t n_prompt = 0, n_out = 0, len = 0;
  hqekv_kv_stats st;
  hqekv_status s;
  int rc = 1;

  /* A library of this API version or newer has every call this program uses. */
  if (hqekv_api_version() < HQEKV_API_VERSION) {
    fprintf(stderr, "generate: built for API %d, library has %d\n", HQEKV_API_VERSION,
            hqekv_api_version());
    return 1;
  }
  if (n_predict < 0) {
    fprintf(stderr, "generate: N_PREDICT must be >= 0\n");
    return 1;
  }
  /* One thread: the same numbers as `hqekv run -t 1`. */
  if ((s = hqekv_set_threads(1)) != HQEKV_OK) return fail("set_threads", s);
  if ((s = hqekv_model_load(path, NULL, &model)) != HQEKV_OK) return fail("model_load", s);
  if ((s = hqekv_context_create(model, kv_spec, 0, &ctx)) != HQEKV_OK) {
    rc = fail("context_create", s);
    goto done;
  }
  /* Count the prompt's tokens, then tokenize into a buffer that fits. As
   * `hqekv run`: BOS when the model asks for it or the prompt is empty. */
  {
    const int add_bos = hqekv_model_add_bos(model) || prompt[0] == '\0';
    s = hqekv_tokenize(model, prompt, (size_t)-1, add_bos, 0, NULL, 0, &n_prompt);
    if (s != HQEKV_OK && s != HQEKV_ERR_BUFFER_TOO_SMALL) {
      rc = fail("tokenize", s);
      goto done;
    }
    prompt_ids = (int32_t*)malloc((n_prompt + 1) * sizeof(int32_t));
    out = (int32_t*)malloc(((size_t)n_predict + 1) * sizeof(int32_t));
    if (!prompt_ids || !out) goto done;
    if ((s = hqekv_tokenize(model, prompt, (size_t)-1, add_bos, 0, prompt_ids, n_prompt,
                            &n_prompt)) != HQEKV_OK) {
      rc = fail("tokenize", s);
      goto done;
    }
  }
  if (n_prompt == 0) {
    fprintf(stderr, "generate: empty prompt and the model has no BOS token\n");
    goto done;
  }
  if ((s = hqekv_decode(ctx, prompt_ids, (int)n_prompt)) != HQEKV_OK) {
    rc = fail("decode", s);
    goto done;
  }
  if ((s = hqekv_sampler_create(&params, &sampler)) != HQEKV_OK) {
    rc = fail("sampler_create", s);
    goto done;
  }
  if ((s = hqekv_generate(ctx, sampler, n_predict, out, (size_t)n_predict, &n_out)) != HQEKV_OK) {
    rc = fail("generate", s);
    goto done;
  }
  /* Text of the generated tokens after the prompt's last one. */
  hqekv_detokenize(model, out, n_out, prompt_ids[n_prompt - 1], NULL, 0, &len);
  text = (char*)malloc(len + 1);
  if (!text) goto done;
  if ((s = hqekv_detokenize(model, out, n_out, prompt_ids[n_prompt - 1], text, len + 1, &len)) !=
      HQEKV_OK) {
    rc = fail("detokenize", s);
    goto done;
  }
  fwrite(prompt, 1, strlen(prompt), stdout);
  fwrite(text, 1, len, stdout);
  fputc('\n', stdout);
  if ((s = hqekv_context_kv_stats(ctx, &st)) != HQEKV_OK) {
    rc = fail("kv_stats", s);
    goto done;
  }
  fprintf(stderr,
          "[generate] %s | kv %s | prompt %d tok, generated %d tok | KV %lld bytes held, %.3f true "
          "bits/element\n",
          hqekv_model_name(model), hqekv_context_kv_describe(ctx), (int)n_prompt, (int)n_out,
          (long long)st.bytes_total, st.true_bits);
  rc = 0;
done:
  free(text);
  free(out);
  free(prompt_ids);
  hqekv_sampler_free(sampler);
  hqekv_context_free(ctx);
  hqekv_model_free(model);
  return rc;
}
