/* Bad-input matrix (issue 8), the IVF source of the index: lshk_index_build
 * with p.source = LSHK_SOURCE_IVF (its knobs p.ivf, row weights, every
 * storage), lshk_index_query with its knobs qp.ivf, lshk_index_calibrate,
 * label training of IVF lists, save/load of IVF indexes, the accessors
 * on an IVF index; calibration of the other sources (UNSUPPORTED). See
 * bad_input.h for what a case asserts. File cases check that a refused
 * save leaves no file (and no temporary file) behind; the load cases
 * cover missing, empty, garbage and truncated files, and W passed or not
 * passed against what the file needs (0.2 IVF files: bad_input_index_load02.c).
 *
 * Functions covered here:
 *   lshk_index_build lshk_index_query lshk_index_calibrate
 *   lshk_index_save lshk_index_load lshk_index_describe
 *   lshk_index_memory_bytes lshk_index_free lshk_index_train_labels
 *   lshk_index_label_info lshk_index_candidates */
#define _POSIX_C_SOURCE 200809L
#include "bad_input_files.h"
#include <float.h>

#define FX bi_fx()
#define IR BI_FX_ROWS
#define ID BI_FX_DIM
#define IWS 9 /* a w_stride > dim */
#define NL 4  /* lists of the fixtures */

static lshk_index *ivf_live;     /* W copied (F32), CODES_I8, bias */
static lshk_index *ivf_borrowed; /* borrows wb (stride IWS), no bias */
static lshk_index *ivf_flat;     /* CODES_NONE */
static lshk_index *ivf_bf16;     /* BF16 storage: the scorer ranks by it */
static lshk_index *ivf_pq;       /* CODES_PQ4 (cannot take labels) */
static lshk_index *ivf_pq8;      /* CODES_PQ4_I8 (cannot take labels either) */
static lshk_index *ivf_lab[4];   /* trained by the accepted label cases */

static char path_owned[300], path_borrowed[300], path_index[300];
static float wb[IR * IWS]; /* the borrowed W of ivf_borrowed / path_borrowed */

static lshk_index *fx_ivf(const float *w, size_t stride, const float *bias,
                          uint32_t codes, uint32_t storage) {
  lshk_index_params p = lshk_index_params_default();
  lshk_index *h = NULL;
  p.source = LSHK_SOURCE_IVF;
  p.storage = storage;
  p.ivf.nlist = NL;
  p.ivf.codes = codes;
  p.build_threads = 1;
  bi_fx_need(lshk_index_build(w, bias, IR, ID, stride, &p, &h),
             "lshk_index_build");
  return h;
}

/* ---- lshk_index_build (IVF source; borrowed W by default, as the
 * standalone IVF of 0.2 did) ------------------------------------------- */
