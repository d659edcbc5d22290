/* C tests of lshk_index_train_labels / lshk_index_label_info on a SimHash
 * index: bad inputs (the index must stay unchanged: its query results and
 * candidate counts are the canary), a successful training that makes the
 * labels candidates (and lshk_index_describe's `labelled` 1), and
 * save/load of the trained index. */
#include <math.h>

#include "lshk_test.h"

#define ROWS 300
#define DIM 8
#define QSTRIDE 10
#define NT 40 /* training queries */
#define K 300

static uint64_t rng_state = 4242;
static float next_f(void) {
  rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
  return (float)((double)(rng_state >> 11) / 9007199254740992.0) * 2.0f - 1.0f;
}

static float w[ROWS * DIM];
static float tq[NT * QSTRIDE];
static size_t offs[NT + 1];
static uint32_t ylabels[NT * 2];
static uint32_t ids0[NT * K], ids1[NT * K];

/* Candidate total and top-K ids of the training queries. */
static uint64_t run(const lshk_index *idx, uint32_t *ids) {
  lshk_query_stats st;
  memset(&st, 0, sizeof st);
  st.struct_size = sizeof st;
  if (lshk_index_query(idx, tq, NT, QSTRIDE, K, NULL, ids, NULL, &st) !=
      LSHK_STATUS_OK)
    return UINT64_MAX;
  return st.candidates_total;
}

/* lshk_index_describe's `labelled` (UINT32_MAX when the call fails). */
static uint32_t labelled(const lshk_index *idx) {
  lshk_index_info info;
  memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  if (lshk_index_describe(idx, &info) != LSHK_STATUS_OK) return UINT32_MAX;
  return info.labelled;
}

static int has(const uint32_t *ids, uint32_t y) {
  for (size_t j = 0; j < K; j++)
    if (ids[j] == y) return 1;
  return 0;
}

/* lshk_tables_add_labels on standalone tables: bad inputs leave the
 * tables unchanged (the gathered candidates are the canary), INSTEAD with
 * cap 0 turns each bucket into exactly its training labels, and the result
 * is frozen. Tables lent by an index are refused. */
#define TL 2
#define TN 3
static size_t gather_one(const lshk_tables *t, uint32_t code, uint32_t *out,
                         size_t cap) {
  uint32_t codes[TL] = {code, code};
  size_t offsets[2] = {0, 0};
  size_t needed = 0;
  if (lshk_tables_gather(t, codes, 1, NULL, NULL, 0, NULL, NULL, 0, out, cap,
                         offsets, NULL, &needed) != LSHK_STATUS_OK)
    return (size_t)-1;
  return offsets[1];
}

static void standalone_tables(const lshk_index *idx) {
  static uint32_t row_codes[ROWS * TL];
  for (size_t i = 0; i < ROWS; i++) {
    row_codes[i * TL] = (uint32_t)(i % 8);
    row_codes[i * TL + 1] = (uint32_t)(i % 8);
  }
  lshk_tables *t = NULL;
  EXPECT_OK(lshk_tables_build(row_codes, ROWS, TL, 3, 0, 1, 1, &t));
  uint32_t qcodes[TN * TL] = {1, 1, 2, 2, 1, 1};
  size_t qoff[TN + 1] = {0, 2, 3, 4};
  uint32_t qlab[4] = {5, 9, 7, 5};
  uint32_t before[ROWS], after[ROWS];
  size_t n0 = gather_one(t, 1, before, ROWS);
  CHECK(n0 == ROWS / 8 + 1); /* rows 1, 9, 17, ... */
  lshk_label_params lp = lshk_label_params_default();
  lp.policy = LSHK_LABEL_POLICY_INSTEAD;
  lp.label_cap = 0;

  uint32_t bad_lab[4] = {5, 9, ROWS, 5};
  EXPECT_STATUS(lshk_tables_add_labels(t, qcodes, TN, qoff, bad_lab, &lp),
                LSHK_STATUS_INDEX_OUT_OF_RANGE);
  size_t bad_off[TN + 1] = {0, 2, 1, 4};
  EXPECT_STATUS(lshk_tables_add_labels(t, qcodes, TN, bad_off, qlab, &lp),
                LSHK_STATUS_INVALID_ARGUMENT);
  EXPECT_STATUS(lshk_tables_add_labels(t, NULL, TN, qoff, qlab, &lp),
                LSHK_STATUS_NULL_POINTER);
  lshk_label_params bad = lp;
  bad.policy = 7;
  EXPECT_STATUS(lshk_tables_add_labels(t, qcodes, TN, qoff, qlab, &bad),
                LSHK_STATUS_INVALID_ARGUMENT);
  bad = lp;
  bad.struct_size = 4;
  EXPECT_STATUS(lshk_tables_add_labels(t, qcodes, TN, qoff, qlab, &bad),
                LSHK_STATUS_INVALID_ARGUMENT);
  EXPECT_STATUS(lshk_tables_add_labels(NULL, qcodes, TN, qoff, qlab, &lp),
                LSHK_STATUS_NULL_POINTER);
  CHECK(gather_one(t, 1, after, ROWS) == n0);
  CHECK(memcmp(before, after, n0 * sizeof(uint32_t)) == 0);

  EXPECT_OK(lshk_tables_add_labels(t, qcodes, TN, qoff, qlab, &lp));
  /* Bucket 1 (queries 0 and 2): labels {5, 9}; bucket 2: {7}. */
  CHECK(gather_one(t, 1, after, ROWS) == 2);
  CHECK(after[0] == 5 && after[1] == 9);
  CHECK(gather_one(t, 2, after, ROWS) == 1);
  CHECK(after[0] == 7);
  CHECK(gather_one(t, 3, after, ROWS) == 0);
  /* Frozen: no second labelling, no update. */
  EXPECT_STATUS(lshk_tables_add_labels(t, qcodes, TN, qoff, qlab, &lp),
                LSHK_STATUS_INVALID_ARGUMENT);
  uint32_t id0 = 0, nc[TL] = {3, 3};
  EXPECT_STATUS(lshk_tables_update(t, &id0, nc, 1),
                LSHK_STATUS_INVALID_ARGUMENT);
  EXPECT_OK(lshk_tables_free(t));

  /* Tables lent by an index. */
  const lshk_tables *lent = NULL;
  EXPECT_OK(lshk_index_tables(idx, &lent));
  EXPECT_STATUS(lshk_tables_add_labels((lshk_tables *)lent, qcodes, TN, qoff,
                                       qlab, &lp),
                LSHK_STATUS_INVALID_ARGUMENT);
}

