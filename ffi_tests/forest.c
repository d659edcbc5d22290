/* The hashing forest through the C ABI, as the forest source of
 * lshk_index (LSHK_SOURCE_FOREST): build and describe, per-sample
 * candidate sets (lshk_index_candidates: a class's own row finds it, sets
 * of max(set_size, k) distinct ascending ids), queries ranking those sets
 * by their exact logits, the capped union (lshk_index_union), rebuild
 * after W changed in place (lshk_index_rebuild: the same sets as a fresh
 * build with that seed; NaN refused, index unchanged), save / load round
 * trip, BUFFER_TOO_SMALL's *needed, bad forest knobs, and the LSH and IVF
 * calls refused with UNSUPPORTED. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdlib.h>
#include <unistd.h>

#include "lshk_test.h"

#define ROWS 500
#define DIM 10
#define NX 6
#define Q 12
#define K 4

static float w[ROWS * DIM], x[NX * DIM];
static uint32_t ids[NX * 32], ids2[NX * 32], uids[NX * Q], ucnt[NX * Q];
static size_t offs[NX + 1], offs2[NX + 1];

static lshk_index_params forest_params(void) {
  lshk_index_params p = lshk_index_params_default();
  p.source = LSHK_SOURCE_FOREST;
  p.storage = LSHK_STORAGE_BORROWED_F32;
  p.forest.trees = 4;
  p.forest.leaf_size = 16;
  p.build_threads = 2;
  return p;
}

static lshk_query_params set_of(uint32_t q) {
  lshk_query_params qp = lshk_query_params_default();
  qp.forest.set_size = q;
  return qp;
}

/* The candidate sets of the samples x with set size Q into ids2 / offs2;
 * their total (SIZE_MAX on an error). */
static size_t sets(const lshk_index *f) {
  lshk_query_params qp = set_of(Q);
  size_t need = 0;
  if (lshk_index_candidates(f, x, NX, DIM, 0, &qp, ids2, NX * 32, offs2, &need) !=
      LSHK_STATUS_OK)
    return SIZE_MAX;
  return need;
}

static double logit(size_t i, uint32_t r) {
  double e = 0.0;
  for (size_t d = 0; d < DIM; d++) e += (double)w[r * DIM + d] * x[i * DIM + d];
  return e;
}