typedef struct {
  float wv[IR * IWS];
  float bv[IR];
  float wtv[IR];
  float planes[4 * 3 * ID];
  uint32_t map[2 * 3 * 4];
  lshk_index_params pv;
  struct {
    lshk_index_params p;
    unsigned char tail[48];
  } big; /* a caller with a newer, larger lshk_index_params */
  const float *w;
  const float *bias;
  size_t rows, dim, w_stride;
  const lshk_index_params *p;
  lshk_index *outv;
  lshk_index **out;
} bi_args_lshk_index_build;
static void bi_init_lshk_index_build(bi_args_lshk_index_build *a, bi_outs *o) {
  for (int i = 0; i < IR * IWS; i++) a->wv[i] = (float)((i * 13) % 17) - 8.0f;
  for (int i = 0; i < IR; i++) {
    a->bv[i] = 0.5f * (float)(i % 3);
    a->wtv[i] = 1.0f + (float)(i % 4);
  }
  for (int i = 0; i < 4 * 3 * ID; i++) a->planes[i] = 1.0f;
  for (int i = 0; i < 2 * 3 * 4; i++) a->map[i] = (uint32_t)(i % ID);
  a->pv = lshk_index_params_default();
  a->pv.source = LSHK_SOURCE_IVF;
  a->pv.storage = LSHK_STORAGE_BORROWED_F32;
  a->pv.ivf.nlist = NL;
  a->pv.ivf.iters = 3;
  a->pv.build_threads = 1;
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
static lshk_status bi_call_lshk_index_build(bi_args_lshk_index_build *a) {
  lshk_index *before = a->outv;
  lshk_status s = lshk_index_build(a->w, a->bias, a->rows, a->dim, a->w_stride,
                                   a->p, a->out);
  if (s == LSHK_STATUS_OK && a->out != NULL && *a->out != before)
    lshk_index_free(*a->out);
  return s;
}
/* Row weights on the build's arguments. */
#define WEIGHTED(a) ((a).pv.ivf.row_weights = (a).wtv, (a).pv.ivf.n_weights = IR)

/* ---- lshk_index_query (the IVF knobs) ---------------------------------- */
#define QN 3
#define QK 4
#define QS 10
typedef struct {
  const lshk_index *idx;
  float qv[QN * QS];
  lshk_query_params qpv;
  struct {
    lshk_query_params p;
    unsigned char tail[20];
  } big;
  uint32_t ib[QN * QK + 2];
  float sb[QN * QK + 2];
  lshk_query_stats st;
  struct {
    lshk_query_stats s;
    unsigned char tail[40];
  } bigst; /* a caller with a newer, larger lshk_query_stats */
  const float *q;
  size_t nq, q_stride;
  uint32_t k;
  const lshk_query_params *qp;
  uint32_t *out_ids;
  float *out_scores;
  lshk_query_stats *stats;
} bi_args_lshk_index_query;
static void bi_init_lshk_index_query(bi_args_lshk_index_query *a, bi_outs *o) {
  for (int i = 0; i < QN * QS; i++) a->qv[i] = (float)((i * 7) % 9) - 4.0f;
  a->qpv = lshk_query_params_default();
  a->qpv.ivf.nprobe = 2;
  a->qpv.ivf.rerank = 10;
  a->big.p = a->qpv;
  a->big.p.struct_size = (uint32_t)sizeof a->big;
  memset(a->big.tail, 0x11, sizeof a->big.tail);
  a->st.struct_size = (uint32_t)sizeof a->st;
  a->idx = ivf_live;
  a->q = a->qv;
  a->nq = QN;
  a->q_stride = QS;
  a->k = QK;
  a->qp = &a->qpv;
  a->out_ids = a->ib;
  a->out_scores = a->sb;
  a->stats = &a->st;
  bi_out(o, a->ib, sizeof a->ib);
  bi_out(o, a->sb, sizeof a->sb);
  /* every field of the stats but the caller's struct_size */
  bi_out(o, &a->st.reserved,
         sizeof a->st - offsetof(lshk_query_stats, reserved));
}
static lshk_status bi_call_lshk_index_query(bi_args_lshk_index_query *a) {
  return lshk_index_query(a->idx, a->q, a->nq, a->q_stride, a->k, a->qp,
                          a->out_ids, a->out_scores, a->stats);
}

/* ---- lshk_index_candidates (the lists' top k, best first) --------------- */
typedef struct {
  bi_args_lshk_index_query b;
  uint32_t cb[QN * QK + 2];
  size_t ob[QN + 2];
  size_t nb;
  uint32_t *ids;
  size_t ids_len;
  size_t *offsets;
  size_t *needed;
} bi_args_lshk_index_candidates;
static void bi_init_lshk_index_candidates(bi_args_lshk_index_candidates *a,
                                          bi_outs *o) {
  bi_outs unused;
  memset(&unused, 0, sizeof unused);
  bi_init_lshk_index_query(&a->b, &unused);
  a->ids = a->cb;
  a->ids_len = QN * QK;
  a->offsets = a->ob;
  a->needed = &a->nb;
  bi_out(o, a->cb, sizeof a->cb);
  bi_out(o, a->ob, sizeof a->ob);
  bi_out(o, &a->nb, sizeof a->nb);
}
static lshk_status bi_call_lshk_index_candidates(
    bi_args_lshk_index_candidates *a) {
  return lshk_index_candidates(a->b.idx, a->b.q, a->b.nq, a->b.q_stride,
                               a->b.k, a->b.qp, a->ids, a->ids_len, a->offsets,
                               a->needed);
}

/* ---- lshk_index_save / lshk_index_load ----------------------------------- */
typedef struct {
  const lshk_index *idx;
  const char *path;
} bi_args_lshk_index_save;
static void bi_init_lshk_index_save(bi_args_lshk_index_save *a, bi_outs *o) {
  (void)o;
  a->idx = ivf_live;
  a->path = path_new;
}
/* Also checks that a refused save created neither the file nor a
 * temporary file: -> PANIC (never a real outcome here) if it did. */
static lshk_status bi_call_lshk_index_save(bi_args_lshk_index_save *a) {
  int before = dir_entries();
  lshk_status s = lshk_index_save(a->idx, a->path);
  if (s == LSHK_STATUS_OK) {
    remove(path_new);
  } else if (file_exists(path_new) || dir_entries() != before) {
    fprintf(stderr, "lshk_index_save left a file behind after failing\n");
    return LSHK_STATUS_PANIC;
  }
  return s;
}

typedef struct {
  const char *path;
  const float *w;
  size_t w_stride;
  float wnan[IR * IWS];
  lshk_index *outv;
  lshk_index **out;
} bi_args_lshk_index_load;
static void bi_init_lshk_index_load(bi_args_lshk_index_load *a, bi_outs *o) {
  memcpy(a->wnan, wb, sizeof wb);
  a->path = path_owned;
  a->w = NULL;
  a->w_stride = 0;
  a->out = &a->outv;
  bi_out(o, &a->outv, sizeof a->outv);
}
static lshk_status bi_call_lshk_index_load(bi_args_lshk_index_load *a) {
  lshk_index *before = a->outv;
  lshk_status s = lshk_index_load(a->path, a->w, a->w_stride, a->out);
  if (s == LSHK_STATUS_OK && a->out != NULL && *a->out != before)
    lshk_index_free(*a->out);
  return s;
}

/* ---- accessors ----------------------------------------------------------- */
typedef struct {
  const lshk_index *idx;
  size_t v;
  size_t *out;
} bi_args_lshk_index_memory_bytes;
static void bi_init_lshk_index_memory_bytes(bi_args_lshk_index_memory_bytes *a,
                                            bi_outs *o) {
  a->idx = ivf_live;
  a->out = &a->v;
  bi_out(o, &a->v, sizeof a->v);
}
static lshk_status bi_call_lshk_index_memory_bytes(
    bi_args_lshk_index_memory_bytes *a) {
  return lshk_index_memory_bytes(a->idx, a->out);
}

typedef struct {
  const lshk_index *idx;
  lshk_index_info v;
  lshk_index_info *out;
} bi_args_lshk_index_describe;
static void bi_init_lshk_index_describe(bi_args_lshk_index_describe *a,
                                        bi_outs *o) {
  a->idx = ivf_live;
  a->v.struct_size = (uint32_t)sizeof a->v;
  a->out = &a->v;
  bi_out(o, &a->v.source, sizeof a->v - offsetof(lshk_index_info, source));
}
static lshk_status bi_call_lshk_index_describe(bi_args_lshk_index_describe *a) {
  return lshk_index_describe(a->idx, a->out);
}

typedef struct {
  lshk_index *idx;
} bi_args_lshk_index_free;
static void bi_init_lshk_index_free(bi_args_lshk_index_free *a, bi_outs *o) {
  (void)o;
  a->idx = NULL;
}
static lshk_status bi_call_lshk_index_free(bi_args_lshk_index_free *a) {
  return lshk_index_free(a->idx);
}

/* ---- lshk_index_calibrate ------------------------------------------------ */
#define CN 3
typedef struct {
  const lshk_index *idx;
  float qv[CN * QS];
  lshk_calibration cv;
  struct {
    lshk_calibration c;
    unsigned char tail[24];
  } big; /* a caller with a newer, larger lshk_calibration */
  const float *q;
  size_t nq, q_stride;
  uint32_t k, rerank, threads;
  float target;
  lshk_calibration *out;
} bi_args_lshk_index_calibrate;
static void bi_init_lshk_index_calibrate(bi_args_lshk_index_calibrate *a,
                                         bi_outs *o) {
  for (int i = 0; i < CN * QS; i++) a->qv[i] = (float)((i * 5) % 7) - 3.0f;
  memset(&a->cv, 0x5A, sizeof a->cv);
  a->cv.struct_size = (uint32_t)sizeof a->cv;
  a->idx = ivf_live;
  a->q = a->qv;
  a->nq = CN;
  a->q_stride = QS;
  a->k = QK;
  a->target = 0.9f;
  a->rerank = 10;
  a->threads = 1;
  a->out = &a->cv;
  /* every field but the caller's struct_size */
  bi_out(o, &a->cv.met, sizeof a->cv - offsetof(lshk_calibration, met));
}
static lshk_status bi_call_lshk_index_calibrate(bi_args_lshk_index_calibrate *a) {
  return lshk_index_calibrate(a->idx, a->q, a->nq, a->q_stride, a->k,
                              a->target, a->rerank, a->threads, a->out);
}

#define BI_IVF_CASES(FN, FIELD, T)                                             \
  BI_HANDLE_CASES(FN, FIELD, T, bi_fx()->idx_freed, (T *)NULL, ivf_live,      \
                  bi_fx()->tb, bi_fx()->sh)

/* ---- lshk_index_train_labels / lshk_index_label_info --------------------- */
#define TQ 3  /* training queries */
#define TQS 9 /* their stride */
typedef struct {
  lshk_index *idx;
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
} bi_args_lshk_index_train_labels;
static void bi_init_lshk_index_train_labels(bi_args_lshk_index_train_labels *a,
                                            bi_outs *o) {
  (void)o;
  for (int i = 0; i < TQ * TQS; i++) a->qv[i] = (float)((i * 5) % 9) - 4.0f;
  for (int i = 0; i <= TQ; i++) a->lo[i] = (size_t)i * 2;
  for (int i = 0; i < TQ * 2; i++) a->lv[i] = (uint32_t)((i * 13) % IR);
  a->pv = lshk_label_params_default();
  a->big.p = a->pv;
  a->big.p.struct_size = (uint32_t)sizeof a->big;
  memset(a->big.tail, 0x5A, sizeof a->big.tail);
  a->idx = ivf_live;
  a->queries = a->qv;
  a->n = TQ;
  a->q_stride = TQS;
  a->label_offsets = a->lo;
  a->labels = a->lv;
  a->p = &a->pv;
}
static lshk_status bi_call_lshk_index_train_labels(
    bi_args_lshk_index_train_labels *a) {
  return lshk_index_train_labels(a->idx, a->queries, a->n, a->q_stride,
                                 a->label_offsets, a->labels, a->p);
}

typedef struct {
  const lshk_index *idx;
  uint32_t tv;
  lshk_label_params pv;
  struct {
    lshk_label_params p;
    unsigned char tail[24];
  } big;
  uint32_t *trained;
  lshk_label_params *params;
} bi_args_lshk_index_label_info;
static void bi_init_lshk_index_label_info(bi_args_lshk_index_label_info *a,
                                          bi_outs *o) {
  a->pv.struct_size = (uint32_t)sizeof a->pv;
  a->idx = ivf_lab[0]; /* trained by the first accepted case */
  a->trained = &a->tv;
  a->params = &a->pv;
  bi_out(o, &a->tv, sizeof a->tv);
  bi_out(o, &a->pv.label_cap,
         sizeof a->pv - offsetof(lshk_label_params, label_cap));
}
static lshk_status bi_call_lshk_index_label_info(
    bi_args_lshk_index_label_info *a) {
  return lshk_index_label_info(a->idx, a->trained, a->params);
}

/* ids of a fixed query on `h` (0 on failure). */
static uint64_t query_fingerprint(const lshk_index *h) {
  bi_args_lshk_index_query a;
  bi_outs o;
  uint64_t f = 1469598103934665603ull;
  memset(&a, 0, sizeof a);
  memset(&o, 0, sizeof o);
  bi_init_lshk_index_query(&a, &o);
  a.idx = h;
  if (bi_call_lshk_index_query(&a) != LSHK_STATUS_OK) return 0;
  for (int i = 0; i < QN * QK; i++) f = (f ^ a.ib[i]) * 1099511628211ull;
  return f;
}

int main(void) {
  uint64_t fp;
  lshk_simhash *hold;
  bi_fx_setup();
  for (int i = 0; i < IR * IWS; i++) wb[i] = (float)((i * 29) % 31) - 15.0f;
  hold = bi_fx_hold();
  ivf_live = fx_ivf(FX->w, ID, FX->bias, LSHK_IVF_CODES_I8, LSHK_STORAGE_F32);
  ivf_borrowed = fx_ivf(wb, IWS, NULL, LSHK_IVF_CODES_I8,
                        LSHK_STORAGE_BORROWED_F32);
  ivf_flat = fx_ivf(FX->w, ID, FX->bias, LSHK_IVF_CODES_NONE, LSHK_STORAGE_F32);
  ivf_bf16 = fx_ivf(FX->w, ID, FX->bias, LSHK_IVF_CODES_I8, LSHK_STORAGE_BF16);
  ivf_pq = fx_ivf(FX->w, ID, FX->bias, LSHK_IVF_CODES_PQ4, LSHK_STORAGE_F32);
  ivf_pq8 = fx_ivf(FX->w, ID, FX->bias, LSHK_IVF_CODES_PQ4_I8, LSHK_STORAGE_F32);
  for (int i = 0; i < 4; i++)
    ivf_lab[i] = fx_ivf(i == 3 ? wb : FX->w, i == 3 ? IWS : ID, FX->bias,
                        i == 2 ? LSHK_IVF_CODES_NONE : LSHK_IVF_CODES_I8,
                        i == 3 ? LSHK_STORAGE_BORROWED_F32 : LSHK_STORAGE_F32);
  bi_fx_unhold(hold);
  fp = query_fingerprint(ivf_live);

  /* ---- files ---- */
  {
    static const char garbage[] = "this is not an lshk IVF file, at all..";
    bi_files_open("index-ivf", "lshk");
    snprintf(path_owned, sizeof path_owned, "%s/owned.lshk", dir);
    snprintf(path_borrowed, sizeof path_borrowed, "%s/borrowed.lshk", dir);
    snprintf(path_index, sizeof path_index, "%s/simhash.lshk", dir);
    bi_fx_need(lshk_index_save(ivf_live, path_owned), "lshk_index_save");
    bi_fx_need(lshk_index_save(ivf_borrowed, path_borrowed), "lshk_index_save");
    bi_fx_need(lshk_index_save(FX->idx, path_index), "lshk_index_save");
    bi_files_fill(garbage, sizeof garbage, path_owned);
  }

#define FN lshk_index_build
  BI_BASELINE(FN);
  BI_ACCEPT(FN, a.p = &a.big.p); /* larger struct_size, non-zero tail */
  BI_ACCEPT(FN, a.pv.ivf = lshk_index_params_default().ivf; a.bias = NULL);
  BI_ACCEPT(FN, a.pv.storage = LSHK_STORAGE_F32);
  BI_ACCEPT(FN, a.pv.storage = LSHK_STORAGE_F32;
            a.pv.ivf.codes = LSHK_IVF_CODES_NONE);
  /* CODES_NONE on a borrowed W: the lists keep their own f32 copy */
  BI_ACCEPT(FN, a.pv.ivf.codes = LSHK_IVF_CODES_NONE);
  /* any storage: the scorer ranks by the stored W */
  BI_ACCEPT(FN, a.pv.storage = LSHK_STORAGE_BF16);
  BI_ACCEPT(FN, a.pv.storage = LSHK_STORAGE_F16);
  BI_ACCEPT(FN, a.pv.storage = LSHK_STORAGE_I8; a.pv.ivf.codes = LSHK_IVF_CODES_NONE);
  BI_ACCEPT(FN, a.pv.ivf.codes = LSHK_IVF_CODES_PQ4);
  BI_ACCEPT(FN, a.pv.ivf.codes = LSHK_IVF_CODES_PQ4; a.pv.ivf.pq_m = 1);
  BI_ACCEPT(FN, a.pv.ivf.codes = LSHK_IVF_CODES_PQ4; a.pv.ivf.pq_m = ID);
  BI_ACCEPT(FN, a.pv.ivf.codes = LSHK_IVF_CODES_PQ4_I8);
  BI_ACCEPT(FN, a.pv.ivf.codes = LSHK_IVF_CODES_PQ4_I8; a.pv.ivf.pq_m = 1;
            a.pv.storage = LSHK_STORAGE_F32);
  BI_ACCEPT(FN, a.pv.ivf.nlist = IR; a.pv.ivf.train_rows = IR);
  BI_ACCEPT(FN, a.pv.ivf.nlist = 1; a.pv.ivf.train_rows = 1);
  BI_ACCEPT(FN, a.pv.ivf.train_rows = UINT32_MAX); /* clamped to rows */
  BI_ACCEPT(FN, a.pv.build_threads = 64);
  BI_ACCEPT(FN, a.rows = 1; a.pv.ivf.nlist = 0);
  BI_ACCEPT(FN, a.wv[IWS - 1] = NAN); /* the stride gap is not W */
  /* the IVF source reads only its own knobs */
  BI_ACCEPT(FN, a.pv.lsh.bits_per_table = 0; a.pv.lsh.tables = 0;
            a.pv.lsh.bin_size = 3; a.pv.lsh.range_bits = 99; a.pv.graph.m = 0;
            a.pv.forest.trees = 0);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.w = NULL);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.out = NULL);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.out = BI_MISALIGN(lshk_index *, &a.outv));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.w = BI_MISALIGN(const float, a.wv));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.bias = BI_MISALIGN(const float, a.bv));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.p = BI_MISALIGN(const lshk_index_params, &a.pv));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.rows = 0);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.rows = 0; a.w = NULL);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.dim = 0);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.w_stride = ID - 1);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.w_stride = 0);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.struct_size = 0);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.pv.struct_size = (uint32_t)sizeof(lshk_index_params) - 1);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.ivf.reserved = 1);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.big.p.ivf.reserved = 2;
          a.p = &a.big.p);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.graph.reserved = 1);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.forest.reserved = 1);
  /* the IVF scores [w, b] itself: no transform, no planes or maps */
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.pv.transform = LSHK_TRANSFORM_BIAS_AUG);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.transform = LSHK_TRANSFORM_MIPS);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.lsh.planes = a.planes;
          a.pv.lsh.planes_len = 4 * 3 * ID);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.lsh.dwta_map = a.map;
          a.pv.lsh.dwta_map_len = 2 * 3 * 4);
  /* pq_m is for CODES_PQ4 and PQ4_I8 only, and divides dim */
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.ivf.pq_m = 1);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.ivf.pq_m = UINT32_MAX);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.big.p.ivf.pq_m = 5;
          a.p = &a.big.p);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.ivf.codes = LSHK_IVF_CODES_PQ4;
          a.pv.ivf.pq_m = ID + 1);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.ivf.codes = LSHK_IVF_CODES_PQ4;
          a.pv.ivf.pq_m = UINT32_MAX);
  /* PQ4 trains 16 centroids per sub-space: at least 16 rows */
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.ivf.codes = LSHK_IVF_CODES_PQ4;
          a.rows = 15; a.pv.ivf.nlist = 1);
  /* PQ4_I8 holds the same 4-bit codes: the same two rules */
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.pv.ivf.codes = LSHK_IVF_CODES_PQ4_I8; a.rows = 15;
          a.pv.ivf.nlist = 1);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.pv.ivf.codes = LSHK_IVF_CODES_PQ4_I8; a.pv.ivf.pq_m = ID + 1);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.ivf.codes = 4);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.ivf.codes = UINT32_MAX);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.storage = 5);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.storage = UINT32_MAX);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.ivf.iters = 0);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.ivf.nlist = IR + 1);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.ivf.nlist = UINT32_MAX);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.rows = 3; a.pv.ivf.nlist = 4);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.ivf.nlist = 10;
          a.pv.ivf.train_rows = 9);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.storage = LSHK_STORAGE_F16;
          a.wv[3] = 70000.0f);
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.wv[(IR - 1) * IWS + ID - 1] = NAN);
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.wv[0] = INFINITY);
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.pv.storage = LSHK_STORAGE_F32;
          a.wv[5] = -INFINITY);
  /* finite, but beyond sqrt(FLT_MAX / (16 (dim + 2))) */
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.wv[2] = 3e37f);
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.wv[2] = 1e30f);
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.bv[1] = -1e30f);
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.bv[IR - 1] = NAN);
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.pv.storage = LSHK_STORAGE_F32;
          a.pv.ivf.codes = LSHK_IVF_CODES_NONE; a.bv[3] = INFINITY);
  BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.rows = SIZE_MAX);
  BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.w_stride = SIZE_MAX / 2);
  BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.dim = SIZE_MAX;
          a.w_stride = SIZE_MAX; a.rows = 2);

  /* row weights (p.ivf.row_weights, p.ivf.n_weights) */
  BI_ACCEPT(FN, WEIGHTED(a));
  BI_ACCEPT(FN, WEIGHTED(a); a.bias = NULL);
  BI_ACCEPT(FN, WEIGHTED(a); a.pv.storage = LSHK_STORAGE_F32);
  BI_ACCEPT(FN, WEIGHTED(a); a.pv.ivf.codes = LSHK_IVF_CODES_NONE);
  BI_ACCEPT(FN, WEIGHTED(a); for (int i = 0; i < IR; i++) a.wtv[i] = 0.0f;
            a.wtv[IR - 1] = 1e-30f); /* one positive weight is enough */
  BI_ACCEPT(FN, WEIGHTED(a); a.wtv[2] = -0.0f); /* -0 is a zero weight */
  BI_ACCEPT(FN, WEIGHTED(a); a.wtv[1] = FLT_MAX);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.pv.ivf.n_weights = IR);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, WEIGHTED(a); a.w = NULL);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, WEIGHTED(a); a.out = NULL);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, WEIGHTED(a);
          a.pv.ivf.row_weights = BI_MISALIGN(const float, a.wtv));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, WEIGHTED(a); a.pv.ivf.n_weights = 0);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, WEIGHTED(a);
          a.pv.ivf.n_weights = IR - 1);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, WEIGHTED(a);
          a.pv.ivf.n_weights = IR + 1);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, WEIGHTED(a); a.rows = IR - 1);
  BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, WEIGHTED(a);
          a.pv.ivf.n_weights = SIZE_MAX);
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, WEIGHTED(a); a.wtv[0] = NAN);
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, WEIGHTED(a); a.wtv[IR - 1] = INFINITY);
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, WEIGHTED(a);
          a.pv.storage = LSHK_STORAGE_F32; a.wtv[3] = -INFINITY);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, WEIGHTED(a); a.wtv[5] = -1.0f);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, WEIGHTED(a); a.wtv[5] = -1e-45f);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, WEIGHTED(a);
          for (int i = 0; i < IR; i++) a.wtv[i] = 0.0f);
  /* the build's own checks still apply */
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, WEIGHTED(a); a.rows = 0;
          a.pv.ivf.n_weights = 0);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, WEIGHTED(a); a.pv.struct_size = 0);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, WEIGHTED(a); a.pv.ivf.iters = 0);
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, WEIGHTED(a); a.wv[0] = NAN);
#undef FN

