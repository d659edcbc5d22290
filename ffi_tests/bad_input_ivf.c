/* Bad-input matrix (issue 8), the IVF index: lshk_ivf_* (build, query,
 * save/load, accessors). See bad_input.h for what a case asserts. File
 * cases check that a refused save leaves no file (and no temporary file)
 * behind; the load cases cover missing, empty, garbage and truncated
 * files, an lshk_index file (and an IVF file given to lshk_index_load),
 * and W passed or not passed against what the file needs.
 *
 * Functions covered here:
 *   lshk_ivf_params_default lshk_ivf_search_default lshk_ivf_build
 *   lshk_ivf_query lshk_ivf_save lshk_ivf_load lshk_ivf_shape
 *   lshk_ivf_memory_bytes lshk_ivf_free lshk_ivf_train_labels
 *   lshk_ivf_label_info lshk_ivf_calibrate lshk_ivf_build_weighted */
#define _POSIX_C_SOURCE 200809L
#include "bad_input_files.h"
#include <float.h>

#define FX bi_fx()
#define IR BI_FX_ROWS
#define ID BI_FX_DIM
#define IWS 9 /* a w_stride > dim */
#define NL 4  /* lists of the fixtures */

static lshk_ivf *ivf_live;     /* W copied, CODES_I8, bias */
static lshk_ivf *ivf_borrowed; /* borrows wb (stride IWS) */
static lshk_ivf *ivf_flat;     /* CODES_NONE */
static lshk_ivf *ivf_freed;
static lshk_ivf *ivf_pq;      /* CODES_PQ4 (cannot take labels) */
static lshk_ivf *ivf_pq8;     /* CODES_PQ4_I8 (cannot take labels either) */
static lshk_ivf *ivf_lab[4];  /* trained by the accepted label cases */

static char path_owned[300], path_borrowed[300], path_index[300];
static float wb[IR * IWS]; /* the borrowed W of ivf_borrowed / path_borrowed */


static lshk_ivf *fx_ivf(const float *w, size_t stride, const float *bias,
                        uint32_t codes, uint32_t borrow) {
  lshk_ivf_params p = lshk_ivf_params_default();
  lshk_ivf *h = NULL;
  p.nlist = NL;
  p.codes = codes;
  p.borrow = borrow;
  p.threads = 1;
  bi_fx_need(lshk_ivf_build(w, bias, IR, ID, stride, &p, &h), "lshk_ivf_build");
  return h;
}

/* ---- lshk_ivf_build ------------------------------------------------------ */
typedef struct {
  float wv[IR * IWS];
  float bv[IR];
  lshk_ivf_params pv;
  struct {
    lshk_ivf_params p;
    unsigned char tail[48];
  } big; /* a caller with a newer, larger lshk_ivf_params */
  const float *w;
  const float *bias;
  size_t rows, dim, w_stride;
  const lshk_ivf_params *p;
  lshk_ivf *outv;
  lshk_ivf **out;
} bi_args_lshk_ivf_build;
static void bi_init_lshk_ivf_build(bi_args_lshk_ivf_build *a, bi_outs *o) {
  for (int i = 0; i < IR * IWS; i++) a->wv[i] = (float)((i * 13) % 17) - 8.0f;
  for (int i = 0; i < IR; i++) a->bv[i] = 0.5f * (float)(i % 3);
  a->pv = lshk_ivf_params_default();
  a->pv.nlist = NL;
  a->pv.iters = 3;
  a->pv.threads = 1;
  a->big.p = a->pv;
  a->big.p.struct_size = (uint32_t)sizeof a->big;
  memset(a->big.tail, 0xEE, sizeof a->big.tail);
  a->w = a->wv;
  a->bias = a->bv;
  a->rows = IR;
  a->dim = ID;
  a->w_stride = IWS;
  a->p = &a->pv;
  a->out = &a->outv;
  bi_out(o, &a->outv, sizeof a->outv);
}
static lshk_status bi_call_lshk_ivf_build(bi_args_lshk_ivf_build *a) {
  lshk_ivf *before = a->outv;
  lshk_status s =
      lshk_ivf_build(a->w, a->bias, a->rows, a->dim, a->w_stride, a->p, a->out);
  if (s == LSHK_STATUS_OK && a->out != NULL && *a->out != before)
    lshk_ivf_free(*a->out);
  return s;
}

/* ---- lshk_ivf_build_weighted --------------------------------------------- */
typedef struct {
  bi_args_lshk_ivf_build b;
  float wtv[IR];
  const float *wt;
  size_t n_wt;
} bi_args_lshk_ivf_build_weighted;
static void bi_init_lshk_ivf_build_weighted(bi_args_lshk_ivf_build_weighted *a,
                                            bi_outs *o) {
  bi_init_lshk_ivf_build(&a->b, o);
  for (int i = 0; i < IR; i++) a->wtv[i] = 1.0f + (float)(i % 4);
  a->wt = a->wtv;
  a->n_wt = IR;
}
static lshk_status bi_call_lshk_ivf_build_weighted(
    bi_args_lshk_ivf_build_weighted *a) {
  lshk_ivf *before = a->b.outv;
  lshk_status s = lshk_ivf_build_weighted(a->b.w, a->b.bias, a->b.rows,
                                          a->b.dim, a->b.w_stride, a->wt,
                                          a->n_wt, a->b.p, a->b.out);
  if (s == LSHK_STATUS_OK && a->b.out != NULL && *a->b.out != before)
    lshk_ivf_free(*a->b.out);
  return s;
}