int main(void) {
  uint64_t s = 99;
  lshk_index *f = NULL, *g = NULL, *h = NULL;
  lshk_index_params p = forest_params();
  lshk_query_params qp = set_of(Q);
  lshk_index_info info;
  size_t need = 0, need2 = 0;
  uint64_t ns = 42;
  char path[256];
  const char *tmp = getenv("TMPDIR");
  for (int i = 0; i < ROWS * DIM; i++) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    w[i] = (float)(s >> 40) / 16777216.0f - 0.5f;
  }
  for (int i = 0; i < NX; i++)
    for (int d = 0; d < DIM; d++) x[i * DIM + d] = w[(i * 71) * DIM + d];
  {
    lshk_index_params d = lshk_index_params_default();
    lshk_query_params dq = lshk_query_params_default();
    CHECK(d.forest.trees == 8 && d.forest.leaf_size == 64 &&
          d.forest.normalize_rows == 1 && d.forest.seed == 1);
    CHECK(dq.forest.set_size == 256 && dq.forest.confidence == 0.0f);
  }
  EXPECT_OK(lshk_index_build(w, NULL, ROWS, DIM, DIM, &p, &f));
  if (f == NULL) return lshk_test_summary("forest");
  memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  EXPECT_OK(lshk_index_describe(f, &info));
  CHECK(info.source == LSHK_SOURCE_FOREST && info.rows == ROWS && info.dim == DIM &&
        info.tables == 4 && info.storage == LSHK_STORAGE_BORROWED_F32 &&
        info.bits_per_table == 0 && info.nlist == 0);

  /* candidates: Q distinct ascending classes per sample, its own among them */
  EXPECT_OK(lshk_index_candidates(f, x, NX, DIM, 0, &qp, ids, NX * 32, offs, &need));
  CHECK(need == NX * Q && offs[0] == 0 && offs[NX] == need);
  for (int i = 0; i < NX; i++) {
    int found = 0;
    CHECK(offs[i + 1] - offs[i] == Q);
    for (size_t k = offs[i]; k < offs[i + 1]; k++) {
      found |= ids[k] == (uint32_t)(i * 71);
      if (k > offs[i]) CHECK(ids[k - 1] < ids[k]);
      CHECK(ids[k] < ROWS);
    }
    CHECK(found);
  }
  /* k above the set size: max(set_size, k) classes */
  EXPECT_OK(lshk_index_candidates(f, x, NX, DIM, 20, &qp, ids2, NX * 32, offs2, &need2));
  CHECK(need2 == NX * 20);
  /* too small a buffer: only *needed written */
  lshk_fill_canary(ids2, sizeof ids2);
  lshk_fill_canary(offs2, sizeof offs2);
  EXPECT_STATUS(lshk_index_candidates(f, x, NX, DIM, 0, &qp, ids2, need - 1, offs2, &need2),
                LSHK_STATUS_BUFFER_TOO_SMALL);
  CHECK(need2 == need && lshk_canary_intact(ids2, sizeof ids2) &&
        lshk_canary_intact(offs2, sizeof offs2));
  /* a bad forest knob */
  qp.forest.confidence = 2.0f;
  EXPECT_STATUS(lshk_index_candidates(f, x, NX, DIM, 0, &qp, ids2, NX * 32, offs2, &need2),
                LSHK_STATUS_INVALID_ARGUMENT);
  qp = set_of(Q);

  /* a query ranks each sample's set by the exact logits: its top K */
  {
    uint32_t top[NX * K];
    float sc[NX * K];
    lshk_query_stats st;
    int ok = 1;
    memset(&st, 0, sizeof st);
    st.struct_size = sizeof st;
    EXPECT_OK(lshk_index_query(f, x, NX, DIM, K, &qp, top, sc, &st));
    CHECK(st.queries == NX && st.candidates_total == (uint64_t)NX * Q &&
          st.candidates_min == Q && st.candidates_max == Q);
    for (size_t i = 0; i < NX; i++) {
      /* the K best of the set, by the exact logits (descending) */
      int taken[Q] = {0};
      for (size_t j = 0; j < K; j++) {
        size_t best = Q;
        for (size_t c = 0; c < Q; c++)
          if (!taken[c] && (best == Q || logit(i, ids[offs[i] + c]) >
                                             logit(i, ids[offs[i] + best])))
            best = c;
        taken[best] = 1;
        ok &= top[i * K + j] == ids[offs[i] + best];
        ok &= fabs((double)sc[i * K + j] - logit(i, top[i * K + j])) < 1e-5;
      }
    }
    CHECK(ok);
  }

  /* the union of the batch's sets: capped, ascending, counts in 1..NX */
  EXPECT_OK(lshk_index_union(f, ids, need, 20, 7, uids, ucnt, NX * Q, &need2));
  CHECK(need2 == 20);
  for (size_t k = 0; k < need2; k++) {
    if (k > 0) CHECK(uids[k - 1] < uids[k]);
    CHECK(ucnt[k] >= 1 && ucnt[k] <= NX);
  }
  {
    uint32_t again[NX * Q];
    size_t n3 = 0;
    EXPECT_OK(lshk_index_union(f, ids, need, 20, 7, again, NULL, NX * Q, &n3));
    CHECK(n3 == 20 && memcmp(again, uids, 20 * sizeof(uint32_t)) == 0);
  }
  /* no cap: every distinct id, counts adding up to the sets' sizes */
  EXPECT_OK(lshk_index_union(f, ids, need, 0, 7, uids, ucnt, NX * Q, &need2));
  CHECK(need2 > 20 && need2 <= need);
  {
    size_t total = 0;
    for (size_t k = 0; k < need2; k++) total += ucnt[k];
    CHECK(total == need);
  }
  {
    uint32_t bad = ROWS;
    EXPECT_STATUS(lshk_index_union(f, &bad, 1, 0, 7, uids, NULL, NX * Q, &need2),
                  LSHK_STATUS_INDEX_OUT_OF_RANGE);
    EXPECT_STATUS(lshk_index_union(f, ids, need, 0, 7, uids, NULL, 3, &need2),
                  LSHK_STATUS_BUFFER_TOO_SMALL);
  }

  /* save / load (the borrowed W passed again): the same sets */
  snprintf(path, sizeof path, "%s/lshk-forest-c-%ld.lshk", tmp ? tmp : "/tmp", (long)getpid());
  EXPECT_OK(lshk_index_save(f, path));
  EXPECT_STATUS(lshk_index_load(path, NULL, 0, &g), LSHK_STATUS_INVALID_ARGUMENT);
  CHECK(g == NULL);
  EXPECT_OK(lshk_index_load(path, w, 0, &g));
  if (g == NULL) return lshk_test_summary("forest");
  need2 = sets(g);
  CHECK(need2 == need && memcmp(ids, ids2, need * 4) == 0);
  remove(path);
  /* W changes below: no index may borrow it but the one rebuilt */
  EXPECT_OK(lshk_index_free(f));

  /* rebuild after W changed in place: the sets of a fresh build over the
   * new W with that seed; without a seed, the forest's own (now 42) */
  static uint32_t before[NX * 32];
  size_t nbefore = need;
  memcpy(before, ids, sizeof before);
  for (int r = 0; r < ROWS; r += 3)
    for (int d = 0; d < DIM; d++) w[r * DIM + d] = -w[r * DIM + d];
  EXPECT_OK(lshk_index_rebuild(g, &ns));
  p.forest.seed = ns;
  EXPECT_OK(lshk_index_build(w, NULL, ROWS, DIM, DIM, &p, &h));
  if (h == NULL) return lshk_test_summary("forest");
  need = sets(h);
  memcpy(ids, ids2, sizeof ids);
  CHECK(need != SIZE_MAX && sets(g) == need && memcmp(ids, ids2, need * 4) == 0);
  CHECK(need != nbefore || memcmp(ids, before, need * 4) != 0); /* they moved */
  EXPECT_OK(lshk_index_rebuild(g, NULL));
  CHECK(sets(g) == need && memcmp(ids, ids2, need * 4) == 0);
  /* a NaN in W: refused, the index unchanged */
  {
    float keep = w[17 * DIM + 2];
    w[17 * DIM + 2] = NAN;
    EXPECT_STATUS(lshk_index_rebuild(g, &ns), LSHK_STATUS_NON_FINITE);
    w[17 * DIM + 2] = keep;
    CHECK(sets(g) == need && memcmp(ids, ids2, need * 4) == 0);
  }

  /* bad forest knobs: nothing built */
  {
    lshk_index *canary = (lshk_index *)(uintptr_t)0x1230, *b = canary;
    lshk_index_params bp = forest_params();
    bp.forest.trees = 0;
    EXPECT_STATUS(lshk_index_build(w, NULL, ROWS, DIM, DIM, &bp, &b),
                  LSHK_STATUS_INVALID_ARGUMENT);
    bp = forest_params();
    bp.forest.leaf_size = 1;
    EXPECT_STATUS(lshk_index_build(w, NULL, ROWS, DIM, DIM, &bp, &b),
                  LSHK_STATUS_INVALID_ARGUMENT);
    bp = forest_params();
    bp.forest.normalize_rows = 2;
    EXPECT_STATUS(lshk_index_build(w, NULL, ROWS, DIM, DIM, &bp, &b),
                  LSHK_STATUS_INVALID_ARGUMENT);
    bp = forest_params();
    bp.storage = LSHK_STORAGE_BF16; /* F32 or BORROWED_F32 only */
    EXPECT_STATUS(lshk_index_build(w, NULL, ROWS, DIM, DIM, &bp, &b),
                  LSHK_STATUS_INVALID_ARGUMENT);
    bp = forest_params();
    EXPECT_STATUS(lshk_index_build(w, NULL, 1, DIM, DIM, &bp, &b),
                  LSHK_STATUS_INVALID_ARGUMENT); /* rows < 2 */
    CHECK(b == canary);
  }
  /* split by direction, on an f32 copy: a class still finds itself */
  {
    lshk_index *n = NULL;
    lshk_index_params np = forest_params();
    np.forest.normalize_rows = 1;
    np.storage = LSHK_STORAGE_F32;
    EXPECT_OK(lshk_index_build(w, NULL, ROWS, DIM, DIM, &np, &n));
    if (n != NULL) {
      for (int i = 0; i < NX; i++)
        for (int d = 0; d < DIM; d++) x[i * DIM + d] = w[(i * 71) * DIM + d];
      need = sets(n);
      CHECK(need == NX * Q);
      for (int i = 0; i < NX && need == NX * Q; i++) {
        int found = 0;
        for (size_t k = offs2[i]; k < offs2[i + 1]; k++)
          found |= ids2[k] == (uint32_t)(i * 71);
        CHECK(found);
      }
      /* an owned W: rebuild has nothing new to read, the same sets */
      memcpy(ids, ids2, sizeof ids);
      EXPECT_OK(lshk_index_rebuild(n, NULL));
      CHECK(sets(n) == need && memcmp(ids, ids2, need * 4) == 0);
    }
    EXPECT_OK(lshk_index_free(n));
  }

  /* the calls of other sources: UNSUPPORTED */
  {
    const lshk_tables *tb = NULL;
    lshk_calibration cal;
    uint32_t one = 1;
    memset(&cal, 0, sizeof cal);
    cal.struct_size = sizeof cal;
    EXPECT_STATUS(lshk_index_tables(g, &tb), LSHK_STATUS_UNSUPPORTED);
    CHECK(tb == NULL);
    EXPECT_STATUS(lshk_index_calibrate(g, x, NX, DIM, K, 0.9f, 32, 1, &cal),
                  LSHK_STATUS_UNSUPPORTED);
    EXPECT_STATUS(lshk_index_update_rows(g, &one, 1, NULL, 0, NULL),
                  LSHK_STATUS_UNSUPPORTED);
    CHECK(sets(g) == need);
  }

  EXPECT_OK(lshk_index_free(g));
  EXPECT_OK(lshk_index_free(h));
  EXPECT_OK(lshk_index_free(NULL));
  return lshk_test_summary("forest");
}
