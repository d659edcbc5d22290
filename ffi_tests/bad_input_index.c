/* Bad-input matrix (issue 8), the index with an LSH source (SimHash,
 * DWTA) and the calls every source shares: lshk_index_build (the LSH
 * knobs, the enums, reserved fields and knobs of every source), query,
 * save/load, accessors, IUL and label training; the LSH-only calls on the
 * other sources (UNSUPPORTED). The IVF, graph and forest sources have
 * their own programs (bad_input_index_ivf.c, _graph.c, _forest.c). See
 * bad_input.h for what a case asserts. File cases check that a refused
 * save leaves no file (and no temporary file) behind.
 *
 * Functions covered here:
 *   lshk_index_params_default lshk_query_params_default
 *   lshk_iul_params_default lshk_index_build lshk_index_query
 *   lshk_index_save lshk_index_load lshk_index_load_borrowed
 *   lshk_index_memory_bytes
 *   lshk_index_describe lshk_index_weights lshk_index_free
 *   lshk_index_simhash lshk_index_dwta lshk_index_tables
 *   lshk_index_train_iul lshk_index_train_labels lshk_index_label_info */
#define _POSIX_C_SOURCE 200809L
#include "bad_input_files.h"

#define FX bi_fx()
#define IR BI_FX_ROWS
#define ID BI_FX_DIM
#define IK BI_FX_K
#define IL BI_FX_L
#define IWS 9 /* a w_stride > dim */

static char path_stored[300], path_borrowed[300];
static float wb[IR * IWS]; /* the borrowed W of path_borrowed */


