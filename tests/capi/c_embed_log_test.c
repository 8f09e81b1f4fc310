/* Embeddings, the log callback and hqekv_seq_keep through the C API,
 * compiled as C99 against libhqekv.so:
 *   c_embed_log_test MODEL
 * Log: loading the model and creating a context give INFO lines naming
 * them; a failed call gives an ERROR line equal to hqekv_last_error(); a
 * policy that cannot meet its budget gives one WARN; after
 * hqekv_log_set(NULL) nothing more arrives.
 * Embeddings: off -> HQEKV_ERR_STATE; a prompt decoded in one batch gives
 * n_embd floats per token; the same prompt through hqekv_decode_batch on two
 * other sequences gives the same vectors as hqekv_decode on sequence 0;
 * pooling mean / last / first and normalisation agree with the rows; a
 * prefix decoded alone gives (nearly) the same vectors as inside the longer
 * batch (causality).
 * seq_keep: keeps one sequence, drops the others, clears sequence 0.
 * Exit 0 when every check holds. */
#include <hqekv/hqekv.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "c_check.h"

#define MAXT 32

struct log_seen {
  int info_model, info_context, errors, warns, total;
  char last_error[1024];
};

static void on_log(hqekv_log_level level, const char* message, void* user) {
  struct log_seen* s = (struct log_seen*)user;
  ++s->total;
  if (getenv("HQEKV_TEST_VERBOSE")) fprintf(stderr, "log %d: %s\n", (int)level, message);
  if (level == HQEKV_LOG_INFO && strstr(message, "loaded ") && strstr(message, "layers"))
    ++s->info_model;
  if (level == HQEKV_LOG_INFO && strstr(message, "context: kv fp16")) ++s->info_context;
  if (level == HQEKV_LOG_WARN && strstr(message, "budget not met")) ++s->warns;
  if (level == HQEKV_LOG_ERROR) {
    ++s->errors;
    strncpy(s->last_error, message, sizeof s->last_error - 1);
  }
}

static double max_diff(const float* a, const float* b, int n) {
  double m = 0;
  int i;
  for (i = 0; i < n; ++i) {
    double d = fabs((double)a[i] - (double)b[i]);
    if (d > m) m = d;
  }
  return m;
}

