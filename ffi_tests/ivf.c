/* C tests of the IVF source of lshk_index (LSHK_SOURCE_IVF): build over a
 * seeded layer (W borrowed and copied, every kind of codes), queries
 * visiting every list with a full re-rank against a brute-force top-k
 * computed here (equal up to ties within the f32 dot-product bound),
 * default searches (returned scores are the exact logits of the returned
 * ids), the stats (lists, scanned, reranked), lshk_index_describe,
 * save/load round trips giving bit-identical results, memory, and the
 * same index (byte for byte, as saved) on every ISA tier; a bf16 storage;
 * calibration (lshk_index_calibrate: its report agrees with queries run
 * with what it chose); label-aware lists (lshk_index_train_labels); row
 * weights (p.ivf.row_weights); and the LSH-only calls refused with
 * UNSUPPORTED. */
#include <math.h>

#include "lshk_test.h"

#define ROWS 500
#define DIM 20
#define STRIDE 23
#define NQ 7
#define QS 21 /* query stride > DIM */
#define K 6
#define NLIST 16
#define NCAL 64 /* calibration sample queries */

static uint64_t rng_state = 4242;
static float next_f(void) {
  rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
  return (float)((double)(rng_state >> 11) / 9007199254740992.0) * 2.0f - 1.0f;
}

static float w[ROWS * STRIDE];
static float bias[ROWS];
static float q[NQ * QS];

/* Exact logit of row r for query i (bias optional) and its magnitude
 * sum |w_d q_d| + |b|. */
static double exact(size_t i, uint32_t r, int with_bias, double *mag) {
  double e = with_bias ? bias[r] : 0.0, m = with_bias ? fabs(bias[r]) : 0.0;
  for (size_t d = 0; d < DIM; d++) {
    double p = (double)w[r * STRIDE + d] * q[i * QS + d];
    e += p;
    m += fabs(p);
  }
  *mag = m;
  return e;
}
/* The f32 bound of a dot product of DIM terms plus a bias: gamma(DIM + 2)
 * times the magnitude. */
static double bound(double mag) {
  const double u = 0x1p-24 * (DIM + 2);
  return u / (1.0 - u) * mag + 1e-30;
}

/* Brute-force top-k of query i: the k largest exact logits (descending,
 * ties by smaller id). */
static void brute_topk(size_t i, int with_bias, uint32_t *ids, double *sc) {
  double all[ROWS], mag;
  int taken[ROWS];
  for (uint32_t r = 0; r < ROWS; r++) {
    all[r] = exact(i, r, with_bias, &mag);
    taken[r] = 0;
  }
  for (size_t j = 0; j < K; j++) {
    uint32_t best = UINT32_MAX;
    for (uint32_t r = 0; r < ROWS; r++)
      if (!taken[r] && (best == UINT32_MAX || all[r] > all[best])) best = r;
    taken[best] = 1;
    ids[j] = best;
    sc[j] = all[best];
  }
}

/* A full search (every list, every candidate re-ranked) equals the exact
 * top-k up to ties within the bound: every returned score is within the
 * bound of its row's logit, scores descend, ids are distinct, and the j-th
 * returned logit is within twice the largest bound of the j-th exact one. */
static int matches_brute_force(const uint32_t *ids, const float *sc,
                               int with_bias) {
  double maxb = 0.0, mag;
  for (size_t i = 0; i < NQ; i++)
    for (uint32_t r = 0; r < ROWS; r++) {
      (void)exact(i, r, with_bias, &mag);
      if (bound(mag) > maxb) maxb = bound(mag);
    }
  for (size_t i = 0; i < NQ; i++) {
    uint32_t rid[K];
    double rsc[K];
    brute_topk(i, with_bias, rid, rsc);
    for (size_t j = 0; j < K; j++) {
      uint32_t id = ids[i * K + j];
      float s = sc[i * K + j];
      if (id >= ROWS) return 0;
      double e = exact(i, id, with_bias, &mag);
      if (fabs((double)s - e) > bound(mag)) return 0;
      if (fabs(e - rsc[j]) > 2.0 * maxb) return 0;
      for (size_t t = 0; t < j; t++)
        if (ids[i * K + t] == id) return 0;
      if (j > 0 && s > sc[i * K + j - 1]) return 0;
      if (j > 0 && s == sc[i * K + j - 1] && id < ids[i * K + j - 1]) return 0;
    }
  }
  return 1;
}

/* Default search: ids in range, distinct, descending exact scores of their
 * rows (rerank > 0 re-scores every returned row exactly). */
static int plausible(const uint32_t *ids, const float *sc, int with_bias) {
  double mag;
  for (size_t i = 0; i < NQ; i++)
    for (size_t j = 0; j < K; j++) {
      uint32_t id = ids[i * K + j];
      if (id == UINT32_MAX) {
        if (!(isinf(sc[i * K + j]) && sc[i * K + j] < 0)) return 0;
        continue;
      }
      if (id >= ROWS) return 0;
      double e = exact(i, id, with_bias, &mag);
      if (fabs((double)sc[i * K + j] - e) > bound(mag)) return 0;
      if (j > 0 && ids[i * K + j - 1] != UINT32_MAX &&
          sc[i * K + j] > sc[i * K + j - 1])
        return 0;
      for (size_t t = 0; t < j; t++)
        if (ids[i * K + t] == id) return 0;
    }
  return 1;
}

