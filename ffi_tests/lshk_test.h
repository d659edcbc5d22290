/* Shared helpers for the C tests in ffi_tests/ (C11, no dependencies).
 *
 * Each ffi_tests/X.c is a standalone program: it includes this header,
 * runs its cases with the macros below, and ends main() with
 * `return lshk_test_summary("X");`, which prints "N passed, M failed"
 * and returns non-zero when anything failed. */
#ifndef LSHK_TEST_H
#define LSHK_TEST_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lshk.h"

static int lshk_test_passed = 0;
static int lshk_test_failed = 0;

#define CHECK(cond)                                                            \
  do {                                                                         \
    if (cond) {                                                                \
      lshk_test_passed++;                                                      \
    } else {                                                                   \
      lshk_test_failed++;                                                      \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
    }                                                                          \
  } while (0)

/* Asserts that `call` returns `want`; for an error status also that a
 * non-empty last-error message was recorded. */
#define EXPECT_STATUS(call, want)                                              \
  do {                                                                         \
    lshk_status got_ = (call);                                                 \
    lshk_status want_ = (want);                                                \
    if (got_ != want_) {                                                       \
      char msg_[512];                                                          \
      lshk_last_error_message(msg_, sizeof msg_);                              \
      lshk_test_failed++;                                                      \
      fprintf(stderr, "%s:%d: %s returned %s, expected %s (message: %s)\n",    \
              __FILE__, __LINE__, #call, lshk_status_name(got_),               \
              lshk_status_name(want_), msg_);                                  \
    } else if (want_ != LSHK_STATUS_OK &&                                      \
               lshk_last_error_message(NULL, 0) == 0) {                        \
      lshk_test_failed++;                                                      \
      fprintf(stderr, "%s:%d: %s failed without a message\n", __FILE__,        \
              __LINE__, #call);                                                \
    } else {                                                                   \
      lshk_test_passed++;                                                      \
    }                                                                          \
  } while (0)

#define EXPECT_OK(call) EXPECT_STATUS(call, LSHK_STATUS_OK)

/* Canary: fill a buffer with a byte pattern, later check nothing changed. */
static inline void lshk_fill_canary(void *p, size_t bytes) {
  memset(p, 0xA5, bytes);
}
static inline int lshk_canary_intact(const void *p, size_t bytes) {
  const unsigned char *c = (const unsigned char *)p;
  for (size_t i = 0; i < bytes; i++)
    if (c[i] != 0xA5) return 0;
  return 1;
}

static inline int lshk_test_summary(const char *name) {
  printf("%s: %d passed, %d failed\n", name, lshk_test_passed,
         lshk_test_failed);
  return lshk_test_failed == 0 ? 0 : 1;
}

#endif
