/* C tests of lshk_index_train_iul: defaults, bad inputs (status, reports
 * canary intact, planes unchanged; a DWTA index INVALID_ARGUMENT, an IVF
 * index UNSUPPORTED), a successful training (reports
 * written, planes changed, borrowed family handle sees them), and
 * determinism for a fixed seed. */
#include <math.h>

#include "lshk_test.h"

#define ROWS 300
#define DIM 10
#define NQ 200
#define KB 4
#define L 6
#define NPL (KB * L * DIM)

static uint64_t rng_state = 4242;
static float next_f(void) {
  rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
  return (float)((double)(rng_state >> 11) / 9007199254740992.0) * 2.0f - 1.0f;
}

static float w[ROWS * DIM];
static float q[NQ * DIM];
static size_t offs[NQ + 1];
static uint32_t labels[NQ * 2];

static lshk_index *build(void) {
  lshk_index_params p = lshk_index_params_default();
  p.lsh.bits_per_table = KB;
  p.lsh.tables = L;
  lshk_index *idx = NULL;
  EXPECT_OK(lshk_index_build(w, NULL, ROWS, DIM, DIM, &p, &idx));
  return idx;
}

static void planes_of(const lshk_index *idx, float *out) {
  const lshk_simhash *h = NULL;
  EXPECT_OK(lshk_index_simhash(idx, &h));
  EXPECT_OK(lshk_simhash_copy_planes(h, out, NPL));
}