/* ---- lshk_index_build ---------------------------------------------------- */
typedef struct {
  float wv[IR * IWS];
  float bv[IR];
  lshk_index_params pv;
  struct {
    lshk_index_params p;
    unsigned char tail[48];
  } big;
  float planes[IK * IL * (ID + 1) + 1];
  uint32_t map[2 * IL * 4 + 1];
  float rwv[IR];
  const float *w;
  const float *bias;
  size_t rows, dim, w_stride;
  const lshk_index_params *p;
  lshk_index *outv;
  lshk_index **out;
} bi_args_lshk_index_build;
static void bi_init_lshk_index_build(bi_args_lshk_index_build *a, bi_outs *o) {
  for (int i = 0; i < IR * IWS; i++) a->wv[i] = (float)((i * 13) % 17) - 8.0f;
  for (int i = 0; i < IR; i++) a->bv[i] = 0.5f * (float)(i % 3);
  for (int i = 0; i < IK * IL * (ID + 1) + 1; i++)
    a->planes[i] = (float)((i * 3) % 5) - 2.0f;
  for (int i = 0; i < 2 * IL * 4 + 1; i++) a->map[i] = (uint32_t)(i % ID);
  for (int i = 0; i < IR; i++) a->rwv[i] = 1.0f;
  a->pv = lshk_index_params_default();
  a->pv.lsh.bits_per_table = IK;
  a->pv.lsh.tables = IL;
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
/* A progress callback that counts its calls. */
static void count_progress(void *user, uint64_t done, uint64_t total) {
  (void)done;
  (void)total;
  (*(int *)user)++;
}
static int progress_calls;

static lshk_status bi_call_lshk_index_build(bi_args_lshk_index_build *a) {
  lshk_index *before = a->outv;
  lshk_status s = lshk_index_build(a->w, a->bias, a->rows, a->dim, a->w_stride,
                                   a->p, a->out);
  if (s == LSHK_STATUS_OK && a->out != NULL && *a->out != before)
    lshk_index_free(*a->out);
  return s;
}

/* ---- lshk_index_query -------------------------------------------------- */
#define QN 3
#define QK 4
#define QS 10
typedef struct {
  const lshk_index *idx;
  float qv[QN * QS];
  lshk_query_params qpv;
  struct {
    lshk_query_params p;
    unsigned char tail[16];
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
  a->qpv.lsh.probes = 2;
  a->big.p = a->qpv;
  a->big.p.struct_size = (uint32_t)sizeof a->big;
  memset(a->big.tail, 0x11, sizeof a->big.tail);
  a->st.struct_size = (uint32_t)sizeof a->st;
  a->idx = FX->idx;
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

/* ---- lshk_index_save / lshk_index_load ----------------------------------- */
typedef struct {
  const lshk_index *idx;
  const char *path;
} bi_args_lshk_index_save;
static void bi_init_lshk_index_save(bi_args_lshk_index_save *a, bi_outs *o) {
  (void)o;
  a->idx = FX->idx;
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
  const float *borrowed_w;
  size_t w_stride;
  float wnan[IR * IWS];
  lshk_index *outv;
  lshk_index **out;
} bi_args_lshk_index_load;
static void bi_init_lshk_index_load(bi_args_lshk_index_load *a, bi_outs *o) {
  memcpy(a->wnan, wb, sizeof wb);
  a->path = path_stored;
  a->borrowed_w = NULL;
  a->w_stride = 0;
  a->out = &a->outv;
  bi_out(o, &a->outv, sizeof a->outv);
}
static lshk_status bi_call_lshk_index_load(bi_args_lshk_index_load *a) {
  lshk_index *before = a->outv;
  lshk_status s = lshk_index_load(a->path, a->borrowed_w, a->w_stride, a->out);
  if (s == LSHK_STATUS_OK && a->out != NULL && *a->out != before)
    lshk_index_free(*a->out);
  return s;
}

typedef struct {
  const char *path;
  const float *w;
  size_t w_len;
  size_t w_stride;
  float wnan[IR * IWS];
  lshk_index *outv;
  lshk_index **out;
} bi_args_lshk_index_load_borrowed;
static void bi_init_lshk_index_load_borrowed(bi_args_lshk_index_load_borrowed *a,
                                             bi_outs *o) {
  memcpy(a->wnan, wb, sizeof wb);
  a->path = path_borrowed;
  a->w = wb;
  a->w_len = IR * IWS;
  a->w_stride = 0;
  a->out = &a->outv;
  bi_out(o, &a->outv, sizeof a->outv);
}
static lshk_status bi_call_lshk_index_load_borrowed(bi_args_lshk_index_load_borrowed *a) {
  lshk_index *before = a->outv;
  lshk_status s = lshk_index_load_borrowed(a->path, a->w, a->w_len, a->w_stride, a->out);
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
  a->idx = FX->idx;
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
  struct {
    lshk_index_info v;
    unsigned char tail[40];
  } big; /* a caller with a newer, larger lshk_index_info */
  lshk_index_info *out;
} bi_args_lshk_index_describe;
static void bi_init_lshk_index_describe(bi_args_lshk_index_describe *a,
                                        bi_outs *o) {
  a->idx = FX->idx;
  a->v.struct_size = (uint32_t)sizeof a->v;
  a->out = &a->v;
  /* every field of the info but the caller's struct_size */
  bi_out(o, &a->v.source, sizeof a->v - offsetof(lshk_index_info, source));
}
static lshk_status bi_call_lshk_index_describe(bi_args_lshk_index_describe *a) {
  return lshk_index_describe(a->idx, a->out);
}

/* The info of `idx` (source UINT32_MAX when the call fails). */
static lshk_index_info describe(const lshk_index *idx) {
  lshk_index_info v;
  memset(&v, 0, sizeof v);
  v.struct_size = (uint32_t)sizeof v;
  if (lshk_index_describe(idx, &v) != LSHK_STATUS_OK) v.source = UINT32_MAX;
  return v;
}

typedef struct {
  const lshk_index *idx;
  lshk_weights_view v;
  struct {
    lshk_weights_view v;
    unsigned char tail[40];
  } big; /* a caller with a newer, larger lshk_weights_view */
  lshk_weights_view *out;
} bi_args_lshk_index_weights;
static void bi_init_lshk_index_weights(bi_args_lshk_index_weights *a,
                                       bi_outs *o) {
  a->idx = FX->idx;
  a->v.struct_size = (uint32_t)sizeof a->v;
  a->out = &a->v;
  /* every field of the view but the caller's struct_size */
  bi_out(o, &a->v.storage,
         sizeof a->v - offsetof(lshk_weights_view, storage));
}
static lshk_status bi_call_lshk_index_weights(bi_args_lshk_index_weights *a) {
  return lshk_index_weights(a->idx, a->out);
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

/* The three borrowed-handle accessors share one shape. */
#define ACCESSOR(NAME, T, LIVE)                                                \
  typedef struct {                                                             \
    const lshk_index *idx;                                                     \
    const T *v;                                                                \
    const T **out;                                                             \
  } bi_args_##NAME;                                                            \
  static void bi_init_##NAME(bi_args_##NAME *a, bi_outs *o) {                  \
    a->idx = LIVE;                                                             \
    a->out = &a->v;                                                            \
    bi_out(o, (void *)&a->v, sizeof a->v);                                     \
  }                                                                            \
  static lshk_status bi_call_##NAME(bi_args_##NAME *a) {                       \
    return NAME(a->idx, a->out);                                               \
  }
ACCESSOR(lshk_index_simhash, lshk_simhash, FX->idx)
ACCESSOR(lshk_index_dwta, lshk_dwta, FX->idx_dw)
ACCESSOR(lshk_index_tables, lshk_tables, FX->idx)

/* ---- training -------------------------------------------------------------- */
#define TQ 6
typedef struct {
  lshk_index *idx;
  float qv[TQ * QS];
  size_t lo[TQ + 1];
  uint32_t lv[TQ * 2];
  lshk_iul_params pv;
  struct {
    lshk_iul_params p;
    unsigned char tail[40];
  } big;
  lshk_iul_report rep[4];
  const float *queries;
  size_t n, q_stride;
  const size_t *label_offsets;
  const uint32_t *labels;
  const lshk_iul_params *p;
  lshk_iul_report *reports;
  size_t reports_len;
} bi_args_lshk_index_train_iul;
/* The valid call trains FX->idx; accepted calls are only made on pool
 * indexes (training changes the index). */
static void bi_init_lshk_index_train_iul(bi_args_lshk_index_train_iul *a,
                                         bi_outs *o) {
  for (int i = 0; i < TQ * QS; i++) a->qv[i] = (float)((i * 5) % 11) - 5.0f;
  for (int i = 0; i <= TQ; i++) a->lo[i] = (size_t)i * 2;
  for (int i = 0; i < TQ * 2; i++) a->lv[i] = (uint32_t)((i * 7) % IR);
  a->pv = lshk_iul_params_default();
  a->pv.rounds = 2;
  a->pv.epochs = 1;
  a->pv.batch = 4;
  a->big.p = a->pv;
  a->big.p.struct_size = (uint32_t)sizeof a->big;
  memset(a->big.tail, 0x42, sizeof a->big.tail);
  a->idx = FX->idx;
  a->queries = a->qv;
  a->n = TQ;
  a->q_stride = QS;
  a->label_offsets = a->lo;
  a->labels = a->lv;
  a->p = &a->pv;
  a->reports = a->rep;
  a->reports_len = 2;
  bi_out(o, a->rep, sizeof a->rep);
}
static lshk_status bi_call_lshk_index_train_iul(bi_args_lshk_index_train_iul *a) {
  return lshk_index_train_iul(a->idx, a->queries, a->n, a->q_stride,
                              a->label_offsets, a->labels, a->p, a->reports,
                              a->reports_len);
}

typedef struct {
  lshk_index *idx;
  float qv[TQ * QS];
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
  for (int i = 0; i < TQ * QS; i++) a->qv[i] = (float)((i * 3) % 7) - 3.0f;
  for (int i = 0; i <= TQ; i++) a->lo[i] = (size_t)i * 2;
  for (int i = 0; i < TQ * 2; i++) a->lv[i] = (uint32_t)((i * 11) % IR);
  a->pv = lshk_label_params_default();
  a->big.p = a->pv;
  a->big.p.struct_size = (uint32_t)sizeof a->big;
  memset(a->big.tail, 0x24, sizeof a->big.tail);
  a->idx = FX->idx;
  a->queries = a->qv;
  a->n = TQ;
  a->q_stride = QS;
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
  a->idx = FX->idx_pool[2]; /* trained below, before any case */
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

static uint64_t query_fingerprint(const lshk_index *idx) {
  bi_args_lshk_index_query a;
  bi_outs o;
  uint64_t h = 1469598103934665603ull;
  memset(&a, 0, sizeof a);
  memset(&o, 0, sizeof o);
  bi_init_lshk_index_query(&a, &o);
  a.idx = idx;
  if (bi_call_lshk_index_query(&a) != LSHK_STATUS_OK) return 0;
  for (int i = 0; i < QN * QK; i++) h = (h ^ a.ib[i]) * 1099511628211ull;
  return h;
}

int main(void) {
  uint64_t fp;
  bi_fx_setup();
  fp = query_fingerprint(FX->idx);

  /* ---- files ---- */
  {
    lshk_index_params p = lshk_index_params_default();
    lshk_index *bidx = NULL;
    static const char garbage[] = "this is not an lshk index file, at all.";
    bi_files_open("index", "lshk");
    snprintf(path_stored, sizeof path_stored, "%s/stored.lshk", dir);
    snprintf(path_borrowed, sizeof path_borrowed, "%s/borrowed.lshk", dir);
    bi_fx_need(lshk_index_save(FX->idx, path_stored), "lshk_index_save");
    for (int i = 0; i < IR * IWS; i++) wb[i] = (float)((i * 29) % 31) - 15.0f;
    p.lsh.bits_per_table = IK;
    p.lsh.tables = IL;
    p.storage = LSHK_STORAGE_BORROWED_F32;
    p.build_threads = 1;
    bi_fx_need(lshk_index_build(wb, NULL, IR, ID, IWS, &p, &bidx),
               "lshk_index_build");
    bi_fx_need(lshk_index_save(bidx, path_borrowed), "lshk_index_save");
    bi_fx_need(lshk_index_free(bidx), "lshk_index_free");
    bi_files_fill(garbage, sizeof garbage, path_stored);
  }

  {
    lshk_index_params d = lshk_index_params_default();
    BI_EXPECT(lshk_index_params_default,
              d.struct_size == sizeof(lshk_index_params) &&
                  d.source == LSHK_SOURCE_SIMHASH &&
                  d.storage == LSHK_STORAGE_F32 && d.lsh.planes == NULL &&
                  d.lsh.dwta_map == NULL && d.progress == NULL);
    BI_EXPECT(lshk_index_params_default,
              d.ivf.reserved == 0 && d.graph.reserved == 0 &&
                  d.forest.reserved == 0 && d.ivf.row_weights == NULL &&
                  d.ivf.codes == LSHK_IVF_CODES_I8 &&
                  d.graph.storage == LSHK_STORAGE_F32 &&
                  d.forest.trees == 8 && d.forest.leaf_size == 64);
  }
  {
    lshk_query_params d = lshk_query_params_default();
    BI_EXPECT(lshk_query_params_default,
              d.struct_size == sizeof(lshk_query_params) && d.threads == 0 &&
                  d.graph.reserved == 0 && d.forest.confidence == 0.0f);
    BI_EXPECT(lshk_query_params_default,
              d.lsh.min_count == 1 && d.lsh.probes == 0 &&
                  d.ivf.nprobe == UINT32_MAX && d.ivf.rerank == 32 &&
                  d.ivf.refine == 256 &&
                  d.graph.walk == LSHK_GRAPH_WALK_EXACT && d.graph.ef == 100 &&
                  d.forest.set_size == 256);
  }
  BI_EXPECT(lshk_iul_params_default,
            lshk_iul_params_default().struct_size == sizeof(lshk_iul_params) &&
                lshk_iul_params_default().flags == 0);

#define FN lshk_index_build
  BI_BASELINE(FN);
  BI_ACCEPT(FN, a.p = &a.big.p);
  BI_ACCEPT(FN, a.p = NULL; a.bias = NULL);
  BI_ACCEPT(FN, a.pv.lsh.planes = a.planes; a.pv.lsh.planes_len = IK * IL * ID);
  BI_ACCEPT(FN, a.pv.transform = LSHK_TRANSFORM_MIPS; a.pv.lsh.planes = a.planes;
            a.pv.lsh.planes_len = IK * IL * (ID + 1));
  BI_ACCEPT(FN, a.pv.source = LSHK_SOURCE_DWTA; a.pv.lsh.bits_per_table = 2;
            a.pv.lsh.bin_size = 4; a.pv.lsh.dwta_map = a.map;
            a.pv.lsh.dwta_map_len = 2 * IL * 4);
  BI_ACCEPT(FN, a.wv[IWS - 1] = NAN); /* the stride gap is not W */
  /* an LSH source reads only its own knobs */
  BI_ACCEPT(FN, a.pv.ivf.nlist = UINT32_MAX; a.pv.ivf.iters = 0;
            a.pv.ivf.pq_m = 3; a.pv.graph.m = 0; a.pv.graph.ef_construction = 0;
            a.pv.forest.trees = 0; a.pv.forest.leaf_size = 0);
  BI_ACCEPT(FN, progress_calls = 0; a.pv.progress = count_progress;
            a.pv.progress_user = &progress_calls);
  BI_EXPECT(lshk_index_build, progress_calls >= 1);
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
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.source = 5);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.source = UINT32_MAX);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.big.p.source = 5; a.p = &a.big.p);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.storage = 5);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.storage = UINT32_MAX);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.transform = 3);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.transform = UINT32_MAX);
  /* every source's enums and reserved fields are checked, read or not */
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.ivf.reserved = 1);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.ivf.reserved = UINT32_MAX);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.graph.reserved = 1);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.forest.reserved = 1);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.big.p.forest.reserved = 7;
          a.p = &a.big.p);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.ivf.codes = 4);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.graph.storage = 5);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.pv.graph.storage = LSHK_STORAGE_F16);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.forest.normalize_rows = 2);
  /* row weights steer the IVF's k-means only */
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.ivf.row_weights = a.rwv;
          a.pv.ivf.n_weights = IR);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.source = LSHK_SOURCE_DWTA;
          a.pv.lsh.bits_per_table = 2; a.pv.lsh.bin_size = 4;
          a.pv.ivf.row_weights = a.rwv; a.pv.ivf.n_weights = IR);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.pv.ivf.n_weights = IR);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.lsh.bits_per_table = 0);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.lsh.bits_per_table = 33);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.lsh.tables = 0);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.lsh.range_bits = 25);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.lsh.range_bits = UINT32_MAX);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.source = LSHK_SOURCE_DWTA;
          a.pv.lsh.bin_size = 3);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.source = LSHK_SOURCE_DWTA;
          a.pv.lsh.bin_size = 0);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.source = LSHK_SOURCE_DWTA;
          a.pv.lsh.bits_per_table = 12; a.pv.lsh.bin_size = 8); /* 36 bits */
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.lsh.planes = a.planes;
          a.pv.lsh.planes_len = IK * IL * ID - 1);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.lsh.planes = a.planes;
          a.pv.lsh.planes_len = IK * IL * ID + 1);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.transform = LSHK_TRANSFORM_MIPS;
          a.pv.lsh.planes = a.planes; a.pv.lsh.planes_len = IK * IL * ID);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.pv.lsh.planes_len = IK * IL * ID);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.pv.lsh.planes = BI_MISALIGN(const float, a.planes);
          a.pv.lsh.planes_len = IK * IL * ID);
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.pv.lsh.planes = a.planes;
          a.pv.lsh.planes_len = IK * IL * ID;
          a.planes[IK * IL * ID - 1] = NAN);
  BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.pv.lsh.planes = a.planes;
          a.pv.lsh.planes_len = SIZE_MAX);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.source = LSHK_SOURCE_DWTA;
          a.pv.lsh.bits_per_table = 2; a.pv.lsh.bin_size = 4;
          a.pv.lsh.dwta_map = a.map; a.pv.lsh.dwta_map_len = 2 * IL * 4 - 1);
  BI_CASE(FN, LSHK_STATUS_INDEX_OUT_OF_RANGE, a.pv.source = LSHK_SOURCE_DWTA;
          a.pv.lsh.bits_per_table = 2; a.pv.lsh.bin_size = 4;
          a.pv.lsh.dwta_map = a.map; a.pv.lsh.dwta_map_len = 2 * IL * 4;
          a.map[2 * IL * 4 - 1] = ID);
  BI_CASE(FN, LSHK_STATUS_INDEX_OUT_OF_RANGE, a.pv.source = LSHK_SOURCE_DWTA;
          a.pv.lsh.bits_per_table = 2; a.pv.lsh.bin_size = 4;
          a.pv.lsh.dwta_map = a.map; a.pv.lsh.dwta_map_len = 2 * IL * 4;
          a.map[0] = UINT32_MAX);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.pv.source = LSHK_SOURCE_DWTA;
          a.pv.lsh.bits_per_table = 2; a.pv.lsh.bin_size = 4;
          a.pv.lsh.dwta_map_len = 2 * IL * 4);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.storage = LSHK_STORAGE_F16;
          a.wv[(IR - 1) * IWS + ID - 1] = 70000.0f);
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.wv[(IR - 1) * IWS + ID - 1] = NAN);
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.wv[0] = INFINITY);
  /* finite, but no query could be scored within f32 */
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.wv[3] = 3e38f);
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.pv.storage = LSHK_STORAGE_I8;
          a.wv[5] = -INFINITY);
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.bv[IR - 1] = NAN);
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.pv.storage = LSHK_STORAGE_BORROWED_F32;
          a.bv[3] = INFINITY);
  BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.rows = SIZE_MAX);
  BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.w_stride = SIZE_MAX / 2);
  BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.dim = SIZE_MAX; a.w_stride = SIZE_MAX;
          a.rows = 1);