/* ---- lshk_ivf_query ------------------------------------------------------ */
#define QN 3
#define QK 4
#define QS 10
typedef struct {
  const lshk_ivf *ivf;
  float qv[QN * QS];
  lshk_ivf_search sv;
  struct {
    lshk_ivf_search s;
    unsigned char tail[20];
  } big;
  uint32_t ib[QN * QK + 2];
  float sb[QN * QK + 2];
  lshk_ivf_stats st;
  struct {
    lshk_ivf_stats s;
    unsigned char tail[40];
  } bigst; /* a caller with a newer, larger lshk_ivf_stats */
  const float *q;
  size_t nq, q_stride;
  uint32_t k;
  const lshk_ivf_search *s;
  uint32_t *out_ids;
  float *out_scores;
  lshk_ivf_stats *stats;
} bi_args_lshk_ivf_query;
static void bi_init_lshk_ivf_query(bi_args_lshk_ivf_query *a, bi_outs *o) {
  for (int i = 0; i < QN * QS; i++) a->qv[i] = (float)((i * 7) % 9) - 4.0f;
  a->sv = lshk_ivf_search_default();
  a->sv.nprobe = 2;
  a->sv.rerank = 10;
  a->big.s = a->sv;
  a->big.s.struct_size = (uint32_t)sizeof a->big;
  memset(a->big.tail, 0x11, sizeof a->big.tail);
  a->st.struct_size = (uint32_t)sizeof a->st;
  a->ivf = ivf_live;
  a->q = a->qv;
  a->nq = QN;
  a->q_stride = QS;
  a->k = QK;
  a->s = &a->sv;
  a->out_ids = a->ib;
  a->out_scores = a->sb;
  a->stats = &a->st;
  bi_out(o, a->ib, sizeof a->ib);
  bi_out(o, a->sb, sizeof a->sb);
  /* every field of the stats but the caller's struct_size */
  bi_out(o, &a->st.reserved, sizeof a->st - offsetof(lshk_ivf_stats, reserved));
}
static lshk_status bi_call_lshk_ivf_query(bi_args_lshk_ivf_query *a) {
  return lshk_ivf_query(a->ivf, a->q, a->nq, a->q_stride, a->k, a->s,
                        a->out_ids, a->out_scores, a->stats);
}

/* ---- lshk_ivf_save / lshk_ivf_load --------------------------------------- */
typedef struct {
  const lshk_ivf *ivf;
  const char *path;
} bi_args_lshk_ivf_save;
static void bi_init_lshk_ivf_save(bi_args_lshk_ivf_save *a, bi_outs *o) {
  (void)o;
  a->ivf = ivf_live;
  a->path = path_new;
}
/* Also checks that a refused save created neither the file nor a
 * temporary file: -> PANIC (never a real outcome here) if it did. */
static lshk_status bi_call_lshk_ivf_save(bi_args_lshk_ivf_save *a) {
  int before = dir_entries();
  lshk_status s = lshk_ivf_save(a->ivf, a->path);
  if (s == LSHK_STATUS_OK) {
    remove(path_new);
  } else if (file_exists(path_new) || dir_entries() != before) {
    fprintf(stderr, "lshk_ivf_save left a file behind after failing\n");
    return LSHK_STATUS_PANIC;
  }
  return s;
}

typedef struct {
  const char *path;
  const float *w;
  size_t w_stride;
  float wnan[IR * IWS];
  lshk_ivf *outv;
  lshk_ivf **out;
} bi_args_lshk_ivf_load;
static void bi_init_lshk_ivf_load(bi_args_lshk_ivf_load *a, bi_outs *o) {
  memcpy(a->wnan, wb, sizeof wb);
  a->path = path_owned;
  a->w = NULL;
  a->w_stride = 0;
  a->out = &a->outv;
  bi_out(o, &a->outv, sizeof a->outv);
}
static lshk_status bi_call_lshk_ivf_load(bi_args_lshk_ivf_load *a) {
  lshk_ivf *before = a->outv;
  lshk_status s = lshk_ivf_load(a->path, a->w, a->w_stride, a->out);
  if (s == LSHK_STATUS_OK && a->out != NULL && *a->out != before)
    lshk_ivf_free(*a->out);
  return s;
}

/* ---- accessors ----------------------------------------------------------- */
typedef struct {
  const lshk_ivf *ivf;
  size_t v;
  size_t *out;
} bi_args_lshk_ivf_memory_bytes;
static void bi_init_lshk_ivf_memory_bytes(bi_args_lshk_ivf_memory_bytes *a,
                                          bi_outs *o) {
  a->ivf = ivf_live;
  a->out = &a->v;
  bi_out(o, &a->v, sizeof a->v);
}
static lshk_status bi_call_lshk_ivf_memory_bytes(
    bi_args_lshk_ivf_memory_bytes *a) {
  return lshk_ivf_memory_bytes(a->ivf, a->out);
}

