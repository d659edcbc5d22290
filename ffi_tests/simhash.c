/* C tests of the SimHash entry points and of the common C ABI functions
 * (status names, last-error message, version, ISA tiers).
 *
 * Every status code a SimHash entry point can return is provoked, each with
 * a canary proving the outputs were not written; LSHK_STATUS_PANIC cannot
 * be provoked without a bug, and INDEX_OUT_OF_RANGE, IO_ERROR and
 * BAD_FILE_FORMAT are not returned by SimHash.
 *
 * Built and run by tests/c_abi.rs (gcc and clang, -std=c11 -Wall -Wextra
 * -Werror -pedantic); by hand:
 *   cargo build && gcc -std=c11 -Wall -Wextra -Werror -pedantic -Iinclude \
 *     -Iffi_tests ffi_tests/simhash.c -Ltarget/debug -llshk \
 *     -Wl,-rpath,$PWD/target/debug -o /tmp/simhash && /tmp/simhash */
#include <math.h> /* NAN, INFINITY, isnan: macros only, no libm needed */

#include "lshk_test.h"

enum { DIM = 37, K = 7, L = 5, N = 6, NP = K * L };

static float absf(float v) { return v < 0 ? -v : v; }

/* Deterministic test data in [-1, 1). */
static uint64_t rng_state = 12345;
static float next_float(void) {
  rng_state = rng_state * 6364136223846793005u + 1442695040888963407u;
  return (float)((double)(rng_state >> 40) / (double)(1u << 24)) * 2.0f - 1.0f;
}

/* A stand-in for "some pointer the caller got from somewhere": the value of
 * an output handle before a call that must not write it. */
static char handle_sentinel;
#define SENTINEL ((lshk_simhash *)(void *)&handle_sentinel)

static void test_status_names(void) {
  static const char *const names[] = {
      "LSHK_STATUS_OK",
      "LSHK_STATUS_NULL_POINTER",
      "LSHK_STATUS_INVALID_ARGUMENT",
      "LSHK_STATUS_BUFFER_TOO_SMALL",
      "LSHK_STATUS_INDEX_OUT_OF_RANGE",
      "LSHK_STATUS_UNSUPPORTED_ISA",
      "LSHK_STATUS_IO_ERROR",
      "LSHK_STATUS_BAD_FILE_FORMAT",
      "LSHK_STATUS_ALLOCATION_FAILED",
      "LSHK_STATUS_PANIC",
      "LSHK_STATUS_INVALID_HANDLE",
      "LSHK_STATUS_SIZE_OVERFLOW",
      "LSHK_STATUS_NON_FINITE",
      "LSHK_STATUS_UNSUPPORTED",
  };
  static const lshk_status codes[] = {
      LSHK_STATUS_OK,
      LSHK_STATUS_NULL_POINTER,
      LSHK_STATUS_INVALID_ARGUMENT,
      LSHK_STATUS_BUFFER_TOO_SMALL,
      LSHK_STATUS_INDEX_OUT_OF_RANGE,
      LSHK_STATUS_UNSUPPORTED_ISA,
      LSHK_STATUS_IO_ERROR,
      LSHK_STATUS_BAD_FILE_FORMAT,
      LSHK_STATUS_ALLOCATION_FAILED,
      LSHK_STATUS_PANIC,
      LSHK_STATUS_INVALID_HANDLE,
      LSHK_STATUS_SIZE_OVERFLOW,
      LSHK_STATUS_NON_FINITE,
      LSHK_STATUS_UNSUPPORTED,
  };
  for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++) {
    CHECK(codes[i] == (lshk_status)i); /* the values are part of the ABI */
    CHECK(lshk_status_name(codes[i]) != NULL);
    CHECK(strcmp(lshk_status_name(codes[i]), names[i]) == 0);
  }
  CHECK(strcmp(lshk_status_name(14), "LSHK_STATUS_UNKNOWN") == 0);
  CHECK(strcmp(lshk_status_name(0xFFFFFFFFu), "LSHK_STATUS_UNKNOWN") == 0);
}

static void test_version(void) {
  CHECK(strcmp(lshk_version(), LSHK_VERSION_STRING) == 0);
  char expect[64];
  snprintf(expect, sizeof expect, "%d.%d.%d", LSHK_VERSION_MAJOR,
           LSHK_VERSION_MINOR, LSHK_VERSION_PATCH);
  CHECK(strcmp(lshk_version(), expect) == 0);
}