#undef FN

#define FN lshk_index_query
  BI_BASELINE(FN);
  BI_INDEX_CASES(FN, idx, const lshk_index);
  BI_ACCEPT(FN, a.qp = &a.big.p);
  BI_ACCEPT(FN, a.qp = NULL; a.stats = NULL; a.out_scores = NULL);
  BI_ACCEPT(FN, a.qpv.lsh.bits_per_table = IK);
  BI_ACCEPT(FN, a.st.struct_size = (uint32_t)sizeof a.st + 64;
            a.stats = (lshk_query_stats *)(void *)&a.st);
  BI_ACCEPT(FN, a.idx = FX->idx_dw; a.qp = NULL);
  /* an LSH source reads only its own knobs */
  BI_ACCEPT(FN, a.qpv.ivf.nprobe = 0; a.qpv.ivf.reach = NAN; a.qpv.graph.ef = 0;
            a.qpv.forest.set_size = 0);
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
  /* the stats overlapping an output (written last, it would clobber it) */
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.stats = (lshk_query_stats *)(void *)(a.sb + 2));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.q_stride = ID - 1);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.q_stride = 0);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.qpv.struct_size = 0);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.qpv.struct_size = (uint32_t)sizeof(lshk_query_params) - 1);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.st.struct_size = 0);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.st.struct_size = (uint32_t)sizeof(lshk_query_stats) - 1);
  /* any thread count is accepted; reserved fields, the walk enum and the
     forest's confidence are checked whatever the source */
  BI_ACCEPT(FN, a.qpv.threads = 2);
  BI_ACCEPT(FN, a.qpv.threads = LSHK_QUERY_THREADS_ALL);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.qpv.graph.reserved = 1);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.qpv.forest.confidence = 2.0f);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.big.p.forest.confidence = NAN;
          a.qp = &a.big.p);
  BI_ACCEPT(FN, a.qpv.forest.confidence = 0.75f); /* read by a forest only */
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.qpv.graph.walk = 2);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.qpv.graph.reserved = 1;
          a.nq = 0; a.q = NULL);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.idx = FX->idx_dw); /* probes */
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.qpv.lsh.probes = 1u << IK);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.qpv.lsh.probes = UINT32_MAX);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.qpv.lsh.bits_per_table = IK + 1);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.qpv.lsh.bits_per_table = 33);
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.qv[(QN - 1) * QS + ID - 1] = NAN);
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.qv[0] = -INFINITY);
  /* finite, but the scores could overflow f32 */
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.qv[1] = 3e38f);
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.idx = FX->idx_dw; a.qp = NULL;
          a.qv[QS + 1] = INFINITY);
  BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.nq = SIZE_MAX);
  BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.q_stride = SIZE_MAX / 2);
  BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.nq = SIZE_MAX / 16; a.q_stride = ID;
          a.k = UINT32_MAX);
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
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.out_scores = a.qv);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.out_ids = (uint32_t *)(void *)(a.qv + 2));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.out_ids = (uint32_t *)(void *)(a.sb + 1));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, o_.n = 0;
          a.out_ids = (uint32_t *)(void *)&a.qpv; /* over the params */
          bi_out(&o_, &a.qpv.lsh, sizeof a.qpv - offsetof(lshk_query_params, lsh)));
