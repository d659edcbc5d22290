/* Bad-input matrix (issue 8) for the mutable index (issue 14, item 2):
 * lshk_index_update_rows, lshk_index_rehash_rows, lshk_index_rehash_dirty,
 * lshk_index_dirty_rows, lshk_rehash_next, and the scorer's row codes
 * (lshk_index_set_codes). See bad_input.h for what a case asserts; refused
 * updates must also leave the index as it was (its query results and dirty
 * count). Row updates and rehashes are LSH-only: the other sources refuse
 * them (UNSUPPORTED); row codes are refused by the IVF source only.
 *
 * Functions covered here:
 *   lshk_index_update_rows lshk_index_rehash_rows lshk_index_rehash_dirty
 *   lshk_index_dirty_rows lshk_rehash_next lshk_index_set_codes */
#include "bad_input.h"

#define FX bi_fx()
#define IR BI_FX_ROWS
#define ID BI_FX_DIM
#define UN 3
#define US 10 /* row stride of the new rows, > dim */

static lshk_index *nobias, *labelled, *half, *bor, *coded, *int8;
static float wbor[IR * ID];

static lshk_index *make(uint32_t storage, const float *w, const float *bias) {
  lshk_index_params p = lshk_index_params_default();
  lshk_index *idx = NULL;
  p.lsh.bits_per_table = BI_FX_K;
  p.lsh.tables = BI_FX_L;
  p.storage = storage;
  p.build_threads = 1;
  bi_fx_need(lshk_index_build(w, bias, IR, ID, ID, &p, &idx), "lshk_index_build");
  return idx;
}

static uint64_t fingerprint(const lshk_index *idx) {
  float q[2 * ID];
  uint32_t ids[2 * 5];
  float sc[2 * 5];
  uint64_t h = 1469598103934665603ull;
  size_t dirty = 0;
  uint32_t bits;
  for (int i = 0; i < 2 * ID; i++) q[i] = (float)((i * 7) % 5) - 2.0f;
  if (lshk_index_query(idx, q, 2, ID, 5, NULL, ids, sc, NULL) != LSHK_STATUS_OK) return 0;
  if (lshk_index_dirty_rows(idx, &dirty) != LSHK_STATUS_OK) return 0;
  for (int i = 0; i < 10; i++) {
    memcpy(&bits, &sc[i], 4);
    h = (h ^ ids[i]) * 1099511628211ull;
    h = (h ^ bits) * 1099511628211ull;
  }
  return (h ^ dirty) * 1099511628211ull;
}

/* ---- lshk_index_update_rows ---------------------------------------------- */
typedef struct {
  lshk_index *idx;
  uint32_t idv[UN];
  float rv[UN * US];
  float bv[UN];
  const uint32_t *ids;
  size_t count;
  const float *rows;
  size_t row_stride;
  const float *bias;
} bi_args_lshk_index_update_rows;
static void bi_init_lshk_index_update_rows(bi_args_lshk_index_update_rows *a,
                                           bi_outs *o) {
  (void)o;
  for (int j = 0; j < UN; j++) {
    a->idv[j] = (uint32_t)(j * 13 + 2);
    a->bv[j] = 0.25f * (float)j;
  }
  for (int i = 0; i < UN * US; i++) a->rv[i] = (float)((i * 3) % 7) - 3.0f;
  a->idx = FX->idx_pool[0];
  a->ids = a->idv;
  a->count = UN;
  a->rows = a->rv;
  a->row_stride = US;
  a->bias = a->bv;
}
static lshk_status bi_call_lshk_index_update_rows(bi_args_lshk_index_update_rows *a) {
  return lshk_index_update_rows(a->idx, a->ids, a->count, a->rows, a->row_stride,
                                a->bias);
}

/* ---- lshk_index_rehash_rows ---------------------------------------------- */
typedef struct {
  lshk_index *idx;
  size_t outv[2];
  uint32_t idv[UN];
  const uint32_t *ids;
  size_t count;
  size_t *out;
} bi_args_lshk_index_rehash_rows;
static void bi_init_lshk_index_rehash_rows(bi_args_lshk_index_rehash_rows *a,
                                           bi_outs *o) {
  for (int j = 0; j < UN; j++) a->idv[j] = (uint32_t)(j * 11 + 1);
  a->idx = FX->idx_pool[0];
  a->ids = a->idv;
  a->count = UN;
  a->out = &a->outv[0];
  bi_out(o, a->outv, sizeof a->outv);
}
static lshk_status bi_call_lshk_index_rehash_rows(bi_args_lshk_index_rehash_rows *a) {
  return lshk_index_rehash_rows(a->idx, a->ids, a->count, a->out);
}