/* Must run before any call fails on this thread. */
static void test_last_error_initially_empty(void) {
  char buf[8];
  memset(buf, 'x', sizeof buf);
  CHECK(lshk_last_error_message(NULL, 0) == 0);
  CHECK(lshk_last_error_message(buf, sizeof buf) == 0);
  CHECK(buf[0] == '\0' && buf[1] == 'x');
}

static void test_last_error_message(void) {
  lshk_simhash *h = SENTINEL;
  CHECK(lshk_simhash_new(0, K, L, 0, 1, &h) == LSHK_STATUS_INVALID_ARGUMENT);
  CHECK(h == SENTINEL);

  size_t len = lshk_last_error_message(NULL, 0);
  CHECK(len > 0);
  char full[512];
  CHECK(len < sizeof full);
  memset(full, 'x', sizeof full);
  CHECK(lshk_last_error_message(full, sizeof full) == len);
  CHECK(strlen(full) == len);
  CHECK(strstr(full, "lshk_simhash_new") != NULL); /* names the function */
  CHECK(strstr(full, "dim") != NULL);              /* and the culprit */

  /* Exactly fitting buffer: len + 1 bytes. */
  char *exact = malloc(len + 1);
  CHECK(exact != NULL);
  if (exact) {
    memset(exact, 'x', len + 1);
    CHECK(lshk_last_error_message(exact, len + 1) == len);
    CHECK(memcmp(exact, full, len + 1) == 0);
    free(exact);
  }

  /* Short buffer: NUL-terminated prefix of buf_len - 1 bytes; the bytes
   * after the terminator are not touched. */
  char small[8];
  memset(small, 'x', sizeof small);
  CHECK(lshk_last_error_message(small, 5) == len);
  CHECK(small[4] == '\0' && memcmp(small, full, 4) == 0);
  CHECK(small[5] == 'x' && small[6] == 'x' && small[7] == 'x');

  /* buf_len 1: only the terminator fits. */
  char one[2] = {'x', 'x'};
  CHECK(lshk_last_error_message(one, 1) == len);
  CHECK(one[0] == '\0' && one[1] == 'x');

  /* NULL with length 0 is the size query and writes nothing. */
  CHECK(lshk_last_error_message(NULL, 0) == len);

  /* A successful call keeps the last message. */
  CHECK(lshk_simhash_new(DIM, K, L, 0, 1, &h) == LSHK_STATUS_OK);
  CHECK(lshk_last_error_message(NULL, 0) == len);
  EXPECT_OK(lshk_simhash_free(h));
  CHECK(lshk_last_error_message(NULL, 0) == len);

  /* The next failure replaces it. */
  CHECK(lshk_simhash_new(DIM, 33, L, 0, 1, &h) == LSHK_STATUS_INVALID_ARGUMENT);
  lshk_last_error_message(full, sizeof full);
  CHECK(strstr(full, "33") != NULL);
}

