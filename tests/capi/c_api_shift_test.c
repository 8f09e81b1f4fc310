/* Context shift through the C API (hqekv_context_set_shift), C99 against
 * libhqekv.so:
 *   c_api_shift_test MODEL N_CTX N_PREDICT KV
 * generates N_PREDICT tokens greedily from BOS in a context of N_CTX
 * positions, far past it, and prints the text (stdout) and the KV summary
 * (stderr) as `hqekv run --ctx N_CTX -n N_PREDICT --temp 0 -t 1 --kv KV`
 * does; tests/capi/capi.cmake compares both with the CLI's. It also checks
 * that without the shift generation stops at a full context, that bad n_keep
 * values are refused, and that a reset forgets the shifts. */
#include <hqekv/hqekv.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "c_check.h"

int main(int argc, char** argv) {
  hqekv_model* model = NULL;
  hqekv_context* ctx = NULL;
  hqekv_sampler* sampler = NULL;
  hqekv_sampler_params p = hqekv_sampler_greedy_params();
  hqekv_kv_stats st;
  int32_t bos;
  int32_t* out;
  char* text;
  size_t n_out = 0, len = 0, text_cap;
  int n_ctx, n_predict;
  if (argc != 5) {
    fprintf(stderr, "usage: c_api_shift_test MODEL N_CTX N_PREDICT KV\n");
    return 2;
  }
  n_ctx = atoi(argv[2]);
  n_predict = atoi(argv[3]);
  out = (int32_t*)malloc(sizeof(int32_t) * (size_t)n_predict);
  text_cap = 64 * (size_t)n_predict + 1;
  text = (char*)malloc(text_cap);
  if (!out || !text || n_ctx < 4 || n_predict <= n_ctx) return 2;
  REQUIRE_OK(hqekv_set_threads(1));
  REQUIRE_OK(hqekv_model_load(argv[1], NULL, &model));
  bos = hqekv_model_bos(model);
  REQUIRE_OK(hqekv_context_create(model, argv[4], n_ctx, &ctx));
  REQUIRE_OK(hqekv_sampler_create(&p, &sampler));

  /* Bad arguments: n_keep must leave something to drop. */
  CHECK(hqekv_context_set_shift(NULL, 1, 0) == HQEKV_ERR_INVALID_ARGUMENT);
  CHECK(hqekv_context_set_shift(ctx, 1, -1) == HQEKV_ERR_INVALID_ARGUMENT);
  CHECK(hqekv_context_set_shift(ctx, 1, n_ctx - 1) == HQEKV_ERR_INVALID_ARGUMENT &&
        strstr(hqekv_last_error(), "n_keep") != NULL);

  /* Off (the default): generation stops when the context is full. */
  REQUIRE_OK(hqekv_decode(ctx, &bos, 1));
  REQUIRE_OK(hqekv_generate(ctx, sampler, n_predict, out, (size_t)n_predict, &n_out));
  CHECK(n_out == (size_t)n_ctx && hqekv_context_n_shifts(ctx) == 0);
  CHECK(hqekv_context_n_past(ctx) == n_ctx);

  /* On, keeping BOS as `hqekv run --keep 0` does: all n_predict tokens. */
  REQUIRE_OK(hqekv_context_reset(ctx));
  hqekv_sampler_free(sampler);
  REQUIRE_OK(hqekv_sampler_create(&p, &sampler));
  REQUIRE_OK(hqekv_context_set_shift(ctx, 1, 1));
  REQUIRE_OK(hqekv_decode(ctx, &bos, 1));
  REQUIRE_OK(hqekv_generate(ctx, sampler, n_predict, out, (size_t)n_predict, &n_out));
  CHECK(n_out == (size_t)n_predict);
  CHECK(hqekv_context_n_shifts(ctx) > 0 && hqekv_context_n_past(ctx) <= n_ctx);
  REQUIRE_OK(hqekv_detokenize(model, out, n_out, bos, text, text_cap, &len));
  fwrite(text, 1, len, stdout);
  fputc('\n', stdout);
  REQUIRE_OK(hqekv_context_kv_stats(ctx, &st));
  fprintf(stderr, "[c_api_shift_test] %d context shifts, KV %lld bytes held, %.3f true bits\n",
          hqekv_context_n_shifts(ctx), (long long)st.bytes_total, st.true_bits);
  REQUIRE_OK(hqekv_context_reset(ctx));
  CHECK(hqekv_context_n_shifts(ctx) == 0);

  hqekv_sampler_free(sampler);
  hqekv_context_free(ctx);
  hqekv_model_free(model);
  free(out);
  free(text);
  if (failures) fprintf(stderr, "c_api_shift_test: %d check(s) failed\n", failures);
  return failures ? 1 : 0;
}
