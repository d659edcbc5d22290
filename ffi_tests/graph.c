/* C tests of the graph source of lshk_index (LSHK_SOURCE_GRAPH): build
 * over a seeded layer (the graph's rows in f32, bf16 and int8, with and
 * without bias; W kept as an f32 copy or borrowed), a search with ef >=
 * rows against a brute-force top-k computed here (equal up to ties within
 * the f32 dot-product bound: the index scores the graph's candidates from
 * W), smaller pools (real rows, descending logits, at most ef candidates),
 * stats, one-at-a-time equals batched, lshk_index_describe, save/load
 * round trips giving bit-identical results and files, memory, bad graph
 * knobs, and the same graph (byte for byte, as saved) on every ISA tier
 * and thread count. */
#include <math.h>

#include "lshk_test.h"

#define ROWS 600
#define DIM 20
#define STRIDE 23
#define NQ 7
#define QS 21 /* query stride > DIM */
#define K 6

static uint64_t rng_state = 777;
static float next_f(void) {
  rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
  return (float)((double)(rng_state >> 11) / 9007199254740992.0) * 2.0f - 1.0f;
}

static float w[ROWS * STRIDE];
static float bias[ROWS];
static float q[NQ * QS];

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
/* gamma(DIM + 2) times the magnitude: the gathered matmul's bound. */
static double bound(double mag) {
  const double u = 0x1p-24 * (DIM + 2);
  return u / (1.0 - u) * mag + 1e-30;
}

static int matches_brute_force(const uint32_t *ids, const float *sc, int with_bias) {
  double mag;
  for (size_t i = 0; i < NQ; i++) {
    double all[ROWS];
    int taken[ROWS];
    for (uint32_t r = 0; r < ROWS; r++) {
      all[r] = exact(i, r, with_bias, &mag);
      taken[r] = 0;
    }
    for (size_t j = 0; j < K; j++) {
      uint32_t best = UINT32_MAX, id = ids[i * K + j];
      double e;
      for (uint32_t r = 0; r < ROWS; r++)
        if (!taken[r] && (best == UINT32_MAX || all[r] > all[best])) best = r;
      taken[best] = 1;
      if (id >= ROWS) return 0;
      e = exact(i, id, with_bias, &mag);
      if (fabs((double)sc[i * K + j] - e) > bound(mag)) return 0;
      if (fabs(e - all[best]) > 2.0 * bound(mag) + 1e-6) return 0;
      if (j > 0 && sc[i * K + j] > sc[i * K + j - 1]) return 0;
    }
  }
  return 1;
}