static void test_isa(void) {
  lshk_isa detected = lshk_isa_detected();
  lshk_isa active = lshk_isa_active();
  CHECK(detected <= LSHK_ISA_AVX512);
  CHECK(active <= detected);
  printf("isa: detected %s, active %s\n", lshk_isa_name(detected),
         lshk_isa_name(active));
  CHECK(strcmp(lshk_isa_name(LSHK_ISA_SCALAR), "scalar") == 0);
  CHECK(strcmp(lshk_isa_name(LSHK_ISA_PORTABLE), "portable") == 0);
  CHECK(strcmp(lshk_isa_name(LSHK_ISA_AVX2), "avx2") == 0);
  CHECK(strcmp(lshk_isa_name(LSHK_ISA_AVX512), "avx512") == 0);
  CHECK(strcmp(lshk_isa_name(4), "unknown") == 0);
  CHECK(strcmp(lshk_isa_name(7), "unknown") == 0);
  CHECK(strcmp(lshk_isa_name(0xFFFFFFFFu), "unknown") == 0);

  EXPECT_STATUS(lshk_isa_set_max(7), LSHK_STATUS_INVALID_ARGUMENT);
  EXPECT_STATUS(lshk_isa_set_max(4), LSHK_STATUS_INVALID_ARGUMENT);
  CHECK(lshk_isa_active() == active); /* a rejected value changes nothing */

  /* Lowering... */
  EXPECT_OK(lshk_isa_set_max(LSHK_ISA_SCALAR));
  CHECK(lshk_isa_active() == LSHK_ISA_SCALAR);
  CHECK(lshk_isa_detected() == detected); /* detection ignores the cap */
  EXPECT_OK(lshk_isa_set_max(LSHK_ISA_PORTABLE));
  CHECK(lshk_isa_active() ==
        (active < LSHK_ISA_PORTABLE ? active : LSHK_ISA_PORTABLE));

  /* ...the explicit-tier entry points ignore the cap... */
  if (detected >= LSHK_ISA_AVX2) {
    lshk_simhash *h = NULL;
    float x[DIM];
    uint32_t codes[L];
    for (int j = 0; j < DIM; j++) x[j] = next_float();
    EXPECT_OK(lshk_simhash_new(DIM, K, L, 0, 9, &h));
    EXPECT_OK(lshk_simhash_hash_isa(LSHK_ISA_AVX2, h, x, 1, DIM, codes, L));
    EXPECT_OK(lshk_simhash_free(h));
  }

  /* ...and raising it back (asking for more than the CPU has is fine)
   * restores the tier the process started with (LSHK_MAX_ISA still
   * applies). */
  EXPECT_OK(lshk_isa_set_max(LSHK_ISA_AVX512));
  CHECK(lshk_isa_active() == active);
}

static void test_new_errors(void) {
  lshk_simhash *h = SENTINEL;
  EXPECT_STATUS(lshk_simhash_new(DIM, K, L, 0, 1, NULL),
                LSHK_STATUS_NULL_POINTER);
  EXPECT_STATUS(lshk_simhash_new(0, K, L, 0, 1, &h),
                LSHK_STATUS_INVALID_ARGUMENT);
  EXPECT_STATUS(lshk_simhash_new(DIM, 0, L, 0, 1, &h),
                LSHK_STATUS_INVALID_ARGUMENT);
  EXPECT_STATUS(lshk_simhash_new(DIM, 33, L, 0, 1, &h),
                LSHK_STATUS_INVALID_ARGUMENT);
  EXPECT_STATUS(lshk_simhash_new(DIM, K, 0, 0, 1, &h),
                LSHK_STATUS_INVALID_ARGUMENT);
  EXPECT_STATUS(lshk_simhash_new(DIM, K, 0, 3, 1, &h),
                LSHK_STATUS_INVALID_ARGUMENT);
  /* K*L*dim = 32 * (2^32-1) * (2^32-1) does not fit in 64 bits. */
  EXPECT_STATUS(lshk_simhash_new(0xFFFFFFFFu, 32, 0xFFFFFFFFu, 0, 1, &h),
                LSHK_STATUS_SIZE_OVERFLOW);
  /* 2^50 floats = 4 PiB: fits in size_t, no address space holds it. */
  EXPECT_STATUS(lshk_simhash_new(1u << 24, 32, 1u << 21, 0, 1, &h),
                LSHK_STATUS_ALLOCATION_FAILED);
  CHECK(h == SENTINEL);
}

static void test_from_planes_errors(void) {
  static float planes[NP * DIM];
  for (int i = 0; i < NP * DIM; i++) planes[i] = next_float();
  lshk_simhash *h = SENTINEL;
  EXPECT_STATUS(lshk_simhash_from_planes(NULL, DIM, K, L, &h),
                LSHK_STATUS_NULL_POINTER);
  EXPECT_STATUS(lshk_simhash_from_planes(planes, DIM, K, L, NULL),
                LSHK_STATUS_NULL_POINTER);
  EXPECT_STATUS(lshk_simhash_from_planes(planes, 0, K, L, &h),
                LSHK_STATUS_INVALID_ARGUMENT);
  EXPECT_STATUS(lshk_simhash_from_planes(planes, DIM, 0, L, &h),
                LSHK_STATUS_INVALID_ARGUMENT);
  EXPECT_STATUS(lshk_simhash_from_planes(planes, DIM, 33, L, &h),
                LSHK_STATUS_INVALID_ARGUMENT);
  EXPECT_STATUS(lshk_simhash_from_planes(planes, DIM, K, 0, &h),
                LSHK_STATUS_INVALID_ARGUMENT);
  EXPECT_STATUS(
      lshk_simhash_from_planes(planes, 0xFFFFFFFFu, 32, 0xFFFFFFFFu, &h),
      LSHK_STATUS_SIZE_OVERFLOW);
  float keep = planes[5 * DIM + 3];
  planes[5 * DIM + 3] = NAN;
  EXPECT_STATUS(lshk_simhash_from_planes(planes, DIM, K, L, &h),
                LSHK_STATUS_NON_FINITE);
  planes[5 * DIM + 3] = -INFINITY;
  EXPECT_STATUS(lshk_simhash_from_planes(planes, DIM, K, L, &h),
                LSHK_STATUS_NON_FINITE);
  planes[NP * DIM - 1] = INFINITY; /* the very last value is checked too */
  planes[5 * DIM + 3] = keep;
  EXPECT_STATUS(lshk_simhash_from_planes(planes, DIM, K, L, &h),
                LSHK_STATUS_NON_FINITE);
  CHECK(h == SENTINEL);
}