int main(int argc, char** argv) {
  struct log_seen seen;
  hqekv_model* m = NULL;
  hqekv_context *ctx = NULL, *bad = NULL, *tight = NULL, *pre = NULL;
  int32_t toks[MAXT];
  size_t nt = 0;
  int n, d = 0, i, j, before;
  const float* e = NULL;
  float *rows, *pooled;
  hqekv_seq_id s1 = 0, s2 = 0, ids[2 * MAXT];
  int32_t both[2 * MAXT];
  if (argc != 2) {
    fprintf(stderr, "usage: %s MODEL\n", argv[0]);
    return 2;
  }
  CHECK(hqekv_api_version() >= 2);
  memset(&seen, 0, sizeof seen);
  hqekv_log_set(on_log, &seen);

  /* ---- log ---- */
  REQUIRE_OK(hqekv_model_load(argv[1], NULL, &m));
  CHECK(seen.info_model == 1);
  REQUIRE_OK(hqekv_context_create(m, "fp16", 128, &ctx));
  CHECK(seen.info_context == 1);
  CHECK(hqekv_context_create(m, "kivi:bitz=2", 128, &bad) == HQEKV_ERR_SPEC);
  CHECK(seen.errors == 1);
  CHECK(strcmp(seen.last_error, hqekv_last_error()) == 0);
  REQUIRE_OK(hqekv_tokenize(m, "Once upon a time there was a little girl", (size_t)-1, 1, 0, toks,
                            MAXT, &nt));
  n = (int)nt;
  REQUIRE_OK(hqekv_context_create(m, "h2o:bits=0.3", 128, &tight));
  REQUIRE_OK(hqekv_decode(tight, toks, n));
  REQUIRE_OK(hqekv_decode(tight, toks, 1));
  CHECK(seen.warns == 1); /* said once, not at every step */

  /* ---- embeddings ---- */
  CHECK_ERR(hqekv_get_embeddings_ith(ctx, 0, &e, &d), HQEKV_ERR_STATE, "set_embeddings");
  REQUIRE_OK(hqekv_context_set_embeddings(ctx, 1));
  REQUIRE_OK(hqekv_decode(ctx, toks, n));
  REQUIRE_OK(hqekv_get_embeddings_ith(ctx, 0, &e, &d));
  CHECK(d == hqekv_model_n_embd(m));
  rows = (float*)malloc(sizeof(float) * (size_t)(n * d));
  pooled = (float*)malloc(sizeof(float) * (size_t)d);
  for (i = 0; i < n; ++i) {
    REQUIRE_OK(hqekv_get_embeddings_ith(ctx, i, &e, &d));
    memcpy(rows + (size_t)i * d, e, sizeof(float) * (size_t)d);
  }
  REQUIRE_OK(hqekv_get_embeddings_ith(ctx, -1, &e, &d));
  CHECK(max_diff(e, rows + (size_t)(n - 1) * d, d) == 0.0);
  CHECK(max_diff(rows, rows + (size_t)(n - 1) * d, d) > 1e-3); /* tokens differ */
  CHECK_ERR(hqekv_get_embeddings_ith(ctx, n, &e, &d), HQEKV_ERR_INVALID_ARGUMENT, "outside");

  /* Pooling over sequence 0. */
  {
    double norm = 0, mean_err = 0;
    REQUIRE_OK(hqekv_get_embeddings_seq(ctx, 0, HQEKV_POOLING_MEAN, 0, pooled, (size_t)d));
    for (j = 0; j < d; ++j) {
      double acc = 0;
      for (i = 0; i < n; ++i) acc += rows[(size_t)i * d + j];
      acc /= n;
      if (fabs(acc - pooled[j]) > mean_err) mean_err = fabs(acc - pooled[j]);
    }
    CHECK(mean_err < 1e-5);
    REQUIRE_OK(hqekv_get_embeddings_seq(ctx, 0, HQEKV_POOLING_LAST, 1, pooled, (size_t)d));
    for (j = 0; j < d; ++j) norm += (double)pooled[j] * pooled[j];
    CHECK(fabs(norm - 1.0) < 1e-5);
    REQUIRE_OK(hqekv_get_embeddings_seq(ctx, 0, HQEKV_POOLING_FIRST, 0, pooled, (size_t)d));
    CHECK(max_diff(pooled, rows, d) == 0.0);
    CHECK_ERR(hqekv_get_embeddings_seq(ctx, 0, HQEKV_POOLING_MEAN, 0, pooled, (size_t)d - 1),
              HQEKV_ERR_BUFFER_TOO_SMALL, "floats");
    CHECK_ERR(hqekv_get_embeddings_seq(ctx, 0, 9, 0, pooled, (size_t)d), HQEKV_ERR_INVALID_ARGUMENT,
              "pooling");
    CHECK_ERR(hqekv_get_embeddings_seq(ctx, 5, HQEKV_POOLING_MEAN, 0, pooled, (size_t)d),
              HQEKV_ERR_INVALID_ARGUMENT, "no token");
  }

  /* The same prompt on two new sequences in one batch: the same vectors. */
  REQUIRE_OK(hqekv_seq_add(ctx, NULL, &s1));
  REQUIRE_OK(hqekv_seq_add(ctx, NULL, &s2));
  for (i = 0; i < n; ++i) {
    ids[2 * i] = s1;
    ids[2 * i + 1] = s2;
    both[2 * i] = toks[i];
    both[2 * i + 1] = toks[i];
  }
  REQUIRE_OK(hqekv_decode_batch(ctx, ids, both, NULL, 2 * n));
  for (i = 0; i < n; ++i) {
    REQUIRE_OK(hqekv_get_embeddings_ith(ctx, 2 * i + 1, &e, &d));
    CHECK(max_diff(e, rows + (size_t)i * d, d) < 1e-4);
  }
  REQUIRE_OK(hqekv_get_embeddings_seq(ctx, s2, HQEKV_POOLING_LAST, 0, pooled, (size_t)d));
  CHECK(max_diff(pooled, rows + (size_t)(n - 1) * d, d) < 1e-4);

  /* Causality: a prefix alone gives the vectors it has in the long batch. */
  REQUIRE_OK(hqekv_context_create(m, "fp16", 128, &pre));
  REQUIRE_OK(hqekv_context_set_embeddings(pre, 1));
  REQUIRE_OK(hqekv_decode(pre, toks, n / 2));
  for (i = 0; i < n / 2; ++i) {
    REQUIRE_OK(hqekv_get_embeddings_ith(pre, i, &e, &d));
    CHECK(max_diff(e, rows + (size_t)i * d, d) < 1e-4);
  }
  /* Off again: the next decode keeps none. */
  REQUIRE_OK(hqekv_context_set_embeddings(pre, 0));
  REQUIRE_OK(hqekv_decode(pre, toks + n / 2, 1));
  CHECK(hqekv_get_embeddings_ith(pre, 0, &e, &d) == HQEKV_ERR_STATE);

  /* ---- seq_keep ---- */
  REQUIRE_OK(hqekv_seq_keep(ctx, s2));
  CHECK(hqekv_seq_n_past(ctx, s2) == n);
  CHECK(hqekv_seq_n_past(ctx, s1) == -1);
  CHECK(hqekv_context_n_past(ctx) == 0);
  CHECK_ERR(hqekv_seq_keep(ctx, s1), HQEKV_ERR_INVALID_ARGUMENT, "no sequence");
  REQUIRE_OK(hqekv_seq_keep(ctx, 0));
  CHECK(hqekv_seq_n_past(ctx, s2) == -1);

  /* ---- log removed ---- */
  hqekv_log_set(NULL, NULL);
  before = seen.total;
  CHECK(hqekv_context_create(m, "kivi:bitz=2", 128, &bad) == HQEKV_ERR_SPEC);
  CHECK(seen.total == before);

  free(rows);
  free(pooled);
  hqekv_context_free(pre);
  hqekv_context_free(tight);
  hqekv_context_free(ctx);
  hqekv_model_free(m);
  if (failures) fprintf(stderr, "%d check(s) failed\n", failures);
  return failures ? 1 : 0;
}