#undef FN

#define FN lshk_index_save
  BI_BASELINE(FN);
  BI_INDEX_CASES(FN, idx, const lshk_index);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.path = NULL);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.path = "");
  BI_CASE(FN, LSHK_STATUS_IO_ERROR, a.path = path_subdir); /* a directory */
  BI_CASE(FN, LSHK_STATUS_IO_ERROR, a.path = path_fifo);   /* not replaced */
  BI_CASE(FN, LSHK_STATUS_IO_ERROR, a.path = "/nonexistent-lshk-dir/x.lshk");
#undef FN

#define FN lshk_index_load
  BI_BASELINE(FN);
  BI_ACCEPT(FN, a.path = path_borrowed; a.borrowed_w = wb);
  /* w_stride: 0 or the stride the file records */
  BI_ACCEPT(FN, a.w_stride = ID);
  BI_ACCEPT(FN, a.path = path_borrowed; a.borrowed_w = wb; a.w_stride = IWS);
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
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.borrowed_w = wb);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.path = path_borrowed);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.path = path_borrowed;
          a.w_stride = IWS);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.path = path_borrowed;
          a.borrowed_w = BI_MISALIGN(const float, wb));
  /* a w_stride other than the recorded one */
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.w_stride = ID + 1);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.w_stride = SIZE_MAX);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.path = path_borrowed;
          a.borrowed_w = wb; a.w_stride = ID);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.path = path_borrowed;
          a.borrowed_w = wb; a.w_stride = IWS + 1);
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.path = path_borrowed;
          a.wnan[(IR - 1) * IWS + ID - 1] = NAN; a.borrowed_w = a.wnan);
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.path = path_borrowed;
          a.wnan[0] = -INFINITY; a.borrowed_w = a.wnan);
  BI_ACCEPT(FN, a.path = path_borrowed; a.wnan[IWS - 1] = NAN;
            a.borrowed_w = a.wnan); /* the stride gap is not W */