typedef lshk_status (*hash_fn)(lshk_isa, const lshk_simhash *, const float *,
                               size_t, size_t, uint32_t *, size_t);
typedef lshk_status (*project_fn)(lshk_isa, const lshk_simhash *,
                                  const float *, size_t, size_t, float *,
                                  size_t);
/* The active-tier entry points with the _isa signature (isa ignored). */
static lshk_status hash_active(lshk_isa isa, const lshk_simhash *h,
                               const float *x, size_t n, size_t stride,
                               uint32_t *codes, size_t len) {
  (void)isa;
  return lshk_simhash_hash(h, x, n, stride, codes, len);
}
static lshk_status project_active(lshk_isa isa, const lshk_simhash *h,
                                  const float *x, size_t n, size_t stride,
                                  float *out, size_t len) {
  (void)isa;
  return lshk_simhash_project(h, x, n, stride, out, len);
}

/* Every input/output error of hash and project (active tier and _isa on
 * scalar), each leaving the output untouched. */
static void test_hash_project_errors(const lshk_simhash *h) {
  static float x[N * DIM + 1];
  for (int i = 0; i < N * DIM + 1; i++) x[i] = next_float();
  uint32_t codes[N * L + 4];
  float proj[N * NP + 4];
  const hash_fn hashes[2] = {hash_active, lshk_simhash_hash_isa};
  const project_fn projects[2] = {project_active, lshk_simhash_project_isa};
  const size_t huge = SIZE_MAX / 2; /* (huge - 1) * DIM overflows */

  for (int v = 0; v < 2; v++) {
    hash_fn hf = hashes[v];
    project_fn pf = projects[v];
    const lshk_isa t = LSHK_ISA_SCALAR;

    lshk_fill_canary(codes, sizeof codes);
    lshk_fill_canary(proj, sizeof proj);

    EXPECT_STATUS(hf(t, NULL, x, N, DIM, codes, N * L),
                  LSHK_STATUS_NULL_POINTER);
    EXPECT_STATUS(hf(t, h, NULL, N, DIM, codes, N * L),
                  LSHK_STATUS_NULL_POINTER);
    EXPECT_STATUS(hf(t, h, x, N, DIM, NULL, N * L), LSHK_STATUS_NULL_POINTER);
    EXPECT_STATUS(hf(t, h, x, N, DIM - 1, codes, N * L),
                  LSHK_STATUS_INVALID_ARGUMENT);
    EXPECT_STATUS(hf(t, h, x, N, 0, codes, N * L),
                  LSHK_STATUS_INVALID_ARGUMENT);
    EXPECT_STATUS(hf(t, h, x, N, DIM, codes, N * L - 1),
                  LSHK_STATUS_BUFFER_TOO_SMALL);
    EXPECT_STATUS(hf(t, h, x, N, DIM, codes, 0), LSHK_STATUS_BUFFER_TOO_SMALL);
    EXPECT_STATUS(hf(t, h, x, N, DIM, NULL, 0), LSHK_STATUS_BUFFER_TOO_SMALL);
    EXPECT_STATUS(hf(t, h, x, huge, DIM, codes, N * L),
                  LSHK_STATUS_SIZE_OVERFLOW);
    EXPECT_STATUS(hf(t, h, x, 2, huge, codes, N * L),
                  LSHK_STATUS_SIZE_OVERFLOW);
    CHECK(lshk_canary_intact(codes, sizeof codes));

    EXPECT_STATUS(pf(t, NULL, x, N, DIM, proj, N * NP),
                  LSHK_STATUS_NULL_POINTER);
    EXPECT_STATUS(pf(t, h, NULL, N, DIM, proj, N * NP),
                  LSHK_STATUS_NULL_POINTER);
    EXPECT_STATUS(pf(t, h, x, N, DIM, NULL, N * NP), LSHK_STATUS_NULL_POINTER);
    EXPECT_STATUS(pf(t, h, x, N, DIM - 1, proj, N * NP),
                  LSHK_STATUS_INVALID_ARGUMENT);
    EXPECT_STATUS(pf(t, h, x, N, DIM, proj, N * NP - 1),
                  LSHK_STATUS_BUFFER_TOO_SMALL);
    EXPECT_STATUS(pf(t, h, x, huge, DIM, proj, N * NP),
                  LSHK_STATUS_SIZE_OVERFLOW);
    CHECK(lshk_canary_intact(proj, sizeof proj));

    /* n = 0 is a no-op: NULL buffers are fine and nothing is written. */
    EXPECT_OK(hf(t, h, NULL, 0, DIM, NULL, 0));
    EXPECT_OK(hf(t, h, x, 0, DIM, codes, N * L));
    EXPECT_OK(pf(t, h, NULL, 0, DIM, NULL, 0));
    EXPECT_OK(pf(t, h, x, 0, DIM, proj, N * NP));
    CHECK(lshk_canary_intact(codes, sizeof codes));
    CHECK(lshk_canary_intact(proj, sizeof proj));
  }

  /* n*L overflows while the input span does not (a 1-dim family). */
  {
    lshk_simhash *h1 = NULL;
    EXPECT_OK(lshk_simhash_new(1, 1, 4, 0, 3, &h1));
    lshk_fill_canary(codes, sizeof codes);
    EXPECT_STATUS(lshk_simhash_hash(h1, x, SIZE_MAX / 2, 1, codes, N * L),
                  LSHK_STATUS_SIZE_OVERFLOW);
    CHECK(lshk_canary_intact(codes, sizeof codes));
    EXPECT_OK(lshk_simhash_free(h1));
  }

  /* Tier values arrive as uint32_t and are validated. */
  lshk_fill_canary(codes, sizeof codes);
  lshk_fill_canary(proj, sizeof proj);
  const lshk_isa bad[] = {4, 7, 0xFFFFFFFFu};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    EXPECT_STATUS(lshk_simhash_hash_isa(bad[i], h, x, N, DIM, codes, N * L),
                  LSHK_STATUS_INVALID_ARGUMENT);
    EXPECT_STATUS(
        lshk_simhash_project_isa(bad[i], h, x, N, DIM, proj, N * NP),
        LSHK_STATUS_INVALID_ARGUMENT);
  }
  if (lshk_isa_detected() < LSHK_ISA_AVX512) {
    EXPECT_STATUS(
        lshk_simhash_hash_isa(LSHK_ISA_AVX512, h, x, N, DIM, codes, N * L),
        LSHK_STATUS_UNSUPPORTED_ISA);
    EXPECT_STATUS(
        lshk_simhash_project_isa(LSHK_ISA_AVX512, h, x, N, DIM, proj, N * NP),
        LSHK_STATUS_UNSUPPORTED_ISA);
  } else {
    printf("skipped: UNSUPPORTED_ISA case (this CPU has every tier)\n");
  }
  CHECK(lshk_canary_intact(codes, sizeof codes));
  CHECK(lshk_canary_intact(proj, sizeof proj));

  /* copy_planes and shape. */
  static float planes[NP * DIM + 4];
  lshk_fill_canary(planes, sizeof planes);
  EXPECT_STATUS(lshk_simhash_copy_planes(NULL, planes, NP * DIM),
                LSHK_STATUS_NULL_POINTER);
  EXPECT_STATUS(lshk_simhash_copy_planes(h, NULL, NP * DIM),
                LSHK_STATUS_NULL_POINTER);
  EXPECT_STATUS(lshk_simhash_copy_planes(h, planes, NP * DIM - 1),
                LSHK_STATUS_BUFFER_TOO_SMALL);
  EXPECT_STATUS(lshk_simhash_copy_planes(h, NULL, 0),
                LSHK_STATUS_BUFFER_TOO_SMALL);
  CHECK(lshk_canary_intact(planes, sizeof planes));
  uint32_t d = 0xA5A5A5A5u, k = 0xA5A5A5A5u, l = 0xA5A5A5A5u;
  EXPECT_STATUS(lshk_simhash_shape(NULL, &d, &k, &l), LSHK_STATUS_NULL_POINTER);
  CHECK(d == 0xA5A5A5A5u && k == 0xA5A5A5A5u && l == 0xA5A5A5A5u);
}