int main(void) {
  for (size_t i = 0; i < ROWS * DIM; i++) w[i] = next_f();
  size_t nl = 0;
  offs[0] = 0;
  for (size_t i = 0; i < NQ; i++) {
    size_t k = i % 3; /* 0, 1 or 2 labels */
    for (size_t d = 0; d < DIM; d++) q[i * DIM + d] = 0.5f * next_f();
    for (size_t j = 0; j < k; j++) {
      uint32_t y = (uint32_t)((i * 7 + j * 13) % ROWS);
      labels[nl++] = y;
      for (size_t d = 0; d < DIM; d++) q[i * DIM + d] += w[y * DIM + d];
    }
    offs[i + 1] = nl;
  }

  lshk_iul_params p = lshk_iul_params_default();
  CHECK(p.struct_size == sizeof(lshk_iul_params));
  CHECK(p.rounds == 3 && p.epochs == 4 && p.batch == 256 && p.seed == 1 &&
        p.t1 == 0.0f && p.t2 == 0.0f && p.flags == 0 && p.max_pairs == 0);
  CHECK(fabsf(p.learning_rate - 0.01f) < 1e-9f);
  p.rounds = 2;
  p.epochs = 3;
  p.batch = 32;

  lshk_index *idx = build();
  float before[NPL], after[NPL], again[NPL];
  planes_of(idx, before);

  lshk_iul_report rep[3];
  lshk_fill_canary(rep, sizeof rep);
#define BAD(call, st)                                                          \
  do {                                                                         \
    EXPECT_STATUS(call, st);                                                   \
    CHECK(lshk_canary_intact(rep, sizeof rep));                                \
  } while (0)
  BAD(lshk_index_train_iul(NULL, q, NQ, DIM, offs, labels, &p, rep, 3),
      LSHK_STATUS_NULL_POINTER);
  BAD(lshk_index_train_iul(idx, NULL, NQ, DIM, offs, labels, &p, rep, 3),
      LSHK_STATUS_NULL_POINTER);
  BAD(lshk_index_train_iul(idx, q, 0, DIM, offs, labels, &p, rep, 3),
      LSHK_STATUS_INVALID_ARGUMENT);
  BAD(lshk_index_train_iul(idx, q, NQ, DIM - 1, offs, labels, &p, rep, 3),
      LSHK_STATUS_INVALID_ARGUMENT);
  BAD(lshk_index_train_iul(idx, q, SIZE_MAX, DIM, offs, labels, &p, rep, 3),
      LSHK_STATUS_SIZE_OVERFLOW);
  BAD(lshk_index_train_iul(idx, q, NQ, DIM, NULL, labels, &p, rep, 3),
      LSHK_STATUS_NULL_POINTER);
  BAD(lshk_index_train_iul(idx, q, NQ, DIM, offs, NULL, &p, rep, 3),
      LSHK_STATUS_NULL_POINTER);
  BAD(lshk_index_train_iul(idx, q, NQ, DIM, offs, labels, &p, rep, 1),
      LSHK_STATUS_BUFFER_TOO_SMALL);
  BAD(lshk_index_train_iul(idx, q, NQ, DIM, offs, labels, &p, NULL, 3),
      LSHK_STATUS_NULL_POINTER);
  {
    lshk_iul_params b = p;
    b.struct_size = 8;
    BAD(lshk_index_train_iul(idx, q, NQ, DIM, offs, labels, &b, rep, 3),
        LSHK_STATUS_INVALID_ARGUMENT);
    b = p;
    b.flags = 16; /* not an LSHK_IUL_* bit */
    BAD(lshk_index_train_iul(idx, q, NQ, DIM, offs, labels, &b, rep, 3),
        LSHK_STATUS_INVALID_ARGUMENT);
    b = p;
    b.flags = UINT32_MAX;
    BAD(lshk_index_train_iul(idx, q, NQ, DIM, offs, labels, &b, rep, 3),
        LSHK_STATUS_INVALID_ARGUMENT);
    b = p;
    b.flags = LSHK_IUL_RANK_THRESHOLDS;
    b.t1 = 2.5f; /* rank cut-offs are whole numbers */
    BAD(lshk_index_train_iul(idx, q, NQ, DIM, offs, labels, &b, rep, 3),
        LSHK_STATUS_INVALID_ARGUMENT);
    b.t1 = -1.0f;
    BAD(lshk_index_train_iul(idx, q, NQ, DIM, offs, labels, &b, rep, 3),
        LSHK_STATUS_INVALID_ARGUMENT);
    b = p;
    b.learning_rate = 0.0f;
    BAD(lshk_index_train_iul(idx, q, NQ, DIM, offs, labels, &b, rep, 3),
        LSHK_STATUS_INVALID_ARGUMENT);
    b = p;
    b.batch = 0;
    BAD(lshk_index_train_iul(idx, q, NQ, DIM, offs, labels, &b, rep, 3),
        LSHK_STATUS_INVALID_ARGUMENT);
    b = p;
    b.validation_fraction = 1.0f;
    BAD(lshk_index_train_iul(idx, q, NQ, DIM, offs, labels, &b, rep, 3),
        LSHK_STATUS_INVALID_ARGUMENT);
    b = p;
    b.t1 = NAN;
    BAD(lshk_index_train_iul(idx, q, NQ, DIM, offs, labels, &b, rep, 3),
        LSHK_STATUS_NON_FINITE);
  }
  {
    size_t o2[NQ + 1];
    memcpy(o2, offs, sizeof o2);
    o2[0] = 1;
    BAD(lshk_index_train_iul(idx, q, NQ, DIM, o2, labels, &p, rep, 3),
        LSHK_STATUS_INVALID_ARGUMENT);
    memcpy(o2, offs, sizeof o2);
    o2[10] = o2[11] + 1;
    BAD(lshk_index_train_iul(idx, q, NQ, DIM, o2, labels, &p, rep, 3),
        LSHK_STATUS_INVALID_ARGUMENT);
    uint32_t l2[NQ * 2];
    memcpy(l2, labels, sizeof l2);
    l2[3] = ROWS;
    BAD(lshk_index_train_iul(idx, q, NQ, DIM, offs, l2, &p, rep, 3),
        LSHK_STATUS_INVALID_ARGUMENT);
    float q2[NQ * DIM];
    memcpy(q2, q, sizeof q2);
    q2[17] = INFINITY;
    BAD(lshk_index_train_iul(idx, q2, NQ, DIM, offs, labels, &p, rep, 3),
        LSHK_STATUS_NON_FINITE);
  }
  {
    /* A DWTA index is refused. */
    lshk_index_params dp = lshk_index_params_default();
    dp.source = LSHK_SOURCE_DWTA;
    dp.lsh.bits_per_table = 3;
    dp.lsh.tables = 4;
    lshk_index *dw = NULL;
    EXPECT_OK(lshk_index_build(w, NULL, ROWS, DIM, DIM, &dp, &dw));
    BAD(lshk_index_train_iul(dw, q, NQ, DIM, offs, labels, &p, rep, 3),
        LSHK_STATUS_INVALID_ARGUMENT);
    EXPECT_OK(lshk_index_free(dw));
  }
  {
    /* A source without hash tables (IVF lists) has no planes to learn. */
    lshk_index_params vp = lshk_index_params_default();
    vp.source = LSHK_SOURCE_IVF;
    vp.ivf.nlist = 8;
    lshk_index *iv = NULL;
    EXPECT_OK(lshk_index_build(w, NULL, ROWS, DIM, DIM, &vp, &iv));
    BAD(lshk_index_train_iul(iv, q, NQ, DIM, offs, labels, &p, rep, 3),
        LSHK_STATUS_UNSUPPORTED);
    EXPECT_OK(lshk_index_free(iv));
  }
  planes_of(idx, after);
  CHECK(memcmp(before, after, sizeof before) == 0);

  /* Success: two reports written, the third slot untouched. */
  EXPECT_OK(lshk_index_train_iul(idx, q, NQ, DIM, offs, labels, &p, rep, 3));
  CHECK(lshk_canary_intact(&rep[2], sizeof rep[2]));
  for (int r = 0; r < 2; r++) {
    CHECK(rep[r].round == (uint32_t)r);
    CHECK(rep[r].kept == 0); /* no LSHK_IUL_KEEP_BEST */
    CHECK(rep[r].positives == rep[r].negatives);
    printf("round %u: pairs %llu+%llu loss %.4f -> %.4f, pos coll %.3f -> %.3f, "
           "neg coll %.3f -> %.3f, cand %.1f -> %.1f, recall %.3f -> %.3f\n",
           rep[r].round, (unsigned long long)rep[r].positives,
           (unsigned long long)rep[r].negatives, rep[r].loss_before,
           rep[r].loss_after, rep[r].pos_collision_before,
           rep[r].pos_collision_after, rep[r].neg_collision_before,
           rep[r].neg_collision_after, rep[r].mean_candidates_before,
           rep[r].mean_candidates_after, rep[r].label_recall_before,
           rep[r].label_recall_after);
  }
  planes_of(idx, after);
  CHECK(memcmp(before, after, sizeof before) != 0);

  /* lshk_simhash_train_iul on the same planes, rows and queries (index
   * range_bits: min(K, 20, ceil(log2 rows) + 1) = K = 4, no bucket cap)
   * gives the same planes and reports. */
  {
    float out[NPL + 1];
    lshk_iul_report r2[3];
    lshk_fill_canary(out, sizeof out);
    lshk_fill_canary(r2, sizeof r2);
#define SBAD(call, st)                                                         \
  do {                                                                         \
    EXPECT_STATUS(call, st);                                                   \
    CHECK(lshk_canary_intact(out, sizeof out));                                \
    CHECK(lshk_canary_intact(r2, sizeof r2));                                  \
  } while (0)
    SBAD(lshk_simhash_train_iul(NULL, NPL, DIM, KB, L, KB, w, ROWS, DIM, q, NQ,
                                DIM, offs, labels, &p, out, NPL, r2, 3),
         LSHK_STATUS_NULL_POINTER);
    SBAD(lshk_simhash_train_iul(before, NPL - 1, DIM, KB, L, KB, w, ROWS, DIM, q,
                                NQ, DIM, offs, labels, &p, out, NPL, r2, 3),
         LSHK_STATUS_INVALID_ARGUMENT);
    SBAD(lshk_simhash_train_iul(before, NPL, DIM, KB, L, 0, w, ROWS, DIM, q, NQ,
                                DIM, offs, labels, &p, out, NPL, r2, 3),
         LSHK_STATUS_INVALID_ARGUMENT);
    SBAD(lshk_simhash_train_iul(before, NPL, DIM, 33, L, KB, w, ROWS, DIM, q, NQ,
                                DIM, offs, labels, &p, out, NPL, r2, 3),
         LSHK_STATUS_INVALID_ARGUMENT);
    SBAD(lshk_simhash_train_iul(before, NPL, DIM, KB, L, KB, w, ROWS, DIM - 1, q,
                                NQ, DIM, offs, labels, &p, out, NPL, r2, 3),
         LSHK_STATUS_INVALID_ARGUMENT);
    SBAD(lshk_simhash_train_iul(before, NPL, DIM, KB, L, KB, w, 0, DIM, q, NQ,
                                DIM, offs, labels, &p, out, NPL, r2, 3),
         LSHK_STATUS_INVALID_ARGUMENT);
    SBAD(lshk_simhash_train_iul(before, NPL, DIM, KB, L, KB, w, ROWS, DIM, q, NQ,
                                DIM, offs, labels, &p, out, NPL - 1, r2, 3),
         LSHK_STATUS_BUFFER_TOO_SMALL);
    SBAD(lshk_simhash_train_iul(before, NPL, DIM, KB, L, KB, w, ROWS, DIM, q, NQ,
                                DIM, offs, labels, &p, out, NPL, r2, 1),
         LSHK_STATUS_BUFFER_TOO_SMALL);
    {
      float bp[NPL];
      memcpy(bp, before, sizeof bp);
      bp[5] = NAN;
      SBAD(lshk_simhash_train_iul(bp, NPL, DIM, KB, L, KB, w, ROWS, DIM, q, NQ,
                                  DIM, offs, labels, &p, out, NPL, r2, 3),
           LSHK_STATUS_NON_FINITE);
    }
    EXPECT_OK(lshk_simhash_train_iul(before, NPL, DIM, KB, L, KB, w, ROWS, DIM, q,
                                     NQ, DIM, offs, labels, &p, out, NPL + 1, r2,
                                     3));
    CHECK(memcmp(out, after, sizeof after) == 0);
    CHECK(lshk_canary_intact(&out[NPL], sizeof(float)));
    CHECK(memcmp(r2, rep, 2 * sizeof(lshk_iul_report)) == 0);
    CHECK(lshk_canary_intact(&r2[2], sizeof r2[2]));
  }

  /* Rank cut-offs and keep-best (flags): the index and the standalone
   * trainer agree, at most one round is marked kept, and the result is
   * deterministic. */
  {
    lshk_iul_params f = p;
    lshk_iul_report a[3], c[3];
    float pa[NPL], pc[NPL], pd[NPL];
    f.flags = LSHK_IUL_RANK_THRESHOLDS | LSHK_IUL_KEEP_BEST;
    f.rounds = 3;
    f.t1 = 8.0f;  /* a missed label among the top 8 rows: positive */
    f.t2 = 40.0f; /* a retrieved non-label outside the top 40: negative */
    f.validation_fraction = 0.25f;
    lshk_index *i3 = build();
    EXPECT_OK(lshk_index_train_iul(i3, q, NQ, DIM, offs, labels, &f, a, 3));
    planes_of(i3, pa);
    unsigned kept = 0;
    for (int r = 0; r < 3; r++) {
      CHECK(a[r].round == (uint32_t)r && a[r].kept <= 1);
      kept += a[r].kept;
      printf("flags round %u: pairs %llu, recall %.3f -> %.3f, kept %u\n", a[r].round,
             (unsigned long long)a[r].positives, a[r].label_recall_before,
             a[r].label_recall_after, a[r].kept);
    }
    CHECK(kept <= 1);
    /* The kept round has the best validation recall of all rounds, and
     * beats the starting planes; none kept: no round beat them. */
    for (int r = 0; r < 3; r++) {
      if (a[r].kept) {
        for (int t = 0; t < 3; t++)
          CHECK(!(a[t].label_recall_after > a[r].label_recall_after));
        CHECK(a[r].label_recall_after > a[0].label_recall_before);
      }
    }
    if (kept == 0) {
      for (int t = 0; t < 3; t++)
        CHECK(!(a[t].label_recall_after > a[0].label_recall_before));
      CHECK(memcmp(pa, before, sizeof pa) == 0);
    }
    EXPECT_OK(lshk_simhash_train_iul(before, NPL, DIM, KB, L, KB, w, ROWS, DIM, q, NQ,
                                     DIM, offs, labels, &f, pc, NPL, c, 3));
    CHECK(memcmp(pa, pc, sizeof pa) == 0);
    CHECK(memcmp(a, c, sizeof a) == 0);
    lshk_index *i4 = build();
    EXPECT_OK(lshk_index_train_iul(i4, q, NQ, DIM, offs, labels, &f, NULL, 0));
    planes_of(i4, pd);
    CHECK(memcmp(pa, pd, sizeof pa) == 0);
    EXPECT_OK(lshk_index_free(i4));
    EXPECT_OK(lshk_index_free(i3));
  }

  /* Determinism: the same training on a fresh index, no reports. */
  lshk_index *idx2 = build();
  EXPECT_OK(lshk_index_train_iul(idx2, q, NQ, DIM, offs, labels, &p, NULL, 0));
  planes_of(idx2, again);
  CHECK(memcmp(after, again, sizeof after) == 0);
  /* NULL params = defaults. */
  EXPECT_OK(lshk_index_train_iul(idx2, q, NQ, DIM, offs, labels, NULL, NULL, 0));
  EXPECT_OK(lshk_index_free(idx2));
  EXPECT_OK(lshk_index_free(idx));
  return lshk_test_summary("iul");
}
