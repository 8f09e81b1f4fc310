/* Check macros of the C99 API tests (c_api_test.c, c_api_shift_test.c,
 * c_state_test.c). Each test counts failures in `failures` and exits with
 * it; REQUIRE_OK stops the test at once (nothing after it can run).
 *   CHECK(cond)                      cond holds
 *   CHECK_ERR(call, status, needle)  call returns status and the last error
 *                                    message contains needle
 *   REQUIRE_OK(call)                 call returns HQEKV_OK, else exit(1) */
#ifndef HQEKV_TESTS_CAPI_C_CHECK_H_
#define HQEKV_TESTS_CAPI_C_CHECK_H_

#include <hqekv/hqekv.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures = 0;

#define CHECK(cond)                                                                            \
  do {                                                                                         \
    if (!(cond)) {                                                                             \
      fprintf(stderr, "%s:%d: CHECK failed: %s (last error: %s)\n", __FILE__, __LINE__, #cond, \
              hqekv_last_error());                                                             \
      ++failures;                                                                              \
    }                                                                                          \
  } while (0)

#define CHECK_ERR(call, status, needle)                                                        \
  do {                                                                                         \
    hqekv_status s_ = (call);                                                                  \
    if (s_ != (status) || strstr(hqekv_last_error(), (needle)) == NULL) {                      \
      fprintf(stderr, "%s:%d: %s gave %s '%s', expected %s naming '%s'\n", __FILE__, __LINE__, \
              #call, hqekv_status_name(s_), hqekv_last_error(), #status, (needle));            \
      ++failures;                                                                              \
    }                                                                                          \
  } while (0)

#define REQUIRE_OK(call)                                                       \
  do {                                                                         \
    hqekv_status s_ = (call);                                                  \
    if (s_ != HQEKV_OK) {                                                      \
      fprintf(stderr, "%s:%d: %s failed: %s: %s\n", __FILE__, __LINE__, #call, \
              hqekv_status_name(s_), hqekv_last_error());                      \
      exit(1);                                                                 \
    }                                                                          \
  } while (0)

#endif /* HQEKV_TESTS_CAPI_C_CHECK_H_ */
