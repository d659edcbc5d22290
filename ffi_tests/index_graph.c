/* C tests of the graph family of lshk_index (LSHK_FAMILY_GRAPH):
 * lshk_index_build_ex with lshk_graph_params gives, through
 * lshk_index_query_ex, the ids lshk_graph_query_ex returns on a graph built
 * with the same parameters (exact and int8 walks; re-rank k: same set), with
 * scores the exact logits of W q + b (within the f32 bound) descending;
 * lshk_index_build with family GRAPH uses lshk_graph_params_default();
 * save/load round trip with bit-identical results; shape (K = L = 0);
 * the LSH-only calls are refused with INVALID_ARGUMENT and write nothing. */
#include <math.h>

#include "lshk_test.h"

#define ROWS 500
#define DIM 16
#define NQ 6
#define K 5

static uint64_t rng_state = 4242;
static float next_f(void) {
  rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
  return (float)((double)(rng_state >> 11) / 9007199254740992.0) * 2.0f - 1.0f;
}

static float w[ROWS * DIM];
static float bias[ROWS];
static float q[NQ * DIM];

static double exact(size_t i, uint32_t r, double *mag) {
  double e = bias[r], m = fabs(bias[r]);
  for (size_t d = 0; d < DIM; d++) {
    double p = (double)w[r * DIM + d] * q[i * DIM + d];
    e += p;
    m += fabs(p);
  }
  *mag = m;
  return e;
}

static int scores_are_exact_logits(const uint32_t *ids, const float *sc) {
  for (size_t i = 0; i < NQ; i++)
    for (size_t j = 0; j < K; j++) {
      double mag, e;
      if (ids[i * K + j] >= ROWS) return 0;
      e = exact(i, ids[i * K + j], &mag);
      if (fabs(sc[i * K + j] - e) > 0x1p-24 * (DIM + 2) * 1.01 * mag + 1e-30) return 0;
      if (j > 0 && sc[i * K + j - 1] < sc[i * K + j]) return 0;
    }
  return 1;
}

static int cmp_u32(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return (x > y) - (x < y);
}

/* The same ids per query, as sets. */
static int same_sets(const uint32_t *a, const uint32_t *b) {
  for (size_t i = 0; i < NQ; i++) {
    uint32_t x[K], y[K];
    memcpy(x, a + i * K, sizeof x);
    memcpy(y, b + i * K, sizeof y);
    qsort(x, K, sizeof x[0], cmp_u32);
    qsort(y, K, sizeof y[0], cmp_u32);
    if (memcmp(x, y, sizeof x) != 0) return 0;
  }
  return 1;
}

