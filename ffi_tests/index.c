/* C tests of lshk_index_*: bad inputs with canaries, queries against the
 * exact logits of the returned ids, save/load (stored and borrowed
 * weights), and the borrowed family/tables handles. */
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

int main(void) {
  for (size_t i = 0; i < ROWS * STRIDE; i++) w[i] = next_f();
  for (size_t i = 0; i < ROWS; i++) bias[i] = 0.1f * next_f();
  for (size_t i = 0; i < NQ * DIM; i++) q[i] = next_f();

  /* params */
  lshk_index_params p = lshk_index_params_default();
  CHECK(p.struct_size == sizeof(lshk_index_params));
  CHECK(p.family == LSHK_FAMILY_SIMHASH && p.bits_per_table == 12 &&
        p.tables == 50 && p.storage == LSHK_STORAGE_F32 &&
        p.transform == LSHK_TRANSFORM_NONE && p.seed == 1 &&
        p.planes == NULL && p.progress == NULL);
  p.bits_per_table = 6;
  p.tables = 10;
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
  bad.family = 2;
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
  bad.planes = planes;
  bad.planes_len = 6 * 10 * DIM; /* dim' is DIM + 1 with a transform */
  EXPECT_STATUS(lshk_index_build(w, bias, ROWS, DIM, STRIDE, &bad, &idx),
                LSHK_STATUS_INVALID_ARGUMENT);
  bad.planes = NULL;
  bad.planes_len = 3;
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
  p.planes = planes;
  p.planes_len = sizeof planes / sizeof *planes;
  p.progress = on_progress;
  p.progress_user = &user_calls;
  EXPECT_OK(lshk_index_build(w, bias, ROWS, DIM, STRIDE, &p, &idx));
  CHECK(idx != canary && idx != NULL);
  CHECK(user_calls >= 1 && user_calls == progress_calls);
  CHECK(progress_last_done == ROWS && progress_last_total == ROWS);
  lshk_index_free(idx);
  p.planes = NULL;
  p.planes_len = 0;
  p.progress = NULL;

  /* the index used below: SimHash, bias augmentation, f32 copy */
  EXPECT_OK(lshk_index_build(w, bias, ROWS, DIM, STRIDE, &p, &idx));
  size_t rows = 0, dim = 0, mem = 0;
  uint32_t k = 0, l = 0;
  EXPECT_OK(lshk_index_shape(idx, &rows, &dim, &k, &l));
  CHECK(rows == ROWS && dim == DIM && k == 6 && l == 10);
  EXPECT_OK(lshk_index_shape(idx, NULL, NULL, NULL, NULL));
  EXPECT_OK(lshk_index_memory_bytes(idx, &mem));
  CHECK(mem >= ROWS * DIM * sizeof(float));
  EXPECT_STATUS(lshk_index_memory_bytes(idx, NULL), LSHK_STATUS_NULL_POINTER);
  EXPECT_STATUS(lshk_index_shape(NULL, &rows, NULL, NULL, NULL),
                LSHK_STATUS_NULL_POINTER);

  /* query: bad inputs write nothing */
  uint32_t ids[NQ * K];
  float sc[NQ * K];
  lshk_query_stats st;
  lshk_fill_canary(ids, sizeof ids);
  lshk_fill_canary(sc, sizeof sc);
  lshk_fill_canary(&st, sizeof st);
  st.struct_size = sizeof st;
  lshk_gather_params g = lshk_gather_params_default();
  EXPECT_STATUS(lshk_index_query(NULL, q, NQ, DIM, K, &g, ids, sc, &st),
                LSHK_STATUS_NULL_POINTER);
  EXPECT_STATUS(lshk_index_query(idx, NULL, NQ, DIM, K, &g, ids, sc, &st),
                LSHK_STATUS_NULL_POINTER);
  EXPECT_STATUS(lshk_index_query(idx, q, NQ, DIM, K, &g, NULL, sc, &st),
                LSHK_STATUS_NULL_POINTER);
  EXPECT_STATUS(lshk_index_query(idx, q, NQ, DIM - 1, K, &g, ids, sc, &st),
                LSHK_STATUS_INVALID_ARGUMENT);
  lshk_gather_params gbad = g;
  gbad.struct_size = 4;
  EXPECT_STATUS(lshk_index_query(idx, q, NQ, DIM, K, &gbad, ids, sc, &st),
                LSHK_STATUS_INVALID_ARGUMENT);
  gbad = g;
  gbad.probes = 2;
  gbad.bits_per_table = 7;
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

  /* query: results, NULL gather params and NULL scores give the same ids */
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
  g.probes = 3;
  EXPECT_OK(lshk_index_query(idx, q, NQ, DIM, K, &g, ids2, NULL, &st2));
  g.probes = 0;
  EXPECT_OK(lshk_index_query(idx, q, NQ, DIM, K, &g, ids2, NULL, &st1));
  CHECK(st2.candidates_total >= st1.candidates_total);

  /* borrowed family and tables handles */
  const lshk_simhash *sh = NULL;
  const lshk_dwta *dw = NULL;
  const lshk_tables *tb = NULL;
  EXPECT_OK(lshk_index_simhash(idx, &sh));
  EXPECT_STATUS(lshk_index_dwta(idx, &dw), LSHK_STATUS_INVALID_ARGUMENT);
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
  EXPECT_STATUS(lshk_index_load(path, w, &back), LSHK_STATUS_INVALID_ARGUMENT);
  EXPECT_STATUS(lshk_index_load(NULL, NULL, &back), LSHK_STATUS_NULL_POINTER);
  EXPECT_STATUS(lshk_index_load(path, NULL, NULL), LSHK_STATUS_NULL_POINTER);
  EXPECT_STATUS(lshk_index_load("/nonexistent-dir/x.lshk", NULL, &back),
                LSHK_STATUS_IO_ERROR);
  CHECK(back == canary);
  EXPECT_OK(lshk_index_load(path, NULL, &back));
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
    EXPECT_STATUS(lshk_index_load(path, NULL, &back),
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
  p.family = LSHK_FAMILY_DWTA;
  p.bits_per_table = 3;
  p.tables = 8;
  p.bin_size = 4;
  p.storage = LSHK_STORAGE_BORROWED_F32;
  EXPECT_OK(lshk_index_build(w, bias, ROWS, DIM, STRIDE, &p, &idx));
  EXPECT_STATUS(lshk_index_simhash(idx, &sh), LSHK_STATUS_INVALID_ARGUMENT);
  EXPECT_OK(lshk_index_dwta(idx, &dw));
  EXPECT_STATUS(lshk_dwta_free((lshk_dwta *)(uintptr_t)dw),
                LSHK_STATUS_INVALID_ARGUMENT);
  EXPECT_OK(lshk_index_query(idx, q, NQ, DIM, K, NULL, ids, sc, NULL));
  CHECK(check_results(ids, sc));
  EXPECT_OK(lshk_index_save(idx, path));
  back = canary;
  EXPECT_STATUS(lshk_index_load(path, NULL, &back),
                LSHK_STATUS_INVALID_ARGUMENT);
  CHECK(back == canary);
  EXPECT_OK(lshk_index_load(path, w, &back));
  EXPECT_OK(lshk_index_query(back, q, NQ, DIM, K, NULL, ids2, sc2, NULL));
  CHECK(memcmp(ids, ids2, sizeof ids) == 0);
  CHECK(memcmp(sc, sc2, sizeof sc) == 0);
  EXPECT_OK(lshk_index_free(back));
  EXPECT_OK(lshk_index_free(idx));
  remove(path);

  return lshk_test_summary("index");
}