static unsigned char *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  unsigned char *b;
  long n;
  if (f == NULL) return NULL;
  if (fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0) {
    fclose(f);
    return NULL;
  }
  rewind(f);
  b = (unsigned char *)malloc((size_t)n + 1);
  if (b == NULL || fread(b, 1, (size_t)n, f) != (size_t)n) {
    fclose(f);
    free(b);
    return NULL;
  }
  fclose(f);
  *len = (size_t)n;
  return b;
}

/* 1 when the files at `a` and `b` hold the same bytes. */
static int same_files(const char *a, const char *b) {
  size_t n1 = 0, n2 = 0;
  unsigned char *x = slurp(a, &n1), *y = slurp(b, &n2);
  int same = x != NULL && y != NULL && n1 == n2 && memcmp(x, y, n1) == 0;
  free(x);
  free(y);
  return same;
}

static char path[160], path2[160];
static size_t last_mem = 0;

/* IVF build parameters: NLIST lists, `codes`, W per `storage`. */
static lshk_index_params ivf_params(uint32_t codes, uint32_t storage) {
  lshk_index_params p = lshk_index_params_default();
  p.source = LSHK_SOURCE_IVF;
  p.storage = storage;
  p.build_threads = 2;
  p.ivf.nlist = NLIST;
  p.ivf.codes = codes;
  p.ivf.seed = 99;
  return p;
}

/* Query parameters visiting every list and re-ranking every row. */
static lshk_query_params full_search(void) {
  lshk_query_params qp = lshk_query_params_default();
  qp.ivf.nprobe = NLIST;
  qp.ivf.rerank = ROWS;
  qp.ivf.reach = 0.0f; /* exactly nprobe lists */
  return qp;
}

static lshk_query_stats fresh_stats(void) {
  lshk_query_stats st;
  memset(&st, 0xA5, sizeof st);
  st.struct_size = sizeof st;
  return st;
}

/* One configuration: build, full and default searches, stats, describe,
 * memory, save/load. */
