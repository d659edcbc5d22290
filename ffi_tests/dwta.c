/* DWTA from C: good calls, every status the lshk_dwta_* entry points can
 * return on bad input (ALLOCATION_FAILED and PANIC excepted: they cannot be
 * provoked safely), canaries showing nothing is written on error, and every
 * tier this CPU runs agreeing with the scalar tier. */
#include <math.h>
#include <stdint.h>

#include "lshk_test.h"

#define DIM 40
#define K 3
#define L 5
#define B 8
#define NROWS 4

static uint32_t lcg_state = 12345u;
static float next_value(void) {
  lcg_state = lcg_state * 1664525u + 1013904223u;
  return (float)((int)(lcg_state >> 24) - 128) / 16.0f;
}

static void hand_worked(void) {
  /* bin 0 = [5, 0, 3, 3], bin 1 = [2, 4, 1, 0] (K = 2, L = 1, B = 4);
   * see tests/dwta.rs for the derivation of every expected key. */
  const uint32_t map[8] = {5, 0, 3, 3, 2, 4, 1, 0};
  lshk_dwta *h = NULL;
  EXPECT_OK(lshk_dwta_from_map(map, 8, 6, 2, 1, 4, &h));
  const float x[6] = {1.0f, 7.0f, -2.0f, 4.0f, 7.0f, NAN};
  uint32_t c[5];
  EXPECT_OK(lshk_dwta_hash_dense(h, x, 1, 6, c, 1));
  CHECK(c[0] == 6);
  const size_t indptr[6] = {0, 2, 3, 3, 4, 6};
  const uint32_t idx[6] = {0, 3, 3, 5, 1, 5};
  const float val[6] = {-0.0f, 0.0f, 1.0f, NAN, 0.0f, 3.0f};
  EXPECT_OK(lshk_dwta_hash_sparse(h, indptr, idx, val, 5, c, 5));
  CHECK(c[0] == 13 && c[1] == 10 && c[2] == 0 && c[3] == 0 && c[4] == 8);
  EXPECT_OK(lshk_dwta_free(h));
}

