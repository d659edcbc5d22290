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

/* A case that applies only on CPUs without AVX-512 (UNSUPPORTED_ISA when
 * asking for the AVX-512 tier). On an AVX-512 CPU it is not run and is
 * listed (verbose) as "n/a", so that tests/bad_input_coverage.rs counts
 * the same matrix, and docs/hardening.md can quote one figure, whatever
 * CPU runs it. */
#define BI_CASE_NO_AVX512(FN, WANT, ...)                                       \
  BI_CASE_NO_AVX512_(FN, WANT, __VA_ARGS__)
#define BI_CASE_NO_AVX512_(FN, WANT, ...)                                      \
  do {                                                                         \
    if (lshk_isa_detected() < LSHK_ISA_AVX512) {                               \
      BI_CASE(FN, WANT, __VA_ARGS__);                                          \
    } else if (bi_is_verbose()) {                                              \
      printf("  %-32s %-28s %-60s %s\n", #FN, "n/a (CPU has AVX-512)",         \
             #__VA_ARGS__, "");                                                \
    }                                                                          \
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

/* Whether a case that makes lshk ask malloc for an impossible size may run:
 * AddressSanitizer aborts on such a request unless
 * ASAN_OPTIONS=allocator_may_return_null=1 (valgrind and plain runs are
 * fine). */
#if defined(__SANITIZE_ADDRESS__)
#define BI_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define BI_ASAN 1
#endif
#endif
static inline int bi_huge_alloc_ok(void) {
#ifdef BI_ASAN
  const char *o = getenv("ASAN_OPTIONS");
  if (o == NULL || strstr(o, "allocator_may_return_null=1") == NULL) {
    printf("skipped: ALLOCATION_FAILED case under AddressSanitizer (set "
           "ASAN_OPTIONS=allocator_may_return_null=1 to run it)\n");
    return 0;
  }
#endif
  return 1;
}

/* Returns p + 1 byte: a misaligned pointer of the same type. */
#define BI_MISALIGN(T, p) ((T *)(void *)((char *)(uintptr_t)(p) + 1))

/* A zeroed, aligned block that is no live handle (magic 0). */
static inline void *bi_garbage(void) {
  static uint64_t block[8];
  return block;
}
#define BI_GARBAGE(T) ((T *)bi_garbage())

/* A case expected to succeed whose outputs are written (no canary check):
 * "accepted" inputs such as a larger struct_size or a borrowed handle. */
#define BI_ACCEPT(FN, ...) BI_ACCEPT_(FN, #__VA_ARGS__, __VA_ARGS__)
#define BI_ACCEPT_(FN, WHAT, ...)                                              \
  do {                                                                         \
    bi_args_##FN a;                                                            \
    bi_outs o_;                                                                \
    lshk_status s_;                                                            \
    memset(&a, 0, sizeof a);                                                   \
    memset(&o_, 0, sizeof o_);                                                 \
    bi_init_##FN(&a, &o_);                                                     \
    { __VA_ARGS__; }                                                           \
    s_ = bi_call_##FN(&a);                                                     \
    o_.n = 0;                                                                  \
    bi_check(__FILE__, __LINE__, #FN, WHAT, s_, LSHK_STATUS_OK, &o_);          \
  } while (0)

/* ---- shared fixtures: live, freed, foreign and borrowed handles ------- */
#define BI_FX_ROWS 40
#define BI_FX_DIM 8
#define BI_FX_K 4
#define BI_FX_L 3
typedef struct {
  lshk_simhash *sh;        /* dim 8, K 4, L 3 */
  lshk_dwta *dw;           /* dim 16, K 2, L 3, B 4 */
  lshk_tables *tb;         /* n 40, L 3, range_bits 4 */
  lshk_index *idx;         /* SimHash index: 40 rows, dim 8, K 4, L 3 */
  lshk_index *idx_dw;      /* DWTA index: 40 rows, dim 8, K 2, L 3, B 4 */
  lshk_index *idx_ivf;     /* IVF index: 40 rows, dim 8, 4 lists, CODES_I8 */
  lshk_index *idx_graph;   /* graph index: 40 rows, dim 8, m 4 */
  lshk_index *idx_forest;  /* forest index: 40 rows, dim 8, 3 trees */
  const lshk_simhash *sh_borrowed; /* from idx */
  const lshk_dwta *dw_borrowed;    /* from idx_dw */
  const lshk_tables *tb_borrowed;  /* from idx */
  lshk_simhash *sh_freed;
  lshk_dwta *dw_freed;
  lshk_tables *tb_freed;
  lshk_index *idx_freed;
  const lshk_simhash *sh_dead; /* borrowed from an index since freed */
  const lshk_dwta *dw_dead;
  const lshk_tables *tb_dead;
  lshk_tables *tb_pool[6];  /* fresh tables for calls that change them */
  lshk_index *idx_pool[6];  /* fresh SimHash indexes, likewise */
  float w[BI_FX_ROWS * BI_FX_DIM];
  float bias[BI_FX_ROWS];
  uint32_t codes[BI_FX_ROWS * BI_FX_L];
} bi_fixtures;

static inline bi_fixtures *bi_fx(void) {
  static bi_fixtures f;
  return &f;
}

static inline void bi_fx_need(lshk_status s, const char *what) {
  if (s != LSHK_STATUS_OK) {
    char m[512];
    lshk_last_error_message(m, sizeof m);
    fprintf(stderr, "bad_input fixture %s failed: %s (%s)\n", what,
            lshk_status_name(s), m);
    exit(2);
  }
}

static inline lshk_index *bi_fx_index(uint32_t source) {
  bi_fixtures *f = bi_fx();
  lshk_index_params p = lshk_index_params_default();
  lshk_index *idx = NULL;
  p.source = source;
  p.lsh.bits_per_table = source == LSHK_SOURCE_DWTA ? 2 : BI_FX_K;
  p.lsh.tables = BI_FX_L;
  p.lsh.bin_size = 4;
  p.build_threads = 1;
  bi_fx_need(lshk_index_build(f->w, f->bias, BI_FX_ROWS, BI_FX_DIM, BI_FX_DIM,
                              &p, &idx),
             "lshk_index_build");
  return idx;
}

/* The fixture index of a source other than LSH, over the fixture rows
 * (with their bias; the forest ignores it for its sets). */
static inline lshk_index *bi_fx_source_index(uint32_t source) {
  bi_fixtures *f = bi_fx();
  lshk_index_params p = lshk_index_params_default();
  lshk_index *idx = NULL;
  p.source = source;
  p.build_threads = 1;
  p.ivf.nlist = 4;
  p.ivf.iters = 3;
  p.graph.m = 4;
  p.graph.ef_construction = 16;
  p.forest.trees = 3;
  p.forest.leaf_size = 6;
  bi_fx_need(lshk_index_build(f->w, f->bias, BI_FX_ROWS, BI_FX_DIM, BI_FX_DIM,
                              &p, &idx),
             "lshk_index_build");
  return idx;
}

static inline lshk_tables *bi_fx_tables(void) {
  lshk_tables *t = NULL;
  bi_fx_need(lshk_tables_build(bi_fx()->codes, BI_FX_ROWS, BI_FX_L, 4, 0, 7, 1,
                               &t),
             "lshk_tables_build");
  return t;
}

/* Creates every fixture. The retired and freed handles are made last: the
 * slot of a freed handle is reused by the next handle created, so no
 * handle may outlive the case that created it (bi_call_ functions free
 * what a call made). */
static inline void bi_fx_setup(void) {
  bi_fixtures *f = bi_fx();
  lshk_index *tmp;
  for (int i = 0; i < BI_FX_ROWS * BI_FX_DIM; i++)
    f->w[i] = (float)((i * 37) % 23) / 11.0f - 1.0f;
  for (int i = 0; i < BI_FX_ROWS; i++) f->bias[i] = 0.01f * (float)(i % 5);
  for (int i = 0; i < BI_FX_ROWS * BI_FX_L; i++)
    f->codes[i] = (uint32_t)((i * 2654435761u) >> 28);
  bi_fx_need(lshk_simhash_new(BI_FX_DIM, BI_FX_K, BI_FX_L, 0, 1, &f->sh),
             "lshk_simhash_new");
  bi_fx_need(lshk_dwta_new(16, 2, BI_FX_L, 4, 1, &f->dw), "lshk_dwta_new");
  f->tb = bi_fx_tables();
  f->idx = bi_fx_index(LSHK_SOURCE_SIMHASH);
  f->idx_dw = bi_fx_index(LSHK_SOURCE_DWTA);
  f->idx_ivf = bi_fx_source_index(LSHK_SOURCE_IVF);
  f->idx_graph = bi_fx_source_index(LSHK_SOURCE_GRAPH);
  f->idx_forest = bi_fx_source_index(LSHK_SOURCE_FOREST);
  bi_fx_need(lshk_index_simhash(f->idx, &f->sh_borrowed), "lshk_index_simhash");
  bi_fx_need(lshk_index_dwta(f->idx_dw, &f->dw_borrowed), "lshk_index_dwta");
  bi_fx_need(lshk_index_tables(f->idx, &f->tb_borrowed), "lshk_index_tables");
  for (int i = 0; i < 6; i++) {
    f->tb_pool[i] = bi_fx_tables();
    f->idx_pool[i] = bi_fx_index(LSHK_SOURCE_SIMHASH);
  }
  /* dead borrowed handles */
  tmp = bi_fx_index(LSHK_SOURCE_SIMHASH);
  bi_fx_need(lshk_index_simhash(tmp, &f->sh_dead), "lshk_index_simhash");
  bi_fx_need(lshk_index_tables(tmp, &f->tb_dead), "lshk_index_tables");
  bi_fx_need(lshk_index_free(tmp), "lshk_index_free");
  tmp = bi_fx_index(LSHK_SOURCE_DWTA);
  bi_fx_need(lshk_index_dwta(tmp, &f->dw_dead), "lshk_index_dwta");
  bi_fx_need(lshk_index_free(tmp), "lshk_index_free");
  /* freed handles */
  bi_fx_need(lshk_simhash_new(BI_FX_DIM, BI_FX_K, BI_FX_L, 0, 2, &f->sh_freed),
             "lshk_simhash_new");
  bi_fx_need(lshk_simhash_free(f->sh_freed), "lshk_simhash_free");
  bi_fx_need(lshk_dwta_new(16, 2, BI_FX_L, 4, 2, &f->dw_freed), "lshk_dwta_new");
  bi_fx_need(lshk_dwta_free(f->dw_freed), "lshk_dwta_free");
  f->tb_freed = bi_fx_tables();
  bi_fx_need(lshk_tables_free(f->tb_freed), "lshk_tables_free");
  f->idx_freed = bi_fx_index(LSHK_SOURCE_SIMHASH);
  bi_fx_need(lshk_index_free(f->idx_freed), "lshk_index_free");
}

static inline void bi_fx_teardown(void) {
  bi_fixtures *f = bi_fx();
  bi_fx_need(lshk_simhash_free(f->sh), "lshk_simhash_free");
  bi_fx_need(lshk_dwta_free(f->dw), "lshk_dwta_free");
  bi_fx_need(lshk_tables_free(f->tb), "lshk_tables_free");
  bi_fx_need(lshk_index_free(f->idx), "lshk_index_free");
  bi_fx_need(lshk_index_free(f->idx_dw), "lshk_index_free");
  bi_fx_need(lshk_index_free(f->idx_ivf), "lshk_index_free");
  bi_fx_need(lshk_index_free(f->idx_graph), "lshk_index_free");
  bi_fx_need(lshk_index_free(f->idx_forest), "lshk_index_free");
  for (int i = 0; i < 6; i++) {
    bi_fx_need(lshk_tables_free(f->tb_pool[i]), "lshk_tables_free");
    bi_fx_need(lshk_index_free(f->idx_pool[i]), "lshk_index_free");
  }
}

/* The slot freed last is reused first, by a handle of any type: an index
 * that a program builds (or loads) after bi_fx_setup() and keeps past a
 * case could take the slot of idx_freed and make it a live index again.
 * Bracket such fixtures with bi_fx_hold() ... bi_fx_unhold(h): a
 * placeholder handle takes that slot meanwhile and gives it back freed. */
static inline lshk_simhash *bi_fx_hold(void) {
  lshk_simhash *h = NULL;
  bi_fx_need(lshk_simhash_new(BI_FX_DIM, 1, 1, 0, 3, &h), "lshk_simhash_new");
  return h;
}
static inline void bi_fx_unhold(lshk_simhash *h) {
  bi_fx_need(lshk_simhash_free(h), "lshk_simhash_free");
}

/* The invalid-handle classes for argument FIELD of type T (a live handle
 * LIVE of that type is needed for the misaligned variant): NULL, freed,
 * borrowed-then-retired, foreign (other handle kinds cast), garbage and
 * misaligned. */
#define BI_HANDLE_CASES(FN, FIELD, T, FREED, DEAD, LIVE, FOREIGN1, FOREIGN2)  \
  do {                                                                         \
    BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.FIELD = NULL);                     \
    BI_CASE(FN, LSHK_STATUS_INVALID_HANDLE, a.FIELD = (T *)(FREED));           \
    if ((DEAD) != NULL)                                                        \
      BI_CASE(FN, LSHK_STATUS_INVALID_HANDLE, a.FIELD = (T *)(DEAD));          \
    BI_CASE(FN, LSHK_STATUS_INVALID_HANDLE,                                    \
            a.FIELD = (T *)(void *)(FOREIGN1));                                \
    BI_CASE(FN, LSHK_STATUS_INVALID_HANDLE,                                    \
            a.FIELD = (T *)(void *)(FOREIGN2));                                \
    BI_CASE(FN, LSHK_STATUS_INVALID_HANDLE, a.FIELD = BI_GARBAGE(T));          \
    BI_CASE(FN, LSHK_STATUS_INVALID_HANDLE, a.FIELD = BI_MISALIGN(T, LIVE));   \
  } while (0)
#define BI_SIMHASH_CASES(FN, FIELD, T)                                         \
  BI_HANDLE_CASES(FN, FIELD, T, bi_fx()->sh_freed, bi_fx()->sh_dead,          \
                  bi_fx()->sh, bi_fx()->dw, bi_fx()->tb)
#define BI_DWTA_CASES(FN, FIELD, T)                                            \
  BI_HANDLE_CASES(FN, FIELD, T, bi_fx()->dw_freed, bi_fx()->dw_dead,          \
                  bi_fx()->dw, bi_fx()->sh, bi_fx()->idx)
#define BI_TABLES_CASES(FN, FIELD, T)                                          \
  BI_HANDLE_CASES(FN, FIELD, T, bi_fx()->tb_freed, bi_fx()->tb_dead,          \
                  bi_fx()->tb, bi_fx()->sh, bi_fx()->idx)
#define BI_INDEX_CASES(FN, FIELD, T)                                           \
  BI_HANDLE_CASES(FN, FIELD, T, bi_fx()->idx_freed, (T *)NULL, bi_fx()->idx,  \
                  bi_fx()->tb, bi_fx()->sh)

#endif