static void run_config(uint32_t codes, uint32_t storage, int with_bias) {
  const int borrow = storage == LSHK_STORAGE_BORROWED_F32;
  lshk_index_params p = ivf_params(codes, storage);
  lshk_query_params full = full_search();
  lshk_query_stats st;
  lshk_index_info info;
  lshk_index *ivf = NULL, *back = NULL;
  uint32_t ids[NQ * K], ids2[NQ * K];
  float sc[NQ * K], sc2[NQ * K];
  size_t mem = 0, mem2 = 0;
  const float *b = with_bias ? bias : NULL;
  printf("config: codes %u, storage %u, bias %d\n", codes, storage, with_bias);
  EXPECT_OK(lshk_index_build(w, b, ROWS, DIM, STRIDE, &p, &ivf));
  if (ivf == NULL) return;
  memset(&info, 0xA5, sizeof info);
  info.struct_size = sizeof info;
  EXPECT_OK(lshk_index_describe(ivf, &info));
  CHECK(info.source == LSHK_SOURCE_IVF && info.storage == storage &&
        info.transform == LSHK_TRANSFORM_NONE && info.rows == ROWS &&
        info.dim == DIM && info.bits_per_table == 0 && info.tables == 0 &&
        info.nlist == NLIST && info.codes == codes && info.labelled == 0);
  EXPECT_OK(lshk_index_memory_bytes(ivf, &mem));
  CHECK(mem > 0);
  last_mem = mem;

  /* every list, every candidate re-ranked: the exact top-k */
  st = fresh_stats();
  EXPECT_OK(lshk_index_query(ivf, q, NQ, QS, K, &full, ids, sc, &st));
  CHECK(matches_brute_force(ids, sc, with_bias));
  CHECK(st.queries == NQ && st.lists == (uint64_t)NQ * NLIST);
  CHECK(st.scanned == (uint64_t)NQ * ROWS);
  CHECK(st.reranked ==
        (codes == LSHK_IVF_CODES_NONE ? 0 : (uint64_t)NQ * ROWS));
  CHECK(st.struct_size == sizeof st && st.reserved == 0xA5A5A5A5u);
  /* rerank beyond rows acts as rows; nprobe beyond nlist as nlist */
  full.ivf.nprobe = UINT32_MAX;
  full.ivf.rerank = UINT32_MAX;
  EXPECT_OK(lshk_index_query(ivf, q, NQ, QS, K, &full, ids2, sc2, NULL));
  CHECK(memcmp(ids, ids2, sizeof ids) == 0 && memcmp(sc, sc2, sizeof sc) == 0);
  /* scores not wanted: the same ids */
  EXPECT_OK(lshk_index_query(ivf, q, NQ, QS, K, &full, ids2, NULL, NULL));
  CHECK(memcmp(ids, ids2, sizeof ids) == 0);
  /* one query at a time: the same results */
  for (size_t i = 0; i < NQ; i++) {
    EXPECT_OK(lshk_index_query(ivf, q + i * QS, 1, DIM, K, &full, ids2 + i * K,
                               sc2 + i * K, NULL));
  }
  CHECK(memcmp(ids, ids2, sizeof ids) == 0 && memcmp(sc, sc2, sizeof sc) == 0);
  /* the other sources' knobs are ignored */
  full.lsh.probes = 5;
  full.graph.ef = 1;
  full.forest.set_size = 1;
  EXPECT_OK(lshk_index_query(ivf, q, NQ, QS, K, &full, ids2, sc2, NULL));
  CHECK(memcmp(ids, ids2, sizeof ids) == 0 && memcmp(sc, sc2, sizeof sc) == 0);
  full = full_search();

  /* default search (adaptive lists, rerank 32): exact scores of real rows */
  st = fresh_stats();
  EXPECT_OK(lshk_index_query(ivf, q, NQ, QS, K, NULL, ids, sc, &st));
  CHECK(plausible(ids, sc, with_bias));
  CHECK(st.scanned > 0 && st.scanned <= (uint64_t)NQ * ROWS);
  CHECK(st.lists >= NQ && st.lists <= (uint64_t)NQ * NLIST);
  if (codes != LSHK_IVF_CODES_NONE)
    CHECK(st.reranked >= (uint64_t)NQ * K && st.reranked <= (uint64_t)NQ * 32);
  /* one list, no re-ranking: approximate scores, ids still real rows */
  full.ivf.nprobe = 1;
  full.ivf.rerank = 0;
  EXPECT_OK(lshk_index_query(ivf, q, NQ, QS, K, &full, ids2, sc2, &st));
  CHECK(st.reranked == 0 && st.scanned < (uint64_t)NQ * ROWS);
  CHECK(st.lists == NQ);
  for (size_t i = 0; i < NQ * K; i++)
    CHECK(ids2[i] == UINT32_MAX || ids2[i] < ROWS);
  /* adaptive with a cap of one list: the same single best list */
  full.ivf.reach = 2.0f;
  EXPECT_OK(lshk_index_query(ivf, q, NQ, QS, K, &full, ids, sc, &st));
  CHECK(st.lists == NQ && memcmp(ids, ids2, sizeof ids) == 0);
  full.ivf.reach = 0.0f;
  /* ids / sc hold the default search again (compared after save / load) */
  EXPECT_OK(lshk_index_query(ivf, q, NQ, QS, K, NULL, ids, sc, NULL));
  /* k = 0 and nq = 0 write nothing but the stats */
  EXPECT_OK(lshk_index_query(ivf, q, NQ, QS, 0, NULL, NULL, NULL, &st));
  CHECK(st.scanned == 0 && st.reranked == 0);
  EXPECT_OK(lshk_index_query(ivf, NULL, 0, QS, K, NULL, NULL, NULL, NULL));
  /* bad IVF knobs: nothing written */
  lshk_fill_canary(ids2, sizeof ids2);
  full = full_search();
  full.ivf.nprobe = 0;
  EXPECT_STATUS(lshk_index_query(ivf, q, NQ, QS, K, &full, ids2, NULL, NULL),
                LSHK_STATUS_INVALID_ARGUMENT);
  full = full_search();
  full.ivf.reach = -1.0f;
  EXPECT_STATUS(lshk_index_query(ivf, q, NQ, QS, K, &full, ids2, NULL, NULL),
                LSHK_STATUS_INVALID_ARGUMENT);
  full.ivf.reach = NAN;
  EXPECT_STATUS(lshk_index_query(ivf, q, NQ, QS, K, &full, ids2, NULL, NULL),
                LSHK_STATUS_INVALID_ARGUMENT);
  CHECK(lshk_canary_intact(ids2, sizeof ids2));

  /* save / load: identical results, describe and memory */
  EXPECT_OK(lshk_index_save(ivf, path));
  back = (lshk_index *)(uintptr_t)0x1230;
  EXPECT_STATUS(lshk_index_load(path, borrow ? NULL : w, borrow ? 0 : STRIDE, &back),
                LSHK_STATUS_INVALID_ARGUMENT);
  if (borrow)
    EXPECT_STATUS(lshk_index_load(path, w, STRIDE + 1, &back),
                  LSHK_STATUS_INVALID_ARGUMENT);
  CHECK(back == (lshk_index *)(uintptr_t)0x1230);
  back = NULL;
  EXPECT_OK(lshk_index_load(path, borrow ? w : NULL, borrow ? STRIDE : 0, &back));
  if (back != NULL) {
    lshk_index_info binfo;
    memset(&binfo, 0, sizeof binfo);
    binfo.struct_size = sizeof binfo;
    EXPECT_OK(lshk_index_describe(back, &binfo));
    CHECK(binfo.source == LSHK_SOURCE_IVF && binfo.storage == storage &&
          binfo.rows == ROWS && binfo.dim == DIM && binfo.nlist == NLIST &&
          binfo.codes == codes && binfo.labelled == 0);
    EXPECT_OK(lshk_index_memory_bytes(back, &mem2));
    CHECK(mem2 == mem);
    EXPECT_OK(lshk_index_query(back, q, NQ, QS, K, NULL, ids2, sc2, NULL));
    CHECK(memcmp(ids, ids2, sizeof ids) == 0 &&
          memcmp(sc, sc2, sizeof sc) == 0);
    /* a loaded index saves to the same bytes */
    EXPECT_OK(lshk_index_save(back, path2));
    CHECK(same_files(path, path2));
    EXPECT_OK(lshk_index_free(back));
  }
  remove(path);
  remove(path2);
  EXPECT_OK(lshk_index_free(ivf));
}

/* Recall@K of `got` against `truth` (NCAL queries, K ids each): the mean
 * over queries of the fraction of the true ids found. */
static double recall_at_k(const uint32_t *got, const uint32_t *truth) {
  double sum = 0.0;
  for (size_t i = 0; i < NCAL; i++) {
    size_t hit = 0;
    for (size_t j = 0; j < K; j++)
      for (size_t t = 0; t < K; t++) hit += got[i * K + j] == truth[i * K + t];
    sum += (double)hit / K;
  }
  return sum / NCAL;
}

/* lshk_index_calibrate: deterministic, independent of threads, and what it
 * reports (recall, rows scanned) is what queries with its parameters get
 * on the same sample; bad arguments write nothing. */