/* Real rows, distinct, descending scores that are their rows' logits. */
static int plausible(const uint32_t *ids, const float *sc, int with_bias) {
  double mag;
  for (size_t i = 0; i < NQ; i++)
    for (size_t j = 0; j < K; j++) {
      if (ids[i * K + j] >= ROWS) return 0;
      if (fabs((double)sc[i * K + j] - exact(i, ids[i * K + j], with_bias, &mag)) >
          bound(mag))
        return 0;
      if (j > 0 && sc[i * K + j] > sc[i * K + j - 1]) return 0;
      for (size_t t = 0; t < j; t++)
        if (ids[i * K + t] == ids[i * K + j]) return 0;
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

static lshk_index_params graph_params(uint32_t graph_storage, uint32_t storage) {
  lshk_index_params p = lshk_index_params_default();
  p.source = LSHK_SOURCE_GRAPH;
  p.storage = storage;
  p.build_threads = 2;
  p.graph.m = 8;
  p.graph.ef_construction = 40;
  p.graph.storage = graph_storage;
  return p;
}

static lshk_query_params pool(uint32_t ef) {
  lshk_query_params qp = lshk_query_params_default();
  qp.graph.ef = ef;
  return qp;
}

static void run_config(uint32_t graph_storage, uint32_t storage, int with_bias) {
  const int borrow = storage == LSHK_STORAGE_BORROWED_F32;
  lshk_index_params p = graph_params(graph_storage, storage);
  lshk_query_params all = pool(ROWS), small = pool(16);
  lshk_query_stats st;
  lshk_index_info info;
  lshk_index *g = NULL, *back = NULL;
  uint32_t ids[NQ * K], ids2[NQ * K];
  float sc[NQ * K], sc2[NQ * K];
  size_t mem = 0, mem2 = 0;
  const float *b = with_bias ? bias : NULL;
  printf("config: graph storage %u, storage %u, bias %d\n", graph_storage, storage,
         with_bias);
  EXPECT_OK(lshk_index_build(w, b, ROWS, DIM, STRIDE, &p, &g));
  if (g == NULL) return;
  memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  EXPECT_OK(lshk_index_describe(g, &info));
  CHECK(info.source == LSHK_SOURCE_GRAPH && info.storage == storage &&
        info.transform == LSHK_TRANSFORM_NONE && info.rows == ROWS &&
        info.dim == DIM && info.bits_per_table == 0 && info.tables == 0 &&
        info.nlist == 0 && info.codes == 0 && info.labelled == 0);
  EXPECT_OK(lshk_index_memory_bytes(g, &mem));
  CHECK(mem > 0);

  /* a pool of every row: every row a candidate, the exact top-k */
  memset(&st, 0xA5, sizeof st);
  st.struct_size = sizeof st;
  EXPECT_OK(lshk_index_query(g, q, NQ, QS, K, &all, ids, sc, &st));
  CHECK(matches_brute_force(ids, sc, with_bias));
  CHECK(st.queries == NQ && st.candidates_min == ROWS && st.candidates_max == ROWS &&
        st.candidates_total == (uint64_t)NQ * ROWS);
  CHECK(st.lists == 0 && st.scanned > 0 && st.reranked == 0);
  CHECK(st.struct_size == sizeof st && st.reserved == 0xA5A5A5A5u);
  /* scores not wanted: the same ids */
  EXPECT_OK(lshk_index_query(g, q, NQ, QS, K, &all, ids2, NULL, NULL));
  CHECK(memcmp(ids, ids2, sizeof ids) == 0);

  /* a small pool: real rows, descending, at most ef candidates; one at a
   * time equals batched */
  EXPECT_OK(lshk_index_query(g, q, NQ, QS, K, &small, ids, sc, &st));
  CHECK(plausible(ids, sc, with_bias));
  CHECK(st.candidates_min >= K && st.candidates_max <= 16);
  for (size_t i = 0; i < NQ; i++)
    EXPECT_OK(lshk_index_query(g, q + i * QS, 1, DIM, K, &small, ids2 + i * K,
                               sc2 + i * K, NULL));
  CHECK(memcmp(ids, ids2, sizeof ids) == 0 && memcmp(sc, sc2, sizeof sc) == 0);
  /* k = 0 and nq = 0 write nothing but the stats */
  lshk_fill_canary(ids2, sizeof ids2);
  EXPECT_OK(lshk_index_query(g, q, NQ, QS, 0, &small, ids2, NULL, &st));
  CHECK(st.queries == NQ && lshk_canary_intact(ids2, sizeof ids2));
  EXPECT_OK(lshk_index_query(g, NULL, 0, QS, K, &small, NULL, NULL, &st));
  CHECK(st.queries == 0 && st.candidates_total == 0);

  /* save / load: identical results, describe, memory and bytes */
  EXPECT_OK(lshk_index_save(g, path));
  EXPECT_OK(lshk_index_load(path, borrow ? w : NULL, 0, &back));
  if (back != NULL) {
    lshk_index_info binfo;
    memset(&binfo, 0, sizeof binfo);
    binfo.struct_size = sizeof binfo;
    EXPECT_OK(lshk_index_describe(back, &binfo));
    CHECK(binfo.source == LSHK_SOURCE_GRAPH && binfo.storage == storage &&
          binfo.rows == ROWS && binfo.dim == DIM);
    EXPECT_OK(lshk_index_memory_bytes(back, &mem2));
    CHECK(mem2 == mem);
    EXPECT_OK(lshk_index_query(back, q, NQ, QS, K, &small, ids2, sc2, NULL));
    CHECK(memcmp(ids, ids2, sizeof ids) == 0 && memcmp(sc, sc2, sizeof sc) == 0);
    EXPECT_OK(lshk_index_save(back, path2));
    {
      size_t n1 = 0, n2 = 0;
      unsigned char *a = slurp(path, &n1), *c = slurp(path2, &n2);
      CHECK(a != NULL && c != NULL && n1 == n2 && memcmp(a, c, n1) == 0);
      free(a);
      free(c);
    }
    EXPECT_OK(lshk_index_free(back));
  }
  remove(path);
  remove(path2);
  EXPECT_OK(lshk_index_free(g));
}

int main(void) {
  int here = 0;
  for (size_t i = 0; i < ROWS * STRIDE; i++) w[i] = next_f();
  for (size_t i = 0; i < ROWS; i++) bias[i] = 0.2f * next_f();
  for (size_t i = 0; i < NQ * QS; i++) q[i] = next_f();
  snprintf(path, sizeof path, "/tmp/lshk-ffi-graph-%lx.lshk", (unsigned long)(uintptr_t)&here);
  snprintf(path2, sizeof path2, "/tmp/lshk-ffi-graph-%lx-2.lshk",
           (unsigned long)(uintptr_t)&here);

  {
    lshk_index_params p = lshk_index_params_default();
    lshk_query_params qp = lshk_query_params_default();
    CHECK(p.graph.m == 16 && p.graph.ef_construction == 200 &&
          p.graph.storage == LSHK_STORAGE_F32 && p.graph.reserved == 0);
    CHECK(qp.graph.walk == LSHK_GRAPH_WALK_EXACT && qp.graph.ef == 100 &&
          qp.graph.rerank == 0 && qp.graph.reserved == 0);
    CHECK(sizeof(lshk_graph_params) == 24 && sizeof(lshk_graph_query) == 16);
  }

  run_config(LSHK_STORAGE_F32, LSHK_STORAGE_F32, 1);
  run_config(LSHK_STORAGE_F32, LSHK_STORAGE_F32, 0);
  run_config(LSHK_STORAGE_BF16, LSHK_STORAGE_F32, 1);
  run_config(LSHK_STORAGE_I8, LSHK_STORAGE_F32, 1);
  run_config(LSHK_STORAGE_BF16, LSHK_STORAGE_BORROWED_F32, 0);

  /* default graph knobs */
  {
    lshk_index_params p = lshk_index_params_default();
    lshk_index *g = NULL;
    uint32_t ids[NQ * K];
    float sc[NQ * K];
    p.source = LSHK_SOURCE_GRAPH;
    EXPECT_OK(lshk_index_build(w, bias, ROWS, DIM, STRIDE, &p, &g));
    EXPECT_OK(lshk_index_query(g, q, NQ, QS, K, NULL, ids, sc, NULL));
    CHECK(plausible(ids, sc, 1));
    EXPECT_OK(lshk_index_free(g));
  }

  /* bad graph knobs: nothing built */
  {
    lshk_index *canary = (lshk_index *)(uintptr_t)0x1230, *g = canary;
    lshk_index_params p = graph_params(LSHK_STORAGE_F32, LSHK_STORAGE_F32);
    p.graph.m = 1;
    EXPECT_STATUS(lshk_index_build(w, bias, ROWS, DIM, STRIDE, &p, &g),
                  LSHK_STATUS_INVALID_ARGUMENT);
    p.graph.m = 257;
    EXPECT_STATUS(lshk_index_build(w, bias, ROWS, DIM, STRIDE, &p, &g),
                  LSHK_STATUS_INVALID_ARGUMENT);
    p = graph_params(LSHK_STORAGE_F32, LSHK_STORAGE_F32);
    p.graph.ef_construction = 0;
    EXPECT_STATUS(lshk_index_build(w, bias, ROWS, DIM, STRIDE, &p, &g),
                  LSHK_STATUS_INVALID_ARGUMENT);
    /* the graph's rows: F32, BF16 or I8 only */
    p = graph_params(LSHK_STORAGE_F16, LSHK_STORAGE_F32);
    EXPECT_STATUS(lshk_index_build(w, bias, ROWS, DIM, STRIDE, &p, &g),
                  LSHK_STATUS_INVALID_ARGUMENT);
    p = graph_params(LSHK_STORAGE_BORROWED_F32, LSHK_STORAGE_F32);
    EXPECT_STATUS(lshk_index_build(w, bias, ROWS, DIM, STRIDE, &p, &g),
                  LSHK_STATUS_INVALID_ARGUMENT);
    p = graph_params(LSHK_STORAGE_F32, LSHK_STORAGE_F32);
    p.graph.reserved = 1;
    EXPECT_STATUS(lshk_index_build(w, bias, ROWS, DIM, STRIDE, &p, &g),
                  LSHK_STATUS_INVALID_ARGUMENT);
    CHECK(g == canary);
  }

  /* The graph is the same on every tier and thread count: saved under
   * each tier cap (1 or 2 build threads), the files are identical. */
  {
    lshk_isa top = lshk_isa_active();
    unsigned char *ref = NULL;
    size_t ref_len = 0;
    for (lshk_isa t = LSHK_ISA_SCALAR; t <= top; t++) {
      lshk_index_params p = graph_params(LSHK_STORAGE_F32, LSHK_STORAGE_F32);
      lshk_index *g = NULL;
      unsigned char *b;
      size_t n = 0;
      p.build_threads = t % 2 ? 1 : 2;
      EXPECT_OK(lshk_isa_set_max(t));
      EXPECT_OK(lshk_index_build(w, bias, ROWS, DIM, STRIDE, &p, &g));
      EXPECT_OK(lshk_index_save(g, path));
      EXPECT_OK(lshk_index_free(g));
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
  EXPECT_OK(lshk_index_free(NULL));
  {
    lshk_index_params p = graph_params(LSHK_STORAGE_F32, LSHK_STORAGE_F32);
    lshk_index *g = NULL;
    EXPECT_OK(lshk_index_build(w, NULL, ROWS, DIM, STRIDE, &p, &g));
    EXPECT_OK(lshk_index_free(g));
    EXPECT_STATUS(lshk_index_free(g), LSHK_STATUS_INVALID_HANDLE);
  }

  return lshk_test_summary("graph");
}