#undef FN

#define FN lshk_index_load_borrowed
  /* W's length: (IR - 1) * IWS + ID floats are the file's shape */
  BI_BASELINE(FN);
  BI_ACCEPT(FN, a.w_len = (IR - 1) * IWS + ID);
  BI_ACCEPT(FN, a.w_len = SIZE_MAX; a.w_stride = IWS);
  BI_CASE(FN, LSHK_STATUS_BUFFER_TOO_SMALL, a.w_len = (IR - 1) * IWS + ID - 1);
  BI_CASE(FN, LSHK_STATUS_BUFFER_TOO_SMALL, a.w_len = 0);
  BI_CASE(FN, LSHK_STATUS_BUFFER_TOO_SMALL, a.w_len = ID);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.w = NULL);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.path = NULL);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.out = NULL);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.out = BI_MISALIGN(lshk_index *, &a.outv));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.path = "");
  BI_CASE(FN, LSHK_STATUS_IO_ERROR, a.path = path_missing);
  BI_CASE(FN, LSHK_STATUS_IO_ERROR, a.path = path_fifo); /* never blocks */
  BI_CASE(FN, LSHK_STATUS_BAD_FILE_FORMAT, a.path = path_truncated);
  /* a file that stores its weights takes no W */
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.path = path_stored);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.w_stride = IWS + 1);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.w_stride = ID);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.w = BI_MISALIGN(const float, wb));
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.wnan[(IR - 1) * IWS + ID - 1] = NAN;
          a.w = a.wnan);
  BI_ACCEPT(FN, a.wnan[IWS - 1] = NAN; a.w = a.wnan); /* the stride gap */