/* ---- lshk_ivf_calibrate -------------------------------------------------- */
#define CN 3
typedef struct {
  const lshk_ivf *ivf;
  float qv[CN * QS];
  lshk_ivf_calibration cv;
  struct {
    lshk_ivf_calibration c;
    unsigned char tail[24];
  } big; /* a caller with a newer, larger lshk_ivf_calibration */
  const float *q;
  size_t nq, q_stride;
  uint32_t k, rerank, threads;
  float target;
  lshk_ivf_calibration *out;
} bi_args_lshk_ivf_calibrate;
static void bi_init_lshk_ivf_calibrate(bi_args_lshk_ivf_calibrate *a,
                                       bi_outs *o) {
  for (int i = 0; i < CN * QS; i++) a->qv[i] = (float)((i * 5) % 7) - 3.0f;
  memset(&a->cv, 0x5A, sizeof a->cv);
  a->cv.struct_size = (uint32_t)sizeof a->cv;
  a->ivf = ivf_live;
  a->q = a->qv;
  a->nq = CN;
  a->q_stride = QS;
  a->k = QK;
  a->target = 0.9f;
  a->rerank = 10;
  a->threads = 1;
  a->out = &a->cv;
  /* every field but the caller's struct_size */
  bi_out(o, &a->cv.met, sizeof a->cv - offsetof(lshk_ivf_calibration, met));
}
static lshk_status bi_call_lshk_ivf_calibrate(bi_args_lshk_ivf_calibrate *a) {
  return lshk_ivf_calibrate(a->ivf, a->q, a->nq, a->q_stride, a->k,
                            a->target, a->rerank, a->threads, a->out);
}

typedef struct {
  const lshk_ivf *ivf;
  size_t sv[2];
  uint32_t uv[2];
  size_t *rows, *dim;
  uint32_t *nlist;
} bi_args_lshk_ivf_shape;
static void bi_init_lshk_ivf_shape(bi_args_lshk_ivf_shape *a, bi_outs *o) {
  a->ivf = ivf_live;
  a->rows = &a->sv[0];
  a->dim = &a->sv[1];
  a->nlist = &a->uv[0];
  bi_out(o, a->sv, sizeof a->sv);
  bi_out(o, a->uv, sizeof a->uv);
}
static lshk_status bi_call_lshk_ivf_shape(bi_args_lshk_ivf_shape *a) {
  return lshk_ivf_shape(a->ivf, a->rows, a->dim, a->nlist);
}

typedef struct {
  lshk_ivf *ivf;
} bi_args_lshk_ivf_free;
static void bi_init_lshk_ivf_free(bi_args_lshk_ivf_free *a, bi_outs *o) {
  (void)o;
  a->ivf = NULL;
}
static lshk_status bi_call_lshk_ivf_free(bi_args_lshk_ivf_free *a) {
  return lshk_ivf_free(a->ivf);
}

#define BI_IVF_CASES(FN, FIELD, T)                                             \
  BI_HANDLE_CASES(FN, FIELD, T, ivf_freed, (T *)NULL, ivf_live, bi_fx()->idx, \
                  bi_fx()->tb)

/* ---- lshk_ivf_train_labels / lshk_ivf_label_info ------------------------- */
#define TQ 3  /* training queries */
#define TQS 9 /* their stride */
typedef struct {
  lshk_ivf *ivf;
  float qv[TQ * TQS];
  size_t lo[TQ + 1];
  uint32_t lv[TQ * 2];
  lshk_label_params pv;
  struct {
    lshk_label_params p;
    unsigned char tail[24];
  } big;
  const float *queries;
  size_t n, q_stride;
  const size_t *label_offsets;
  const uint32_t *labels;
  const lshk_label_params *p;
} bi_args_lshk_ivf_train_labels;
static void bi_init_lshk_ivf_train_labels(bi_args_lshk_ivf_train_labels *a,
                                          bi_outs *o) {
  (void)o;
  for (int i = 0; i < TQ * TQS; i++) a->qv[i] = (float)((i * 5) % 9) - 4.0f;
  for (int i = 0; i <= TQ; i++) a->lo[i] = (size_t)i * 2;
  for (int i = 0; i < TQ * 2; i++) a->lv[i] = (uint32_t)((i * 13) % IR);
  a->pv = lshk_label_params_default();
  a->big.p = a->pv;
  a->big.p.struct_size = (uint32_t)sizeof a->big;
  memset(a->big.tail, 0x5A, sizeof a->big.tail);
  a->ivf = ivf_live;
  a->queries = a->qv;
  a->n = TQ;
  a->q_stride = TQS;
  a->label_offsets = a->lo;
  a->labels = a->lv;
  a->p = &a->pv;
}
static lshk_status bi_call_lshk_ivf_train_labels(
    bi_args_lshk_ivf_train_labels *a) {
  return lshk_ivf_train_labels(a->ivf, a->queries, a->n, a->q_stride,
                               a->label_offsets, a->labels, a->p);
}

typedef struct {
  const lshk_ivf *ivf;
  uint32_t tv;
  lshk_label_params pv;
  struct {
    lshk_label_params p;
    unsigned char tail[24];
  } big;
  uint32_t *trained;
  lshk_label_params *params;
} bi_args_lshk_ivf_label_info;
static void bi_init_lshk_ivf_label_info(bi_args_lshk_ivf_label_info *a,
                                        bi_outs *o) {
  a->pv.struct_size = (uint32_t)sizeof a->pv;
  a->ivf = ivf_lab[0]; /* trained by the first accepted case */
  a->trained = &a->tv;
  a->params = &a->pv;
  bi_out(o, &a->tv, sizeof a->tv);
  bi_out(o, &a->pv.label_cap,
         sizeof a->pv - offsetof(lshk_label_params, label_cap));
}
static lshk_status bi_call_lshk_ivf_label_info(bi_args_lshk_ivf_label_info *a) {
  return lshk_ivf_label_info(a->ivf, a->trained, a->params);
}