/* A freed handle and a foreign pointer are rejected by every entry point. */
static void test_invalid_handles(void) {
  static float x[N * DIM];
  static float planes[NP * DIM];
  uint32_t codes[N * L];
  float proj[N * NP];
  uint32_t d = 0xA5A5A5A5u;
  for (int i = 0; i < N * DIM; i++) x[i] = next_float();
  /* Zeroed, aligned memory that was never a handle. */
  static uint64_t foreign_mem[4];
  const lshk_simhash *foreign = (const lshk_simhash *)(void *)foreign_mem;

  lshk_simhash *h = NULL;
  EXPECT_OK(lshk_simhash_new(DIM, K, L, 0, 5, &h));
  EXPECT_OK(lshk_simhash_free(h));
  /* No lshk_simhash_new before these calls: the freed slot is not reused
   * (detection of stale handles is best effort once slots are reused). */
  const lshk_simhash *bad[2] = {h, foreign};
  for (int b = 0; b < 2; b++) {
    lshk_fill_canary(codes, sizeof codes);
    lshk_fill_canary(proj, sizeof proj);
    lshk_fill_canary(planes, sizeof planes);
    EXPECT_STATUS(lshk_simhash_hash(bad[b], x, N, DIM, codes, N * L),
                  LSHK_STATUS_INVALID_HANDLE);
    EXPECT_STATUS(lshk_simhash_hash_isa(LSHK_ISA_SCALAR, bad[b], x, N, DIM,
                                        codes, N * L),
                  LSHK_STATUS_INVALID_HANDLE);
    EXPECT_STATUS(lshk_simhash_project(bad[b], x, N, DIM, proj, N * NP),
                  LSHK_STATUS_INVALID_HANDLE);
    EXPECT_STATUS(lshk_simhash_project_isa(LSHK_ISA_SCALAR, bad[b], x, N, DIM,
                                           proj, N * NP),
                  LSHK_STATUS_INVALID_HANDLE);
    EXPECT_STATUS(lshk_simhash_copy_planes(bad[b], planes, NP * DIM),
                  LSHK_STATUS_INVALID_HANDLE);
    EXPECT_STATUS(lshk_simhash_shape(bad[b], &d, NULL, NULL),
                  LSHK_STATUS_INVALID_HANDLE);
    EXPECT_STATUS(lshk_simhash_free((lshk_simhash *)(uintptr_t)bad[b]),
                  LSHK_STATUS_INVALID_HANDLE);
    CHECK(lshk_canary_intact(codes, sizeof codes));
    CHECK(lshk_canary_intact(proj, sizeof proj));
    CHECK(lshk_canary_intact(planes, sizeof planes));
    CHECK(d == 0xA5A5A5A5u);
  }
  CHECK(foreign_mem[0] == 0 && foreign_mem[1] == 0); /* not written either */
  EXPECT_OK(lshk_simhash_free(NULL));
}