/* ---- lshk_index_rehash_dirty --------------------------------------------- */
typedef struct {
  lshk_index *idx;
  size_t outv[2];
  size_t *out;
} bi_args_lshk_index_rehash_dirty;
static void bi_init_lshk_index_rehash_dirty(bi_args_lshk_index_rehash_dirty *a,
                                            bi_outs *o) {
  a->idx = FX->idx_pool[0];
  a->out = &a->outv[0];
  bi_out(o, a->outv, sizeof a->outv);
}
static lshk_status bi_call_lshk_index_rehash_dirty(bi_args_lshk_index_rehash_dirty *a) {
  return lshk_index_rehash_dirty(a->idx, a->out);
}

/* ---- lshk_index_dirty_rows ----------------------------------------------- */
typedef struct {
  const lshk_index *idx;
  size_t outv[2];
  size_t *out;
} bi_args_lshk_index_dirty_rows;
static void bi_init_lshk_index_dirty_rows(bi_args_lshk_index_dirty_rows *a,
                                          bi_outs *o) {
  a->idx = FX->idx_pool[0];
  a->out = &a->outv[0];
  bi_out(o, a->outv, sizeof a->outv);
}
static lshk_status bi_call_lshk_index_dirty_rows(bi_args_lshk_index_dirty_rows *a) {
  return lshk_index_dirty_rows(a->idx, a->out);
}

/* ---- lshk_rehash_next ---------------------------------------------------- */
typedef struct {
  double p0, lambda;
  uint64_t t;
  uint64_t outv[2];
  uint64_t *out;
} bi_args_lshk_rehash_next;
static void bi_init_lshk_rehash_next(bi_args_lshk_rehash_next *a, bi_outs *o) {
  a->p0 = LSHK_LNS_REHASH_PERIOD;
  a->lambda = LSHK_LNS_REHASH_LAMBDA;
  a->t = 1000;
  a->out = &a->outv[0];
  bi_out(o, a->outv, sizeof a->outv);
}
static lshk_status bi_call_lshk_rehash_next(bi_args_lshk_rehash_next *a) {
  return lshk_rehash_next(a->p0, a->lambda, a->t, a->out);
}

/* ---- lshk_index_set_codes ------------------------------------------------ */
typedef struct {
  lshk_index *idx;
  uint32_t codes;
  uint32_t rerank;
} bi_args_lshk_index_set_codes;
static void bi_init_lshk_index_set_codes(bi_args_lshk_index_set_codes *a,
                                         bi_outs *o) {
  (void)o;
  a->idx = coded;
  a->codes = LSHK_IVF_CODES_I8;
  a->rerank = 8;
}
static lshk_status bi_call_lshk_index_set_codes(bi_args_lshk_index_set_codes *a) {
  return lshk_index_set_codes(a->idx, a->codes, a->rerank);
}