static void calibration(void) {
  static float cq[NCAL * DIM];
  static uint32_t truth[NCAL * K], got[NCAL * K];
  lshk_index_params p = ivf_params(LSHK_IVF_CODES_I8, LSHK_STORAGE_BORROWED_F32);
  lshk_index *ivf = NULL;
  lshk_calibration c1, c2;
  lshk_query_params full = full_search(), fixed;
  lshk_query_stats st = fresh_stats();
  const float target = 0.9f;
  /* sample queries near rows (a query's answers are a neighbourhood) */
  for (size_t i = 0; i < NCAL; i++)
    for (size_t d = 0; d < DIM; d++)
      cq[i * DIM + d] = w[(i * 7 % ROWS) * STRIDE + d] + 0.5f * next_f();
  EXPECT_OK(lshk_index_build(w, bias, ROWS, DIM, STRIDE, &p, &ivf));
  if (ivf == NULL) return;
  memset(&c1, 0, sizeof c1);
  memset(&c2, 0, sizeof c2);
  c1.struct_size = c2.struct_size = sizeof c1;
  EXPECT_OK(lshk_index_calibrate(ivf, cq, NCAL, DIM, K, target, 32, 1, &c1));
  EXPECT_OK(lshk_index_calibrate(ivf, cq, NCAL, DIM, K, target, 32, 2, &c2));
  CHECK(memcmp(&c1, &c2, sizeof c1) == 0);
  printf("calibration: met %u, recall %.4f (lower %.4f), scanned %.1f; "
         "fixed nprobe %u (%.4f, %.1f), adaptive reach %.4f (%.4f, %.1f)\n",
         c1.met, c1.recall, c1.recall_lower, c1.scanned, c1.fixed_nprobe,
         c1.fixed_recall, c1.fixed_scanned, c1.adaptive_reach,
         c1.adaptive_recall, c1.adaptive_scanned);
  CHECK(c1.struct_size == sizeof c1);
  /* every list with rerank 32 >= K finds the exact top-k: met */
  CHECK(c1.met == 1 && c1.recall_lower >= target &&
        c1.recall_lower <= c1.recall && c1.recall <= 1.0f);
  CHECK(c1.fixed_nprobe >= 1 && c1.fixed_nprobe <= NLIST);
  CHECK(c1.adaptive_reach >= 0.0f && c1.adaptive_reach <= 16.0f);
  CHECK(c1.query.struct_size == sizeof(lshk_query_params) &&
        c1.query.threads == 0 && c1.query.ivf.rerank == 32);
  /* the chosen point is the cheaper one */
  CHECK(c1.scanned == c1.fixed_scanned || c1.scanned == c1.adaptive_scanned);
  CHECK(c1.scanned <= (double)ROWS && c1.scanned > 0.0);

  /* its figures are those of the queries it chose */
  EXPECT_OK(lshk_index_query(ivf, cq, NCAL, DIM, K, &full, truth, NULL, NULL));
  EXPECT_OK(lshk_index_query(ivf, cq, NCAL, DIM, K, &c1.query, got, NULL, &st));
  CHECK(fabs(recall_at_k(got, truth) - (double)c1.recall) < 1e-6);
  CHECK((double)st.scanned / NCAL == c1.scanned);
  fixed = lshk_query_params_default();
  fixed.ivf.nprobe = c1.fixed_nprobe;
  fixed.ivf.reach = 0.0f;
  fixed.ivf.rerank = 32;
  EXPECT_OK(lshk_index_query(ivf, cq, NCAL, DIM, K, &fixed, got, NULL, &st));
  CHECK(fabs(recall_at_k(got, truth) - (double)c1.fixed_recall) < 1e-6);
  CHECK((double)st.scanned / NCAL == c1.fixed_scanned);
  CHECK(st.lists == (uint64_t)NCAL * c1.fixed_nprobe);

  /* a target of 1 on this sample is met or not; either way a point that
   * was measured comes back */
  EXPECT_OK(lshk_index_calibrate(ivf, cq, NCAL, DIM, K, 1.0f, 32, 1, &c2));
  CHECK(c2.met == (c2.recall_lower >= 1.0f));

  /* bad arguments: nothing written but the caller's struct_size */
  lshk_fill_canary(&c2, sizeof c2);
  c2.struct_size = sizeof c2;
  EXPECT_STATUS(lshk_index_calibrate(ivf, cq, NCAL, DIM, K, 0.0f, 32, 1, &c2),
                LSHK_STATUS_INVALID_ARGUMENT);
  EXPECT_STATUS(lshk_index_calibrate(ivf, cq, NCAL, DIM, K, 1.5f, 32, 1, &c2),
                LSHK_STATUS_INVALID_ARGUMENT);
  EXPECT_STATUS(lshk_index_calibrate(ivf, cq, NCAL, DIM, 0, 0.9f, 32, 1, &c2),
                LSHK_STATUS_INVALID_ARGUMENT);
  EXPECT_STATUS(lshk_index_calibrate(ivf, cq, 0, DIM, K, 0.9f, 32, 1, &c2),
                LSHK_STATUS_INVALID_ARGUMENT);
  EXPECT_STATUS(lshk_index_calibrate(ivf, cq, NCAL, DIM - 1, K, 0.9f, 32, 1, &c2),
                LSHK_STATUS_INVALID_ARGUMENT);
  EXPECT_STATUS(lshk_index_calibrate(ivf, NULL, NCAL, DIM, K, 0.9f, 32, 1, &c2),
                LSHK_STATUS_NULL_POINTER);
  EXPECT_STATUS(lshk_index_calibrate(ivf, cq, NCAL, DIM, K, 0.9f, 32, 1, NULL),
                LSHK_STATUS_NULL_POINTER);
  cq[3] = NAN;
  EXPECT_STATUS(lshk_index_calibrate(ivf, cq, NCAL, DIM, K, 0.9f, 32, 1, &c2),
                LSHK_STATUS_NON_FINITE);
  cq[3] = 0.0f;
  CHECK(lshk_canary_intact((char *)&c2 + sizeof(uint32_t),
                           sizeof c2 - sizeof(uint32_t)));
  c2.struct_size = sizeof c2 - 8;
  EXPECT_STATUS(lshk_index_calibrate(ivf, cq, NCAL, DIM, K, 0.9f, 32, 1, &c2),
                LSHK_STATUS_INVALID_ARGUMENT);
  CHECK(lshk_canary_intact((char *)&c2 + sizeof(uint32_t),
                           sizeof c2 - sizeof(uint32_t)));
  EXPECT_OK(lshk_index_free(ivf));
}