/* Sum over j of |x_j * p_j|: the scale of a projection's rounding error. */
static float abs_dot(const float *x, const float *p, int dim) {
  float s = 0;
  for (int j = 0; j < dim; j++) s += absf(x[j] * p[j]);
  return s;
}

/* Compares codes with the signs of projections, on every tier the CPU has.
 * A bit may differ only where |projection| is within rounding of zero:
 * bound 2 * dim * 2^-24 * sum|x_j p_j| (two independently rounded sums). */
static void check_hash_matches_project(const lshk_simhash *h, const float *x,
                                       size_t n, size_t stride) {
  uint32_t dim = 0, k = 0, l = 0;
  EXPECT_OK(lshk_simhash_shape(h, &dim, &k, &l));
  size_t np = (size_t)k * l;
  float *planes = malloc(np * dim * sizeof(float));
  float *proj = malloc(n * np * sizeof(float));
  uint32_t *codes = malloc(n * l * sizeof(uint32_t));
  CHECK(planes && proj && codes);
  if (!planes || !proj || !codes) goto out;
  EXPECT_OK(lshk_simhash_copy_planes(h, planes, np * dim));
  for (lshk_isa t = 0; t <= LSHK_ISA_AVX512; t++) {
    if (t > lshk_isa_detected()) {
      static int told[LSHK_ISA_AVX512 + 1];
      if (!told[t]++)
        printf("skipped: %s tier (CPU lacks it%s)\n", lshk_isa_name(t),
               t == LSHK_ISA_AVX512 ? ": avx512f/bw/dq/vl" : "");
      continue;
    }
    EXPECT_OK(lshk_simhash_hash_isa(t, h, x, n, stride, codes, n * l));
    EXPECT_OK(lshk_simhash_project_isa(t, h, x, n, stride, proj, n * np));
    size_t excused = 0, wrong = 0;
    for (size_t i = 0; i < n; i++) {
      for (uint32_t tl = 0; tl < l; tl++) {
        uint32_t c = codes[i * l + tl];
        if (k < 32 && (c >> k) != 0) wrong++; /* bits above K are 0 */
        for (uint32_t b = 0; b < k; b++) {
          size_t p = (size_t)tl * k + b;
          float v = proj[i * np + p];
          int want = v > 0;
          int got = (int)((c >> b) & 1u);
          if (want == got) continue;
          float bound = 2.0f * (float)dim / 16777216.0f *
                        abs_dot(x + i * stride, planes + p * dim, (int)dim);
          if (absf(v) <= bound)
            excused++;
          else
            wrong++;
        }
      }
    }
    CHECK(wrong == 0);
    if (wrong || excused)
      printf("hash vs project (%s, dim %u, K %u, L %u): %zu wrong, %zu "
             "near-zero bits excused\n",
             lshk_isa_name(t), dim, k, l, wrong, excused);
  }
out:
  free(planes);
  free(proj);
  free(codes);
}

