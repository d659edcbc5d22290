/* The bad-input matrix framework (issue 8), shared by ffi_tests/bad_input_*.c.
 *
 * Every public entry point gets, per function FN:
 *   typedef struct {...} bi_args_FN;          all arguments + owned buffers
 *   static void bi_init_FN(bi_args_FN *a, bi_outs *o);
 *       fills `a` with a VALID call (pointers into `a`'s own arrays or into
 *       fixtures) and registers every output buffer with bi_out(), which
 *       fills it with the canary;
 *   static lshk_status bi_call_FN(bi_args_FN *a);
 *       makes the call (and releases anything a call that succeeded by
 *       mistake created, so a bug does not leak or reuse handle slots).
 *
 * Then one line per case:
 *   BI_CASE(FN, LSHK_STATUS_X, a.x = NULL);
 * initialises a valid call, applies the mutation (any statements on `a`),
 * records a sentinel error from another function, calls, and asserts:
 *   - the status is the expected one;
 *   - for an error, lshk_last_error_message() is non-empty and was set by
 *     THIS call (it starts with "FN: ", the boundary's prefix);
 *   - every registered output still holds the canary (nothing written).
 * BI_BASELINE(FN) runs the unmutated call and requires LSHK_STATUS_OK, so a
 * case's failure is caused by its mutation alone.
 *
 * To add cases for a new function: write bi_args_/bi_init_/bi_call_ for it
 * and list BI_CASE lines; tests/bad_input_coverage.rs checks that every
 * function of include/lshk.h is named in some ffi_tests/bad_input_*.c.
 *
 * Set BAD_INPUT_VERBOSE=1 to print every case with its message. */
#ifndef LSHK_BAD_INPUT_H
#define LSHK_BAD_INPUT_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lshk_test.h"

typedef struct {
  void *p;
  size_t bytes;
} bi_region;

#define BI_MAX_OUT 8
typedef struct {
  bi_region r[BI_MAX_OUT];
  int n;
} bi_outs;

static int bi_cases = 0;
static int bi_failed = 0;
static int bi_baselines = 0;
static int bi_verbose = -1;

/* Registers an output region and fills it with the canary. */
static inline void bi_out(bi_outs *o, void *p, size_t bytes) {
  if (o->n >= BI_MAX_OUT) {
    fprintf(stderr, "bad_input.h: too many output regions\n");
    exit(2);
  }
  o->r[o->n].p = p;
  o->r[o->n].bytes = bytes;
  o->n++;
  lshk_fill_canary(p, bytes);
}

/* Leaves a last-error message that names another function, so a case can
 * tell that its own call recorded the message it finds. */
static inline void bi_prime(const char *fn) {
  if (strcmp(fn, "lshk_isa_set_max") != 0) {
    (void)lshk_isa_set_max(0xFFFFFFFFu);
  } else {
    (void)lshk_simhash_new(0, 0, 0, 0, 0, NULL);
  }
}

static inline int bi_is_verbose(void) {
  if (bi_verbose < 0) {
    const char *v = getenv("BAD_INPUT_VERBOSE");
    bi_verbose = v != NULL && v[0] != '\0' && v[0] != '0';
  }
  return bi_verbose;
}

/* Checks one case's outcome (see the file comment). */
static inline void bi_check(const char *file, int line, const char *fn,
                            const char *what, lshk_status got,
                            lshk_status want, const bi_outs *o) {
  char msg[1024];
  int ok = 1;
  msg[0] = '\0';
  bi_cases++;
  if (want != LSHK_STATUS_OK) lshk_last_error_message(msg, sizeof msg);
  if (got != want) {
    ok = 0;
    fprintf(stderr, "%s:%d: %s [%s]: returned %s, expected %s (message: %s)\n",
            file, line, fn, what, lshk_status_name(got),
            lshk_status_name(want), msg);
  } else if (want != LSHK_STATUS_OK) {
    size_t fl = strlen(fn);
    if (msg[0] == '\0') {
      ok = 0;
      fprintf(stderr, "%s:%d: %s [%s]: failed without a message\n", file,
              line, fn, what);
    } else if (strncmp(msg, fn, fl) != 0 || msg[fl] != ':') {
      ok = 0;
      fprintf(stderr,
              "%s:%d: %s [%s]: the message is not this call's: \"%s\"\n",
              file, line, fn, what, msg);
    }
  }
  for (int i = 0; i < o->n; i++) {
    if (!lshk_canary_intact(o->r[i].p, o->r[i].bytes)) {
      ok = 0;
      fprintf(stderr, "%s:%d: %s [%s]: output region %d (%zu bytes) written\n",
              file, line, fn, what, i, o->r[i].bytes);
    }
  }
  if (!ok) bi_failed++;
  if (bi_is_verbose())
    printf("  %-32s %-28s %-60s %s\n", fn, lshk_status_name(got), what,
           want == LSHK_STATUS_OK ? "" : msg);
}