#define FN lshk_index_query
  BI_BASELINE(FN);
  BI_IVF_CASES(FN, idx, const lshk_index);
  BI_ACCEPT(FN, a.qp = &a.big.p); /* larger struct_size, non-zero tail */
  BI_ACCEPT(FN, a.qp = NULL; a.stats = NULL; a.out_scores = NULL);
  BI_ACCEPT(FN, a.idx = ivf_borrowed);
  BI_ACCEPT(FN, a.idx = ivf_bf16);
  BI_ACCEPT(FN, a.idx = ivf_flat; a.qpv.ivf.rerank = 0);
  BI_ACCEPT(FN, a.qpv.ivf.nprobe = UINT32_MAX; a.qpv.ivf.rerank = UINT32_MAX);
  BI_ACCEPT(FN, a.qpv.ivf.rerank = 0);
  BI_ACCEPT(FN, a.qpv.ivf.reach = 0.0f); /* exactly nprobe lists */
  BI_ACCEPT(FN, a.qpv.ivf.reach = 1e30f);
  BI_ACCEPT(FN, a.idx = ivf_pq8; a.qpv.ivf.refine = 0);
  BI_ACCEPT(FN, a.idx = ivf_pq8; a.qpv.ivf.refine = UINT32_MAX);
  BI_ACCEPT(FN, a.q_stride = ID); /* no gap */
  BI_ACCEPT(FN, a.qv[QS - 1] = NAN); /* the stride gap is not q */
  /* the IVF source reads only its own knobs */
  BI_ACCEPT(FN, a.qpv.lsh.probes = UINT32_MAX; a.qpv.lsh.bits_per_table = 33;
            a.qpv.graph.ef = 0; a.qpv.forest.set_size = 0);
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
          a.stats = (lshk_query_stats *)(void *)(a.sb + 2));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.stats = (lshk_query_stats *)(void *)(a.ib + 2));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.q_stride = ID - 1);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.q_stride = 0);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.qpv.struct_size = 0);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.qpv.struct_size = (uint32_t)sizeof(lshk_query_params) - 1);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.st.struct_size = 0);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.st.struct_size = (uint32_t)sizeof(lshk_query_stats) - 1);
  BI_ACCEPT(FN, a.qpv.threads = 3);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.qpv.graph.reserved = 1);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.qpv.forest.confidence = -0.5f);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.qpv.graph.walk = UINT32_MAX);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.qpv.ivf.nprobe = 0);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.qpv.ivf.nprobe = 0; a.nq = 0;
          a.q = NULL);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.big.p.ivf.nprobe = 0;
          a.qp = &a.big.p);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.qpv.ivf.reach = -1.0f);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.qpv.ivf.reach = -0.0f - 1e-30f);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.qpv.ivf.reach = NAN);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.qpv.ivf.reach = INFINITY);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.qpv.ivf.reach = NAN; a.nq = 0;
          a.q = NULL);
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.qv[(QN - 1) * QS + ID - 1] = NAN);
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.qv[0] = -INFINITY);
  /* finite, but the scores could overflow f32 */
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.qv[1] = 3e38f);
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.idx = ivf_flat; a.qv[QS] = -1e37f);
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.idx = ivf_flat; a.qv[QS + 1] = INFINITY);
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.idx = ivf_borrowed; a.k = 0;
          a.qv[QS + 1] = NAN); /* checked even when nothing is returned */
  BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.nq = SIZE_MAX);
  BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.q_stride = SIZE_MAX / 2);
  BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.nq = SIZE_MAX / 16;
          a.q_stride = ID; a.k = UINT32_MAX);
  BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.nq = 2; a.k = 1;
          a.q_stride = SIZE_MAX / 4);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.q = BI_MISALIGN(const float, a.qv));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.qp = BI_MISALIGN(const lshk_query_params, &a.qpv));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.out_ids = BI_MISALIGN(uint32_t, a.ib));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.out_scores = BI_MISALIGN(float, a.sb));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.stats = BI_MISALIGN(lshk_query_stats, &a.st));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.out_scores = (float *)(void *)a.ib); /* outputs overlap */
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.out_scores = (float *)(void *)(a.ib + QN * QK - 1));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.out_scores = a.qv);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.out_ids = (uint32_t *)(void *)(a.qv + 2));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.out_ids = (uint32_t *)(void *)(a.sb + 1));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, o_.n = 0;
          a.out_ids = (uint32_t *)(void *)&a.qpv; /* over the query params */
          bi_out(&o_, &a.qpv.lsh, sizeof a.qpv - offsetof(lshk_query_params, lsh)));