/* ids of a fixed query on `h` (0 on failure). */
static uint64_t query_fingerprint(const lshk_ivf *h) {
  bi_args_lshk_ivf_query a;
  bi_outs o;
  uint64_t f = 1469598103934665603ull;
  memset(&a, 0, sizeof a);
  memset(&o, 0, sizeof o);
  bi_init_lshk_ivf_query(&a, &o);
  a.ivf = h;
  if (bi_call_lshk_ivf_query(&a) != LSHK_STATUS_OK) return 0;
  for (int i = 0; i < QN * QK; i++) f = (f ^ a.ib[i]) * 1099511628211ull;
  return f;
}

int main(void) {
  uint64_t fp;
  bi_fx_setup();
  for (int i = 0; i < IR * IWS; i++) wb[i] = (float)((i * 29) % 31) - 15.0f;
  ivf_live = fx_ivf(FX->w, ID, FX->bias, LSHK_IVF_CODES_I8, 0);
  ivf_borrowed = fx_ivf(wb, IWS, NULL, LSHK_IVF_CODES_I8, 1);
  ivf_flat = fx_ivf(FX->w, ID, FX->bias, LSHK_IVF_CODES_NONE, 0);
  ivf_freed = fx_ivf(FX->w, ID, NULL, LSHK_IVF_CODES_I8, 0);
  /* Built before ivf_freed is freed, so that none reuses its memory. */
  ivf_pq = fx_ivf(FX->w, ID, FX->bias, LSHK_IVF_CODES_PQ4, 0);
  ivf_pq8 = fx_ivf(FX->w, ID, FX->bias, LSHK_IVF_CODES_PQ4_I8, 0);
  for (int i = 0; i < 4; i++)
    ivf_lab[i] = fx_ivf(i == 3 ? wb : FX->w, i == 3 ? IWS : ID, FX->bias,
                        i == 2 ? LSHK_IVF_CODES_NONE : LSHK_IVF_CODES_I8,
                        i == 3);
  bi_fx_need(lshk_ivf_free(ivf_freed), "lshk_ivf_free");
  fp = query_fingerprint(ivf_live);

  /* ---- files ---- */
  {
    static const char garbage[] = "this is not an lshk IVF file, at all..";
    bi_files_open("ivf", "ivf");
    snprintf(path_owned, sizeof path_owned, "%s/owned.ivf", dir);
    snprintf(path_borrowed, sizeof path_borrowed, "%s/borrowed.ivf", dir);
    snprintf(path_index, sizeof path_index, "%s/index.lshk", dir);
    bi_fx_need(lshk_ivf_save(ivf_live, path_owned), "lshk_ivf_save");
    bi_fx_need(lshk_ivf_save(ivf_borrowed, path_borrowed), "lshk_ivf_save");
    bi_fx_need(lshk_index_save(FX->idx, path_index), "lshk_index_save");
    bi_files_fill(garbage, sizeof garbage, path_owned);
  }

  BI_EXPECT(lshk_ivf_params_default,
            lshk_ivf_params_default().struct_size == sizeof(lshk_ivf_params) &&
                lshk_ivf_params_default().pq_m == 0 &&
                lshk_ivf_params_default().codes == LSHK_IVF_CODES_I8 &&
                lshk_ivf_params_default().borrow == 1);
  BI_EXPECT(lshk_ivf_search_default,
            lshk_ivf_search_default().struct_size == sizeof(lshk_ivf_search) &&
                lshk_ivf_search_default().nprobe >= 1);

#define FN lshk_ivf_build
  BI_BASELINE(FN);
  BI_ACCEPT(FN, a.p = &a.big.p); /* larger struct_size, non-zero tail */
  BI_ACCEPT(FN, a.p = NULL; a.bias = NULL); /* defaults: borrowed W */
  BI_ACCEPT(FN, a.pv.borrow = 0);
  BI_ACCEPT(FN, a.pv.borrow = 0; a.pv.codes = LSHK_IVF_CODES_NONE);
  BI_ACCEPT(FN, a.pv.codes = LSHK_IVF_CODES_PQ4);
  BI_ACCEPT(FN, a.pv.codes = LSHK_IVF_CODES_PQ4; a.pv.pq_m = 1);
  BI_ACCEPT(FN, a.pv.codes = LSHK_IVF_CODES_PQ4; a.pv.pq_m = ID);
  BI_ACCEPT(FN, a.pv.codes = LSHK_IVF_CODES_PQ4_I8);
  BI_ACCEPT(FN, a.pv.codes = LSHK_IVF_CODES_PQ4_I8; a.pv.pq_m = 1; a.pv.borrow = 0);
  BI_ACCEPT(FN, a.pv.nlist = IR; a.pv.train_rows = IR);
  BI_ACCEPT(FN, a.pv.nlist = 1; a.pv.train_rows = 1);
  BI_ACCEPT(FN, a.pv.train_rows = UINT32_MAX); /* clamped to rows */
  BI_ACCEPT(FN, a.pv.threads = 64);
  BI_ACCEPT(FN, a.rows = 1; a.pv.nlist = 0);
  BI_ACCEPT(FN, a.wv[IWS - 1] = NAN); /* the stride gap is not W */
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.w = NULL);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.out = NULL);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.out = BI_MISALIGN(lshk_ivf *, &a.outv));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.w = BI_MISALIGN(const float, a.wv));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.bias = BI_MISALIGN(const float, a.bv));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.p = BI_MISALIGN(const lshk_ivf_params, &a.pv));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.rows = 0);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.rows = 0; a.w = NULL);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.dim = 0);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.w_stride = ID - 1);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.w_stride = 0);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.struct_size = 0);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.pv.struct_size = (uint32_t)sizeof(lshk_ivf_params) - 1);
  /* pq_m (0.2.0's reserved field) is for CODES_PQ4 only, and divides dim */
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.pq_m = 1);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.pq_m = UINT32_MAX);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.big.p.pq_m = 5;
          a.p = &a.big.p);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.codes = LSHK_IVF_CODES_PQ4;
          a.pv.pq_m = ID + 1);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.codes = LSHK_IVF_CODES_PQ4;
          a.pv.pq_m = UINT32_MAX);
  /* PQ4 trains 16 centroids per sub-space: at least 16 rows */
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.codes = LSHK_IVF_CODES_PQ4;
          a.rows = 15; a.pv.nlist = 1);
  /* PQ4_I8 holds the same 4-bit codes: the same two rules */
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.codes = LSHK_IVF_CODES_PQ4_I8;
          a.rows = 15; a.pv.nlist = 1);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.codes = LSHK_IVF_CODES_PQ4_I8;
          a.pv.pq_m = ID + 1);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.codes = 4);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.codes = UINT32_MAX);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.borrow = 2);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.borrow = UINT32_MAX);
  /* CODES_NONE scores the index's own copy: it cannot borrow */
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.codes = LSHK_IVF_CODES_NONE);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.iters = 0);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.nlist = IR + 1);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.nlist = UINT32_MAX);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.rows = 3; a.pv.nlist = 4);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.nlist = 10;
          a.pv.train_rows = 9);
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.wv[(IR - 1) * IWS + ID - 1] = NAN);
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.wv[0] = INFINITY);
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.pv.borrow = 0; a.wv[5] = -INFINITY);
  /* finite, but beyond sqrt(FLT_MAX / (16 (dim + 2))) */
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.wv[2] = 3e37f);
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.bv[1] = -1e30f);
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.bv[IR - 1] = NAN);
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.pv.borrow = 0;
          a.pv.codes = LSHK_IVF_CODES_NONE; a.bv[3] = INFINITY);
  BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.rows = SIZE_MAX);
  BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.w_stride = SIZE_MAX / 2);
  BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.dim = SIZE_MAX;
          a.w_stride = SIZE_MAX; a.rows = 2);