#define NT 30 /* label training queries */

/* lshk_index_train_labels on IVF lists: with INSTEAD a training query's
 * first list holds its labels (the candidates of a one-list search whose k
 * and rerank cover the whole list include them); with BESIDE a search of every list is still the exact
 * top-k; the training is reported (label_info, describe) and saved. */
static void label_lists(void) {
  static float tq[NT * DIM];
  static size_t offs[NT + 1];
  static uint32_t labels[NT * 2];
  static uint32_t cids[NT * ROWS];
  size_t coffs[NT + 1], need = 0;
  lshk_label_params lp = lshk_label_params_default(), info;
  lshk_query_params one = lshk_query_params_default();
  uint32_t trained = 7;
  for (size_t i = 0; i < NT * DIM; i++) tq[i] = next_f();
  offs[0] = 0;
  for (size_t i = 0; i < NT; i++) {
    labels[2 * i] = (uint32_t)(i * 17 % ROWS);
    labels[2 * i + 1] = (uint32_t)(i * 31 % ROWS);
    offs[i + 1] = 2 * (i + 1);
  }
  one.ivf.nprobe = 1;
  one.ivf.reach = 0.0f;
  one.ivf.rerank = ROWS;
  lp.label_cap = 0;

  for (uint32_t policy = LSHK_LABEL_POLICY_BESIDE;
       policy <= LSHK_LABEL_POLICY_INSTEAD; policy++) {
    lshk_index_params p = ivf_params(LSHK_IVF_CODES_I8, LSHK_STORAGE_F32);
    lshk_index *ivf = NULL, *back = NULL;
    lshk_index_info di;
    EXPECT_OK(lshk_index_build(w, bias, ROWS, DIM, STRIDE, &p, &ivf));
    if (ivf == NULL) return;
    EXPECT_OK(lshk_index_label_info(ivf, &trained, NULL));
    CHECK(trained == 0);
    lp.policy = policy;
    /* bad labels change nothing */
    labels[3] = ROWS;
    EXPECT_STATUS(lshk_index_train_labels(ivf, tq, NT, DIM, offs, labels, &lp),
                  LSHK_STATUS_INDEX_OUT_OF_RANGE);
    labels[3] = 3;
    EXPECT_OK(lshk_index_label_info(ivf, &trained, NULL));
    CHECK(trained == 0);

    EXPECT_OK(lshk_index_train_labels(ivf, tq, NT, DIM, offs, labels, &lp));
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    EXPECT_OK(lshk_index_label_info(ivf, &trained, &info));
    CHECK(trained == 1 && info.label_cap == 0 && info.policy == policy);
    if (trained != 1) { /* the checks below need the trained lists */
      EXPECT_OK(lshk_index_free(ivf));
      continue;
    }
    memset(&di, 0, sizeof di);
    di.struct_size = sizeof di;
    EXPECT_OK(lshk_index_describe(ivf, &di));
    CHECK(di.labelled == 1 && di.source == LSHK_SOURCE_IVF && di.nlist == NLIST);
    /* trained once only */
    EXPECT_STATUS(lshk_index_train_labels(ivf, tq, NT, DIM, offs, labels, &lp),
                  LSHK_STATUS_INVALID_ARGUMENT);

    if (policy == LSHK_LABEL_POLICY_INSTEAD) {
      /* k and rerank cover the whole list: every entry a candidate */
      EXPECT_OK(lshk_index_candidates(ivf, tq, NT, DIM, ROWS, &one, cids,
                                      NT * ROWS, coffs, &need));
      CHECK(need < (size_t)NT * ROWS); /* one list each, not every row */
      int all = 1;
      for (size_t i = 0; i < NT; i++)
        for (size_t t = offs[i]; t < offs[i + 1]; t++) {
          int found = 0;
          for (size_t c = coffs[i]; c < coffs[i + 1]; c++)
            found |= cids[c] == labels[t];
          all &= found;
        }
      CHECK(all);
    } else {
      uint32_t ids[NQ * K];
      float sc[NQ * K];
      lshk_query_params full = full_search();
      EXPECT_OK(lshk_index_query(ivf, q, NQ, QS, K, &full, ids, sc, NULL));
      CHECK(matches_brute_force(ids, sc, 1));
    }

    /* saved and loaded: still trained, the same answers */
    EXPECT_OK(lshk_index_save(ivf, path));
    EXPECT_OK(lshk_index_load(path, NULL, 0, &back));
    if (back != NULL) {
      uint32_t a[NQ * K], b[NQ * K];
      float as[NQ * K], bs[NQ * K];
      trained = 0;
      EXPECT_OK(lshk_index_label_info(back, &trained, &info));
      CHECK(trained == 1 && info.policy == policy);
      EXPECT_OK(lshk_index_query(ivf, q, NQ, QS, K, &one, a, as, NULL));
      EXPECT_OK(lshk_index_query(back, q, NQ, QS, K, &one, b, bs, NULL));
      CHECK(memcmp(a, b, sizeof a) == 0 && memcmp(as, bs, sizeof as) == 0);
      EXPECT_OK(lshk_index_free(back));
    }
    remove(path);
    EXPECT_OK(lshk_index_free(ivf));
  }
}