#undef FN

#define FN lshk_index_memory_bytes
  BI_BASELINE(FN);
  BI_INDEX_CASES(FN, idx, const lshk_index);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.out = NULL);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.out = BI_MISALIGN(size_t, &a.v));
  BI_ACCEPT(FN, a.idx = FX->idx_ivf);
  BI_ACCEPT(FN, a.idx = FX->idx_graph);
  BI_ACCEPT(FN, a.idx = FX->idx_forest);
#undef FN

#define FN lshk_index_describe
  BI_BASELINE(FN);
  BI_INDEX_CASES(FN, idx, const lshk_index);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.out = NULL);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.idx = NULL; a.out = NULL);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.out = BI_MISALIGN(lshk_index_info, &a.v));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.v.struct_size = 0);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.v.struct_size = (uint32_t)sizeof a.v - 1);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.v.struct_size = 4);
  /* struct_size larger than known: accepted, the unknown tail untouched */
  BI_CASE(FN, LSHK_STATUS_OK, o_.n = 0;
          a.big.v.struct_size = (uint32_t)sizeof a.big; a.out = &a.big.v;
          bi_out(&o_, a.big.tail, sizeof a.big.tail));
  BI_ACCEPT(FN, a.idx = FX->idx_dw);
  BI_ACCEPT(FN, a.idx = FX->idx_ivf);
  BI_ACCEPT(FN, a.idx = FX->idx_graph);
  BI_ACCEPT(FN, a.idx = FX->idx_forest);