#undef FN

#define FN lshk_ivf_build_weighted
  BI_BASELINE(FN);
  BI_ACCEPT(FN, a.b.p = NULL; a.b.bias = NULL); /* defaults: borrowed W */
  BI_ACCEPT(FN, a.b.pv.borrow = 0);
  BI_ACCEPT(FN, for (int i = 0; i < IR; i++) a.wtv[i] = 0.0f;
            a.wtv[IR - 1] = 1e-30f); /* one positive weight is enough */
  BI_ACCEPT(FN, a.wtv[2] = -0.0f); /* -0 is a zero weight */
  BI_ACCEPT(FN, a.wtv[1] = FLT_MAX);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.wt = NULL);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.b.w = NULL);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.b.out = NULL);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.wt = NULL; a.n_wt = 0);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.wt = BI_MISALIGN(const float, a.wtv));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.n_wt = 0);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.n_wt = IR - 1);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.b.rows = IR - 1);
  BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.n_wt = SIZE_MAX);
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.wtv[0] = NAN);
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.wtv[IR - 1] = INFINITY);
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.b.pv.borrow = 0; a.wtv[3] = -INFINITY);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.wtv[5] = -1.0f);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.wtv[5] = -1e-45f);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          for (int i = 0; i < IR; i++) a.wtv[i] = 0.0f);
  /* the build's own checks still apply */
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.b.rows = 0; a.n_wt = 0);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.b.pv.struct_size = 0);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.b.pv.iters = 0);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.b.pv.codes = LSHK_IVF_CODES_NONE);
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.b.wv[0] = NAN);
#undef FN