/* p.ivf.row_weights: weights all 1 give the unweighted index (the same
 * file); other weights give other lists over every row (an exhaustive
 * search is still the exact top-k) and finer lists where the weight is
 * (a one-list search from a heavy row scans fewer rows); bad weights are
 * refused. */
static void row_weights(void) {
  static float wt[ROWS];
  lshk_index_params p = ivf_params(LSHK_IVF_CODES_I8, LSHK_STORAGE_F32);
  lshk_index *a = NULL, *b = NULL;
  lshk_index *canary = (lshk_index *)(uintptr_t)0x1230, *c = canary;
  lshk_query_params full = full_search(), one = lshk_query_params_default();
  lshk_query_stats sa = fresh_stats(), sb = fresh_stats();
  static float hq[50 * DIM];
  static uint32_t heavy[50];
  uint32_t ids[NQ * K], hids[50 * K];
  float sc[NQ * K];
  for (size_t r = 0; r < ROWS; r++) wt[r] = 1.0f;
  p.ivf.row_weights = wt;
  p.ivf.n_weights = ROWS;
  EXPECT_OK(lshk_index_build(w, bias, ROWS, DIM, STRIDE, &p, &b));
  p.ivf.row_weights = NULL;
  p.ivf.n_weights = 0;
  EXPECT_OK(lshk_index_build(w, bias, ROWS, DIM, STRIDE, &p, &a));
  if (a == NULL || b == NULL) return;
  EXPECT_OK(lshk_index_save(a, path));
  EXPECT_OK(lshk_index_save(b, path2));
  CHECK(same_files(path, path2));
  EXPECT_OK(lshk_index_free(b));
  b = NULL;

  /* the 50 rows nearest to row 0 (a region; the queries below) weigh 50 */
  {
    static double d2[ROWS];
    for (size_t r = 0; r < ROWS; r++) {
      d2[r] = 0.0;
      for (size_t d = 0; d < DIM; d++) {
        double t = (double)w[r * STRIDE + d] - w[d];
        d2[r] += t * t;
      }
    }
    for (size_t i = 0; i < 50; i++) {
      size_t best = ROWS;
      for (size_t r = 0; r < ROWS; r++)
        if (wt[r] == 1.0f && (best == ROWS || d2[r] < d2[best])) best = r;
      wt[best] = 50.0f;
      heavy[i] = (uint32_t)best;
    }
  }
  p.ivf.row_weights = wt;
  p.ivf.n_weights = ROWS;
  EXPECT_OK(lshk_index_build(w, bias, ROWS, DIM, STRIDE, &p, &b));
  if (b == NULL) return;
  EXPECT_OK(lshk_index_save(b, path2));
  CHECK(!same_files(path, path2));
  EXPECT_OK(lshk_index_query(b, q, NQ, QS, K, &full, ids, sc, &sb));
  CHECK(matches_brute_force(ids, sc, 1));
  CHECK(sb.scanned == (uint64_t)NQ * ROWS); /* every row in one list */
  for (size_t i = 0; i < 50; i++)
    memcpy(&hq[i * DIM], &w[heavy[i] * STRIDE], DIM * sizeof(float));
  one.ivf.nprobe = 1;
  one.ivf.reach = 0.0f;
  EXPECT_OK(lshk_index_query(a, hq, 50, DIM, K, &one, hids, NULL, &sa));
  EXPECT_OK(lshk_index_query(b, hq, 50, DIM, K, &one, hids, NULL, &sb));
  printf("row weights: rows scanned by 50 one-list searches from heavy rows "
         "%llu -> %llu\n",
         (unsigned long long)sa.scanned, (unsigned long long)sb.scanned);
  CHECK(sb.scanned < sa.scanned);
  /* zero weights beside a positive one: every row still listed */
  for (size_t r = 0; r < ROWS; r++) wt[r] = r == 3 ? 1.0f : 0.0f;
  EXPECT_OK(lshk_index_build(w, bias, ROWS, DIM, STRIDE, &p, &c));
  if (c != canary && c != NULL) {
    EXPECT_OK(lshk_index_query(c, q, NQ, QS, K, &full, ids, sc, &sb));
    CHECK(matches_brute_force(ids, sc, 1));
    EXPECT_OK(lshk_index_free(c));
  }
  c = canary;

  /* refused: nothing built */
  for (size_t r = 0; r < ROWS; r++) wt[r] = 1.0f;
  p.ivf.n_weights = ROWS - 1;
  EXPECT_STATUS(lshk_index_build(w, bias, ROWS, DIM, STRIDE, &p, &c),
                LSHK_STATUS_INVALID_ARGUMENT);
  p.ivf.n_weights = ROWS;
  wt[7] = -1.0f;
  EXPECT_STATUS(lshk_index_build(w, bias, ROWS, DIM, STRIDE, &p, &c),
                LSHK_STATUS_INVALID_ARGUMENT);
  wt[7] = NAN;
  EXPECT_STATUS(lshk_index_build(w, bias, ROWS, DIM, STRIDE, &p, &c),
                LSHK_STATUS_NON_FINITE);
  for (size_t r = 0; r < ROWS; r++) wt[r] = 0.0f;
  EXPECT_STATUS(lshk_index_build(w, bias, ROWS, DIM, STRIDE, &p, &c),
                LSHK_STATUS_INVALID_ARGUMENT);
  p.ivf.row_weights = NULL;
  EXPECT_STATUS(lshk_index_build(w, bias, ROWS, DIM, STRIDE, &p, &c),
                LSHK_STATUS_NULL_POINTER);
  CHECK(c == canary);
  remove(path);
  remove(path2);
  EXPECT_OK(lshk_index_free(a));
  EXPECT_OK(lshk_index_free(b));
}

