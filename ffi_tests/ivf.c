/* C tests of lshk_ivf_*: build over a seeded layer (W borrowed and copied,
 * int8 codes and none), queries visiting every list with a full re-rank
 * against a brute-force top-k computed here (equal up to ties within the
 * f32 dot-product bound), default searches (returned scores are the exact
 * logits of the returned ids), stats, save/load round trips giving
 * bit-identical results, shape and memory, and the same index (byte for
 * byte, as saved) on every ISA tier. */
#include <math.h>

#include "lshk_test.h"

#define ROWS 500
#define DIM 20
#define STRIDE 23
#define NQ 7
#define QS 21 /* query stride > DIM */
#define K 6
#define NLIST 16

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

static char path[160], path2[160];
static size_t last_mem = 0;

/* One configuration: build, full and default searches, stats, shape,
 * memory, save/load. */
static void run_config(uint32_t codes, uint32_t borrow, int with_bias) {
  lshk_ivf_params p = lshk_ivf_params_default();
  lshk_ivf_search full = lshk_ivf_search_default();
  lshk_ivf_stats st;
  lshk_ivf *ivf = NULL, *back = NULL;
  uint32_t ids[NQ * K], ids2[NQ * K];
  float sc[NQ * K], sc2[NQ * K];
  size_t rows = 0, dim = 0, mem = 0, mem2 = 0;
  uint32_t nlist = 0;
  const float *b = with_bias ? bias : NULL;
  printf("config: codes %u, borrow %u, bias %d\n", codes, borrow, with_bias);
  p.nlist = NLIST;
  p.codes = codes;
  p.borrow = borrow;
  p.threads = 2;
  p.seed = 99;
  EXPECT_OK(lshk_ivf_build(w, b, ROWS, DIM, STRIDE, &p, &ivf));
  if (ivf == NULL) return;
  EXPECT_OK(lshk_ivf_shape(ivf, &rows, &dim, &nlist));
  CHECK(rows == ROWS && dim == DIM && nlist == NLIST);
  EXPECT_OK(lshk_ivf_memory_bytes(ivf, &mem));
  CHECK(mem > 0);
  last_mem = mem;

  /* every list, every candidate re-ranked: the exact top-k */
  full.nprobe = NLIST;
  full.rerank = ROWS;
  full.reach = 0.0f; /* exactly nprobe lists */
  memset(&st, 0xA5, sizeof st);
  st.struct_size = sizeof st;
  EXPECT_OK(lshk_ivf_query(ivf, q, NQ, QS, K, &full, ids, sc, &st));
  CHECK(matches_brute_force(ids, sc, with_bias));
  CHECK(st.scanned == (uint64_t)NQ * ROWS);
  CHECK(st.reranked ==
        (codes == LSHK_IVF_CODES_NONE ? 0 : (uint64_t)NQ * ROWS));
  CHECK(st.struct_size == sizeof st && st.reserved == 0xA5A5A5A5u);
  /* rerank beyond rows acts as rows; nprobe beyond nlist as nlist */
  full.nprobe = UINT32_MAX;
  full.rerank = UINT32_MAX;
  EXPECT_OK(lshk_ivf_query(ivf, q, NQ, QS, K, &full, ids2, sc2, NULL));
  CHECK(memcmp(ids, ids2, sizeof ids) == 0 && memcmp(sc, sc2, sizeof sc) == 0);
  /* scores not wanted: the same ids */
  EXPECT_OK(lshk_ivf_query(ivf, q, NQ, QS, K, &full, ids2, NULL, NULL));
  CHECK(memcmp(ids, ids2, sizeof ids) == 0);
  /* one query at a time: the same results */
  for (size_t i = 0; i < NQ; i++) {
    EXPECT_OK(lshk_ivf_query(ivf, q + i * QS, 1, DIM, K, &full, ids2 + i * K,
                             sc2 + i * K, NULL));
  }
  CHECK(memcmp(ids, ids2, sizeof ids) == 0 && memcmp(sc, sc2, sizeof sc) == 0);

  /* default search (adaptive lists, rerank 32): exact scores of real rows */
  EXPECT_OK(lshk_ivf_query(ivf, q, NQ, QS, K, NULL, ids, sc, &st));
  CHECK(plausible(ids, sc, with_bias));
  CHECK(st.scanned > 0 && st.scanned <= (uint64_t)NQ * ROWS);
  CHECK(st.lists >= NQ && st.lists <= (uint64_t)NQ * NLIST);
  if (codes != LSHK_IVF_CODES_NONE)
    CHECK(st.reranked >= (uint64_t)NQ * K && st.reranked <= (uint64_t)NQ * 32);
  /* one list, no re-ranking: approximate scores, ids still real rows */
  full.nprobe = 1;
  full.rerank = 0;
  EXPECT_OK(lshk_ivf_query(ivf, q, NQ, QS, K, &full, ids2, sc2, &st));
  CHECK(st.reranked == 0 && st.scanned < (uint64_t)NQ * ROWS);
  CHECK(st.lists == NQ);
  /* adaptive with a cap of one list: the same single best list */
  full.reach = 2.0f;
  EXPECT_OK(lshk_ivf_query(ivf, q, NQ, QS, K, &full, ids, sc, &st));
  CHECK(st.lists == NQ && memcmp(ids, ids2, sizeof ids) == 0);
  full.reach = 0.0f;
  /* ids / sc hold the default search again (compared after save / load) */
  EXPECT_OK(lshk_ivf_query(ivf, q, NQ, QS, K, NULL, ids, sc, NULL));
  for (size_t i = 0; i < NQ * K; i++)
    CHECK(ids2[i] == UINT32_MAX || ids2[i] < ROWS);
  /* k = 0 and nq = 0 write nothing but the stats */
  EXPECT_OK(lshk_ivf_query(ivf, q, NQ, QS, 0, NULL, NULL, NULL, &st));
  CHECK(st.scanned == 0 && st.reranked == 0);
  EXPECT_OK(lshk_ivf_query(ivf, NULL, 0, QS, K, NULL, NULL, NULL, NULL));

  /* save / load: identical results, shape and memory */
  EXPECT_OK(lshk_ivf_save(ivf, path));
  back = (lshk_ivf *)(uintptr_t)0x1230;
  EXPECT_STATUS(lshk_ivf_load(path, borrow ? NULL : w, STRIDE, &back),
                LSHK_STATUS_INVALID_ARGUMENT);
  CHECK(back == (lshk_ivf *)(uintptr_t)0x1230);
  back = NULL;
  EXPECT_OK(lshk_ivf_load(path, borrow ? w : NULL, STRIDE, &back));
  if (back != NULL) {
    EXPECT_OK(lshk_ivf_shape(back, &rows, &dim, &nlist));
    CHECK(rows == ROWS && dim == DIM && nlist == NLIST);
    EXPECT_OK(lshk_ivf_memory_bytes(back, &mem2));
    CHECK(mem2 == mem);
    EXPECT_OK(lshk_ivf_query(back, q, NQ, QS, K, NULL, ids2, sc2, NULL));
    CHECK(memcmp(ids, ids2, sizeof ids) == 0 &&
          memcmp(sc, sc2, sizeof sc) == 0);
    /* a loaded index saves to the same bytes */
    EXPECT_OK(lshk_ivf_save(back, path2));
    {
      size_t n1 = 0, n2 = 0;
      unsigned char *a = slurp(path, &n1), *c = slurp(path2, &n2);
      CHECK(a != NULL && c != NULL && n1 == n2 && memcmp(a, c, n1) == 0);
      free(a);
      free(c);
    }
    EXPECT_OK(lshk_ivf_free(back));
  }
  remove(path);
  remove(path2);
  EXPECT_OK(lshk_ivf_free(ivf));
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

  /* defaults */
  {
    lshk_ivf_params p = lshk_ivf_params_default();
    lshk_ivf_search s = lshk_ivf_search_default();
    CHECK(p.struct_size == sizeof(lshk_ivf_params) && p.nlist == 0 &&
          p.iters == 10 && p.train_rows == 0 &&
          p.codes == LSHK_IVF_CODES_I8 && p.borrow == 1 && p.threads == 0 &&
          p.pq_m == 0);
    CHECK(s.struct_size == sizeof(lshk_ivf_search) &&
          s.nprobe == UINT32_MAX && s.rerank == 32 && s.reach == 3.0f);
    CHECK(sizeof(lshk_ivf_params) == 40 && sizeof(lshk_ivf_search) == 16 &&
          sizeof(lshk_ivf_stats) == 32);
  }

  run_config(LSHK_IVF_CODES_I8, 1, 1);
  {
    size_t borrowed = last_mem;
    run_config(LSHK_IVF_CODES_I8, 0, 1);
    /* the owned copy of W is counted, a borrowed W is not */
    CHECK(last_mem == borrowed + (size_t)ROWS * DIM * sizeof(float));
  }
  run_config(LSHK_IVF_CODES_NONE, 0, 1);
  run_config(LSHK_IVF_CODES_I8, 1, 0);
  run_config(LSHK_IVF_CODES_PQ4, 1, 1);
  run_config(LSHK_IVF_CODES_PQ4, 0, 0);
  run_config(LSHK_IVF_CODES_PQ4_I8, 1, 1);
  run_config(LSHK_IVF_CODES_PQ4_I8, 0, 0);

  /* NULL params: defaults (nlist round(4 sqrt(500)) = 89, borrowed W) */
  {
    lshk_ivf *ivf = NULL;
    uint32_t nlist = 0;
    EXPECT_OK(lshk_ivf_build(w, bias, ROWS, DIM, STRIDE, NULL, &ivf));
    EXPECT_OK(lshk_ivf_shape(ivf, NULL, NULL, &nlist));
    CHECK(nlist == 89);
    EXPECT_OK(lshk_ivf_free(ivf));
  }

  /* The index is the same on every tier and thread count: saved (W
   * copied) under each tier cap, the files are identical. */
  {
    lshk_isa top = lshk_isa_active();
    unsigned char *ref = NULL;
    size_t ref_len = 0;
    for (lshk_isa t = LSHK_ISA_SCALAR; t <= top; t++) {
      lshk_ivf_params p = lshk_ivf_params_default();
      lshk_ivf *ivf = NULL;
      unsigned char *b;
      size_t n = 0;
      p.nlist = NLIST;
      p.borrow = 0;
      p.threads = t % 2 ? 1 : 2;
      EXPECT_OK(lshk_isa_set_max(t));
      EXPECT_OK(lshk_ivf_build(w, bias, ROWS, DIM, STRIDE, &p, &ivf));
      EXPECT_OK(lshk_ivf_save(ivf, path));
      EXPECT_OK(lshk_ivf_free(ivf));
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

  /* free(NULL) is a no-op; a double free is reported */
  EXPECT_OK(lshk_ivf_free(NULL));
  {
    lshk_ivf *ivf = NULL;
    EXPECT_OK(lshk_ivf_build(w, NULL, ROWS, DIM, STRIDE, NULL, &ivf));
    EXPECT_OK(lshk_ivf_free(ivf));
    EXPECT_STATUS(lshk_ivf_free(ivf), LSHK_STATUS_INVALID_HANDLE);
  }

  return lshk_test_summary("ivf");
}