#undef FN

#define FN lshk_index_candidates
  BI_BASELINE(FN);
  BI_IVF_CASES(FN, b.idx, const lshk_index);
  BI_ACCEPT(FN, a.b.qp = NULL);
  BI_ACCEPT(FN, a.b.idx = ivf_pq8);
  BI_ACCEPT(FN, a.b.k = 0);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.b.qpv.ivf.nprobe = 0);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.b.qpv.ivf.reach = NAN);
  BI_ACCEPT(FN, a.b.qpv.threads = 3);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.b.q_stride = ID - 1);
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.b.qv[0] = NAN);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.b.q = NULL);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.needed = NULL);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.offsets = NULL);
  BI_CASE(FN, LSHK_STATUS_BUFFER_TOO_SMALL, a.ids_len = QN * QK - 1; o_.n = 2);
#undef FN

#define FN lshk_index_save
  BI_BASELINE(FN);
  BI_ACCEPT(FN, a.idx = ivf_borrowed);
  BI_ACCEPT(FN, a.idx = ivf_flat);
  BI_ACCEPT(FN, a.idx = ivf_bf16);
  BI_ACCEPT(FN, a.idx = ivf_pq8);
  BI_IVF_CASES(FN, idx, const lshk_index);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.path = NULL);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.path = "");
  BI_CASE(FN, LSHK_STATUS_IO_ERROR, a.path = path_subdir); /* a directory */
  BI_CASE(FN, LSHK_STATUS_IO_ERROR, a.path = "/nonexistent-lshk-dir/x.lshk");
  BI_CASE(FN, LSHK_STATUS_IO_ERROR, a.path = path_fifo); /* not replaced */