#define FN lshk_ivf_query
  BI_BASELINE(FN);
  BI_IVF_CASES(FN, ivf, const lshk_ivf);
  BI_ACCEPT(FN, a.s = &a.big.s); /* larger struct_size, non-zero tail */
  BI_ACCEPT(FN, a.s = NULL; a.stats = NULL; a.out_scores = NULL);
  BI_ACCEPT(FN, a.ivf = ivf_borrowed);
  BI_ACCEPT(FN, a.ivf = ivf_flat; a.sv.rerank = 0);
  BI_ACCEPT(FN, a.sv.nprobe = UINT32_MAX; a.sv.rerank = UINT32_MAX);
  BI_ACCEPT(FN, a.sv.rerank = 0);
  BI_ACCEPT(FN, a.sv.reach = 0.0f); /* exactly nprobe lists */
  BI_ACCEPT(FN, a.sv.reach = 1e30f);
  BI_ACCEPT(FN, a.q_stride = ID); /* no gap */
  BI_ACCEPT(FN, a.qv[QS - 1] = NAN); /* the stride gap is not q */
  /* struct_size larger than known: accepted, the unknown tail untouched */
  BI_CASE(FN, LSHK_STATUS_OK, o_.n = 0;
          a.bigst.s.struct_size = (uint32_t)sizeof a.bigst;
          a.stats = &a.bigst.s; bi_out(&o_, a.bigst.tail, sizeof a.bigst.tail));
  BI_CASE(FN, LSHK_STATUS_OK, a.k = 0; o_.n = 2); /* stats still written */
  BI_CASE(FN, LSHK_STATUS_OK, a.nq = 0; a.q = NULL; o_.n = 2);
  BI_CASE(FN, LSHK_STATUS_OK, a.nq = 0; a.q = NULL; a.out_ids = NULL;
          a.out_scores = NULL; a.stats = NULL);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.q = NULL);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.out_ids = NULL);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.k = 0; a.q = NULL);
  /* the stats overlapping an output (written last, it would clobber it) */
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.stats = (lshk_ivf_stats *)(void *)(a.sb + 2));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.stats = (lshk_ivf_stats *)(void *)(a.ib + 2));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.q_stride = ID - 1);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.q_stride = 0);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.sv.struct_size = 0);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.sv.struct_size = (uint32_t)sizeof(lshk_ivf_search) - 1);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.st.struct_size = 0);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.st.struct_size = (uint32_t)sizeof(lshk_ivf_stats) - 1);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.sv.nprobe = 0);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.sv.nprobe = 0; a.nq = 0;
          a.q = NULL);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.big.s.nprobe = 0;
          a.s = &a.big.s);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.sv.reach = -1.0f);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.sv.reach = -0.0f - 1e-30f);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.sv.reach = NAN);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.sv.reach = INFINITY);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.sv.reach = NAN; a.nq = 0;
          a.q = NULL);
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.qv[(QN - 1) * QS + ID - 1] = NAN);
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.qv[0] = -INFINITY);
  /* finite, but the scores could overflow f32 */
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.qv[1] = 3e38f);
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.ivf = ivf_flat; a.qv[QS] = -1e37f);
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.ivf = ivf_flat; a.qv[QS + 1] = INFINITY);
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.ivf = ivf_borrowed; a.k = 0;
          a.qv[QS + 1] = NAN); /* checked even when nothing is returned */
  BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.nq = SIZE_MAX);
  BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.q_stride = SIZE_MAX / 2);
  BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.nq = SIZE_MAX / 16;
          a.q_stride = ID; a.k = UINT32_MAX);
  BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.nq = 2; a.k = 1;
          a.q_stride = SIZE_MAX / 4);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.q = BI_MISALIGN(const float, a.qv));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.s = BI_MISALIGN(const lshk_ivf_search, &a.sv));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.out_ids = BI_MISALIGN(uint32_t, a.ib));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.out_scores = BI_MISALIGN(float, a.sb));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.stats = BI_MISALIGN(lshk_ivf_stats, &a.st));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.out_scores = (float *)(void *)a.ib); /* outputs overlap */
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.out_scores = (float *)(void *)(a.ib + QN * QK - 1));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.out_scores = a.qv);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.out_ids = (uint32_t *)(void *)(a.qv + 2));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.out_ids = (uint32_t *)(void *)(a.sb + 1));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.out_ids = (uint32_t *)(void *)&a.sv); /* over the search params */
#undef FN

#define FN lshk_ivf_save
  BI_BASELINE(FN);
  BI_ACCEPT(FN, a.ivf = ivf_borrowed);
  BI_ACCEPT(FN, a.ivf = ivf_flat);
  BI_IVF_CASES(FN, ivf, const lshk_ivf);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.path = NULL);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.path = "");
  BI_CASE(FN, LSHK_STATUS_IO_ERROR, a.path = path_subdir); /* a directory */
  BI_CASE(FN, LSHK_STATUS_IO_ERROR, a.path = "/nonexistent-lshk-dir/x.ivf");
  BI_CASE(FN, LSHK_STATUS_IO_ERROR, a.path = path_fifo); /* not replaced */
#undef FN

#define FN lshk_ivf_load
  BI_BASELINE(FN);
  BI_ACCEPT(FN, a.w_stride = 12345); /* ignored without W */
  BI_ACCEPT(FN, a.path = path_borrowed; a.w = wb; a.w_stride = IWS);
  BI_ACCEPT(FN, a.path = path_borrowed; a.wnan[IWS - 1] = NAN; a.w = a.wnan;
            a.w_stride = IWS); /* the stride gap is not W */
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.path = NULL);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.out = NULL);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.out = BI_MISALIGN(lshk_ivf *, &a.outv));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.path = "");
  BI_CASE(FN, LSHK_STATUS_IO_ERROR, a.path = path_missing);
  BI_CASE(FN, LSHK_STATUS_IO_ERROR, a.path = path_subdir);
  BI_CASE(FN, LSHK_STATUS_IO_ERROR, a.path = path_fifo); /* never blocks */
  BI_CASE(FN, LSHK_STATUS_BAD_FILE_FORMAT, a.path = path_empty);
  BI_CASE(FN, LSHK_STATUS_BAD_FILE_FORMAT, a.path = path_garbage);
  BI_CASE(FN, LSHK_STATUS_BAD_FILE_FORMAT, a.path = path_truncated);
  BI_CASE(FN, LSHK_STATUS_BAD_FILE_FORMAT, a.path = path_index);
  BI_CASE(FN, LSHK_STATUS_BAD_FILE_FORMAT, a.path = path_index; a.w = wb;
          a.w_stride = IWS);
  /* W given for a file that stores its rows, and missing where needed */
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.w = wb; a.w_stride = IWS);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.path = path_borrowed);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.path = path_borrowed;
          a.w_stride = IWS);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.path = path_borrowed;
          a.w = BI_MISALIGN(const float, wb); a.w_stride = IWS);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.path = path_borrowed; a.w = wb;
          a.w_stride = ID - 1);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.path = path_borrowed; a.w = wb;
          a.w_stride = 0);
  BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.path = path_borrowed; a.w = wb;
          a.w_stride = SIZE_MAX / 2);
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.path = path_borrowed;
          a.wnan[(IR - 1) * IWS + ID - 1] = NAN; a.w = a.wnan;
          a.w_stride = IWS);
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.path = path_borrowed;
          a.wnan[0] = -INFINITY; a.w = a.wnan; a.w_stride = IWS);