/* The LSH-only calls on an IVF index: UNSUPPORTED, nothing written, the
 * index unchanged. */
static void lsh_only_calls(void) {
  lshk_index_params p = ivf_params(LSHK_IVF_CODES_I8, LSHK_STORAGE_BORROWED_F32);
  lshk_index *ivf = NULL;
  uint32_t ids[NQ * K], ids2[NQ * K], one = 1;
  size_t n = 77;
  EXPECT_OK(lshk_index_build(w, bias, ROWS, DIM, STRIDE, &p, &ivf));
  if (ivf == NULL) return;
  EXPECT_OK(lshk_index_query(ivf, q, NQ, QS, K, NULL, ids, NULL, NULL));
  {
    const lshk_simhash *sh = (const lshk_simhash *)&n;
    const lshk_dwta *dw = (const lshk_dwta *)&n;
    const lshk_tables *tb = (const lshk_tables *)&n;
    EXPECT_STATUS(lshk_index_simhash(ivf, &sh), LSHK_STATUS_UNSUPPORTED);
    EXPECT_STATUS(lshk_index_dwta(ivf, &dw), LSHK_STATUS_UNSUPPORTED);
    EXPECT_STATUS(lshk_index_tables(ivf, &tb), LSHK_STATUS_UNSUPPORTED);
    CHECK(sh == (const lshk_simhash *)&n && dw == (const lshk_dwta *)&n &&
          tb == (const lshk_tables *)&n);
  }
  EXPECT_STATUS(lshk_index_update_rows(ivf, &one, 1, NULL, 0, NULL),
                LSHK_STATUS_UNSUPPORTED);
  EXPECT_STATUS(lshk_index_rehash_rows(ivf, &one, 1, &n), LSHK_STATUS_UNSUPPORTED);
  EXPECT_STATUS(lshk_index_rehash_dirty(ivf, &n), LSHK_STATUS_UNSUPPORTED);
  CHECK(n == 77);
  EXPECT_STATUS(lshk_index_rebuild(ivf, NULL), LSHK_STATUS_UNSUPPORTED);
  EXPECT_OK(lshk_index_query(ivf, q, NQ, QS, K, NULL, ids2, NULL, NULL));
  CHECK(memcmp(ids, ids2, sizeof ids) == 0);
  EXPECT_OK(lshk_index_free(ivf));
}