int main(void) {
  lshk_dwta *h = NULL;
  lshk_dwta *const sentinel = (lshk_dwta *)(uintptr_t)0x1000;
  lshk_dwta *out = sentinel;

  /* ---- creation ---- */
  EXPECT_STATUS(lshk_dwta_new(DIM, K, L, B, 7, NULL), LSHK_STATUS_NULL_POINTER);
  EXPECT_STATUS(lshk_dwta_new(0, K, L, B, 7, &out), LSHK_STATUS_INVALID_ARGUMENT);
  EXPECT_STATUS(lshk_dwta_new(0x80000000u, K, L, B, 7, &out),
                LSHK_STATUS_INVALID_ARGUMENT);
  EXPECT_STATUS(lshk_dwta_new(DIM, 0, L, B, 7, &out), LSHK_STATUS_INVALID_ARGUMENT);
  EXPECT_STATUS(lshk_dwta_new(DIM, K, 0, B, 7, &out), LSHK_STATUS_INVALID_ARGUMENT);
  EXPECT_STATUS(lshk_dwta_new(DIM, K, L, 1, 7, &out), LSHK_STATUS_INVALID_ARGUMENT);
  EXPECT_STATUS(lshk_dwta_new(DIM, K, L, 12, 7, &out), LSHK_STATUS_INVALID_ARGUMENT);
  EXPECT_STATUS(lshk_dwta_new(DIM, K, L, 512, 7, &out), LSHK_STATUS_INVALID_ARGUMENT);
  /* K * log2(B) = 11 * 3 = 33 > 32 bits */
  EXPECT_STATUS(lshk_dwta_new(DIM, 11, L, 8, 7, &out), LSHK_STATUS_INVALID_ARGUMENT);
  /* K * L = 2^25 > 2^20 bins */
  EXPECT_STATUS(lshk_dwta_new(DIM, 32, 1u << 20, 2, 7, &out),
                LSHK_STATUS_INVALID_ARGUMENT);
  EXPECT_STATUS(lshk_dwta_new(DIM, 2, (1u << 19) + 1, 2, 7, &out),
                LSHK_STATUS_INVALID_ARGUMENT);
  {
    /* A misaligned `out`. */
    unsigned char raw[2 * sizeof(void *)];
    lshk_fill_canary(raw, sizeof raw);
    EXPECT_STATUS(lshk_dwta_new(DIM, K, L, B, 7, (lshk_dwta **)(void *)(raw + 1)),
                  LSHK_STATUS_INVALID_ARGUMENT);
    CHECK(lshk_canary_intact(raw, sizeof raw));
  }
  CHECK(out == sentinel);
  {
    /* The largest dim costs no more memory than a small one. */
    lshk_dwta *big = NULL;
    EXPECT_OK(lshk_dwta_new(0x7FFFFFFFu, K, L, B, 7, &big));
    const size_t ip[2] = {0, 2};
    const uint32_t ix[2] = {5, 0x7FFFFFFEu};
    const float vx[2] = {1.0f, 2.0f};
    uint32_t cb[L];
    EXPECT_OK(lshk_dwta_hash_sparse(big, ip, ix, vx, 1, cb, L));
    const uint32_t ixbad[2] = {5, 0x7FFFFFFFu};
    EXPECT_STATUS(lshk_dwta_hash_sparse(big, ip, ixbad, vx, 1, cb, L),
                  LSHK_STATUS_INDEX_OUT_OF_RANGE);
    EXPECT_OK(lshk_dwta_free(big));
  }
  EXPECT_OK(lshk_dwta_new(DIM, K, L, B, 7, &h));
  CHECK(h != NULL);

  /* ---- shape ---- */
  uint32_t d = 0, kk = 0, ll = 0, bb = 0;
  EXPECT_OK(lshk_dwta_shape(h, &d, &kk, &ll, &bb));
  CHECK(d == DIM && kk == K && ll == L && bb == B);
  EXPECT_OK(lshk_dwta_shape(h, NULL, NULL, &ll, NULL));
  EXPECT_STATUS(lshk_dwta_shape(NULL, &d, &kk, &ll, &bb), LSHK_STATUS_NULL_POINTER);

  /* ---- copy_map / from_map ---- */
  uint32_t map[K * L * B + 1];
  lshk_fill_canary(map, sizeof map);
  EXPECT_STATUS(lshk_dwta_copy_map(h, map, K * L * B - 1), LSHK_STATUS_BUFFER_TOO_SMALL);
  CHECK(lshk_canary_intact(map, sizeof map));
  EXPECT_STATUS(lshk_dwta_copy_map(h, NULL, K * L * B), LSHK_STATUS_NULL_POINTER);
  EXPECT_STATUS(lshk_dwta_copy_map(NULL, map, K * L * B), LSHK_STATUS_NULL_POINTER);
  EXPECT_OK(lshk_dwta_copy_map(h, map, K * L * B + 1));
  CHECK(lshk_canary_intact(map + K * L * B, sizeof map[0]));
  int in_range = 1;
  for (int i = 0; i < K * L * B; i++) in_range &= map[i] < DIM;
  CHECK(in_range);

  lshk_dwta *g = NULL;
  out = sentinel;
  EXPECT_STATUS(lshk_dwta_from_map(NULL, K * L * B, DIM, K, L, B, &out),
                LSHK_STATUS_NULL_POINTER);
  EXPECT_STATUS(lshk_dwta_from_map(map, K * L * B - 1, DIM, K, L, B, &out),
                LSHK_STATUS_INVALID_ARGUMENT);
  EXPECT_STATUS(lshk_dwta_from_map(map, K * L * B, DIM, K, L, 3, &out),
                LSHK_STATUS_INVALID_ARGUMENT);
  EXPECT_STATUS(lshk_dwta_from_map(map, K * L * B, DIM, K, L, B, NULL),
                LSHK_STATUS_NULL_POINTER);
  {
    uint32_t bad[K * L * B];
    memcpy(bad, map, sizeof bad);
    bad[17] = DIM; /* out of range */
    EXPECT_STATUS(lshk_dwta_from_map(bad, K * L * B, DIM, K, L, B, &out),
                  LSHK_STATUS_INDEX_OUT_OF_RANGE);
    /* misaligned map */
    unsigned char raw[sizeof bad + sizeof(uint32_t)];
    memcpy(raw + 1, map, sizeof bad);
    EXPECT_STATUS(lshk_dwta_from_map((const uint32_t *)(const void *)(raw + 1),
                                     K * L * B, DIM, K, L, B, &out),
                  LSHK_STATUS_INVALID_ARGUMENT);
  }
  CHECK(out == sentinel);
  EXPECT_OK(lshk_dwta_from_map(map, K * L * B, DIM, K, L, B, &g));

  /* ---- dense ---- */
  float x[NROWS * (DIM + 3) + 1];
  for (size_t i = 0; i < sizeof x / sizeof x[0]; i++) x[i] = next_value();
  x[5] = NAN;
  x[7] = -0.0f;
  const size_t stride = DIM + 3;
  uint32_t want[NROWS * L], got[NROWS * L], got2[NROWS * L];
  EXPECT_OK(lshk_dwta_hash_dense_isa(LSHK_ISA_SCALAR, h, x, NROWS, stride, want,
                                     NROWS * L));
  for (lshk_isa t = LSHK_ISA_SCALAR; t <= lshk_isa_detected(); t++) {
    memset(got, 0, sizeof got);
    EXPECT_OK(lshk_dwta_hash_dense_isa(t, h, x, NROWS, stride, got, NROWS * L));
    CHECK(memcmp(got, want, sizeof got) == 0);
  }
  if (lshk_isa_detected() < LSHK_ISA_AVX512)
    printf("skipped: avx512 tier (CPU lacks avx512f/bw/dq/vl)\n");
  EXPECT_OK(lshk_dwta_hash_dense(g, x, NROWS, stride, got2, NROWS * L));
  CHECK(memcmp(got2, want, sizeof got2) == 0); /* from_map(copy_map) == same */
  for (int i = 0; i < NROWS * L; i++) CHECK(want[i] < (1u << (K * 3)));
  EXPECT_OK(lshk_dwta_hash_dense(h, NULL, 0, stride, NULL, 0));

  lshk_fill_canary(got, sizeof got);
  EXPECT_STATUS(lshk_dwta_hash_dense(NULL, x, NROWS, stride, got, NROWS * L),
                LSHK_STATUS_NULL_POINTER);
  EXPECT_STATUS(lshk_dwta_hash_dense(h, NULL, NROWS, stride, got, NROWS * L),
                LSHK_STATUS_NULL_POINTER);
  EXPECT_STATUS(lshk_dwta_hash_dense(h, x, NROWS, stride, NULL, NROWS * L),
                LSHK_STATUS_NULL_POINTER);
  EXPECT_STATUS(lshk_dwta_hash_dense(h, x, NROWS, DIM - 1, got, NROWS * L),
                LSHK_STATUS_INVALID_ARGUMENT);
  EXPECT_STATUS(lshk_dwta_hash_dense(h, x, NROWS, stride, got, NROWS * L - 1),
                LSHK_STATUS_BUFFER_TOO_SMALL);
  EXPECT_STATUS(lshk_dwta_hash_dense(h, x, SIZE_MAX / 2, stride, got, NROWS * L),
                LSHK_STATUS_SIZE_OVERFLOW);
  EXPECT_STATUS(lshk_dwta_hash_dense(h, (const float *)(const void *)((const char *)x + 1),
                                     NROWS, stride, got, NROWS * L),
                LSHK_STATUS_INVALID_ARGUMENT);
  EXPECT_STATUS(lshk_dwta_hash_dense_isa(7, h, x, NROWS, stride, got, NROWS * L),
                LSHK_STATUS_INVALID_ARGUMENT);
  if (lshk_isa_detected() < LSHK_ISA_AVX512)
    EXPECT_STATUS(lshk_dwta_hash_dense_isa(LSHK_ISA_AVX512, h, x, NROWS, stride, got,
                                           NROWS * L),
                  LSHK_STATUS_UNSUPPORTED_ISA);
  {
    /* A handle of another type is rejected. */
    lshk_simhash *s = NULL;
    EXPECT_OK(lshk_simhash_new(DIM, 4, 2, 0, 1, &s));
    EXPECT_STATUS(lshk_dwta_hash_dense((const lshk_dwta *)(const void *)s, x, NROWS,
                                       stride, got, NROWS * L),
                  LSHK_STATUS_INVALID_HANDLE);
    EXPECT_STATUS(lshk_dwta_free((lshk_dwta *)(void *)s), LSHK_STATUS_INVALID_HANDLE);
    EXPECT_OK(lshk_simhash_free(s));
  }
  CHECK(lshk_canary_intact(got, sizeof got));

  /* ---- sparse ---- */
  {
    /* 4 rows: 3 entries, none, 1 entry, 5 entries */
    size_t ip[NROWS + 1] = {0, 3, 3, 4, 9};
    uint32_t idx[9] = {1, 7, 39, 20, 0, 2, 3, 4, 38};
    float val[9] = {1.0f, -2.0f, 0.5f, 3.0f, 0.0f, NAN, -0.0f, 9.0f, 9.0f};
    EXPECT_OK(lshk_dwta_hash_sparse_isa(LSHK_ISA_SCALAR, h, ip, idx, val, NROWS, want,
                                        NROWS * L));
    for (int i = 3 * L; i < 4 * L; i++) CHECK(want[i] < (1u << (K * 3)));
    for (int i = L; i < 2 * L; i++) CHECK(want[i] == 0); /* empty row */
    for (lshk_isa t = LSHK_ISA_SCALAR; t <= lshk_isa_detected(); t++) {
      memset(got, 0, sizeof got);
      EXPECT_OK(lshk_dwta_hash_sparse_isa(t, h, ip, idx, val, NROWS, got, NROWS * L));
      CHECK(memcmp(got, want, sizeof got) == 0);
    }
    EXPECT_OK(lshk_dwta_hash_sparse(h, NULL, NULL, NULL, 0, NULL, 0));

    lshk_fill_canary(got, sizeof got);
    EXPECT_STATUS(lshk_dwta_hash_sparse(NULL, ip, idx, val, NROWS, got, NROWS * L),
                  LSHK_STATUS_NULL_POINTER);
    EXPECT_STATUS(lshk_dwta_hash_sparse(h, NULL, idx, val, NROWS, got, NROWS * L),
                  LSHK_STATUS_NULL_POINTER);
    EXPECT_STATUS(lshk_dwta_hash_sparse(h, ip, NULL, val, NROWS, got, NROWS * L),
                  LSHK_STATUS_NULL_POINTER);
    EXPECT_STATUS(lshk_dwta_hash_sparse(h, ip, idx, NULL, NROWS, got, NROWS * L),
                  LSHK_STATUS_NULL_POINTER);
    EXPECT_STATUS(lshk_dwta_hash_sparse(h, ip, idx, val, NROWS, NULL, NROWS * L),
                  LSHK_STATUS_NULL_POINTER);
    EXPECT_STATUS(lshk_dwta_hash_sparse(h, ip, idx, val, NROWS, got, NROWS * L - 1),
                  LSHK_STATUS_BUFFER_TOO_SMALL);
    EXPECT_STATUS(lshk_dwta_hash_sparse(h, ip, idx, val, SIZE_MAX, got, NROWS * L),
                  LSHK_STATUS_SIZE_OVERFLOW);
    EXPECT_STATUS(lshk_dwta_hash_sparse_isa(9, h, ip, idx, val, NROWS, got, NROWS * L),
                  LSHK_STATUS_INVALID_ARGUMENT);
    if (lshk_isa_detected() < LSHK_ISA_AVX512)
      EXPECT_STATUS(lshk_dwta_hash_sparse_isa(LSHK_ISA_AVX512, h, ip, idx, val, NROWS,
                                              got, NROWS * L),
                    LSHK_STATUS_UNSUPPORTED_ISA);

    size_t ip_bad0[NROWS + 1] = {1, 3, 3, 4, 9};
    EXPECT_STATUS(lshk_dwta_hash_sparse(h, ip_bad0, idx, val, NROWS, got, NROWS * L),
                  LSHK_STATUS_INVALID_ARGUMENT);
    size_t ip_dec[NROWS + 1] = {0, 3, 2, 4, 9};
    EXPECT_STATUS(lshk_dwta_hash_sparse(h, ip_dec, idx, val, NROWS, got, NROWS * L),
                  LSHK_STATUS_INVALID_ARGUMENT);
    /* Errors in the last row: the earlier rows are not written either. */
    uint32_t unsorted[9] = {1, 7, 39, 20, 0, 2, 4, 3, 38};
    EXPECT_STATUS(lshk_dwta_hash_sparse(h, ip, unsorted, val, NROWS, got, NROWS * L),
                  LSHK_STATUS_INVALID_ARGUMENT);
    uint32_t dup[9] = {1, 7, 39, 20, 0, 2, 3, 3, 38};
    EXPECT_STATUS(lshk_dwta_hash_sparse(h, ip, dup, val, NROWS, got, NROWS * L),
                  LSHK_STATUS_INVALID_ARGUMENT);
    uint32_t oob[9] = {1, 7, 39, 20, 0, 2, 3, 4, DIM};
    EXPECT_STATUS(lshk_dwta_hash_sparse(h, ip, oob, val, NROWS, got, NROWS * L),
                  LSHK_STATUS_INDEX_OUT_OF_RANGE);
    EXPECT_STATUS(lshk_dwta_hash_sparse(h, ip, (const uint32_t *)(const void *)((const char *)idx + 2),
                                        val, NROWS, got, NROWS * L),
                  LSHK_STATUS_INVALID_ARGUMENT);
    CHECK(lshk_canary_intact(got, sizeof got));
  }

  /* ---- freeing ---- */
  EXPECT_OK(lshk_dwta_free(NULL));
  EXPECT_OK(lshk_dwta_free(g));
  EXPECT_STATUS(lshk_dwta_free(g), LSHK_STATUS_INVALID_HANDLE);
  lshk_fill_canary(got, sizeof got);
  EXPECT_STATUS(lshk_dwta_hash_dense(g, x, NROWS, stride, got, NROWS * L),
                LSHK_STATUS_INVALID_HANDLE);
  EXPECT_STATUS(lshk_dwta_shape(g, &d, NULL, NULL, NULL), LSHK_STATUS_INVALID_HANDLE);
  EXPECT_STATUS(lshk_dwta_copy_map(g, map, K * L * B), LSHK_STATUS_INVALID_HANDLE);
  CHECK(lshk_canary_intact(got, sizeof got));
  EXPECT_OK(lshk_dwta_free(h));

  hand_worked();
  return lshk_test_summary("dwta");
}
