/* C tests of lshk_index_weights: for every storage (borrowed f32, f32,
 * bf16, f16, int8), with and without a bias, built and after a save/load
 * round trip, the view's fields are right and feeding it to
 * lshk_gathered_matmul reproduces the scores lshk_index_query returned
 * (within the kernel's bound; bit for bit on the scalar tier: the index
 * scores with the same kernel). The same for the graph and forest
 * sources, whose scorer ranks by the stored W too. Plus its bad inputs,
 * with canaries. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "lshk_test.h"

#define ROWS 300
#define DIM 20
#define STRIDE 23
#define NQ 7
#define K 6

static uint64_t rng_state = 4242;
static float next_f(void) {
  rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
  return (float)((double)(rng_state >> 11) / 9007199254740992.0) * 2.0f - 1.0f;
}

static float w[ROWS * STRIDE];
static float bias[ROWS];
static float q[NQ * DIM];

/* Scores of `ids` (NQ*K, UINT32_MAX = padding) through the view's kernel. */
static lshk_status rescore(const lshk_weights_view *v, const uint32_t *ids,
                           float *out) {
  uint32_t flat[NQ * K];
  size_t offsets[NQ + 1];
  size_t n = 0;
  offsets[0] = 0;
  for (size_t i = 0; i < NQ; i++) {
    for (size_t j = 0; j < K; j++)
      if (ids[i * K + j] != UINT32_MAX) flat[n++] = ids[i * K + j];
    offsets[i + 1] = n;
  }
  return lshk_gathered_matmul(v, q, NQ, DIM, flat, offsets, out, n);
}

/* Queries `idx`, takes its weights view and checks the view against the
 * build parameters and the query's scores against a rescoring; bit for
 * bit on the scalar tier when `scalar_exact` (candidate sets without long
 * runs of consecutive ids, which the kernel hands to the dense tile). */
static void check_view(const lshk_index *idx, uint32_t storage, int with_bias,
                       const float *caller_w, int scalar_exact) {
  uint32_t ids[NQ * K];
  float sc[NQ * K], again[NQ * K];
  EXPECT_OK(lshk_index_query(idx, q, NQ, DIM, K, NULL, ids, sc, NULL));

  lshk_weights_view v;
  memset(&v, 0, sizeof v);
  v.struct_size = sizeof v;
  EXPECT_OK(lshk_index_weights(idx, &v));
  CHECK(v.struct_size == sizeof v);
  CHECK(v.storage == storage);
  CHECK(v.rows == ROWS && v.dim == DIM && v.w_stride >= DIM);
  CHECK(v.w != NULL);
  CHECK((v.scales != NULL) == (storage == LSHK_STORAGE_I8));
  CHECK((v.bias != NULL) == (with_bias != 0));
  if (storage == LSHK_STORAGE_BORROWED_F32) {
    CHECK(v.w == (const void *)caller_w && v.w_stride == STRIDE);
  } else {
    CHECK(v.w != (const void *)caller_w);
  }
  if (with_bias) {
    int same = 1;
    for (size_t r = 0; r < ROWS; r++) same &= v.bias[r] == bias[r];
    CHECK(same);
  }
  if (storage == LSHK_STORAGE_F32 || storage == LSHK_STORAGE_BORROWED_F32) {
    const float *vw = (const float *)v.w;
    int same = 1;
    for (size_t r = 0; r < ROWS; r++)
      for (size_t d = 0; d < DIM; d++)
        same &= vw[r * v.w_stride + d] == w[r * STRIDE + d];
    CHECK(same);
  }

  size_t n = 0;
  for (size_t i = 0; i < NQ * K; i++) n += ids[i] != UINT32_MAX;
  CHECK(n > 0);
  EXPECT_OK(rescore(&v, ids, again));
  /* Same kernel, same stored values; only the summation order may differ
   * (the SIMD tiers block rows, so a row's last bits can depend on its
   * position in the id list). Both results are within the documented bound
   * of lshk_gathered_matmul, gamma(dim + 2) * sum |terms|, of the
   * exact sum, so they are within twice it of each other. |terms| come from
   * the original f32 W: stored bf16/f16/int8 values differ from it by at
   * most 2^-8 relative / half a quantisation step (<= 1/254 of the row's
   * max), covered by the 1.05 factor. */
  size_t m = 0, close = 1, exact = 1;
  for (size_t i = 0; i < NQ * K; i++) {
    if (ids[i] == UINT32_MAX) continue;
    const uint32_t r = ids[i];
    double mag = with_bias ? fabs(bias[r]) : 0.0, rowmax = 0.0;
    for (size_t d = 0; d < DIM; d++) {
      double t = fabs((double)w[r * STRIDE + d]);
      rowmax = t > rowmax ? t : rowmax;
      mag += t * fabs((double)q[(i / K) * DIM + d]);
    }
    mag = 1.05 * mag + rowmax / 254.0 * DIM;
    const double nu = (DIM + 2) * ldexp(1.0, -24);
    double tol = 2.0 * nu / (1.0 - nu) * mag;
    close &= fabs((double)again[m] - (double)sc[i]) <= tol;
    exact &= memcmp(&again[m], &sc[i], sizeof(float)) == 0;
    m++;
  }
  CHECK(close);
  /* The scalar tier sums in one fixed order: there it is bit-exact. */
  if (scalar_exact && lshk_isa_active() == LSHK_ISA_SCALAR) CHECK(exact);
}