int main(void) {
  uint64_t fp;
  size_t n = 0;
  bi_fx_setup();
  nobias = make(LSHK_STORAGE_F32, FX->w, NULL);
  half = make(LSHK_STORAGE_F16, FX->w, FX->bias);
  memcpy(wbor, FX->w, sizeof wbor);
  bor = make(LSHK_STORAGE_BORROWED_F32, wbor, FX->bias);
  labelled = make(LSHK_STORAGE_F32, FX->w, FX->bias);
  {
    float q[4 * ID];
    size_t lo[5] = {0, 1, 2, 3, 4};
    uint32_t lv[4] = {1, 5, 9, 13};
    for (int i = 0; i < 4 * ID; i++) q[i] = (float)((i * 5) % 9) - 4.0f;
    bi_fx_need(lshk_index_train_labels(labelled, q, 4, ID, lo, lv, NULL),
               "lshk_index_train_labels");
  }
  fp = fingerprint(FX->idx_pool[0]);

#define FN lshk_index_update_rows
  BI_ACCEPT(FN, a.idx = FX->idx_pool[1]);
  BI_ACCEPT(FN, a.idx = FX->idx_pool[1]; a.rows = NULL; a.row_stride = 0);
  BI_ACCEPT(FN, a.idx = FX->idx_pool[1]; a.bias = NULL; a.idv[2] = a.idv[0]);
  BI_ACCEPT(FN, a.idx = FX->idx_pool[1]; a.ids = NULL; a.count = 0);
  BI_ACCEPT(FN, a.idx = nobias; a.bias = NULL);
  BI_ACCEPT(FN, a.idx = bor; a.rows = NULL);
  BI_ACCEPT(FN, a.idx = half; a.rv[0] = 65504.0f);
  BI_INDEX_CASES(FN, idx, lshk_index);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.idx = labelled);
  BI_CASE(FN, LSHK_STATUS_UNSUPPORTED, a.idx = FX->idx_ivf);
  BI_CASE(FN, LSHK_STATUS_UNSUPPORTED, a.idx = FX->idx_graph);
  BI_CASE(FN, LSHK_STATUS_UNSUPPORTED, a.idx = FX->idx_forest);
  BI_CASE(FN, LSHK_STATUS_UNSUPPORTED, a.idx = FX->idx_forest; a.rows = NULL;
          a.bias = NULL);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.idx = nobias);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.idx = bor);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.idx = half; a.rv[US + 1] = 70000.0f);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.ids = NULL);
  BI_CASE(FN, LSHK_STATUS_INDEX_OUT_OF_RANGE, a.idv[UN - 1] = IR);
  BI_CASE(FN, LSHK_STATUS_INDEX_OUT_OF_RANGE, a.idv[0] = UINT32_MAX);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.row_stride = ID - 1);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.row_stride = 0);
  BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.row_stride = SIZE_MAX / 2);
  BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.count = SIZE_MAX);
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.rv[(UN - 1) * US + ID - 1] = NAN);
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.rv[0] = -INFINITY);
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.bv[UN - 1] = NAN);
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.idx = nobias; a.bias = NULL;
          a.rv[US] = INFINITY);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.ids = BI_MISALIGN(const uint32_t, a.idv));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.rows = BI_MISALIGN(const float, a.rv));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.bias = BI_MISALIGN(const float, a.bv));
#undef FN
  BI_EXPECT(lshk_index_update_rows, fp != 0 && fingerprint(FX->idx_pool[0]) == fp);

#define FN lshk_index_rehash_rows
  BI_ACCEPT(FN, a.idx = FX->idx_pool[1]);
  BI_ACCEPT(FN, a.idx = FX->idx_pool[1]; a.out = NULL; a.idv[1] = a.idv[0]);
  BI_ACCEPT(FN, a.idx = FX->idx_pool[1]; a.ids = NULL; a.count = 0);
  BI_ACCEPT(FN, a.idx = bor);
  BI_INDEX_CASES(FN, idx, lshk_index);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.idx = labelled);
  BI_CASE(FN, LSHK_STATUS_UNSUPPORTED, a.idx = FX->idx_ivf);
  BI_CASE(FN, LSHK_STATUS_UNSUPPORTED, a.idx = FX->idx_graph);
  BI_CASE(FN, LSHK_STATUS_UNSUPPORTED, a.idx = FX->idx_forest);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.ids = NULL);
  BI_CASE(FN, LSHK_STATUS_INDEX_OUT_OF_RANGE, a.idv[UN - 1] = IR);
  BI_CASE(FN, LSHK_STATUS_INDEX_OUT_OF_RANGE, a.idv[0] = UINT32_MAX);
  BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.count = SIZE_MAX);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.ids = BI_MISALIGN(const uint32_t, a.idv));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.out = BI_MISALIGN(size_t, a.outv));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.ids = (const uint32_t *)(void *)a.outv;
          a.count = 2);
  wbor[12 * ID + 3] = NAN; /* the caller wrote a NaN into its borrowed W */
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.idx = bor);
  wbor[12 * ID + 3] = FX->w[12 * ID + 3];
#undef FN
  BI_EXPECT(lshk_index_rehash_rows, fp != 0 && fingerprint(FX->idx_pool[0]) == fp);

#define FN lshk_index_rehash_dirty
  BI_ACCEPT(FN, a.idx = FX->idx_pool[1]);
  BI_ACCEPT(FN, a.idx = FX->idx_pool[1]; a.out = NULL);
  BI_INDEX_CASES(FN, idx, lshk_index);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.idx = labelled);
  BI_CASE(FN, LSHK_STATUS_UNSUPPORTED, a.idx = FX->idx_ivf);
  BI_CASE(FN, LSHK_STATUS_UNSUPPORTED, a.idx = FX->idx_graph);
  BI_CASE(FN, LSHK_STATUS_UNSUPPORTED, a.idx = FX->idx_forest; a.out = NULL);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.out = BI_MISALIGN(size_t, a.outv));
  {
    uint32_t r = 12;
    bi_fx_need(lshk_index_update_rows(bor, &r, 1, NULL, 0, NULL), "lshk_index_update_rows");
    wbor[12 * ID] = INFINITY;
    BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.idx = bor);
    wbor[12 * ID] = FX->w[12 * ID];
    BI_ACCEPT(FN, a.idx = bor);
  }
