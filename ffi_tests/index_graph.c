/* C tests of the graph source of lshk_index (LSHK_SOURCE_GRAPH) beside
 * the others: lshk_index_query returns the candidates lshk_index_candidates
 * reports (the graph's best `rerank` of the pool, exact and int8 walks;
 * re-rank k: the same set), with scores the exact logits of W q + b
 * (within the f32 bound) descending; NULL query params are the defaults
 * and the LSH knobs are ignored; the default graph knobs are
 * lshk_index_params_default()'s; save/load round trip with bit-identical
 * results; describe (K = L = 0); the calls of other sources (LSH family,
 * tables, labels, IUL, row updates, calibration, rebuild) are refused
 * with UNSUPPORTED and write nothing. */
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
  p.source = LSHK_SOURCE_GRAPH;
  p.graph.m = 8;
  p.graph.ef_construction = 60;
  p.graph.seed = 99;

  lshk_index *idx = NULL;
  EXPECT_OK(lshk_index_build(w, bias, ROWS, DIM, DIM, &p, &idx));
  if (!idx) return lshk_test_summary("index_graph");

  lshk_index_info info;
  memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  EXPECT_OK(lshk_index_describe(idx, &info));
  CHECK(info.source == LSHK_SOURCE_GRAPH && info.rows == ROWS && info.dim == DIM &&
        info.bits_per_table == 0 && info.tables == 0 && info.nlist == 0 &&
        info.storage == LSHK_STORAGE_F32 && info.labelled == 0);

  uint32_t ids[NQ * K], cids[NQ * K];
  float sc[NQ * K];
  for (uint32_t walk = LSHK_GRAPH_WALK_EXACT; walk <= LSHK_GRAPH_WALK_INT8; walk++) {
    lshk_query_params gq = lshk_query_params_default();
    gq.graph.walk = walk;
    gq.graph.ef = 30;
    gq.graph.rerank = K; /* the index re-scores the k rows the graph ranks */
    lshk_query_stats st;
    size_t offs[NQ + 1], need = 0;
    memset(&st, 0, sizeof st);
    st.struct_size = sizeof st;
    EXPECT_OK(lshk_index_query(idx, q, NQ, DIM, K, &gq, ids, sc, &st));
    EXPECT_OK(lshk_index_candidates(idx, q, NQ, DIM, K, &gq, cids, NQ * K, offs, &need));
    CHECK(need == (size_t)NQ * K);
    for (size_t i = 0; i <= NQ; i++) CHECK(offs[i] == i * K);
    CHECK(same_sets(ids, cids));
    CHECK(scores_are_exact_logits(ids, sc));
    CHECK(st.queries == NQ && st.candidates_total == (uint64_t)NQ * K);
    CHECK(st.candidates_min == K && st.candidates_max == K);
  }
  /* with a pool of every row both walks hand every row to the scorer:
   * the same top-k, exact logits */
  {
    lshk_query_params gq = lshk_query_params_default();
    uint32_t a[NQ * K], b[NQ * K];
    float as[NQ * K], bs[NQ * K];
    gq.graph.ef = ROWS;
    EXPECT_OK(lshk_index_query(idx, q, NQ, DIM, K, &gq, a, as, NULL));
    gq.graph.walk = LSHK_GRAPH_WALK_INT8;
    EXPECT_OK(lshk_index_query(idx, q, NQ, DIM, K, &gq, b, bs, NULL));
    CHECK(scores_are_exact_logits(a, as) && scores_are_exact_logits(b, bs));
    CHECK(same_sets(a, b));
  }
  /* bad graph knobs: nothing written */
  {
    lshk_query_params gq = lshk_query_params_default();
    uint32_t a[NQ * K];
    lshk_fill_canary(a, sizeof a);
    gq.graph.ef = 0;
    EXPECT_STATUS(lshk_index_query(idx, q, NQ, DIM, K, &gq, a, NULL, NULL),
                  LSHK_STATUS_INVALID_ARGUMENT);
    gq = lshk_query_params_default();
    gq.graph.walk = 2;
    EXPECT_STATUS(lshk_index_query(idx, q, NQ, DIM, K, &gq, a, NULL, NULL),
                  LSHK_STATUS_INVALID_ARGUMENT);
    gq = lshk_query_params_default();
    gq.graph.reserved = 1;
    EXPECT_STATUS(lshk_index_query(idx, q, NQ, DIM, K, &gq, a, NULL, NULL),
                  LSHK_STATUS_INVALID_ARGUMENT);
    CHECK(lshk_canary_intact(a, sizeof a));
  }

  /* NULL query params = the defaults; the LSH knobs are ignored */
  {
    uint32_t a[NQ * K], b[NQ * K];
    float as[NQ * K], bs[NQ * K];
    lshk_query_params qp = lshk_query_params_default();
    qp.lsh.probes = 3;
    EXPECT_OK(lshk_index_query(idx, q, NQ, DIM, K, &qp, a, as, NULL));
    EXPECT_OK(lshk_index_query(idx, q, NQ, DIM, K, NULL, b, bs, NULL));
    CHECK(memcmp(a, b, sizeof a) == 0 && memcmp(as, bs, sizeof as) == 0);
    CHECK(scores_are_exact_logits(a, as));
  }

  /* the graph knobs of lshk_index_params_default() are the defaults the
   * header names (m 16, ef_construction 200, f32 rows): the same index */
  {
    lshk_index_params d = lshk_index_params_default(), e;
    lshk_index *i1 = NULL, *i2 = NULL;
    uint32_t a[NQ * K], b[NQ * K];
    float as[NQ * K], bs[NQ * K];
    d.source = LSHK_SOURCE_GRAPH;
    e = d;
    e.graph.m = 16;
    e.graph.ef_construction = 200;
    e.graph.storage = LSHK_STORAGE_F32;
    EXPECT_OK(lshk_index_build(w, bias, ROWS, DIM, DIM, &d, &i1));
    EXPECT_OK(lshk_index_build(w, bias, ROWS, DIM, DIM, &e, &i2));
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
    EXPECT_OK(lshk_index_load(path, NULL, 0, &back));
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

  /* The calls of other sources: UNSUPPORTED, nothing written. */
  {
    size_t rows = 0;
    const lshk_simhash *sh = (const lshk_simhash *)&rows;
    const lshk_dwta *dw = (const lshk_dwta *)&rows;
    const lshk_tables *tb = (const lshk_tables *)&rows;
    EXPECT_STATUS(lshk_index_simhash(idx, &sh), LSHK_STATUS_UNSUPPORTED);
    EXPECT_STATUS(lshk_index_dwta(idx, &dw), LSHK_STATUS_UNSUPPORTED);
    EXPECT_STATUS(lshk_index_tables(idx, &tb), LSHK_STATUS_UNSUPPORTED);
    CHECK(sh == (const lshk_simhash *)&rows && dw == (const lshk_dwta *)&rows &&
          tb == (const lshk_tables *)&rows);
    size_t off[2] = {0, 1};
    uint32_t lab[1] = {3};
    EXPECT_STATUS(lshk_index_train_labels(idx, q, 1, DIM, off, lab, NULL),
                  LSHK_STATUS_UNSUPPORTED);
    lshk_iul_report rep[2];
    lshk_fill_canary(rep, sizeof rep);
    EXPECT_STATUS(lshk_index_train_iul(idx, q, 1, DIM, off, lab, NULL, rep, 2),
                  LSHK_STATUS_UNSUPPORTED);
    CHECK(lshk_canary_intact(rep, sizeof rep));
    uint32_t one = 1;
    EXPECT_STATUS(lshk_index_update_rows(idx, &one, 1, w, DIM, NULL),
                  LSHK_STATUS_UNSUPPORTED);
    size_t n = 77;
    EXPECT_STATUS(lshk_index_rehash_rows(idx, &one, 1, &n), LSHK_STATUS_UNSUPPORTED);
    EXPECT_STATUS(lshk_index_rehash_dirty(idx, &n), LSHK_STATUS_UNSUPPORTED);
    CHECK(n == 77);
    lshk_calibration cal;
    lshk_fill_canary(&cal, sizeof cal);
    cal.struct_size = sizeof cal;
    EXPECT_STATUS(lshk_index_calibrate(idx, q, NQ, DIM, K, 0.9f, 32, 1, &cal),
                  LSHK_STATUS_UNSUPPORTED);
    CHECK(lshk_canary_intact((char *)&cal + sizeof(uint32_t),
                             sizeof cal - sizeof(uint32_t)));
    EXPECT_STATUS(lshk_index_rebuild(idx, NULL), LSHK_STATUS_UNSUPPORTED);
    uint32_t trained = 7;
    EXPECT_OK(lshk_index_label_info(idx, &trained, NULL));
    CHECK(trained == 0);
    uint32_t a[NQ * K];
    float as[NQ * K];
    EXPECT_OK(lshk_index_query(idx, q, NQ, DIM, K, NULL, a, as, NULL));
    CHECK(memcmp(a, ids, sizeof a) == 0 && memcmp(as, sc, sizeof as) == 0);
  }

  EXPECT_OK(lshk_index_free(idx));
  return lshk_test_summary("index_graph");
}
