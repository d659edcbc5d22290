/* C tests of lshk_index_* on the LSH sources (SimHash, DWTA): the
 * parameter defaults of every source, bad inputs with canaries, queries
 * against the exact logits of the returned ids, lshk_index_describe,
 * lshk_index_candidates and lshk_index_union, save/load (stored and
 * borrowed weights, w_stride), the borrowed family/tables handles, the
 * calls of other sources refused with UNSUPPORTED, and the int8 row codes
 * of lshk_index_set_codes. */
#include <math.h>

#include "lshk_test.h"

#define ROWS 400
#define DIM 12
#define STRIDE 13
#define NQ 9
#define K 5

static uint64_t rng_state = 777;
static float next_f(void) {
  rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
  return (float)((double)(rng_state >> 11) / 9007199254740992.0) * 2.0f - 1.0f;
}

static int progress_calls = 0;
static uint64_t progress_last_done = 0, progress_last_total = 0;
static void on_progress(void *user, uint64_t done, uint64_t total) {
  (*(int *)user)++;
  progress_calls++;
  progress_last_done = done;
  progress_last_total = total;
}

static float w[ROWS * STRIDE];
static float bias[ROWS];
static float q[NQ * DIM];

/* Every returned score is the logit of its id, scores descend, pads last. */
static int check_results(const uint32_t *ids, const float *sc) {
  for (size_t i = 0; i < NQ; i++) {
    for (size_t j = 0; j < K; j++) {
      uint32_t id = ids[i * K + j];
      float s = sc[i * K + j];
      if (id == UINT32_MAX) {
        if (!(isinf(s) && s < 0)) return 0;
        continue;
      }
      if (id >= ROWS) return 0;
      double e = bias[id], mag = fabs(bias[id]);
      for (size_t d = 0; d < DIM; d++) {
        e += (double)w[id * STRIDE + d] * q[i * DIM + d];
        mag += fabs((double)w[id * STRIDE + d] * q[i * DIM + d]);
      }
      if (fabs(s - e) > (DIM + 2) * 1.2e-7 * mag) return 0;
      if (j > 0 && ids[i * K + j - 1] != UINT32_MAX && s > sc[i * K + j - 1])
        return 0;
    }
  }
  return 1;
}

/* lshk_index_set_codes on a SimHash index with a bias: int8 codes pick a
 * shortlist of RERANK per query, re-scored exactly (every answer is its
 * exact logit); the codes are saved and loaded (the same bits); NONE
 * answers as before the codes; what cannot take codes is refused. */
