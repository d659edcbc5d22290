/* The mutable index through the C ABI: rows updated
 * (copied W) or changed in place (borrowed W) and rehashed give the same
 * query results, bit for bit, as a fresh build over the updated W; the
 * rehash schedule's values; dirty counts. */
#include "lshk_test.h"

#define ROWS 300
#define DIM 12
#define NQ 9
#define K 10
#define NU 25

static uint64_t st = 777;
static float frand(void) {
  st = st * 6364136223846793005ull + 1442695040888963407ull;
  return (float)(st >> 40) / 16777216.0f * 2.0f - 1.0f;
}

static float w0[ROWS * DIM], w1[ROWS * DIM], wb[ROWS * DIM];
static float b0[ROWS], b1[ROWS];
static float q[NQ * DIM];
static uint32_t ids[NU];
static float vals[NU * DIM], nbias[NU];

static lshk_index *build(const float *w, const float *b, uint32_t storage) {
  lshk_index_params p = lshk_index_params_default();
  lshk_index *idx = NULL;
  p.lsh.bits_per_table = 6;
  p.lsh.tables = 10;
  p.storage = storage;
  p.transform = LSHK_TRANSFORM_BIAS_AUG;
  p.build_threads = 2;
  EXPECT_OK(lshk_index_build(w, b, ROWS, DIM, DIM, &p, &idx));
  return idx;
}

/* 1 when both indexes give the same ids and score bits. */
static int same_results(const lshk_index *a, const lshk_index *b) {
  uint32_t ia[NQ * K], ib[NQ * K];
  float sa[NQ * K], sb[NQ * K];
  EXPECT_OK(lshk_index_query(a, q, NQ, DIM, K, NULL, ia, sa, NULL));
  EXPECT_OK(lshk_index_query(b, q, NQ, DIM, K, NULL, ib, sb, NULL));
  return memcmp(ia, ib, sizeof ia) == 0 && memcmp(sa, sb, sizeof sa) == 0;
}

int main(void) {
  size_t n = 0, dirty = 0;
  uint64_t next = 0;
  lshk_index *idx, *fresh, *bor;
  for (int i = 0; i < ROWS * DIM; i++) w0[i] = frand();
  for (int i = 0; i < ROWS; i++) b0[i] = 0.3f * frand();
  for (int i = 0; i < NQ * DIM; i++) q[i] = frand();
  for (int j = 0; j < NU; j++) {
    ids[j] = (uint32_t)((j * 37 + 5) % ROWS);
    nbias[j] = frand();
    for (int d = 0; d < DIM; d++) vals[j * DIM + d] = 2.0f * frand();
  }
  memcpy(w1, w0, sizeof w0);
  memcpy(b1, b0, sizeof b0);
  for (int j = 0; j < NU; j++) {
    memcpy(&w1[ids[j] * DIM], &vals[j * DIM], DIM * sizeof(float));
    b1[ids[j]] = nbias[j];
  }

  /* copied W */
  idx = build(w0, b0, LSHK_STORAGE_F32);
  fresh = build(w1, b1, LSHK_STORAGE_F32);
  CHECK(!same_results(idx, fresh));
  EXPECT_OK(lshk_index_update_rows(idx, ids, NU, vals, DIM, nbias));
  EXPECT_OK(lshk_index_dirty_rows(idx, &dirty));
  CHECK(dirty == NU);
  EXPECT_OK(lshk_index_rehash_dirty(idx, &n));
  CHECK(n == NU);
  EXPECT_OK(lshk_index_dirty_rows(idx, &dirty));
  CHECK(dirty == 0);
  CHECK(same_results(idx, fresh));
  EXPECT_OK(lshk_index_rehash_dirty(idx, NULL)); /* nothing dirty */

  /* borrowed W, changed in place */
  memcpy(wb, w0, sizeof w0);
  bor = build(wb, b0, LSHK_STORAGE_BORROWED_F32);
  EXPECT_STATUS(lshk_index_update_rows(bor, ids, NU, vals, DIM, NULL),
                LSHK_STATUS_INVALID_ARGUMENT);
  memcpy(wb, w1, sizeof w1);
  EXPECT_OK(lshk_index_update_rows(bor, ids, NU, NULL, 0, nbias));
  EXPECT_OK(lshk_index_rehash_rows(bor, ids, NU, &n));
  CHECK(n == NU);
  CHECK(same_results(bor, fresh));

  /* the schedule */
  EXPECT_OK(lshk_rehash_next(LSHK_LNS_REHASH_PERIOD, LSHK_LNS_REHASH_LAMBDA, 0, &next));
  CHECK(next == 50);
  EXPECT_OK(lshk_rehash_next(LSHK_LNS_REHASH_PERIOD, LSHK_LNS_REHASH_LAMBDA, 200, &next));
  CHECK(next == 251);
  EXPECT_OK(lshk_rehash_next(7.0, 0.0, 70, &next));
  CHECK(next == 77);
  EXPECT_STATUS(lshk_rehash_next(0.5, 0.0, 0, &next), LSHK_STATUS_INVALID_ARGUMENT);
  CHECK(next == 77);

  EXPECT_OK(lshk_index_free(idx));
  EXPECT_OK(lshk_index_free(fresh));
  EXPECT_OK(lshk_index_free(bor));
  return lshk_test_summary("index_update");
}