int main(void) {
  for (size_t i = 0; i < ROWS * STRIDE; i++) w[i] = next_f();
  for (size_t i = 0; i < ROWS; i++) bias[i] = 0.25f * next_f();
  for (size_t i = 0; i < NQ * DIM; i++) q[i] = next_f();

  const uint32_t storages[] = {LSHK_STORAGE_BORROWED_F32, LSHK_STORAGE_F32,
                               LSHK_STORAGE_BF16, LSHK_STORAGE_F16,
                               LSHK_STORAGE_I8};
  /* a name per process (address-space layout randomisation): the harness
   * runs the gcc and clang builds of this test at once */
  char path[128];
  int here = 0;
  snprintf(path, sizeof path, "lshk-index-weights-%lx.lshk",
           (unsigned long)(uintptr_t)&here);
  for (size_t s = 0; s < sizeof storages / sizeof storages[0]; s++) {
    for (int with_bias = 0; with_bias < 2; with_bias++) {
      lshk_index_params p = lshk_index_params_default();
      p.lsh.bits_per_table = 4; /* coarse buckets: many candidates */
      p.lsh.tables = 6;
      p.storage = storages[s];
      p.build_threads = 1;
      lshk_index *idx = NULL;
      EXPECT_OK(lshk_index_build(w, with_bias ? bias : NULL, ROWS, DIM,
                                 STRIDE, &p, &idx));
      if (idx == NULL) continue;
      check_view(idx, storages[s], with_bias, w, 1);

      /* After a save/load round trip (stored weights come from the
       * mapped file; borrowed ones are the caller's again). */
      EXPECT_OK(lshk_index_save(idx, path));
      lshk_index *back = NULL;
      EXPECT_OK(lshk_index_load(
          path, storages[s] == LSHK_STORAGE_BORROWED_F32 ? w : NULL, 0, &back));
      if (back != NULL) {
        check_view(back, storages[s], with_bias, w, 1);
        EXPECT_OK(lshk_index_free(back));
      }
      remove(path);

      /* Bad inputs: nothing written (canary), a message set. */
      if (s == 0 && with_bias == 0) {
        lshk_weights_view v;
        EXPECT_STATUS(lshk_index_weights(idx, NULL), LSHK_STATUS_NULL_POINTER);
        lshk_fill_canary(&v, sizeof v);
        EXPECT_STATUS(lshk_index_weights(NULL, &v), LSHK_STATUS_NULL_POINTER);
        CHECK(lshk_canary_intact(&v, sizeof v));
        lshk_fill_canary(&v, sizeof v);
        v.struct_size = sizeof v - 1;
        EXPECT_STATUS(lshk_index_weights(idx, &v),
                      LSHK_STATUS_INVALID_ARGUMENT);
        CHECK(v.struct_size == sizeof v - 1);
        CHECK(lshk_canary_intact((const unsigned char *)&v + sizeof(uint32_t),
                                 sizeof v - sizeof(uint32_t)));
        /* a handle of another kind */
        lshk_simhash *sh = NULL;
        EXPECT_OK(lshk_simhash_new(DIM, 8, 1, 0, 1, &sh));
        lshk_fill_canary(&v, sizeof v);
        v.struct_size = sizeof v;
        EXPECT_STATUS(lshk_index_weights((const lshk_index *)(void *)sh, &v),
                      LSHK_STATUS_INVALID_HANDLE);
        CHECK(lshk_canary_intact((const unsigned char *)&v + sizeof(uint32_t),
                                 sizeof v - sizeof(uint32_t)));
        EXPECT_OK(lshk_simhash_free(sh));
      }
      EXPECT_OK(lshk_index_free(idx));
    }
  }

  /* The graph and forest sources: the view is the stored W they score
   * their candidates with. */
  {
    lshk_index_params p = lshk_index_params_default();
    lshk_index *idx = NULL;
    p.source = LSHK_SOURCE_GRAPH;
    p.storage = LSHK_STORAGE_BF16;
    p.graph.m = 8;
    p.graph.ef_construction = 40;
    EXPECT_OK(lshk_index_build(w, bias, ROWS, DIM, STRIDE, &p, &idx));
    if (idx != NULL) check_view(idx, LSHK_STORAGE_BF16, 1, w, 1);
    EXPECT_OK(lshk_index_free(idx));

    p = lshk_index_params_default();
    idx = NULL;
    p.source = LSHK_SOURCE_FOREST;
    p.storage = LSHK_STORAGE_BORROWED_F32;
    p.forest.trees = 4;
    p.forest.leaf_size = 16;
    EXPECT_OK(lshk_index_build(w, NULL, ROWS, DIM, STRIDE, &p, &idx));
    /* its candidate sets (256 of 300 rows, ascending) are mostly runs of
     * consecutive ids: scored by the dense tile, not bit for bit the
     * gathered kernel's scores of the same rows */
    if (idx != NULL) check_view(idx, LSHK_STORAGE_BORROWED_F32, 0, w, 0);
    EXPECT_OK(lshk_index_free(idx));
  }
  return lshk_test_summary("index_weights");
}