#undef FN
  {
    lshk_index_info v = describe(FX->idx);
    BI_EXPECT(lshk_index_describe,
              v.struct_size == sizeof v && v.source == LSHK_SOURCE_SIMHASH &&
                  v.storage == LSHK_STORAGE_F32 && v.rows == IR &&
                  v.dim == ID && v.bits_per_table == IK && v.tables == IL &&
                  v.nlist == 0 && v.labelled == 0);
    v = describe(FX->idx_ivf);
    BI_EXPECT(lshk_index_describe,
              v.source == LSHK_SOURCE_IVF && v.nlist == 4 &&
                  v.codes == LSHK_IVF_CODES_I8 && v.bits_per_table == 0);
    v = describe(FX->idx_graph);
    BI_EXPECT(lshk_index_describe,
              v.source == LSHK_SOURCE_GRAPH && v.tables == 0 && v.nlist == 0);
    v = describe(FX->idx_forest);
    BI_EXPECT(lshk_index_describe,
              v.source == LSHK_SOURCE_FOREST && v.tables == 3 && v.rows == IR);
  }

#define FN lshk_index_weights
  BI_BASELINE(FN);
  BI_INDEX_CASES(FN, idx, const lshk_index);
  BI_ACCEPT(FN, a.idx = FX->idx_dw);
  BI_ACCEPT(FN, a.idx = FX->idx_ivf);
  BI_ACCEPT(FN, a.idx = FX->idx_graph);
  BI_ACCEPT(FN, a.idx = FX->idx_forest);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.out = NULL);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.out = BI_MISALIGN(lshk_weights_view, &a.v));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.v.struct_size = 0);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.v.struct_size = (uint32_t)sizeof a.v - 1);
  /* struct_size larger than known: accepted, the unknown tail untouched */
  BI_CASE(FN, LSHK_STATUS_OK, o_.n = 0;
          a.big.v.struct_size = (uint32_t)sizeof a.big; a.out = &a.big.v;
          bi_out(&o_, a.big.tail, sizeof a.big.tail));
#undef FN

#define FN lshk_index_free
  BI_BASELINE(FN);
  BI_CASE(FN, LSHK_STATUS_INVALID_HANDLE, a.idx = FX->idx_freed);
  BI_CASE(FN, LSHK_STATUS_INVALID_HANDLE, a.idx = (lshk_index *)(void *)FX->tb);
  BI_CASE(FN, LSHK_STATUS_INVALID_HANDLE,
          a.idx = (lshk_index *)(void *)FX->sh_borrowed);
  BI_CASE(FN, LSHK_STATUS_INVALID_HANDLE,
          a.idx = (lshk_index *)(void *)FX->tb_borrowed);
  BI_CASE(FN, LSHK_STATUS_INVALID_HANDLE, a.idx = BI_GARBAGE(lshk_index));
  BI_CASE(FN, LSHK_STATUS_INVALID_HANDLE, a.idx = BI_MISALIGN(lshk_index, FX->idx));
  BI_CASE(FN, LSHK_STATUS_INVALID_HANDLE,
          a.idx = BI_MISALIGN(lshk_index, FX->idx_ivf));
#undef FN

#define ACCESSOR_CASES(FN, T)                                                  \
  do {                                                                         \
    BI_BASELINE(FN);                                                           \
    BI_INDEX_CASES(FN, idx, const lshk_index);                                 \
    BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.out = NULL);                       \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,                                  \
            a.out = BI_MISALIGN(const T *, &a.v));                             \
    /* the other sources have no hash family (of this kind) or tables */      \
    BI_CASE(FN, LSHK_STATUS_UNSUPPORTED, a.idx = FX->idx_ivf);                 \
    BI_CASE(FN, LSHK_STATUS_UNSUPPORTED, a.idx = FX->idx_graph);               \
    BI_CASE(FN, LSHK_STATUS_UNSUPPORTED, a.idx = FX->idx_forest);              \
  } while (0)
  ACCESSOR_CASES(lshk_index_simhash, lshk_simhash);
  BI_CASE(lshk_index_simhash, LSHK_STATUS_UNSUPPORTED, a.idx = FX->idx_dw);
  ACCESSOR_CASES(lshk_index_dwta, lshk_dwta);
  BI_CASE(lshk_index_dwta, LSHK_STATUS_UNSUPPORTED, a.idx = FX->idx);
  ACCESSOR_CASES(lshk_index_tables, lshk_tables);
  BI_ACCEPT(lshk_index_tables, a.idx = FX->idx_dw);

