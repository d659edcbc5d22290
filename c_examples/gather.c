/* Example: SimHash codes for random rows, LSH tables over them, and the
 * candidates of a few queries (plain bucket union, with multi-probing, and
 * with a min_count threshold). C11, lshk.h + liblshk only.
 * LSHK_EXAMPLE_SMALL=1 in the environment uses 2,000 rows instead of 20,000
 * (for valgrind: tests/memcheck.rs sets it). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "lshk.h"

#define DIM 64
#define K 10
#define L 16
#define Q 4

static uint64_t state = 42;
static float uniform(void) {
  state = state * 6364136223846793005ULL + 1442695040888963407ULL;
  return (float)((state >> 40) + 0.5) / 16777216.0f;
}
/* Roughly Gaussian: sum of 12 uniforms minus 6. */
static float gaussian(void) {
  float s = -6.0f;
  for (int i = 0; i < 12; i++) s += uniform();
  return s;
}

static int fail(const char *what, lshk_status s) {
  char msg[256];
  lshk_last_error_message(msg, sizeof msg);
  fprintf(stderr, "%s failed: %s (%s)\n", what, lshk_status_name(s), msg);
  return 1;
}

int main(void) {
  const size_t N = getenv("LSHK_EXAMPLE_SMALL") ? 2000 : 20000;
  float *x = malloc(sizeof(float) * N * DIM);
  uint32_t *codes = malloc(sizeof(uint32_t) * N * L);
  if (!x || !codes) return 1;
  for (size_t i = 0; i < (size_t)N * DIM; i++) x[i] = gaussian();

  lshk_simhash *h = NULL;
  lshk_status s = lshk_simhash_new(DIM, K, L, 0, 7, &h);
  if (s) return fail("lshk_simhash_new", s);
  s = lshk_simhash_hash(h, x, N, DIM, codes, (size_t)N * L);
  if (s) return fail("lshk_simhash_hash", s);

  lshk_tables *t = NULL;
  s = lshk_tables_build(codes, N, L, K, 0, 1, 0, &t);
  if (s) return fail("lshk_tables_build", s);
  lshk_table_stats st[L];
  size_t mem = 0;
  lshk_tables_stats(t, st, L);
  s = lshk_tables_memory_bytes(t, &mem);
  if (s) return fail("lshk_tables_memory_bytes", s);
  printf("%zu rows, %d tables of 2^%d buckets, %zu bytes; table 0: %llu "
         "non-empty buckets, largest %u, mean %.1f\n",
         N, L, K, mem,
         (unsigned long long)st[0].nonempty_buckets, st[0].largest_bucket,
         st[0].mean_bucket_size);

  /* Queries: noisy copies of rows 0..Q-1. */
  float qx[Q * DIM];
  for (int i = 0; i < Q * DIM; i++) qx[i] = x[i] + 0.3f * gaussian();
  uint32_t qc[Q * L];
  float proj[Q * K * L];
  if ((s = lshk_simhash_hash(h, qx, Q, DIM, qc, Q * L)) ||
      (s = lshk_simhash_project(h, qx, Q, DIM, proj, Q * K * L)))
    return fail("query hashing", s);

  const char *names[3] = {"union", "probes=4", "min_count=2"};
  for (int mode = 0; mode < 3; mode++) {
    lshk_gather_params p = lshk_gather_params_default();
    if (mode == 1) p.probes = 4, p.bits_per_table = K;
    if (mode == 2) p.min_count = 2;
    size_t offsets[Q + 1], needed = 0;
    /* First call: learn the size. */
    s = lshk_tables_gather(t, qc, Q, &p, proj, Q * K * L, NULL, NULL, 0, NULL,
                           0, offsets, NULL, &needed);
    if (s != LSHK_STATUS_OK && s != LSHK_STATUS_BUFFER_TOO_SMALL)
      return fail("lshk_tables_gather (size)", s);
    uint32_t *ids = malloc(sizeof(uint32_t) * (needed + 1));
    uint32_t *counts = malloc(sizeof(uint32_t) * (needed + 1));
    s = lshk_tables_gather(t, qc, Q, &p, proj, Q * K * L, NULL, NULL, 0, ids,
                           needed, offsets, counts, &needed);
    if (s) return fail("lshk_tables_gather", s);
    printf("%-12s", names[mode]);
    for (int i = 0; i < Q; i++) {
      uint32_t self = 0;
      for (size_t j = offsets[i]; j < offsets[i + 1]; j++)
        if (ids[j] == (uint32_t)i) self = counts[j];
      printf("  q%d: %5zu candidates (row %d in %2u tables)", i,
             offsets[i + 1] - offsets[i], i, self);
    }
    printf("\n");
    free(ids);
    free(counts);
  }
  lshk_tables_free(t);
  lshk_simhash_free(h);
  free(x);
  free(codes);
  return 0;
}