int main(void) {
  int here = 0;
  for (size_t i = 0; i < ROWS * STRIDE; i++) w[i] = next_f();
  for (size_t i = 0; i < ROWS; i++) bias[i] = 0.2f * next_f();
  for (size_t i = 0; i < NQ * QS; i++) q[i] = next_f();
  snprintf(path, sizeof path, "/tmp/lshk-ffi-ivf-%lx.lshk",
           (unsigned long)(uintptr_t)&here);
  snprintf(path2, sizeof path2, "/tmp/lshk-ffi-ivf-%lx-2.lshk",
           (unsigned long)(uintptr_t)&here);

  run_config(LSHK_IVF_CODES_I8, LSHK_STORAGE_BORROWED_F32, 1);
  {
    size_t borrowed = last_mem;
    run_config(LSHK_IVF_CODES_I8, LSHK_STORAGE_F32, 1);
    /* the owned copy of W is counted once (the lists re-rank from it), a
     * borrowed W not at all */
    CHECK(last_mem == borrowed + (size_t)ROWS * DIM * sizeof(float));
  }
  run_config(LSHK_IVF_CODES_NONE, LSHK_STORAGE_F32, 1);
  run_config(LSHK_IVF_CODES_I8, LSHK_STORAGE_BORROWED_F32, 0);
  run_config(LSHK_IVF_CODES_PQ4, LSHK_STORAGE_BORROWED_F32, 1);
  run_config(LSHK_IVF_CODES_PQ4, LSHK_STORAGE_F32, 0);
  run_config(LSHK_IVF_CODES_PQ4_I8, LSHK_STORAGE_BORROWED_F32, 1);
  run_config(LSHK_IVF_CODES_PQ4_I8, LSHK_STORAGE_F32, 0);

  /* bf16 storage: the scorer ranks by the stored bf16 W; every returned
   * score is its row's logit within bf16's rounding (2^-8 relative per
   * element) */
  {
    lshk_index_params p = ivf_params(LSHK_IVF_CODES_I8, LSHK_STORAGE_BF16);
    lshk_query_params full = full_search();
    lshk_index *ivf = NULL;
    uint32_t ids[NQ * K];
    float sc[NQ * K];
    int ok = 1;
    EXPECT_OK(lshk_index_build(w, bias, ROWS, DIM, STRIDE, &p, &ivf));
    EXPECT_OK(lshk_index_query(ivf, q, NQ, QS, K, &full, ids, sc, NULL));
    for (size_t i = 0; i < NQ; i++)
      for (size_t j = 0; j < K; j++) {
        double mag, e;
        if (ids[i * K + j] >= ROWS) {
          ok = 0;
          continue;
        }
        e = exact(i, ids[i * K + j], 1, &mag);
        ok &= fabs((double)sc[i * K + j] - e) <= 0x1p-8 * mag + bound(mag);
        if (j > 0) ok &= sc[i * K + j] <= sc[i * K + j - 1];
      }
    CHECK(ok);
    EXPECT_OK(lshk_index_free(ivf));
  }

  /* NULL knobs: defaults (nlist round(4 sqrt(500)) = 89) */
  {
    lshk_index_params p = lshk_index_params_default();
    lshk_index *ivf = NULL;
    lshk_index_info info;
    p.source = LSHK_SOURCE_IVF;
    EXPECT_OK(lshk_index_build(w, bias, ROWS, DIM, STRIDE, &p, &ivf));
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    EXPECT_OK(lshk_index_describe(ivf, &info));
    CHECK(info.nlist == 89 && info.codes == LSHK_IVF_CODES_I8 &&
          info.storage == LSHK_STORAGE_F32);
    EXPECT_OK(lshk_index_free(ivf));
  }

  /* bad IVF knobs: nothing built */
  {
    lshk_index *canary = (lshk_index *)(uintptr_t)0x1230, *ivf = canary;
    lshk_index_params p = ivf_params(LSHK_IVF_CODES_I8, LSHK_STORAGE_F32);
    p.ivf.nlist = ROWS + 1;
    EXPECT_STATUS(lshk_index_build(w, bias, ROWS, DIM, STRIDE, &p, &ivf),
                  LSHK_STATUS_INVALID_ARGUMENT);
    p = ivf_params(LSHK_IVF_CODES_I8, LSHK_STORAGE_F32);
    p.ivf.iters = 0;
    EXPECT_STATUS(lshk_index_build(w, bias, ROWS, DIM, STRIDE, &p, &ivf),
                  LSHK_STATUS_INVALID_ARGUMENT);
    p = ivf_params(LSHK_IVF_CODES_I8, LSHK_STORAGE_F32);
    p.ivf.codes = 4;
    EXPECT_STATUS(lshk_index_build(w, bias, ROWS, DIM, STRIDE, &p, &ivf),
                  LSHK_STATUS_INVALID_ARGUMENT);
    p = ivf_params(LSHK_IVF_CODES_I8, LSHK_STORAGE_F32);
    p.ivf.pq_m = 4; /* only with PQ4 codes */
    EXPECT_STATUS(lshk_index_build(w, bias, ROWS, DIM, STRIDE, &p, &ivf),
                  LSHK_STATUS_INVALID_ARGUMENT);
    p = ivf_params(LSHK_IVF_CODES_I8, LSHK_STORAGE_F32);
    p.ivf.reserved = 1;
    EXPECT_STATUS(lshk_index_build(w, bias, ROWS, DIM, STRIDE, &p, &ivf),
                  LSHK_STATUS_INVALID_ARGUMENT);
    p = ivf_params(LSHK_IVF_CODES_I8, LSHK_STORAGE_F32);
    p.transform = LSHK_TRANSFORM_BIAS_AUG;
    EXPECT_STATUS(lshk_index_build(w, bias, ROWS, DIM, STRIDE, &p, &ivf),
                  LSHK_STATUS_INVALID_ARGUMENT);
    CHECK(ivf == canary);
  }

  /* The index is the same on every tier and thread count: saved (W
   * copied) under each tier cap, the files are identical. */
  {
    lshk_isa top = lshk_isa_active();
    unsigned char *ref = NULL;
    size_t ref_len = 0;
    for (lshk_isa t = LSHK_ISA_SCALAR; t <= top; t++) {
      lshk_index_params p = ivf_params(LSHK_IVF_CODES_I8, LSHK_STORAGE_F32);
      lshk_index *ivf = NULL;
      unsigned char *b;
      size_t n = 0;
      p.build_threads = t % 2 ? 1 : 2;
      EXPECT_OK(lshk_isa_set_max(t));
      EXPECT_OK(lshk_index_build(w, bias, ROWS, DIM, STRIDE, &p, &ivf));
      EXPECT_OK(lshk_index_save(ivf, path));
      EXPECT_OK(lshk_index_free(ivf));
      b = slurp(path, &n);
      CHECK(b != NULL);
      if (ref == NULL) {
        ref = b;
        ref_len = n;
      } else {
        CHECK(n == ref_len && memcmp(b, ref, n) == 0);
        free(b);
      }
    }
    free(ref);
    remove(path);
    EXPECT_OK(lshk_isa_set_max(top));
  }

  calibration();
  label_lists();
  row_weights();
  lsh_only_calls();

  /* a double free is reported */
  {
    lshk_index_params p = lshk_index_params_default();
    lshk_index *ivf = NULL;
    p.source = LSHK_SOURCE_IVF;
    EXPECT_OK(lshk_index_build(w, NULL, ROWS, DIM, STRIDE, &p, &ivf));
    EXPECT_OK(lshk_index_free(ivf));
    EXPECT_STATUS(lshk_index_free(ivf), LSHK_STATUS_INVALID_HANDLE);
  }

  return lshk_test_summary("ivf");
}