#undef FN

#define FN lshk_index_dirty_rows
  BI_BASELINE(FN);
  BI_INDEX_CASES(FN, idx, const lshk_index);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.out = NULL);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.out = BI_MISALIGN(size_t, a.outv));
  /* no source but LSH has dirty rows: 0 */
  BI_ACCEPT(FN, a.idx = FX->idx_ivf);
  BI_ACCEPT(FN, a.idx = FX->idx_graph);
  BI_ACCEPT(FN, a.idx = FX->idx_forest);
#undef FN
  BI_EXPECT(lshk_index_dirty_rows,
            lshk_index_dirty_rows(bor, &n) == LSHK_STATUS_OK && n == 0);

#define FN lshk_rehash_next
  BI_BASELINE(FN);
  BI_ACCEPT(FN, a.lambda = 0.0; a.p0 = 1.0);
  BI_ACCEPT(FN, a.t = UINT64_MAX);
  BI_ACCEPT(FN, a.lambda = 1e300);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.out = NULL);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.out = BI_MISALIGN(uint64_t, a.outv));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.p0 = 0.5);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.p0 = 0.0);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.p0 = -50.0);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.p0 = NAN);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.p0 = INFINITY);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.lambda = -1e-4);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.lambda = NAN);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.lambda = INFINITY);
#undef FN
  {
    uint64_t next = 0;
    BI_EXPECT(lshk_rehash_next,
              lshk_rehash_next(50.0, 1e-4, 200, &next) == LSHK_STATUS_OK && next == 251);
  }

#define FN lshk_index_set_codes
  coded = make(LSHK_STORAGE_F32, FX->w, FX->bias);
  int8 = make(LSHK_STORAGE_I8, FX->w, FX->bias);
  BI_BASELINE(FN);
  fp = fingerprint(coded);
  BI_INDEX_CASES(FN, idx, lshk_index);
  BI_CASE(FN, LSHK_STATUS_UNSUPPORTED, a.idx = FX->idx_ivf);
  BI_CASE(FN, LSHK_STATUS_UNSUPPORTED, a.idx = FX->idx_ivf; a.codes = LSHK_IVF_CODES_NONE);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.codes = LSHK_IVF_CODES_PQ4);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.codes = LSHK_IVF_CODES_PQ4_I8);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.codes = 4);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.codes = UINT32_MAX);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.rerank = 0);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.idx = nobias; a.rerank = 0);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.idx = int8); /* rows are int8 */
  /* refused calls leave the index (its codes and answers) as it was */
  BI_EXPECT(FN, fingerprint(coded) == fp);
  BI_ACCEPT(FN, a.rerank = UINT32_MAX);
  BI_ACCEPT(FN, a.idx = int8; a.codes = LSHK_IVF_CODES_NONE; a.rerank = 0);
  BI_ACCEPT(FN, a.idx = half);
  BI_ACCEPT(FN, a.idx = bor);
  BI_ACCEPT(FN, a.idx = labelled);
  BI_ACCEPT(FN, a.idx = FX->idx_dw);
  BI_ACCEPT(FN, a.idx = FX->idx_graph);
  BI_ACCEPT(FN, a.idx = FX->idx_forest);
  BI_ACCEPT(FN, a.codes = LSHK_IVF_CODES_NONE; a.rerank = 0);
  BI_ACCEPT(FN, a.codes = LSHK_IVF_CODES_NONE; a.rerank = 7);
  {
    lshk_index_info info = {.struct_size = sizeof info};
    BI_EXPECT(FN, lshk_index_describe(half, &info) == LSHK_STATUS_OK &&
                      info.codes == LSHK_IVF_CODES_I8);
    BI_EXPECT(FN, lshk_index_describe(coded, &info) == LSHK_STATUS_OK &&
                      info.codes == LSHK_IVF_CODES_NONE);
  }
#undef FN
  bi_fx_need(lshk_index_free(coded), "lshk_index_free");
  bi_fx_need(lshk_index_free(int8), "lshk_index_free");
  bi_fx_need(lshk_index_free(nobias), "lshk_index_free");
  bi_fx_need(lshk_index_free(half), "lshk_index_free");
  bi_fx_need(lshk_index_free(bor), "lshk_index_free");
  bi_fx_need(lshk_index_free(labelled), "lshk_index_free");
  bi_fx_teardown();
  return bi_summary("bad_input_index_update");
}