static void test_happy_paths(void) {
  const uint32_t sparsities[] = {0, 1, 3};
  const size_t stride = DIM + 3;
  /* One extra float so that x + 1 (4-byte aligned, not 32) also holds N
   * rows: unaligned input. Padding between rows is NaN: never read. */
  static float x[N * (DIM + 3) + 1];
  for (size_t i = 0; i < sizeof x / sizeof x[0]; i++) x[i] = NAN;
  for (int i = 0; i < N; i++)
    for (int j = 0; j < DIM; j++) x[1 + i * stride + j] = next_float();
  static float compact[N * DIM];
  for (int i = 0; i < N; i++)
    memcpy(compact + i * DIM, x + 1 + i * stride, DIM * sizeof(float));

  for (size_t s = 0; s < sizeof sparsities / sizeof sparsities[0]; s++) {
    lshk_simhash *h = NULL;
    EXPECT_OK(lshk_simhash_new(DIM, K, L, sparsities[s], 77, &h));
    if (!h) continue;
    uint32_t d = 0, k = 0, l = 0;
    EXPECT_OK(lshk_simhash_shape(h, &d, &k, &l));
    CHECK(d == DIM && k == K && l == L);
    EXPECT_OK(lshk_simhash_shape(h, NULL, NULL, NULL));

    check_hash_matches_project(h, x + 1, N, stride);
    check_hash_matches_project(h, compact, N, DIM);

    /* Strided, unaligned input gives the same codes as compact rows. */
    uint32_t a[N * L], b[N * L];
    EXPECT_OK(lshk_simhash_hash(h, x + 1, N, stride, a, N * L));
    EXPECT_OK(lshk_simhash_hash(h, compact, N, DIM, b, N * L));
    CHECK(memcmp(a, b, sizeof a) == 0);

    /* A larger codes buffer: only n*L entries are written. */
    uint32_t big[N * L + 3];
    lshk_fill_canary(big, sizeof big);
    EXPECT_OK(lshk_simhash_hash(h, compact, N, DIM, big, N * L + 3));
    CHECK(memcmp(big, b, sizeof b) == 0);
    CHECK(lshk_canary_intact(big + N * L, 3 * sizeof(uint32_t)));

    /* Same seed, same planes; another seed, other planes. */
    static float p1[NP * DIM], p2[NP * DIM];
    lshk_simhash *h2 = NULL, *h3 = NULL;
    EXPECT_OK(lshk_simhash_new(DIM, K, L, sparsities[s], 77, &h2));
    EXPECT_OK(lshk_simhash_new(DIM, K, L, sparsities[s], 78, &h3));
    EXPECT_OK(lshk_simhash_copy_planes(h, p1, NP * DIM));
    EXPECT_OK(lshk_simhash_copy_planes(h2, p2, NP * DIM));
    CHECK(memcmp(p1, p2, sizeof p1) == 0);
    EXPECT_OK(lshk_simhash_copy_planes(h3, p2, NP * DIM));
    CHECK(memcmp(p1, p2, sizeof p1) != 0);
    EXPECT_OK(lshk_simhash_free(h2));
    EXPECT_OK(lshk_simhash_free(h3));

    /* Sparse planes: exactly ceil(dim/s) nonzeros per plane, each ±1. */
    if (sparsities[s] >= 1) {
      int nnz_ok = 1;
      for (int p = 0; p < NP; p++) {
        int nnz = 0;
        for (int j = 0; j < DIM; j++) {
          float v = p1[p * DIM + j];
          if (v != 0) nnz++;
          if (v != 0 && v != 1 && v != -1) nnz_ok = 0;
        }
        int want = sparsities[s] == 1 ? DIM
                                      : (DIM + (int)sparsities[s] - 1) /
                                            (int)sparsities[s];
        if (nnz != want) nnz_ok = 0;
      }
      CHECK(nnz_ok);
    }

    /* from_planes(copy_planes(h)) round-trips the planes, and for a dense
     * family the codes on every tier (same planes, same kernels). */
    lshk_simhash *r = NULL;
    EXPECT_OK(lshk_simhash_from_planes(p1, DIM, K, L, &r));
    if (r) {
      EXPECT_OK(lshk_simhash_copy_planes(r, p2, NP * DIM));
      CHECK(memcmp(p1, p2, sizeof p1) == 0);
      if (sparsities[s] == 0) {
        for (lshk_isa t = 0; t <= lshk_isa_detected(); t++) {
          EXPECT_OK(lshk_simhash_hash_isa(t, h, compact, N, DIM, a, N * L));
          EXPECT_OK(lshk_simhash_hash_isa(t, r, compact, N, DIM, b, N * L));
          CHECK(memcmp(a, b, sizeof a) == 0);
        }
      } else {
        /* Sparse vs dense kernels: equal up to near-zero bits. */
        check_hash_matches_project(r, compact, N, DIM);
      }
      EXPECT_OK(lshk_simhash_free(r));
    }

    /* A NaN row hashes to 0 in every table, on every tier (all of it NaN:
     * sparse kernels only read the coordinates their planes use). */
    static float nanrow[DIM];
    for (int j = 0; j < DIM; j++) nanrow[j] = NAN;
    for (lshk_isa t = 0; t <= lshk_isa_detected(); t++) {
      uint32_t c[L];
      lshk_fill_canary(c, sizeof c);
      EXPECT_OK(lshk_simhash_hash_isa(t, h, nanrow, 1, DIM, c, L));
      int zero = 1;
      for (int tl = 0; tl < L; tl++) zero &= c[tl] == 0;
      CHECK(zero);
    }

    if (sparsities[s] == 0) test_hash_project_errors(h);
    EXPECT_OK(lshk_simhash_free(h));
  }

  /* K = 32 uses every bit; K = 1 only bit 0. */
  const uint32_t ks[] = {1, 31, 32};
  for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++) {
    lshk_simhash *h = NULL;
    EXPECT_OK(lshk_simhash_new(DIM, ks[i], 3, 0, 11, &h));
    if (h) {
      check_hash_matches_project(h, compact, N, DIM);
      EXPECT_OK(lshk_simhash_free(h));
    }
  }
}

int main(void) {
  test_last_error_initially_empty();
  test_status_names();
  test_version();
  test_last_error_message();
  test_isa();
  test_new_errors();
  test_from_planes_errors();
  test_invalid_handles();
  test_happy_paths();
  return lshk_test_summary("simhash");
}