int main(void) {
  for (size_t i = 0; i < ROWS * DIM; i++) w[i] = next_f();
  for (size_t i = 0; i < ROWS; i++) bias[i] = 0.3f * next_f();
  for (size_t i = 0; i < NQ * DIM; i++) q[i] = next_f();

  lshk_index_params p = lshk_index_params_default();
  p.family = LSHK_FAMILY_GRAPH;
  lshk_graph_params gp = lshk_graph_params_default();
  gp.m = 8;
  gp.ef_construction = 60;
  gp.seed = 99;

  lshk_index *idx = NULL;
  lshk_graph *g = NULL;
  EXPECT_OK(lshk_index_build_ex(w, bias, ROWS, DIM, DIM, &p, &gp, &idx));
  EXPECT_OK(lshk_graph_build(w, bias, ROWS, DIM, DIM, &gp, &g));
  if (!idx || !g) return lshk_test_summary("index_graph");

  size_t rows = 0, dim = 0;
  uint32_t kk = 9, ll = 9;
  EXPECT_OK(lshk_index_shape(idx, &rows, &dim, &kk, &ll));
  CHECK(rows == ROWS && dim == DIM && kk == 0 && ll == 0);

  uint32_t ids[NQ * K], gids[NQ * K];
  float sc[NQ * K], gsc[NQ * K];
  for (uint32_t walk = 0; walk <= 1; walk++) {
    lshk_graph_query_params gq = lshk_graph_query_params_default();
    gq.walk = walk;
    gq.ef = 30;
    gq.rerank = K; /* the index re-scores the k rows the graph ranks */
    lshk_query_stats st;
    memset(&st, 0, sizeof st);
    st.struct_size = sizeof st;
    EXPECT_OK(lshk_index_query_ex(idx, q, NQ, DIM, K, NULL, &gq, ids, sc, &st));
    EXPECT_OK(lshk_graph_query_ex(g, &gq, q, NQ, DIM, K, gids, gsc, NULL));
    CHECK(same_sets(ids, gids));
    CHECK(scores_are_exact_logits(ids, sc));
    CHECK(st.queries == NQ && st.candidates_total == (uint64_t)NQ * K);
    CHECK(st.candidates_min == K && st.candidates_max == K);
  }

  /* lshk_index_query (no graph options) = query_ex with the defaults. */
  {
    uint32_t a[NQ * K], b[NQ * K];
    float as[NQ * K], bs[NQ * K];
    lshk_gather_params gpar = lshk_gather_params_default();
    gpar.probes = 3; /* LSH options: ignored by the graph family */
    EXPECT_OK(lshk_index_query(idx, q, NQ, DIM, K, &gpar, a, as, NULL));
    EXPECT_OK(lshk_index_query_ex(idx, q, NQ, DIM, K, NULL, NULL, b, bs, NULL));
    CHECK(memcmp(a, b, sizeof a) == 0 && memcmp(as, bs, sizeof as) == 0);
    CHECK(scores_are_exact_logits(a, as));
  }

  /* lshk_index_build with family GRAPH = build_ex with default graph
   * params. */
  {
    lshk_index *i1 = NULL, *i2 = NULL;
    uint32_t a[NQ * K], b[NQ * K];
    float as[NQ * K], bs[NQ * K];
    EXPECT_OK(lshk_index_build(w, bias, ROWS, DIM, DIM, &p, &i1));
    EXPECT_OK(lshk_index_build_ex(w, bias, ROWS, DIM, DIM, &p, NULL, &i2));
    if (i1 && i2) {
      EXPECT_OK(lshk_index_query(i1, q, NQ, DIM, K, NULL, a, as, NULL));
      EXPECT_OK(lshk_index_query(i2, q, NQ, DIM, K, NULL, b, bs, NULL));
      CHECK(memcmp(a, b, sizeof a) == 0 && memcmp(as, bs, sizeof as) == 0);
    }
    EXPECT_OK(lshk_index_free(i1));
    EXPECT_OK(lshk_index_free(i2));
  }

  /* Save / load: bit-identical results. */
  {
    const char *path = "index_graph_test.lshk";
    lshk_index *back = NULL;
    uint32_t a[NQ * K];
    float as[NQ * K];
    size_t m1 = 0, m2 = 0;
    EXPECT_OK(lshk_index_query(idx, q, NQ, DIM, K, NULL, ids, sc, NULL));
    EXPECT_OK(lshk_index_save(idx, path));
    EXPECT_OK(lshk_index_load(path, NULL, &back));
    if (back) {
      EXPECT_OK(lshk_index_query(back, q, NQ, DIM, K, NULL, a, as, NULL));
      CHECK(memcmp(a, ids, sizeof a) == 0 && memcmp(as, sc, sizeof as) == 0);
      EXPECT_OK(lshk_index_memory_bytes(idx, &m1));
      EXPECT_OK(lshk_index_memory_bytes(back, &m2));
      CHECK(m1 > ROWS * DIM * 4 && m2 > 0);
    }
    EXPECT_OK(lshk_index_free(back));
    remove(path);
  }

  /* LSH-only calls: INVALID_ARGUMENT, nothing written. */
  {
    const lshk_simhash *sh = (const lshk_simhash *)&rows;
    const lshk_dwta *dw = (const lshk_dwta *)&rows;
    const lshk_tables *tb = (const lshk_tables *)&rows;
    EXPECT_STATUS(lshk_index_simhash(idx, &sh), LSHK_STATUS_INVALID_ARGUMENT);
    EXPECT_STATUS(lshk_index_dwta(idx, &dw), LSHK_STATUS_INVALID_ARGUMENT);
    EXPECT_STATUS(lshk_index_tables(idx, &tb), LSHK_STATUS_INVALID_ARGUMENT);
    CHECK(sh == (const lshk_simhash *)&rows && dw == (const lshk_dwta *)&rows &&
          tb == (const lshk_tables *)&rows);
    size_t off[2] = {0, 1};
    uint32_t lab[1] = {3};
    EXPECT_STATUS(lshk_index_train_labels(idx, q, 1, DIM, off, lab, NULL),
                  LSHK_STATUS_INVALID_ARGUMENT);
    lshk_iul_report rep[2];
    lshk_fill_canary(rep, sizeof rep);
    EXPECT_STATUS(lshk_index_train_iul(idx, q, 1, DIM, off, lab, NULL, rep, 2),
                  LSHK_STATUS_INVALID_ARGUMENT);
    CHECK(lshk_canary_intact(rep, sizeof rep));
    uint32_t one = 1;
    EXPECT_STATUS(lshk_index_update_rows(idx, &one, 1, w, DIM, NULL),
                  LSHK_STATUS_INVALID_ARGUMENT);
    size_t n = 77;
    EXPECT_STATUS(lshk_index_rehash_rows(idx, &one, 1, &n), LSHK_STATUS_INVALID_ARGUMENT);
    EXPECT_STATUS(lshk_index_rehash_dirty(idx, &n), LSHK_STATUS_INVALID_ARGUMENT);
    CHECK(n == 77);
    uint32_t a[NQ * K];
    float as[NQ * K];
    EXPECT_OK(lshk_index_query(idx, q, NQ, DIM, K, NULL, a, as, NULL));
    CHECK(memcmp(a, ids, sizeof a) == 0 && memcmp(as, sc, sizeof as) == 0);
  }

  EXPECT_OK(lshk_index_free(idx));
  EXPECT_OK(lshk_graph_free(g));
  return lshk_test_summary("index_graph");
}