#define BI_CASE(FN, WANT, ...) BI_CASE_(FN, WANT, #__VA_ARGS__, __VA_ARGS__)
#define BI_CASE_(FN, WANT, WHAT, ...)                                          \
  do {                                                                         \
    bi_args_##FN a;                                                            \
    bi_outs o_;                                                                \
    lshk_status s_;                                                            \
    memset(&a, 0, sizeof a);                                                   \
    memset(&o_, 0, sizeof o_);                                                 \
    bi_init_##FN(&a, &o_);                                                     \
    { __VA_ARGS__; }                                                           \
    bi_prime(#FN);                                                             \
    s_ = bi_call_##FN(&a);                                                     \
    bi_check(__FILE__, __LINE__, #FN, WHAT, s_, (WANT), &o_);                  \
  } while (0)

/* The unmutated call must succeed (outputs may be written). */
#define BI_BASELINE(FN) BI_BASELINE_(FN)
#define BI_BASELINE_(FN)                                                       \
  do {                                                                         \
    bi_args_##FN a;                                                            \
    bi_outs o_;                                                                \
    lshk_status s_;                                                            \
    memset(&a, 0, sizeof a);                                                   \
    memset(&o_, 0, sizeof o_);                                                 \
    bi_init_##FN(&a, &o_);                                                     \
    s_ = bi_call_##FN(&a);                                                     \
    bi_baselines++;                                                            \
    if (s_ != LSHK_STATUS_OK) {                                                \
      char m_[512];                                                            \
      lshk_last_error_message(m_, sizeof m_);                                  \
      bi_failed++;                                                             \
      fprintf(stderr, "%s:%d: baseline of %s returned %s (%s)\n", __FILE__,    \
              __LINE__, #FN, lshk_status_name(s_), m_);                        \
    }                                                                          \
  } while (0)

/* A plain assertion counted as a case (for functions without a status). */
#define BI_EXPECT(FN, cond) BI_EXPECT_(FN, #cond, cond)
#define BI_EXPECT_(FN, WHAT, cond)                                             \
  do {                                                                         \
    bi_cases++;                                                                \
    if (!(cond)) {                                                             \
      bi_failed++;                                                             \
      fprintf(stderr, "%s:%d: %s: %s does not hold\n", __FILE__, __LINE__,    \
              #FN, WHAT);                                                     \
    } else if (bi_is_verbose()) {                                              \
      printf("  %-32s %s\n", #FN, WHAT);                                      \
    }                                                                          \
  } while (0)

/* Prints "NAME: N cases, B baselines, F failed" plus the harness's
 * "passed, failed" line; returns the exit code. */
static inline int bi_summary(const char *name) {
  printf("%s: %d cases, %d baselines, %d failed\n", name, bi_cases,
         bi_baselines, bi_failed);
  printf("%s: %d passed, %d failed\n", name,
         bi_cases + bi_baselines - bi_failed, bi_failed);
  return bi_failed == 0 ? 0 : 1;
}

/* Returns p + 1 byte: a misaligned pointer of the same type. */
#define BI_MISALIGN(T, p) ((T *)(void *)((char *)(uintptr_t)(p) + 1))

/* A zeroed, aligned block that is no live handle (magic 0). */
static inline void *bi_garbage(void) {
  static uint64_t block[8];
  return block;
}
#define BI_GARBAGE(T) ((T *)bi_garbage())

#endif