#define RERANK 8
static void test_codes(const char *path) {
  lshk_index_params p = lshk_index_params_default();
  p.lsh.bits_per_table = 4;
  p.lsh.tables = 8;
  p.build_threads = 1;
  lshk_index *idx = NULL, *back = NULL;
  EXPECT_OK(lshk_index_build(w, bias, ROWS, DIM, STRIDE, &p, &idx));
  uint32_t ids0[NQ * K], ids[NQ * K], ids2[NQ * K];
  float sc0[NQ * K], sc[NQ * K], sc2[NQ * K];
  EXPECT_OK(lshk_index_query(idx, q, NQ, DIM, K, NULL, ids0, sc0, NULL));

  EXPECT_OK(lshk_index_set_codes(idx, LSHK_IVF_CODES_I8, RERANK));
  lshk_index_info info;
  memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  EXPECT_OK(lshk_index_describe(idx, &info));
  CHECK(info.codes == LSHK_IVF_CODES_I8);
  lshk_query_stats st;
  memset(&st, 0, sizeof st);
  st.struct_size = sizeof st;
  EXPECT_OK(lshk_index_query(idx, q, NQ, DIM, K, NULL, ids, sc, &st));
  CHECK(check_results(ids, sc));
  /* the shortlist is shorter than the candidates: the codes chose it */
  CHECK(st.reranked > 0 && st.reranked <= NQ * RERANK &&
        st.reranked < st.candidates_total);

  EXPECT_OK(lshk_index_save(idx, path));
  EXPECT_OK(lshk_index_load(path, NULL, 0, &back));
  memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  EXPECT_OK(lshk_index_describe(back, &info));
  CHECK(info.codes == LSHK_IVF_CODES_I8);
  EXPECT_OK(lshk_index_query(back, q, NQ, DIM, K, NULL, ids2, sc2, NULL));
  CHECK(memcmp(ids, ids2, sizeof ids) == 0 && memcmp(sc, sc2, sizeof sc) == 0);

  EXPECT_OK(lshk_index_set_codes(back, LSHK_IVF_CODES_NONE, 0));
  memset(&info, 0xA5, sizeof info);
  info.struct_size = sizeof info;
  EXPECT_OK(lshk_index_describe(back, &info));
  CHECK(info.codes == LSHK_IVF_CODES_NONE);
  EXPECT_OK(lshk_index_query(back, q, NQ, DIM, K, NULL, ids2, sc2, NULL));
  CHECK(memcmp(ids0, ids2, sizeof ids0) == 0 && memcmp(sc0, sc2, sizeof sc0) == 0);

  /* refused, the index unchanged */
  EXPECT_STATUS(lshk_index_set_codes(NULL, LSHK_IVF_CODES_I8, RERANK),
                LSHK_STATUS_NULL_POINTER);
  EXPECT_STATUS(lshk_index_set_codes(idx, LSHK_IVF_CODES_I8, 0),
                LSHK_STATUS_INVALID_ARGUMENT);
  EXPECT_STATUS(lshk_index_set_codes(idx, LSHK_IVF_CODES_PQ4, RERANK),
                LSHK_STATUS_INVALID_ARGUMENT);
  EXPECT_STATUS(lshk_index_set_codes(idx, 9, RERANK),
                LSHK_STATUS_INVALID_ARGUMENT);
  EXPECT_OK(lshk_index_query(idx, q, NQ, DIM, K, NULL, ids2, sc2, NULL));
  CHECK(memcmp(ids, ids2, sizeof ids) == 0 && memcmp(sc, sc2, sizeof sc) == 0);
  EXPECT_OK(lshk_index_free(back));
  EXPECT_OK(lshk_index_free(idx));

  p.storage = LSHK_STORAGE_I8;
  EXPECT_OK(lshk_index_build(w, bias, ROWS, DIM, STRIDE, &p, &idx));
  EXPECT_STATUS(lshk_index_set_codes(idx, LSHK_IVF_CODES_I8, RERANK),
                LSHK_STATUS_INVALID_ARGUMENT);
  EXPECT_OK(lshk_index_free(idx));
  p = lshk_index_params_default();
  p.source = LSHK_SOURCE_IVF;
  p.ivf.nlist = 8;
  p.build_threads = 1;
  EXPECT_OK(lshk_index_build(w, bias, ROWS, DIM, STRIDE, &p, &idx));
  EXPECT_STATUS(lshk_index_set_codes(idx, LSHK_IVF_CODES_I8, RERANK),
                LSHK_STATUS_UNSUPPORTED);
  EXPECT_OK(lshk_index_free(idx));
}