#define FN lshk_index_train_iul
  BI_ACCEPT(FN, a.idx = FX->idx_pool[0]);
  BI_ACCEPT(FN, a.idx = FX->idx_pool[1]; a.p = &a.big.p; a.reports = NULL;
            a.reports_len = 0);
  BI_ACCEPT(FN, a.idx = FX->idx_pool[1]; a.pv.rounds = 0; a.reports = NULL;
            a.reports_len = 0);
  BI_ACCEPT(FN, a.idx = FX->idx_pool[1];
            a.pv.flags = LSHK_IUL_RANK_THRESHOLDS | LSHK_IUL_KEEP_BEST;
            a.pv.t1 = 4.0f; a.pv.t2 = 10.0f);
  BI_ACCEPT(FN, a.idx = FX->idx_pool[1];
            a.pv.flags = LSHK_IUL_TO_CONVERGENCE | LSHK_IUL_COLLISION_LOSS);
  BI_INDEX_CASES(FN, idx, lshk_index);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.idx = FX->idx_dw);
  BI_CASE(FN, LSHK_STATUS_UNSUPPORTED, a.idx = FX->idx_ivf);
  BI_CASE(FN, LSHK_STATUS_UNSUPPORTED, a.idx = FX->idx_graph);
  BI_CASE(FN, LSHK_STATUS_UNSUPPORTED, a.idx = FX->idx_forest);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.queries = NULL);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.label_offsets = NULL);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.labels = NULL);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.reports = NULL);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.n = 0);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.q_stride = ID - 1);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.lv[TQ * 2 - 1] = IR);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.lv[0] = UINT32_MAX);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.lo[0] = 1);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.lo[2] = 7); /* > lo[3] */
  BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.lo[TQ] = SIZE_MAX);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.struct_size = 0);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.pv.struct_size = (uint32_t)sizeof(lshk_iul_params) - 1);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.flags = 16 | LSHK_IUL_KEEP_BEST);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.flags = LSHK_IUL_RANK_THRESHOLDS;
          a.pv.t2 = -3.0f);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.batch = 0);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.learning_rate = 0.0f);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.validation_fraction = 1.0f);
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.pv.t1 = INFINITY);
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.pv.t2 = NAN);
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.qv[(TQ - 1) * QS + ID - 1] = NAN);
  BI_CASE(FN, LSHK_STATUS_BUFFER_TOO_SMALL, a.reports_len = 1);
  BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.n = SIZE_MAX);
  BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.q_stride = SIZE_MAX / 2);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.queries = BI_MISALIGN(const float, a.qv));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.p = BI_MISALIGN(const lshk_iul_params, &a.pv));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.reports = BI_MISALIGN(lshk_iul_report, a.rep));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.reports = (lshk_iul_report *)(void *)a.qv);
#undef FN

#define FN lshk_index_train_labels
  BI_ACCEPT(FN, a.idx = FX->idx_pool[2]);
  BI_ACCEPT(FN, a.idx = FX->idx_pool[3]; a.p = &a.big.p);
  BI_ACCEPT(FN, a.idx = FX->idx_pool[4]; a.lo[0] = 1); /* CSR may start > 0 */
  BI_ACCEPT(FN, a.idx = FX->idx_pool[5]; a.p = NULL;
            a.lv[TQ * 2 - 1] = IR - 1);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.idx = FX->idx_pool[2]);
  BI_INDEX_CASES(FN, idx, lshk_index);
  /* label training is for the LSH and IVF sources */
  BI_CASE(FN, LSHK_STATUS_UNSUPPORTED, a.idx = FX->idx_graph);
  BI_CASE(FN, LSHK_STATUS_UNSUPPORTED, a.idx = FX->idx_forest);
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
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.policy = UINT32_MAX);
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.qv[(TQ - 1) * QS + ID - 1] = NAN);
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.qv[0] = INFINITY);
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
  BI_ACCEPT(FN, a.idx = FX->idx; a.params = NULL);
  BI_ACCEPT(FN, a.idx = FX->idx_graph);
  BI_ACCEPT(FN, a.idx = FX->idx_forest);
  BI_CASE(FN, LSHK_STATUS_OK, o_.n = 0;
          a.big.p.struct_size = (uint32_t)sizeof a.big; a.params = &a.big.p;
          bi_out(&o_, a.big.tail, sizeof a.big.tail)); /* tail untouched */
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.struct_size = 0;
          a.idx = FX->idx); /* checked even when not trained */
  BI_INDEX_CASES(FN, idx, const lshk_index);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.trained = NULL);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.struct_size = 0);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.pv.struct_size = (uint32_t)sizeof(lshk_label_params) - 1);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.trained = BI_MISALIGN(uint32_t, &a.tv));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.params = BI_MISALIGN(lshk_label_params, &a.pv));
#undef FN

  /* Refused training left FX->idx as built. */
  BI_EXPECT(lshk_index_train_iul, fp != 0 && query_fingerprint(FX->idx) == fp);

  remove(path_stored);
  remove(path_borrowed);
  bi_files_close();
  bi_fx_teardown();
  return bi_summary("bad_input_index");
}
