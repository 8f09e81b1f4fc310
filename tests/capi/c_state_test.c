/* KV state through the C API, compiled as C99 against libhqekv.so:
 *   c_state_test MODEL DIR
 * For a compressed and an evicting policy: decode a prompt, save the state
 * (file and buffer), load it into a fresh context, and decode on both: the
 * logits are bit-identical at every step and the KV bytes held agree. Bad
 * input (NULL, empty context, missing / corrupt / truncated file, another
 * spec, a small buffer) gives an error code and a message and leaves the
 * context as it was. Exit 0 when every check holds. */
#include <hqekv/hqekv.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "c_check.h"

static int same_logits(const hqekv_context* a, const hqekv_context* b) {
  const float *la = NULL, *lb = NULL;
  int na = 0, nb = 0;
  REQUIRE_OK(hqekv_get_logits(a, &la, &na));
  REQUIRE_OK(hqekv_get_logits(b, &lb, &nb));
  return na == nb && memcmp(la, lb, sizeof(float) * (size_t)na) == 0;
}

static int64_t held(const hqekv_context* c) {
  hqekv_kv_stats st;
  REQUIRE_OK(hqekv_context_kv_stats(c, &st));
  return st.bytes_total;
}

static void write_bytes(const char* path, const uint8_t* p, size_t n) {
  FILE* f = fopen(path, "wb");
  if (!f || fwrite(p, 1, n, f) != n) exit(1);
  fclose(f);
}

static void round_trip(const hqekv_model* model, const char* spec, const char* dir) {
  hqekv_context *a = NULL, *b = NULL, *c = NULL;
  int32_t prompt[70], tok = 0;
  int i, n_past = 0;
  size_t len = 0, len2 = 0;
  uint8_t* buf = NULL;
  char path[4096], bad[4096];
  int64_t before = 0;
  snprintf(path, sizeof path, "%s/state.kv", dir);
  snprintf(bad, sizeof bad, "%s/bad.kv", dir);
  remove(bad); /* left by the previous policy's round */
  for (i = 0; i < 70; ++i) prompt[i] = i == 0 ? 1 : 3 + (i * 37) % 400;

  REQUIRE_OK(hqekv_context_create(model, spec, 256, &a));
  REQUIRE_OK(hqekv_context_create(model, spec, 256, &b));
  CHECK_ERR(hqekv_context_save_state(a, path), HQEKV_ERR_STATE, "decode a prompt first");
  CHECK_ERR(hqekv_context_save_state(NULL, path), HQEKV_ERR_INVALID_ARGUMENT, "ctx is NULL");
  CHECK_ERR(hqekv_context_save_state(a, NULL), HQEKV_ERR_INVALID_ARGUMENT, "path is NULL");
  CHECK_ERR(hqekv_context_load_state(b, NULL), HQEKV_ERR_INVALID_ARGUMENT, "path is NULL");
  REQUIRE_OK(hqekv_decode(a, prompt, 70));
  REQUIRE_OK(hqekv_context_save_state(a, path));

  /* Buffer: size query, too small, then the bytes. */
  CHECK_ERR(hqekv_context_state_get_data(a, NULL, 0, &len), HQEKV_ERR_BUFFER_TOO_SMALL, "needs");
  CHECK(len > 0);
  buf = (uint8_t*)malloc(len);
  CHECK_ERR(hqekv_context_state_get_data(a, buf, len - 1, &len2), HQEKV_ERR_BUFFER_TOO_SMALL,
            "cap is");
  REQUIRE_OK(hqekv_context_state_get_data(a, buf, len, &len2));
  CHECK(len2 == len);
  fprintf(stderr, "[c_state_test] %s: %zu state bytes, %lld KV bytes held\n", spec, len,
          (long long)held(a));

  /* Bad states leave b (empty) as it was. */
  before = held(b);
  CHECK_ERR(hqekv_context_load_state(b, bad), HQEKV_ERR_LOAD, "bad.kv");
  write_bytes(bad, buf, len / 2);
  CHECK_ERR(hqekv_context_load_state(b, bad), HQEKV_ERR_LOAD, "checksum");
  buf[len / 2] ^= 1;
  CHECK_ERR(hqekv_context_state_set_data(b, buf, len), HQEKV_ERR_LOAD, "checksum");
  buf[len / 2] ^= 1;
  CHECK(hqekv_context_n_past(b) == 0 && held(b) == before);
  REQUIRE_OK(hqekv_context_create(model, "fp16", 256, &c));
  CHECK_ERR(hqekv_context_state_set_data(c, buf, len), HQEKV_ERR_LOAD, "KV policy");
  CHECK(hqekv_context_n_past(c) == 0);
  hqekv_context_free(c);

  /* File into b, buffer into a fresh c: both continue as a does. */
  REQUIRE_OK(hqekv_context_load_state(b, path));
  REQUIRE_OK(hqekv_context_create(model, spec, 256, &c));
  REQUIRE_OK(hqekv_context_state_set_data(c, buf, len));
  CHECK(hqekv_context_n_past(b) == 70 && hqekv_context_n_past(c) == 70);
  CHECK(held(b) == held(a) && held(c) == held(a));
  CHECK(same_logits(a, b) && same_logits(a, c));
  for (i = 0; i < 40; ++i) {
    const float* l = NULL;
    int n = 0, j;
    REQUIRE_OK(hqekv_get_logits(a, &l, &n));
    for (tok = 0, j = 1; j < n; ++j)
      if (l[j] > l[tok]) tok = j;
    REQUIRE_OK(hqekv_decode(a, &tok, 1));
    REQUIRE_OK(hqekv_decode(b, &tok, 1));
    REQUIRE_OK(hqekv_decode(c, &tok, 1));
    CHECK(same_logits(a, b) && same_logits(a, c));
    CHECK(held(a) == held(b) && held(a) == held(c));
  }
  n_past = hqekv_context_n_past(b);
  CHECK(n_past == 110);

  /* A failed load into a busy context keeps its sequence. */
  write_bytes(bad, buf, len - 3);
  CHECK_ERR(hqekv_context_load_state(b, bad), HQEKV_ERR_LOAD, "checksum");
  CHECK(hqekv_context_n_past(b) == n_past && held(b) == held(a) && same_logits(a, b));
  free(buf);
  hqekv_context_free(a);
  hqekv_context_free(b);
  hqekv_context_free(c);
}

int main(int argc, char** argv) {
  hqekv_model* model = NULL;
  if (argc != 3) {
    fprintf(stderr, "usage: c_state_test MODEL DIR\n");
    return 2;
  }
  REQUIRE_OK(hqekv_set_threads(1));
  REQUIRE_OK(hqekv_model_load(argv[1], NULL, &model));
  round_trip(model, "hqekv:nominal_bits=2", argv[2]);
  round_trip(model, "h2o:keep=0.5", argv[2]);
  round_trip(model, "kivi:nominal_bits=2", argv[2]);
  hqekv_model_free(model);
  if (failures) fprintf(stderr, "c_state_test: %d check(s) failed\n", failures);
  return failures ? 1 : 0;
}