int main(void) {
  for (size_t i = 0; i < ROWS * STRIDE; i++) w[i] = next_f();
  for (size_t i = 0; i < ROWS; i++) bias[i] = 0.1f * next_f();
  for (size_t i = 0; i < NQ * DIM; i++) q[i] = next_f();

  /* params */
  lshk_index_params p = lshk_index_params_default();
  CHECK(p.struct_size == sizeof(lshk_index_params));
  CHECK(p.source == LSHK_SOURCE_SIMHASH && p.lsh.bits_per_table == 12 &&
        p.lsh.tables == 50 && p.storage == LSHK_STORAGE_F32 &&
        p.transform == LSHK_TRANSFORM_NONE && p.lsh.seed == 1 &&
        p.lsh.sparsity == 0 && p.lsh.bin_size == 8 && p.lsh.range_bits == 0 &&
        p.lsh.bucket_cap == 0 && p.lsh.planes == NULL &&
        p.lsh.dwta_map == NULL && p.build_threads == 0 && p.progress == NULL);
  CHECK(p.ivf.nlist == 0 && p.ivf.iters == 10 && p.ivf.train_rows == 0 &&
        p.ivf.codes == LSHK_IVF_CODES_I8 && p.ivf.pq_m == 0 &&
        p.ivf.reserved == 0 && p.ivf.row_weights == NULL &&
        p.ivf.n_weights == 0);
  CHECK(p.graph.m == 16 && p.graph.ef_construction == 200 &&
        p.graph.storage == LSHK_STORAGE_F32 && p.graph.reserved == 0);
  CHECK(p.forest.trees == 8 && p.forest.leaf_size == 64 &&
        p.forest.normalize_rows == 1 && p.forest.reserved == 0 &&
        p.forest.seed == 1);
  {
    lshk_query_params qp = lshk_query_params_default();
    CHECK(qp.struct_size == sizeof(lshk_query_params) && qp.threads == 0);
    CHECK(qp.lsh.min_count == 1 && qp.lsh.max_candidates == 0 &&
          qp.lsh.probes == 0 && qp.lsh.bits_per_table == 0);
    CHECK(qp.ivf.nprobe == UINT32_MAX && qp.ivf.rerank == 32 &&
          qp.ivf.reach == 2.0f && qp.ivf.refine == 256);
    CHECK(qp.graph.walk == LSHK_GRAPH_WALK_EXACT && qp.graph.ef == 100 &&
          qp.graph.rerank == 0 && qp.graph.reserved == 0);
    CHECK(qp.forest.set_size == 256 && qp.forest.confidence == 0.0f);
  }
  p.lsh.bits_per_table = 6;
  p.lsh.tables = 10;
  p.transform = LSHK_TRANSFORM_BIAS_AUG;

  /* build: bad inputs leave *out untouched */
  lshk_index *canary = (lshk_index *)(uintptr_t)0x1230;
  lshk_index *idx = canary;
  EXPECT_STATUS(lshk_index_build(w, bias, ROWS, DIM, STRIDE, &p, NULL),
                LSHK_STATUS_NULL_POINTER);
  EXPECT_STATUS(lshk_index_build(NULL, bias, ROWS, DIM, STRIDE, &p, &idx),
                LSHK_STATUS_NULL_POINTER);
  EXPECT_STATUS(lshk_index_build(w, bias, 0, DIM, STRIDE, &p, &idx),
                LSHK_STATUS_INVALID_ARGUMENT);
  EXPECT_STATUS(lshk_index_build(w, bias, ROWS, 0, STRIDE, &p, &idx),
                LSHK_STATUS_INVALID_ARGUMENT);
  EXPECT_STATUS(lshk_index_build(w, bias, ROWS, DIM, DIM - 1, &p, &idx),
                LSHK_STATUS_INVALID_ARGUMENT);
  EXPECT_STATUS(lshk_index_build(w, bias, SIZE_MAX, DIM, STRIDE, &p, &idx),
                LSHK_STATUS_SIZE_OVERFLOW);
  lshk_index_params bad = p;
  bad.struct_size = 8;
  EXPECT_STATUS(lshk_index_build(w, bias, ROWS, DIM, STRIDE, &bad, &idx),
                LSHK_STATUS_INVALID_ARGUMENT);
  bad = p;
  bad.source = 5;
  EXPECT_STATUS(lshk_index_build(w, bias, ROWS, DIM, STRIDE, &bad, &idx),
                LSHK_STATUS_INVALID_ARGUMENT);
  bad = p; /* a transform on a source that is not LSH */
  bad.source = LSHK_SOURCE_GRAPH;
  EXPECT_STATUS(lshk_index_build(w, bias, ROWS, DIM, STRIDE, &bad, &idx),
                LSHK_STATUS_INVALID_ARGUMENT);
  bad = p; /* row weights on a source that is not IVF */
  bad.ivf.row_weights = bias;
  bad.ivf.n_weights = ROWS;
  EXPECT_STATUS(lshk_index_build(w, bias, ROWS, DIM, STRIDE, &bad, &idx),
                LSHK_STATUS_INVALID_ARGUMENT);
  bad = p;
  bad.storage = 5;
  EXPECT_STATUS(lshk_index_build(w, bias, ROWS, DIM, STRIDE, &bad, &idx),
                LSHK_STATUS_INVALID_ARGUMENT);
  bad = p;
  bad.transform = 3;
  EXPECT_STATUS(lshk_index_build(w, bias, ROWS, DIM, STRIDE, &bad, &idx),
                LSHK_STATUS_INVALID_ARGUMENT);
  static float planes[6 * 10 * (DIM + 1)];
  for (size_t i = 0; i < sizeof planes / sizeof *planes; i++)
    planes[i] = next_f();
  bad = p;
  bad.lsh.planes = planes;
  bad.lsh.planes_len = 6 * 10 * DIM; /* dim' is DIM + 1 with a transform */
  EXPECT_STATUS(lshk_index_build(w, bias, ROWS, DIM, STRIDE, &bad, &idx),
                LSHK_STATUS_INVALID_ARGUMENT);
  bad.lsh.planes = NULL;
  bad.lsh.planes_len = 3;
  EXPECT_STATUS(lshk_index_build(w, bias, ROWS, DIM, STRIDE, &bad, &idx),
                LSHK_STATUS_NULL_POINTER);
  w[17 * STRIDE + 3] = NAN;
  EXPECT_STATUS(lshk_index_build(w, bias, ROWS, DIM, STRIDE, &p, &idx),
                LSHK_STATUS_NON_FINITE);
  {
    char msg[256];
    lshk_last_error_message(msg, sizeof msg);
    CHECK(strstr(msg, "row 17") != NULL);
  }
  w[17 * STRIDE + 3] = 0.5f;
  CHECK(idx == canary);

  /* caller-given planes of the right size, and a progress callback */
  int user_calls = 0;
  p.lsh.planes = planes;
  p.lsh.planes_len = sizeof planes / sizeof *planes;
  p.progress = on_progress;
  p.progress_user = &user_calls;
  EXPECT_OK(lshk_index_build(w, bias, ROWS, DIM, STRIDE, &p, &idx));
  CHECK(idx != canary && idx != NULL);
  CHECK(user_calls >= 1 && user_calls == progress_calls);
  CHECK(progress_last_done == ROWS && progress_last_total == ROWS);
  lshk_index_free(idx);
  p.lsh.planes = NULL;
  p.lsh.planes_len = 0;
  p.progress = NULL;

  /* the index used below: SimHash, bias augmentation, f32 copy */
  EXPECT_OK(lshk_index_build(w, bias, ROWS, DIM, STRIDE, &p, &idx));
  size_t rows = 0, mem = 0;
  lshk_index_info info;
  memset(&info, 0xA5, sizeof info);
  info.struct_size = sizeof info;
  EXPECT_OK(lshk_index_describe(idx, &info));
  CHECK(info.struct_size == sizeof info);
  CHECK(info.source == LSHK_SOURCE_SIMHASH &&
        info.storage == LSHK_STORAGE_F32 &&
        info.transform == LSHK_TRANSFORM_BIAS_AUG && info.rows == ROWS &&
        info.dim == DIM && info.bits_per_table == 6 && info.tables == 10 &&
        info.nlist == 0 && info.codes == 0 && info.labelled == 0);
  {
    lshk_index_info keep;
    lshk_fill_canary(&keep, sizeof keep);
    keep.struct_size = sizeof keep - 1;
    EXPECT_STATUS(lshk_index_describe(idx, &keep), LSHK_STATUS_INVALID_ARGUMENT);
    CHECK(lshk_canary_intact((char *)&keep + sizeof(uint32_t),
                             sizeof keep - sizeof(uint32_t)));
    keep.struct_size = sizeof keep;
    EXPECT_STATUS(lshk_index_describe(NULL, &keep), LSHK_STATUS_NULL_POINTER);
    CHECK(lshk_canary_intact((char *)&keep + sizeof(uint32_t),
                             sizeof keep - sizeof(uint32_t)));
    EXPECT_STATUS(lshk_index_describe(idx, NULL), LSHK_STATUS_NULL_POINTER);
  }
  EXPECT_OK(lshk_index_memory_bytes(idx, &mem));
  CHECK(mem >= ROWS * DIM * sizeof(float));
  EXPECT_STATUS(lshk_index_memory_bytes(idx, NULL), LSHK_STATUS_NULL_POINTER);
  EXPECT_STATUS(lshk_index_memory_bytes(NULL, &rows), LSHK_STATUS_NULL_POINTER);
  CHECK(rows == 0);

  /* query: bad inputs write nothing */
  uint32_t ids[NQ * K];
  float sc[NQ * K];
  lshk_query_stats st;
  lshk_fill_canary(ids, sizeof ids);
  lshk_fill_canary(sc, sizeof sc);
  lshk_fill_canary(&st, sizeof st);
  st.struct_size = sizeof st;
  lshk_query_params g = lshk_query_params_default();
  EXPECT_STATUS(lshk_index_query(NULL, q, NQ, DIM, K, &g, ids, sc, &st),
                LSHK_STATUS_NULL_POINTER);
  EXPECT_STATUS(lshk_index_query(idx, NULL, NQ, DIM, K, &g, ids, sc, &st),
                LSHK_STATUS_NULL_POINTER);
  EXPECT_STATUS(lshk_index_query(idx, q, NQ, DIM, K, &g, NULL, sc, &st),
                LSHK_STATUS_NULL_POINTER);
  EXPECT_STATUS(lshk_index_query(idx, q, NQ, DIM - 1, K, &g, ids, sc, &st),
                LSHK_STATUS_INVALID_ARGUMENT);
  lshk_query_params gbad = g;
  gbad.struct_size = 4;
  EXPECT_STATUS(lshk_index_query(idx, q, NQ, DIM, K, &gbad, ids, sc, &st),
                LSHK_STATUS_INVALID_ARGUMENT);
  gbad = g;
  gbad.forest.confidence = -1.0f;
  EXPECT_STATUS(lshk_index_query(idx, q, NQ, DIM, K, &gbad, ids, sc, &st),
                LSHK_STATUS_INVALID_ARGUMENT);
  gbad = g;
  gbad.lsh.probes = 2;
  gbad.lsh.bits_per_table = 7;
  EXPECT_STATUS(lshk_index_query(idx, q, NQ, DIM, K, &gbad, ids, sc, &st),
                LSHK_STATUS_INVALID_ARGUMENT);
  lshk_query_stats small = st;
  small.struct_size = 8;
  EXPECT_STATUS(lshk_index_query(idx, q, NQ, DIM, K, &g, ids, sc, &small),
                LSHK_STATUS_INVALID_ARGUMENT);
  q[5] = INFINITY;
  EXPECT_STATUS(lshk_index_query(idx, q, NQ, DIM, K, &g, ids, sc, &st),
                LSHK_STATUS_NON_FINITE);
  q[5] = 0.25f;
  CHECK(lshk_canary_intact(ids, sizeof ids));
  CHECK(lshk_canary_intact(sc, sizeof sc));
  CHECK(lshk_canary_intact((char *)&st + sizeof(uint64_t),
                           sizeof st - sizeof(uint64_t)));

  /* query: results, NULL query params and NULL scores give the same ids */
  EXPECT_OK(lshk_index_query(idx, q, NQ, DIM, K, &g, ids, sc, &st));
  CHECK(check_results(ids, sc));
  CHECK(st.struct_size == sizeof st && st.queries == NQ);
  CHECK(st.candidates_min <= st.candidates_max &&
        st.candidates_total >= st.candidates_min * NQ &&
        st.candidates_total <= st.candidates_max * NQ);
  uint32_t ids2[NQ * K];
  EXPECT_OK(lshk_index_query(idx, q, NQ, DIM, K, NULL, ids2, NULL, NULL));
  CHECK(memcmp(ids, ids2, sizeof ids) == 0);
  /* k = 0 and nq = 0 write nothing */
  lshk_fill_canary(ids2, sizeof ids2);
  EXPECT_OK(lshk_index_query(idx, q, NQ, DIM, 0, NULL, ids2, NULL, NULL));
  EXPECT_OK(lshk_index_query(idx, NULL, 0, DIM, K, NULL, NULL, NULL, &st));
  CHECK(lshk_canary_intact(ids2, sizeof ids2));
  CHECK(st.queries == 0 && st.candidates_total == 0);
  /* multi-probing with bits_per_table 0 (= K) finds at least as many */
  lshk_query_stats st2 = st, st1 = st;
  g.lsh.probes = 3;
  EXPECT_OK(lshk_index_query(idx, q, NQ, DIM, K, &g, ids2, NULL, &st2));
  g.lsh.probes = 0;
  EXPECT_OK(lshk_index_query(idx, q, NQ, DIM, K, &g, ids2, NULL, &st1));
  CHECK(st2.candidates_total >= st1.candidates_total);
  /* an LSH source ignores the other sources' knobs */
  {
    lshk_query_params other = lshk_query_params_default();
    uint32_t ids3[NQ * K];
    float sc3[NQ * K];
    other.ivf.nprobe = 1;
    other.graph.ef = 1;
    other.forest.set_size = 1;
    EXPECT_OK(lshk_index_query(idx, q, NQ, DIM, K, &other, ids3, sc3, NULL));
    CHECK(memcmp(ids, ids3, sizeof ids) == 0 && memcmp(sc, sc3, sizeof sc) == 0);
    /* a batch split over threads answers the same bits */
    other = lshk_query_params_default();
    other.threads = 3;
    EXPECT_OK(lshk_index_query(idx, q, NQ, DIM, K, &other, ids3, sc3, NULL));
    CHECK(memcmp(ids, ids3, sizeof ids) == 0 && memcmp(sc, sc3, sizeof sc) == 0);
    other.threads = LSHK_QUERY_THREADS_ALL;
    EXPECT_OK(lshk_index_query(idx, q, NQ, DIM, K, &other, ids3, sc3, NULL));
    CHECK(memcmp(ids, ids3, sizeof ids) == 0 && memcmp(sc, sc3, sizeof sc) == 0);
  }
  /* the IVF counters stay 0 on an LSH source */
  CHECK(st1.lists == 0 && st1.scanned == 0 && st1.reranked == 0);

  /* candidates: what the scorer ranks, ascending per query, as many as the
   * stats count; BUFFER_TOO_SMALL writes only *needed */
  {
    static uint32_t cids[NQ * ROWS], cids2[NQ * ROWS], uids[ROWS], ucnt[ROWS];
    size_t coffs[NQ + 1], need = 0, need2 = 0, nu = 0, total = 0;
    EXPECT_OK(lshk_index_candidates(idx, q, NQ, DIM, K, NULL, cids,
                                    NQ * ROWS, coffs, &need));
    CHECK(coffs[0] == 0 && coffs[NQ] == need && need == st1.candidates_total);
    int ascending = 1;
    for (size_t i = 0; i < NQ; i++)
      for (size_t j = coffs[i] + 1; j < coffs[i + 1]; j++)
        ascending &= cids[j - 1] < cids[j];
    CHECK(ascending);
    /* every returned id is a candidate of its query */
    int found_all = 1;
    for (size_t i = 0; i < NQ; i++)
      for (size_t j = 0; j < K; j++) {
        int found = ids[i * K + j] == UINT32_MAX;
        for (size_t c = coffs[i]; c < coffs[i + 1]; c++)
          found |= cids[c] == ids[i * K + j];
        found_all &= found;
      }
    CHECK(found_all);
    lshk_fill_canary(cids2, sizeof cids2);
    EXPECT_STATUS(lshk_index_candidates(idx, q, NQ, DIM, K, NULL, cids2,
                                        need - 1, coffs, &need2),
                  LSHK_STATUS_BUFFER_TOO_SMALL);
    CHECK(need2 == need && lshk_canary_intact(cids2, sizeof cids2));
    /* the union of the batch's sets: distinct ascending ids whose counts
     * add up to the sets' sizes (no cap) */
    EXPECT_OK(lshk_index_union(idx, cids, need, 0, 7, uids, ucnt, ROWS, &nu));
    CHECK(nu > 0 && nu <= need && nu <= ROWS);
    for (size_t j = 0; j < nu; j++) total += ucnt[j];
    CHECK(total == need);
    for (size_t j = 1; j < nu; j++) CHECK(uids[j - 1] < uids[j]);
  }

  /* the calls of other sources: UNSUPPORTED, nothing written */
  {
    lshk_calibration cal;
    lshk_fill_canary(&cal, sizeof cal);
    cal.struct_size = sizeof cal;
    EXPECT_STATUS(lshk_index_calibrate(idx, q, NQ, DIM, K, 0.9f, 32, 1, &cal),
                  LSHK_STATUS_UNSUPPORTED);
    CHECK(lshk_canary_intact((char *)&cal + sizeof(uint32_t),
                             sizeof cal - sizeof(uint32_t)));
    uint64_t seed = 3;
    EXPECT_STATUS(lshk_index_rebuild(idx, &seed), LSHK_STATUS_UNSUPPORTED);
    EXPECT_STATUS(lshk_index_rebuild(idx, NULL), LSHK_STATUS_UNSUPPORTED);
    EXPECT_OK(lshk_index_query(idx, q, NQ, DIM, K, NULL, ids2, NULL, NULL));
    CHECK(memcmp(ids, ids2, sizeof ids) == 0);
  }

  /* borrowed family and tables handles */
  const lshk_simhash *sh = NULL;
  const lshk_dwta *dw = NULL;
  const lshk_tables *tb = NULL;
  EXPECT_OK(lshk_index_simhash(idx, &sh));
  EXPECT_STATUS(lshk_index_dwta(idx, &dw), LSHK_STATUS_UNSUPPORTED); /* SimHash */
  CHECK(dw == NULL);
  EXPECT_OK(lshk_index_tables(idx, &tb));
  uint32_t sdim = 0, sk = 0, sl = 0;
  EXPECT_OK(lshk_simhash_shape(sh, &sdim, &sk, &sl));
  CHECK(sdim == DIM + 1 && sk == 6 && sl == 10);
  float tq[DIM + 1];
  memcpy(tq, q, DIM * sizeof(float));
  tq[DIM] = 1.0f; /* the bias augmentation of query 0 */
  uint32_t codes[10];
  EXPECT_OK(lshk_simhash_hash(sh, tq, 1, DIM + 1, codes, 10));
  size_t tn = 0;
  uint32_t tl = 0, trb = 0;
  EXPECT_OK(lshk_tables_shape(tb, &tn, &tl, &trb));
  CHECK(tn == ROWS && tl == 10);
  EXPECT_STATUS(lshk_simhash_free((lshk_simhash *)(uintptr_t)sh),
                LSHK_STATUS_INVALID_ARGUMENT);
  EXPECT_STATUS(lshk_tables_free((lshk_tables *)(uintptr_t)tb),
                LSHK_STATUS_INVALID_ARGUMENT);
  {
    uint32_t one_id = 0;
    EXPECT_STATUS(
        lshk_tables_update((lshk_tables *)(uintptr_t)tb, &one_id, codes, 1),
        LSHK_STATUS_INVALID_ARGUMENT);
  }
  /* still usable after the refused frees */
  EXPECT_OK(lshk_simhash_hash(sh, tq, 1, DIM + 1, codes, 10));
  EXPECT_OK(lshk_index_query(idx, q, NQ, DIM, K, NULL, ids2, NULL, NULL));
  CHECK(memcmp(ids, ids2, sizeof ids) == 0);

  /* save / load (weights stored) */
  char path[128];
  int here = 0;
  snprintf(path, sizeof path, "/tmp/lshk-ffi-index-%lx.lshk",
           (unsigned long)(uintptr_t)&here);
  EXPECT_STATUS(lshk_index_save(idx, NULL), LSHK_STATUS_NULL_POINTER);
  EXPECT_STATUS(lshk_index_save(NULL, path), LSHK_STATUS_NULL_POINTER);
  EXPECT_STATUS(lshk_index_save(idx, "/nonexistent-dir/x.lshk"),
                LSHK_STATUS_IO_ERROR);
  EXPECT_OK(lshk_index_save(idx, path));
  lshk_index *back = canary;
  EXPECT_STATUS(lshk_index_load(path, w, 0, &back), LSHK_STATUS_INVALID_ARGUMENT);
  EXPECT_STATUS(lshk_index_load(path, w, STRIDE, &back),
                LSHK_STATUS_INVALID_ARGUMENT);
  EXPECT_STATUS(lshk_index_load(NULL, NULL, 0, &back), LSHK_STATUS_NULL_POINTER);
  EXPECT_STATUS(lshk_index_load(path, NULL, 0, NULL), LSHK_STATUS_NULL_POINTER);
  EXPECT_STATUS(lshk_index_load("/nonexistent-dir/x.lshk", NULL, 0, &back),
                LSHK_STATUS_IO_ERROR);
  CHECK(back == canary);
  EXPECT_OK(lshk_index_load(path, NULL, 0, &back));
  {
    lshk_index_info binfo;
    memset(&binfo, 0, sizeof binfo);
    binfo.struct_size = sizeof binfo;
    EXPECT_OK(lshk_index_describe(back, &binfo));
    CHECK(binfo.source == info.source && binfo.storage == info.storage &&
          binfo.transform == info.transform && binfo.rows == info.rows &&
          binfo.dim == info.dim && binfo.bits_per_table == info.bits_per_table &&
          binfo.tables == info.tables && binfo.labelled == 0);
  }
  float sc2[NQ * K];
  EXPECT_OK(lshk_index_query(back, q, NQ, DIM, K, NULL, ids2, sc2, NULL));
  CHECK(memcmp(ids, ids2, sizeof ids) == 0);
  CHECK(memcmp(sc, sc2, sizeof sc) == 0);
  EXPECT_OK(lshk_index_free(back));

  /* a foreign file */
  {
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (f) {
      static const char junk[200] = "this is not an lshk index";
      fwrite(junk, 1, sizeof junk, f);
      fclose(f);
    }
    back = canary;
    EXPECT_STATUS(lshk_index_load(path, NULL, 0, &back),
                  LSHK_STATUS_BAD_FILE_FORMAT);
    CHECK(back == canary);
  }

  /* the index and its borrowed handles die together */
  EXPECT_OK(lshk_index_free(idx));
  EXPECT_STATUS(lshk_simhash_hash(sh, tq, 1, DIM + 1, codes, 10),
                LSHK_STATUS_INVALID_HANDLE);
  EXPECT_STATUS(lshk_index_free(idx), LSHK_STATUS_INVALID_HANDLE);
  EXPECT_OK(lshk_index_free(NULL));

  /* borrowed W, DWTA, int8 cannot mix: DWTA with borrowed storage */
  p = lshk_index_params_default();
  p.source = LSHK_SOURCE_DWTA;
  p.lsh.bits_per_table = 3;
  p.lsh.tables = 8;
  p.lsh.bin_size = 4;
  p.storage = LSHK_STORAGE_BORROWED_F32;
  EXPECT_OK(lshk_index_build(w, bias, ROWS, DIM, STRIDE, &p, &idx));
  memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  EXPECT_OK(lshk_index_describe(idx, &info));
  CHECK(info.source == LSHK_SOURCE_DWTA &&
        info.storage == LSHK_STORAGE_BORROWED_F32 &&
        info.transform == LSHK_TRANSFORM_NONE && info.rows == ROWS &&
        info.dim == DIM && info.bits_per_table == 3 && info.tables == 8 &&
        info.nlist == 0 && info.labelled == 0);
  EXPECT_STATUS(lshk_index_simhash(idx, &sh), LSHK_STATUS_UNSUPPORTED); /* DWTA */
  EXPECT_OK(lshk_index_dwta(idx, &dw));
  EXPECT_STATUS(lshk_dwta_free((lshk_dwta *)(uintptr_t)dw),
                LSHK_STATUS_INVALID_ARGUMENT);
  EXPECT_OK(lshk_index_query(idx, q, NQ, DIM, K, NULL, ids, sc, NULL));
  CHECK(check_results(ids, sc));
  EXPECT_OK(lshk_index_save(idx, path));
  back = canary;
  EXPECT_STATUS(lshk_index_load(path, NULL, 0, &back),
                LSHK_STATUS_INVALID_ARGUMENT);
  /* w_stride: 0 or the recorded one */
  EXPECT_STATUS(lshk_index_load(path, w, STRIDE + 1, &back),
                LSHK_STATUS_INVALID_ARGUMENT);
  EXPECT_STATUS(lshk_index_load(path, w, DIM, &back),
                LSHK_STATUS_INVALID_ARGUMENT);
  CHECK(back == canary);
  EXPECT_OK(lshk_index_load(path, w, 0, &back));
  EXPECT_OK(lshk_index_query(back, q, NQ, DIM, K, NULL, ids2, sc2, NULL));
  CHECK(memcmp(ids, ids2, sizeof ids) == 0);
  CHECK(memcmp(sc, sc2, sizeof sc) == 0);
  EXPECT_OK(lshk_index_free(back));
  back = NULL;
  EXPECT_OK(lshk_index_load(path, w, STRIDE, &back));
  EXPECT_OK(lshk_index_query(back, q, NQ, DIM, K, NULL, ids2, sc2, NULL));
  CHECK(memcmp(ids, ids2, sizeof ids) == 0);
  CHECK(memcmp(sc, sc2, sizeof sc) == 0);
  {
    lshk_index_info binfo;
    memset(&binfo, 0, sizeof binfo);
    binfo.struct_size = sizeof binfo;
    EXPECT_OK(lshk_index_describe(back, &binfo));
    CHECK(binfo.source == LSHK_SOURCE_DWTA &&
          binfo.storage == LSHK_STORAGE_BORROWED_F32 &&
          binfo.bits_per_table == 3 && binfo.tables == 8);
  }
  EXPECT_OK(lshk_index_free(back));
  EXPECT_OK(lshk_index_free(idx));

  test_codes(path);
  remove(path);

  return lshk_test_summary("index");
}
