/* DWTA bin-max hashing from C: SLIDE's output-layer setting (K = 6 bins of
 * 8 per table, L = 50 tables, d = 128). Hashes a query, a slightly
 * perturbed copy and an unrelated vector, and counts the tables in which
 * their keys collide; then hashes a sparse (CSR) row with densification.
 *
 * Build: cc -std=c11 -Iinclude c_examples/dwta.c -Ltarget/release -llshk \
 *          -Wl,-rpath,$PWD/target/release -o dwta && ./dwta */
#include <stdint.h>
#include <stdio.h>

#include "lshk.h"

#define DIM 128
#define K 6
#define L 50
#define B 8

static uint32_t state = 2463534242u;
static float uniform(void) { /* xorshift32, in [-1, 1) */
  state ^= state << 13;
  state ^= state >> 17;
  state ^= state << 5;
  return (float)(state >> 8) / 8388608.0f - 1.0f;
}

static int fail(const char *what, lshk_status s) {
  char msg[256];
  lshk_last_error_message(msg, sizeof msg);
  fprintf(stderr, "%s failed: %s (%s)\n", what, lshk_status_name(s), msg);
  return 1;
}

int main(void) {
  lshk_dwta *h = NULL;
  lshk_status s = lshk_dwta_new(DIM, K, L, B, /*seed=*/42, &h);
  if (s != LSHK_STATUS_OK) return fail("lshk_dwta_new", s);

  /* rows: query, query + 5% noise, unrelated */
  float x[3 * DIM];
  for (int j = 0; j < DIM; j++) {
    x[j] = uniform();
    x[DIM + j] = x[j] + 0.05f * uniform();
    x[2 * DIM + j] = uniform();
  }
  uint32_t codes[3 * L];
  s = lshk_dwta_hash_dense(h, x, 3, DIM, codes, 3 * L);
  if (s != LSHK_STATUS_OK) return fail("lshk_dwta_hash_dense", s);

  int near = 0, far = 0;
  for (int l = 0; l < L; l++) {
    near += codes[l] == codes[L + l];
    far += codes[l] == codes[2 * L + l];
  }
  printf("tier %s; keys are %d bits (K*log2(B))\n", lshk_isa_name(lshk_isa_active()),
         K * 3);
  printf("table 0 keys: query 0x%05x, perturbed 0x%05x, unrelated 0x%05x\n",
         (unsigned)codes[0], (unsigned)codes[L], (unsigned)codes[2 * L]);
  printf("colliding tables: perturbed copy %d/%d, unrelated vector %d/%d\n", near, L,
         far, L);

  /* A sparse row: 4 stored entries out of 128; most bins are empty and are
   * filled by densification. */
  const size_t indptr[2] = {0, 4};
  const uint32_t indices[4] = {3, 17, 64, 100};
  const float values[4] = {0.5f, -1.0f, 2.0f, 0.0f};
  uint32_t sc[L];
  s = lshk_dwta_hash_sparse(h, indptr, indices, values, 1, sc, L);
  if (s != LSHK_STATUS_OK) return fail("lshk_dwta_hash_sparse", s);
  printf("sparse row keys (tables 0-3): 0x%05x 0x%05x 0x%05x 0x%05x\n", (unsigned)sc[0],
         (unsigned)sc[1], (unsigned)sc[2], (unsigned)sc[3]);

  /* Bad input is reported, never undefined behaviour. */
  const uint32_t unsorted[4] = {17, 3, 64, 100};
  s = lshk_dwta_hash_sparse(h, indptr, unsorted, values, 1, sc, L);
  char msg[256];
  lshk_last_error_message(msg, sizeof msg);
  printf("unsorted indices -> %s: %s\n", lshk_status_name(s), msg);

  lshk_dwta_free(h);
  return near > far ? 0 : 1;
}