#undef FN

#define FN lshk_index_load
  BI_BASELINE(FN);
  /* w_stride: 0 or the stride the file records */
  BI_ACCEPT(FN, a.w_stride = ID);
  BI_ACCEPT(FN, a.path = path_borrowed; a.w = wb);
  BI_ACCEPT(FN, a.path = path_borrowed; a.w = wb; a.w_stride = IWS);
  BI_ACCEPT(FN, a.path = path_borrowed; a.wnan[IWS - 1] = NAN; a.w = a.wnan;
            a.w_stride = IWS); /* the stride gap is not W */
  BI_ACCEPT(FN, a.path = path_index); /* an index of another source */
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.path = NULL);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.out = NULL);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.out = BI_MISALIGN(lshk_index *, &a.outv));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.path = "");
  BI_CASE(FN, LSHK_STATUS_IO_ERROR, a.path = path_missing);
  BI_CASE(FN, LSHK_STATUS_IO_ERROR, a.path = path_subdir);
  BI_CASE(FN, LSHK_STATUS_IO_ERROR, a.path = path_fifo); /* never blocks */
  BI_CASE(FN, LSHK_STATUS_BAD_FILE_FORMAT, a.path = path_empty);
  BI_CASE(FN, LSHK_STATUS_BAD_FILE_FORMAT, a.path = path_garbage);
  BI_CASE(FN, LSHK_STATUS_BAD_FILE_FORMAT, a.path = path_truncated);
  /* W given for a file that stores its rows, and missing where needed */
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.w = wb; a.w_stride = IWS);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.w = wb);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.path = path_index; a.w = wb;
          a.w_stride = IWS);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.path = path_borrowed);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.path = path_borrowed;
          a.w_stride = IWS);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.path = path_borrowed;
          a.w = BI_MISALIGN(const float, wb); a.w_stride = IWS);
  /* a w_stride other than the one the file records */
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.w_stride = 12345);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.w_stride = ID - 1);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.path = path_borrowed; a.w = wb;
          a.w_stride = ID - 1);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.path = path_borrowed; a.w = wb;
          a.w_stride = ID);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.path = path_borrowed; a.w = wb;
          a.w_stride = SIZE_MAX / 2);
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.path = path_borrowed;
          a.wnan[(IR - 1) * IWS + ID - 1] = NAN; a.w = a.wnan;
          a.w_stride = IWS);
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.path = path_borrowed;
          a.wnan[0] = -INFINITY; a.w = a.wnan);
  /* finite, but beyond the IVF's row limit, sqrt(FLT_MAX / (16 (dim + 2))) */
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.path = path_borrowed;
          a.wnan[IWS + 3] = 1e30f; a.w = a.wnan);
