/* Hostile arguments through the C API, compiled as C99 against libhqekv.so:
 *   c_hardening_test MODEL DIR
 * One block per class of finding, each named after it:
 *   non_finite:    hqekv_quantize and hqekv_kv_append refuse NaN / infinity
 *                  (no format has a code for them: they came back as 0 or
 *                  65504 without an error);
 *   count_bounds:  hqekv_set_threads and hqekv_kv_create refuse counts past
 *                  their documented bounds before starting threads or
 *                  allocating;
 *   output_path:   hqekv_context_save_state follows a symbolic link (the link
 *                  stays, its target is written) and writes through a device
 *                  instead of replacing it.
 * Exit 0 when every check holds. */
#define _POSIX_C_SOURCE 200112L
#include <hqekv/hqekv.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "c_check.h"

static void non_finite(void) {
  float x[4 * 32];
  uint8_t codes[4096], meta[4096];
  hqekv_kv* kv = NULL;
  hqekv_kv_geometry g = {1, 1, 1, 8, 16};
  float k[8], v[8];
  int32_t pos = 0;
  int i;
  for (i = 0; i < 4 * 32; ++i) x[i] = (float)i / 7.0f;
  REQUIRE_OK(hqekv_quantize("u4", x, 4, 32, codes, sizeof codes, meta, sizeof meta));
  x[37] = (float)NAN;
  CHECK_ERR(hqekv_quantize("u4", x, 4, 32, codes, sizeof codes, meta, sizeof meta),
            HQEKV_ERR_INVALID_ARGUMENT, "src[1][5] is NaN");
  x[37] = (float)INFINITY;
  CHECK_ERR(hqekv_quantize("f16", x, 4, 32, codes, sizeof codes, meta, sizeof meta),
            HQEKV_ERR_INVALID_ARGUMENT, "infinite");
  x[37] = -(float)INFINITY;
  CHECK_ERR(hqekv_quantize("int8", x, 4, 32, codes, sizeof codes, meta, sizeof meta),
            HQEKV_ERR_INVALID_ARGUMENT, "infinite");

  REQUIRE_OK(hqekv_kv_create("fp16", &g, &kv));
  for (i = 0; i < 8; ++i) k[i] = v[i] = (float)i;
  v[3] = (float)NAN;
  CHECK_ERR(hqekv_kv_append(kv, 0, k, v, &pos, 1), HQEKV_ERR_INVALID_ARGUMENT, "v has a NaN");
  v[3] = 1.0f;
  k[0] = (float)INFINITY;
  CHECK_ERR(hqekv_kv_append(kv, 0, k, v, &pos, 1), HQEKV_ERR_INVALID_ARGUMENT, "k has a NaN");
  k[0] = 0.0f;
  REQUIRE_OK(hqekv_kv_append(kv, 0, k, v, &pos, 1)); /* the refusals left the store usable */
  hqekv_kv_free(kv);
}

static void count_bounds(void) {
  hqekv_kv* kv = NULL;
  hqekv_kv_geometry g = {1 << 30, 1, 1, 8, 16};
  clock_t t0 = clock();
  CHECK_ERR(hqekv_set_threads(1000000), HQEKV_ERR_INVALID_ARGUMENT, "is more than");
  CHECK_ERR(hqekv_set_threads(-1), HQEKV_ERR_INVALID_ARGUMENT, ">= 0");
  REQUIRE_OK(hqekv_set_threads(2)); /* still usable after the refusals */
  REQUIRE_OK(hqekv_set_threads(1));
  CHECK_ERR(hqekv_kv_create("fp16", &g, &kv), HQEKV_ERR_INVALID_ARGUMENT, "n_layers 1073741824");
  CHECK(kv == NULL);
  g.n_layers = 1;
  g.max_ctx = 1 << 30;
  CHECK_ERR(hqekv_kv_create("fp16", &g, &kv), HQEKV_ERR_INVALID_ARGUMENT, "max_ctx");
  g.max_ctx = 16;
  g.head_dim = 1 << 28;
  CHECK_ERR(hqekv_kv_create("fp16", &g, &kv), HQEKV_ERR_INVALID_ARGUMENT, "head_dim");
  /* Refused before any work: well under a second of CPU. */
  CHECK((double)(clock() - t0) / CLOCKS_PER_SEC < 1.0);
}

static void output_path(const hqekv_model* model, const char* dir) {
  hqekv_context* a = NULL;
  int32_t prompt[8] = {1, 5, 9, 13, 17, 21, 25, 29};
  char real[4096], link[4096], dev[4096];
  struct stat st;
  snprintf(real, sizeof real, "%s/real.kv", dir);
  snprintf(link, sizeof link, "%s/link.kv", dir);
  snprintf(dev, sizeof dev, "%s/null_link.kv", dir);
  remove(real);
  remove(link);
  remove(dev);
  REQUIRE_OK(hqekv_context_create(model, "fp16", 64, &a));
  REQUIRE_OK(hqekv_decode(a, prompt, 8));
  CHECK(symlink("real.kv", link) == 0);
  REQUIRE_OK(hqekv_context_save_state(a, link));
  CHECK(lstat(link, &st) == 0 && S_ISLNK(st.st_mode));
  CHECK(stat(real, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0);
  CHECK(symlink("/dev/null", dev) == 0);
  REQUIRE_OK(hqekv_context_save_state(a, dev));
  CHECK(lstat(dev, &st) == 0 && S_ISLNK(st.st_mode));
  CHECK(stat("/dev/null", &st) == 0 && S_ISCHR(st.st_mode));
  hqekv_context_free(a);
}

int main(int argc, char** argv) {
  hqekv_model* model = NULL;
  if (argc != 3) {
    fprintf(stderr, "usage: c_hardening_test MODEL DIR\n");
    return 2;
  }
  REQUIRE_OK(hqekv_set_threads(1));
  non_finite();
  count_bounds();
  REQUIRE_OK(hqekv_model_load(argv[1], NULL, &model));
  output_path(model, argv[2]);
  hqekv_model_free(model);
  if (failures) fprintf(stderr, "%d check(s) failed\n", failures);
  return failures ? 1 : 0;
}