int main(void) {
  for (size_t i = 0; i < ROWS * DIM; i++) w[i] = next_f();
  for (size_t i = 0; i < NT * QSTRIDE; i++) tq[i] = next_f();
  offs[0] = 0;
  for (size_t i = 0; i < NT; i++) {
    ylabels[2 * i] = (uint32_t)(i * 7 % ROWS);
    ylabels[2 * i + 1] = (uint32_t)(i * 13 % ROWS);
    offs[i + 1] = 2 * (i + 1);
  }
  lshk_index_params ip = lshk_index_params_default();
  ip.lsh.bits_per_table = 6;
  ip.lsh.tables = 4;
  lshk_index *idx = NULL;
  EXPECT_OK(lshk_index_build(w, NULL, ROWS, DIM, DIM, &ip, &idx));
  uint64_t c0 = run(idx, ids0);
  CHECK(c0 != UINT64_MAX);
  standalone_tables(idx);

  lshk_label_params lp = lshk_label_params_default();
  CHECK(lp.struct_size == sizeof lp);
  CHECK(lp.label_cap == 64);
  CHECK(lp.policy == LSHK_LABEL_POLICY_BESIDE);

  /* label_info on an untrained index: trained = 0, params untouched. */
  uint32_t trained = 7;
  lshk_label_params info;
  lshk_fill_canary(&info, sizeof info);
  info.struct_size = sizeof info;
  EXPECT_OK(lshk_index_label_info(idx, &trained, &info));
  CHECK(trained == 0);
  CHECK(lshk_canary_intact(&info.label_cap, sizeof info - sizeof info.struct_size));
  EXPECT_STATUS(lshk_index_label_info(idx, NULL, NULL), LSHK_STATUS_NULL_POINTER);
  info.struct_size = 4;
  trained = 7;
  EXPECT_STATUS(lshk_index_label_info(idx, &trained, &info),
                LSHK_STATUS_INVALID_ARGUMENT);
  CHECK(trained == 7);
  EXPECT_STATUS(lshk_index_label_info(NULL, &trained, NULL),
                LSHK_STATUS_NULL_POINTER);

  /* Bad inputs: each must fail with its status and change nothing. */
  EXPECT_STATUS(lshk_index_train_labels(NULL, tq, NT, QSTRIDE, offs, ylabels, &lp),
                LSHK_STATUS_NULL_POINTER);
  EXPECT_STATUS(lshk_index_train_labels(idx, NULL, NT, QSTRIDE, offs, ylabels, &lp),
                LSHK_STATUS_NULL_POINTER);
  EXPECT_STATUS(lshk_index_train_labels(idx, tq, NT, QSTRIDE, NULL, ylabels, &lp),
                LSHK_STATUS_NULL_POINTER);
  EXPECT_STATUS(lshk_index_train_labels(idx, tq, NT, QSTRIDE, offs, NULL, &lp),
                LSHK_STATUS_NULL_POINTER);
  EXPECT_STATUS(lshk_index_train_labels(idx, tq, NT, DIM - 1, offs, ylabels, &lp),
                LSHK_STATUS_INVALID_ARGUMENT);
  EXPECT_STATUS(
      lshk_index_train_labels(idx, tq, SIZE_MAX / 2, QSTRIDE, offs, ylabels, &lp),
      LSHK_STATUS_SIZE_OVERFLOW);
  lshk_label_params bad = lp;
  bad.struct_size = 4;
  EXPECT_STATUS(lshk_index_train_labels(idx, tq, NT, QSTRIDE, offs, ylabels, &bad),
                LSHK_STATUS_INVALID_ARGUMENT);
  bad = lp;
  bad.policy = 2;
  EXPECT_STATUS(lshk_index_train_labels(idx, tq, NT, QSTRIDE, offs, ylabels, &bad),
                LSHK_STATUS_INVALID_ARGUMENT);
  ylabels[5] = ROWS; /* a label >= rows */
  EXPECT_STATUS(lshk_index_train_labels(idx, tq, NT, QSTRIDE, offs, ylabels, &lp),
                LSHK_STATUS_INDEX_OUT_OF_RANGE);
  {
    char msg[256];
    lshk_last_error_message(msg, sizeof msg);
    CHECK(strstr(msg, "labels[5]") != NULL);
  }
  ylabels[5] = 5;
  offs[3] = offs[4] + 1; /* decreasing offsets */
  EXPECT_STATUS(lshk_index_train_labels(idx, tq, NT, QSTRIDE, offs, ylabels, &lp),
                LSHK_STATUS_INVALID_ARGUMENT);
  offs[3] = 6;
  float keep = tq[2 * QSTRIDE + 3];
  tq[2 * QSTRIDE + 3] = NAN;
  EXPECT_STATUS(lshk_index_train_labels(idx, tq, NT, QSTRIDE, offs, ylabels, &lp),
                LSHK_STATUS_NON_FINITE);
  tq[2 * QSTRIDE + 3] = keep;
  /* Misaligned label pointer. */
  EXPECT_STATUS(lshk_index_train_labels(idx, tq, NT, QSTRIDE, offs,
                                        (const uint32_t *)((const char *)ylabels + 1),
                                        &lp),
                LSHK_STATUS_INVALID_ARGUMENT);
  /* The index is unchanged after all of the above. */
  CHECK(run(idx, ids1) == c0);
  CHECK(memcmp(ids0, ids1, sizeof ids0) == 0);
  EXPECT_OK(lshk_index_label_info(idx, &trained, NULL));
  CHECK(trained == 0);
  CHECK(labelled(idx) == 0);

  /* Success: BESIDE with label_cap 0 (keep every label) makes every
   * training query's labels candidates of that query (K = ROWS returns
   * every candidate). */
  lp.label_cap = 0;
  EXPECT_OK(lshk_index_train_labels(idx, tq, NT, QSTRIDE, offs, ylabels, &lp));
  uint64_t c1 = run(idx, ids1);
  CHECK(c1 >= c0);
  int all = 1;
  for (size_t i = 0; i < NT; i++)
    all &= has(ids1 + i * K, ylabels[2 * i]) && has(ids1 + i * K, ylabels[2 * i + 1]);
  CHECK(all);
  info.struct_size = sizeof info;
  EXPECT_OK(lshk_index_label_info(idx, &trained, &info));
  CHECK(trained == 1 && info.label_cap == 0 &&
        info.policy == LSHK_LABEL_POLICY_BESIDE);
  CHECK(labelled(idx) == 1);
  /* Trained once only. */
  EXPECT_STATUS(lshk_index_train_labels(idx, tq, NT, QSTRIDE, offs, ylabels, &lp),
                LSHK_STATUS_INVALID_ARGUMENT);

  /* Save / load: same results, still reported as trained. */
  const char *path = "/tmp/lshk_ffi_labels_test.lshk";
  EXPECT_OK(lshk_index_save(idx, path));
  lshk_index *back = NULL;
  EXPECT_OK(lshk_index_load(path, NULL, 0, &back));
  uint32_t *ids2 = (uint32_t *)malloc(sizeof ids1);
  CHECK(ids2 != NULL);
  if (ids2) {
    CHECK(run(back, ids2) == c1);
    CHECK(memcmp(ids1, ids2, sizeof ids1) == 0);
    free(ids2);
  }
  trained = 0;
  EXPECT_OK(lshk_index_label_info(back, &trained, &info));
  CHECK(trained == 1 && info.label_cap == 0);
  CHECK(labelled(back) == 1);
  remove(path);
  EXPECT_OK(lshk_index_free(back));
  EXPECT_OK(lshk_index_free(idx));
  /* A freed handle. */
  EXPECT_STATUS(lshk_index_train_labels(idx, tq, NT, QSTRIDE, offs, ylabels, &lp),
                LSHK_STATUS_INVALID_HANDLE);
  return lshk_test_summary("labels");
}