#undef FN

#define FN lshk_index_memory_bytes
  BI_BASELINE(FN);
  BI_ACCEPT(FN, a.idx = ivf_borrowed);
  BI_ACCEPT(FN, a.idx = ivf_pq8);
  BI_IVF_CASES(FN, idx, const lshk_index);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.out = NULL);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.out = BI_MISALIGN(size_t, &a.v));
#undef FN

#define FN lshk_index_calibrate
  BI_BASELINE(FN);
  BI_IVF_CASES(FN, idx, const lshk_index);
  /* the other sources have no lists to calibrate */
  BI_CASE(FN, LSHK_STATUS_UNSUPPORTED, a.idx = FX->idx);
  BI_CASE(FN, LSHK_STATUS_UNSUPPORTED, a.idx = FX->idx_dw);
  BI_CASE(FN, LSHK_STATUS_UNSUPPORTED, a.idx = FX->idx_graph);
  BI_CASE(FN, LSHK_STATUS_UNSUPPORTED, a.idx = FX->idx_forest);
  BI_CASE(FN, LSHK_STATUS_UNSUPPORTED, a.idx = FX->idx_forest; a.k = 0;
          a.out = NULL);
  BI_ACCEPT(FN, a.idx = ivf_borrowed);
  BI_ACCEPT(FN, a.idx = ivf_bf16);
  BI_ACCEPT(FN, a.idx = ivf_flat; a.rerank = 0; a.target = 1.0f);
  BI_ACCEPT(FN, a.idx = ivf_pq; a.rerank = UINT32_MAX);
  BI_ACCEPT(FN, a.idx = ivf_pq8; a.rerank = 0);
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
          a.cv.struct_size = (uint32_t)sizeof(lshk_calibration) - 1);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.out = BI_MISALIGN(lshk_calibration, &a.cv));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.q = BI_MISALIGN(const float, a.qv));
  /* the output overlapping the queries */
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, o_.n = 0;
          a.out = (lshk_calibration *)(void *)a.qv;
          bi_out(&o_, a.qv, sizeof a.qv));
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.qv[(CN - 1) * QS + ID - 1] = NAN);
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.qv[0] = -INFINITY);
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.qv[1] = 3e38f);
  BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.nq = SIZE_MAX);
  BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.q_stride = SIZE_MAX / 2);