#undef FN

  /* An IVF file is not an lshk_index file, nor an IVF handle an index. */
  {
    lshk_index *out = (lshk_index *)(uintptr_t)0x1230;
    bi_prime("lshk_index_load");
    BI_EXPECT(lshk_index_load,
              lshk_index_load(path_owned, NULL, &out) ==
                      LSHK_STATUS_BAD_FILE_FORMAT &&
                  out == (lshk_index *)(uintptr_t)0x1230);
    BI_EXPECT(lshk_index_load,
              lshk_index_load(path_borrowed, wb, &out) ==
                      LSHK_STATUS_BAD_FILE_FORMAT &&
                  out == (lshk_index *)(uintptr_t)0x1230);
    BI_EXPECT(lshk_index_free,
              lshk_index_free((lshk_index *)(void *)ivf_live) ==
                  LSHK_STATUS_INVALID_HANDLE);
    BI_EXPECT(lshk_index_memory_bytes,
              lshk_index_memory_bytes((const lshk_index *)(void *)ivf_live,
                                      &(size_t){0}) ==
                  LSHK_STATUS_INVALID_HANDLE);
  }

#define FN lshk_ivf_memory_bytes
  BI_BASELINE(FN);
  BI_ACCEPT(FN, a.ivf = ivf_borrowed);
  BI_IVF_CASES(FN, ivf, const lshk_ivf);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.out = NULL);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.out = BI_MISALIGN(size_t, &a.v));
#undef FN

#define FN lshk_ivf_calibrate
  BI_BASELINE(FN);
  BI_IVF_CASES(FN, ivf, const lshk_ivf);
  BI_ACCEPT(FN, a.ivf = ivf_borrowed);
  BI_ACCEPT(FN, a.ivf = ivf_flat; a.rerank = 0; a.target = 1.0f);
  BI_ACCEPT(FN, a.ivf = ivf_pq; a.rerank = UINT32_MAX);
  BI_ACCEPT(FN, a.ivf = ivf_pq8; a.rerank = 0);
  BI_ACCEPT(FN, a.threads = 0);
  BI_ACCEPT(FN, a.threads = UINT32_MAX); /* at most one thread a block */
  BI_ACCEPT(FN, a.k = UINT32_MAX / 2);   /* more than the rows */
  BI_ACCEPT(FN, a.target = 1e-30f);
  BI_ACCEPT(FN, a.q_stride = ID);
  BI_ACCEPT(FN, a.qv[QS - 1] = NAN); /* the stride gap is not q */
  /* struct_size larger than known: accepted, the unknown tail untouched */
  BI_CASE(FN, LSHK_STATUS_OK, o_.n = 0; memset(&a.big, 0, sizeof a.big);
          a.big.c.struct_size = (uint32_t)sizeof a.big; a.out = &a.big.c;
          bi_out(&o_, a.big.tail, sizeof a.big.tail));
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.out = NULL);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.q = NULL);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.nq = 0);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.nq = 0; a.q = NULL);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.k = 0);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.target = 0.0f);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.target = -0.5f);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.target = 1.0001f);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.target = NAN);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.target = INFINITY);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.q_stride = ID - 1);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.q_stride = 0);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.cv.struct_size = 0);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.cv.struct_size = (uint32_t)sizeof(lshk_ivf_calibration) - 1);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.out = BI_MISALIGN(lshk_ivf_calibration, &a.cv));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.q = BI_MISALIGN(const float, a.qv));
  /* the output overlapping the queries */
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, o_.n = 0;
          a.out = (lshk_ivf_calibration *)(void *)a.qv;
          bi_out(&o_, a.qv, sizeof a.qv));
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.qv[(CN - 1) * QS + ID - 1] = NAN);
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.qv[0] = -INFINITY);
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.qv[1] = 3e38f);
  BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.nq = SIZE_MAX);
  BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.q_stride = SIZE_MAX / 2);
#undef FN

#define FN lshk_ivf_shape
  BI_BASELINE(FN);
  BI_IVF_CASES(FN, ivf, const lshk_ivf);
  BI_ACCEPT(FN, a.rows = NULL; a.dim = NULL; a.nlist = NULL);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.rows = BI_MISALIGN(size_t, a.sv));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.dim = BI_MISALIGN(size_t, a.sv + 1));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.nlist = BI_MISALIGN(uint32_t, a.uv));