#undef FN
  {
    /* the calibrated parameters are a whole lshk_query_params */
    bi_args_lshk_index_calibrate a;
    bi_outs o;
    memset(&a, 0, sizeof a);
    memset(&o, 0, sizeof o);
    bi_init_lshk_index_calibrate(&a, &o);
    BI_EXPECT(lshk_index_calibrate,
              bi_call_lshk_index_calibrate(&a) == LSHK_STATUS_OK &&
                  a.cv.struct_size == sizeof a.cv &&
                  a.cv.query.struct_size == sizeof(lshk_query_params) &&
                  a.cv.query.threads == 0 && a.cv.query.ivf.nprobe >= 1);
  }

#define FN lshk_index_describe
  BI_BASELINE(FN);
  BI_IVF_CASES(FN, idx, const lshk_index);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.out = NULL);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.out = BI_MISALIGN(lshk_index_info, &a.v));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.v.struct_size = (uint32_t)sizeof a.v - 1);
#undef FN
  {
    lshk_index_info v;
    memset(&v, 0, sizeof v);
    v.struct_size = (uint32_t)sizeof v;
    BI_EXPECT(lshk_index_describe,
              lshk_index_describe(ivf_pq8, &v) == LSHK_STATUS_OK &&
                  v.source == LSHK_SOURCE_IVF && v.nlist == NL &&
                  v.codes == LSHK_IVF_CODES_PQ4_I8 &&
                  v.storage == LSHK_STORAGE_F32 && v.labelled == 0);
    BI_EXPECT(lshk_index_describe,
              lshk_index_describe(ivf_borrowed, &v) == LSHK_STATUS_OK &&
                  v.storage == LSHK_STORAGE_BORROWED_F32 && v.rows == IR &&
                  v.dim == ID);
  }