#undef FN

#define FN lshk_ivf_free
  BI_BASELINE(FN);
  BI_CASE(FN, LSHK_STATUS_INVALID_HANDLE, a.ivf = ivf_freed);
  BI_CASE(FN, LSHK_STATUS_INVALID_HANDLE, a.ivf = (lshk_ivf *)(void *)FX->idx);
  BI_CASE(FN, LSHK_STATUS_INVALID_HANDLE, a.ivf = (lshk_ivf *)(void *)FX->tb);
  BI_CASE(FN, LSHK_STATUS_INVALID_HANDLE,
          a.ivf = (lshk_ivf *)(void *)FX->sh_borrowed);
  BI_CASE(FN, LSHK_STATUS_INVALID_HANDLE, a.ivf = BI_GARBAGE(lshk_ivf));
  BI_CASE(FN, LSHK_STATUS_INVALID_HANDLE, a.ivf = BI_MISALIGN(lshk_ivf, ivf_live));
#undef FN

#define FN lshk_ivf_train_labels
  BI_ACCEPT(FN, a.ivf = ivf_lab[0]);
  BI_ACCEPT(FN, a.ivf = ivf_lab[1]; a.p = &a.big.p; a.lo[0] = 1);
  BI_ACCEPT(FN, a.ivf = ivf_lab[2]; a.p = NULL; a.lv[TQ * 2 - 1] = IR - 1);
  BI_ACCEPT(FN, a.ivf = ivf_lab[3]; a.pv.policy = LSHK_LABEL_POLICY_INSTEAD;
            a.pv.label_cap = 1);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.ivf = ivf_lab[0]); /* again */
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.ivf = ivf_pq);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.ivf = ivf_pq8);
  BI_IVF_CASES(FN, ivf, lshk_ivf);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.queries = NULL);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.label_offsets = NULL);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.labels = NULL);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.q_stride = ID - 1);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.lo[2] = 7); /* > lo[3] */
  BI_CASE(FN, LSHK_STATUS_INDEX_OUT_OF_RANGE, a.lv[TQ * 2 - 1] = IR);
  BI_CASE(FN, LSHK_STATUS_INDEX_OUT_OF_RANGE, a.lv[0] = UINT32_MAX);
  BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.lo[TQ] = SIZE_MAX);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.struct_size = 0);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.pv.struct_size = (uint32_t)sizeof(lshk_label_params) - 1);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.policy = 2);
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.qv[(TQ - 1) * TQS + ID - 1] = NAN);
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.qv[0] = -INFINITY);
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.qv[1] = 3e38f);
  BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.n = SIZE_MAX);
  BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.q_stride = SIZE_MAX / 2);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.queries = BI_MISALIGN(const float, a.qv));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.label_offsets = BI_MISALIGN(const size_t, a.lo));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.labels = BI_MISALIGN(const uint32_t, a.lv));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.p = BI_MISALIGN(const lshk_label_params, &a.pv));
#undef FN

#define FN lshk_ivf_label_info
  BI_BASELINE(FN);
  BI_ACCEPT(FN, a.ivf = ivf_live; a.params = NULL);
  BI_CASE(FN, LSHK_STATUS_OK, o_.n = 0;
          a.big.p.struct_size = (uint32_t)sizeof a.big; a.params = &a.big.p;
          bi_out(&o_, a.big.tail, sizeof a.big.tail)); /* tail untouched */
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.struct_size = 0;
          a.ivf = ivf_live); /* checked even when not trained */
  BI_IVF_CASES(FN, ivf, const lshk_ivf);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.trained = NULL);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.pv.struct_size = (uint32_t)sizeof(lshk_label_params) - 1);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.trained = BI_MISALIGN(uint32_t, &a.tv));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.params = BI_MISALIGN(lshk_label_params, &a.pv));
#undef FN
  {
    uint32_t t = 9;
    lshk_label_params lp = lshk_label_params_default();
    BI_EXPECT(lshk_ivf_label_info,
              lshk_ivf_label_info(ivf_lab[3], &t, &lp) == LSHK_STATUS_OK &&
                  t == 1 && lp.label_cap == 1 &&
                  lp.policy == LSHK_LABEL_POLICY_INSTEAD);
    BI_EXPECT(lshk_ivf_label_info,
              lshk_ivf_label_info(ivf_live, &t, &lp) == LSHK_STATUS_OK &&
                  t == 0);
  }

  /* Refused calls left the fixtures as built. */
  BI_EXPECT(lshk_ivf_query, fp != 0 && query_fingerprint(ivf_live) == fp);

  remove(path_owned);
  remove(path_borrowed);
  remove(path_index);
  bi_files_close();
  bi_fx_need(lshk_ivf_free(ivf_live), "lshk_ivf_free");
  bi_fx_need(lshk_ivf_free(ivf_borrowed), "lshk_ivf_free");
  bi_fx_need(lshk_ivf_free(ivf_flat), "lshk_ivf_free");
  bi_fx_need(lshk_ivf_free(ivf_pq), "lshk_ivf_free");
  bi_fx_need(lshk_ivf_free(ivf_pq8), "lshk_ivf_free");
  for (int i = 0; i < 4; i++)
    bi_fx_need(lshk_ivf_free(ivf_lab[i]), "lshk_ivf_free");
  bi_fx_teardown();
  return bi_summary("bad_input_ivf");
}