#define FN lshk_index_free
  BI_BASELINE(FN);
  BI_CASE(FN, LSHK_STATUS_INVALID_HANDLE, a.idx = FX->idx_freed);
  BI_CASE(FN, LSHK_STATUS_INVALID_HANDLE, a.idx = (lshk_index *)(void *)FX->tb);
  BI_CASE(FN, LSHK_STATUS_INVALID_HANDLE,
          a.idx = (lshk_index *)(void *)FX->sh_borrowed);
  BI_CASE(FN, LSHK_STATUS_INVALID_HANDLE, a.idx = BI_GARBAGE(lshk_index));
  BI_CASE(FN, LSHK_STATUS_INVALID_HANDLE, a.idx = BI_MISALIGN(lshk_index, ivf_live));
#undef FN

#define FN lshk_index_train_labels
  BI_ACCEPT(FN, a.idx = ivf_lab[0]);
  BI_ACCEPT(FN, a.idx = ivf_lab[1]; a.p = &a.big.p; a.lo[0] = 1);
  BI_ACCEPT(FN, a.idx = ivf_lab[2]; a.p = NULL; a.lv[TQ * 2 - 1] = IR - 1);
  BI_ACCEPT(FN, a.idx = ivf_lab[3]; a.pv.policy = LSHK_LABEL_POLICY_INSTEAD;
            a.pv.label_cap = 1);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.idx = ivf_lab[0]); /* again */
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.idx = ivf_pq);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.idx = ivf_pq8);
  BI_IVF_CASES(FN, idx, lshk_index);
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

#define FN lshk_index_label_info
  BI_BASELINE(FN);
  BI_ACCEPT(FN, a.idx = ivf_live; a.params = NULL);
  BI_CASE(FN, LSHK_STATUS_OK, o_.n = 0;
          a.big.p.struct_size = (uint32_t)sizeof a.big; a.params = &a.big.p;
          bi_out(&o_, a.big.tail, sizeof a.big.tail)); /* tail untouched */
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.struct_size = 0;
          a.idx = ivf_live); /* checked even when not trained */
  BI_IVF_CASES(FN, idx, const lshk_index);
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
    lshk_index_info v;
    memset(&v, 0, sizeof v);
    v.struct_size = (uint32_t)sizeof v;
    BI_EXPECT(lshk_index_label_info,
              lshk_index_label_info(ivf_lab[3], &t, &lp) == LSHK_STATUS_OK &&
                  t == 1 && lp.label_cap == 1 &&
                  lp.policy == LSHK_LABEL_POLICY_INSTEAD);
    BI_EXPECT(lshk_index_label_info,
              lshk_index_label_info(ivf_live, &t, &lp) == LSHK_STATUS_OK &&
                  t == 0);
    BI_EXPECT(lshk_index_describe,
              lshk_index_describe(ivf_lab[3], &v) == LSHK_STATUS_OK &&
                  v.labelled == 1);
  }

  /* Refused calls left the fixtures as built. */
  BI_EXPECT(lshk_index_query, fp != 0 && query_fingerprint(ivf_live) == fp);

  remove(path_owned);
  remove(path_borrowed);
  remove(path_index);
  bi_files_close();
  bi_fx_need(lshk_index_free(ivf_live), "lshk_index_free");
  bi_fx_need(lshk_index_free(ivf_borrowed), "lshk_index_free");
  bi_fx_need(lshk_index_free(ivf_flat), "lshk_index_free");
  bi_fx_need(lshk_index_free(ivf_bf16), "lshk_index_free");
  bi_fx_need(lshk_index_free(ivf_pq), "lshk_index_free");
  bi_fx_need(lshk_index_free(ivf_pq8), "lshk_index_free");
  for (int i = 0; i < 4; i++)
    bi_fx_need(lshk_index_free(ivf_lab[i]), "lshk_index_free");
  bi_fx_teardown();
  return bi_summary("bad_input_index_ivf");
}
