/* Bad-input matrix (issue 8), the forest source of the index (the hashing
 * forest, issue 14, item 4): lshk_index_build with p.source =
 * LSHK_SOURCE_FOREST (its knobs p.forest; F32 or BORROWED_F32 storage),
 * its candidate sets (lshk_index_candidates with qp.forest), their union
 * (lshk_index_union, any source), lshk_index_rebuild (UNSUPPORTED on the
 * other sources), queries, save/load and the accessors on a forest index.
 * See bad_input.h for what a case asserts. File cases check that a
 * refused save leaves no file behind (0.2 forest files:
 * bad_input_index_load02.c).
 *
 * Functions covered here:
 *   lshk_index_build lshk_index_candidates lshk_index_union
 *   lshk_index_rebuild lshk_index_query lshk_index_save lshk_index_load
 *   lshk_index_describe lshk_index_free */
#define _POSIX_C_SOURCE 200809L
#include "bad_input_files.h"

#define FX bi_fx()
#define FR BI_FX_ROWS
#define FD BI_FX_DIM
#define FWS 10 /* a w_stride > dim */
#define FXN 3  /* samples of a candidates call */
#define FQ 5   /* their set size */

static lshk_index *live;    /* borrows wlive, 3 trees, leaf size 6 */
static lshk_index *own;     /* W copied (F32), bias */
static lshk_index *pool[4]; /* rebuilt by the accepted cases; borrow wpool */
static float wlive[FR * FWS];
static float wpool[4][FR * FD];
static char path_ok[300], path_own[300];

static lshk_index *make(const float *w, size_t stride, const float *bias,
                        uint32_t storage, uint64_t seed) {
  lshk_index_params p = lshk_index_params_default();
  lshk_index *f = NULL;
  p.source = LSHK_SOURCE_FOREST;
  p.storage = storage;
  p.forest.trees = 3;
  p.forest.leaf_size = 6;
  p.forest.seed = seed;
  p.build_threads = 1;
  bi_fx_need(lshk_index_build(w, bias, FR, FD, stride, &p, &f),
             "lshk_index_build");
  return f;
}

/* ---- lshk_index_build (forest source, on a borrowed W by default) ------- */
typedef struct {
  float wv[FR * FWS];
  float bv[FR];
  float rwv[FR];
  float planes[4 * 3 * FD];
  lshk_index_params pv;
  struct {
    lshk_index_params p;
    unsigned char tail[24];
  } big;
  lshk_index *outv;
  const float *w;
  const float *bias;
  size_t rows, dim, w_stride;
  const lshk_index_params *p;
  lshk_index **out;
} bi_args_lshk_index_build;
static void bi_init_lshk_index_build(bi_args_lshk_index_build *a, bi_outs *o) {
  for (int i = 0; i < FR * FWS; i++)
    a->wv[i] = (float)((i * 13) % 17) / 8.0f - 1.0f;
  for (int i = 0; i < FR; i++) {
    a->bv[i] = 0.25f * (float)(i % 3);
    a->rwv[i] = 1.0f;
  }
  for (int i = 0; i < 4 * 3 * FD; i++) a->planes[i] = 1.0f;
  a->pv = lshk_index_params_default();
  a->pv.source = LSHK_SOURCE_FOREST;
  a->pv.storage = LSHK_STORAGE_BORROWED_F32;
  a->pv.forest.trees = 2;
  a->pv.forest.leaf_size = 8;
  a->pv.build_threads = 1;
  a->big.p = a->pv;
  a->big.p.struct_size = (uint32_t)sizeof a->big;
  memset(a->big.tail, 0x31, sizeof a->big.tail);
  a->w = a->wv;
  a->bias = NULL;
  a->rows = FR;
  a->dim = FD;
  a->w_stride = FWS;
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

/* ---- lshk_index_free ----------------------------------------------------- */
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

/* ---- lshk_index_describe ------------------------------------------------- */
typedef struct {
  const lshk_index *idx;
  lshk_index_info v;
  lshk_index_info *out;
} bi_args_lshk_index_describe;
static void bi_init_lshk_index_describe(bi_args_lshk_index_describe *a,
                                        bi_outs *o) {
  a->idx = live;
  a->v.struct_size = (uint32_t)sizeof a->v;
  a->out = &a->v;
  bi_out(o, &a->v.source, sizeof a->v - offsetof(lshk_index_info, source));
}
static lshk_status bi_call_lshk_index_describe(bi_args_lshk_index_describe *a) {
  return lshk_index_describe(a->idx, a->out);
}

/* ---- lshk_index_candidates (the forest's sets S(x)) ---------------------- */
typedef struct {
  const lshk_index *idx;
  float xv[FXN * FWS];
  lshk_query_params qpv;
  uint32_t ib[FXN * FQ + 4];
  size_t ob[FXN + 2];
  size_t nb;
  const float *x;
  size_t nx, x_stride;
  uint32_t k;
  const lshk_query_params *qp;
  uint32_t *ids;
  size_t ids_len;
  size_t *offsets;
  size_t *needed;
} bi_args_lshk_index_candidates;
static void bi_init_lshk_index_candidates(bi_args_lshk_index_candidates *a,
                                          bi_outs *o) {
  for (int i = 0; i < FXN * FWS; i++) a->xv[i] = (float)((i * 7) % 9) - 4.0f;
  a->qpv = lshk_query_params_default();
  a->qpv.forest.set_size = FQ;
  a->idx = live;
  a->x = a->xv;
  a->nx = FXN;
  a->x_stride = FWS;
  a->k = 0;
  a->qp = &a->qpv;
  a->ids = a->ib;
  a->ids_len = FXN * FQ;
  a->offsets = a->ob;
  a->needed = &a->nb;
  bi_out(o, a->ib, sizeof a->ib);
  bi_out(o, a->ob, sizeof a->ob);
  bi_out(o, &a->nb, sizeof a->nb);
}
static lshk_status bi_call_lshk_index_candidates(
    bi_args_lshk_index_candidates *a) {
  return lshk_index_candidates(a->idx, a->x, a->nx, a->x_stride, a->k, a->qp,
                               a->ids, a->ids_len, a->offsets, a->needed);
}

/* ---- lshk_index_query (the forest's sets, scored) ------------------------ */
#define QK 4
typedef struct {
  const lshk_index *idx;
  float qv[FXN * FWS];
  lshk_query_params qpv;
  uint32_t ib[FXN * QK + 2];
  float sb[FXN * QK + 2];
  const float *q;
  size_t nq, q_stride;
  uint32_t k;
  const lshk_query_params *qp;
  uint32_t *out_ids;
  float *out_scores;
} bi_args_lshk_index_query;
static void bi_init_lshk_index_query(bi_args_lshk_index_query *a, bi_outs *o) {
  for (int i = 0; i < FXN * FWS; i++) a->qv[i] = (float)((i * 5) % 7) - 3.0f;
  a->qpv = lshk_query_params_default();
  a->qpv.forest.set_size = FQ;
  a->idx = live;
  a->q = a->qv;
  a->nq = FXN;
  a->q_stride = FWS;
  a->k = QK;
  a->qp = &a->qpv;
  a->out_ids = a->ib;
  a->out_scores = a->sb;
  bi_out(o, a->ib, sizeof a->ib);
  bi_out(o, a->sb, sizeof a->sb);
}
static lshk_status bi_call_lshk_index_query(bi_args_lshk_index_query *a) {
  return lshk_index_query(a->idx, a->q, a->nq, a->q_stride, a->k, a->qp,
                          a->out_ids, a->out_scores, NULL);
}

/* ---- lshk_index_union ---------------------------------------------------- */
typedef struct {
  const lshk_index *idx;
  uint32_t iv[8];
  uint32_t ub[8 + 2], cb[8 + 2];
  size_t nb;
  const uint32_t *ids;
  size_t count, cap;
  uint64_t seed;
  uint32_t *out_ids, *out_counts;
  size_t out_len;
  size_t *needed;
} bi_args_lshk_index_union;
static void bi_init_lshk_index_union(bi_args_lshk_index_union *a, bi_outs *o) {
  for (int i = 0; i < 8; i++) a->iv[i] = (uint32_t)((i * 5) % 7);
  a->idx = live;
  a->ids = a->iv;
  a->count = 8;
  a->cap = 4;
  a->seed = 3;
  a->out_ids = a->ub;
  a->out_counts = a->cb;
  a->out_len = 8;
  a->needed = &a->nb;
  bi_out(o, a->ub, sizeof a->ub);
  bi_out(o, a->cb, sizeof a->cb);
  bi_out(o, &a->nb, sizeof a->nb);
}
static lshk_status bi_call_lshk_index_union(bi_args_lshk_index_union *a) {
  return lshk_index_union(a->idx, a->ids, a->count, a->cap, a->seed,
                          a->out_ids, a->out_counts, a->out_len, a->needed);
}

/* ---- lshk_index_rebuild -------------------------------------------------- */
typedef struct {
  lshk_index *idx;
  uint64_t sv[2];
  const uint64_t *new_seed;
} bi_args_lshk_index_rebuild;
static void bi_init_lshk_index_rebuild(bi_args_lshk_index_rebuild *a,
                                       bi_outs *o) {
  (void)o;
  a->idx = pool[0];
  a->sv[0] = 11;
  a->new_seed = a->sv;
}
static lshk_status bi_call_lshk_index_rebuild(bi_args_lshk_index_rebuild *a) {
  return lshk_index_rebuild(a->idx, a->new_seed);
}

/* ---- lshk_index_save / lshk_index_load ----------------------------------- */
typedef struct {
  const lshk_index *idx;
  const char *path;
} bi_args_lshk_index_save;
static void bi_init_lshk_index_save(bi_args_lshk_index_save *a, bi_outs *o) {
  (void)o;
  a->idx = live;
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
  float wnan[FR * FWS];
  lshk_index *outv;
  lshk_index **out;
} bi_args_lshk_index_load;
static void bi_init_lshk_index_load(bi_args_lshk_index_load *a, bi_outs *o) {
  memcpy(a->wnan, wlive, sizeof wlive);
  a->path = path_ok;
  a->w = wlive;
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

#define BI_FOREST_CASES(FN, FIELD, T)                                          \
  BI_HANDLE_CASES(FN, FIELD, T, FX->idx_freed, (T *)NULL, live, FX->tb, FX->sh)

int main(void) {
  lshk_simhash *hold;
  bi_fx_setup();
  for (int r = 0; r < FR; r++)
    for (int j = 0; j < FWS; j++)
      wlive[r * FWS + j] = j < FD ? FX->w[r * FD + j] : 7.0f;
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < FR * FD; j++)
      wpool[i][j] = FX->w[j] * (0.5f + 0.25f * (float)i) + 0.1f;
  hold = bi_fx_hold();
  live = make(wlive, FWS, NULL, LSHK_STORAGE_BORROWED_F32, 1);
  own = make(FX->w, FD, FX->bias, LSHK_STORAGE_F32, 2);
  for (int i = 0; i < 4; i++)
    pool[i] = make(wpool[i], FD, NULL, LSHK_STORAGE_BORROWED_F32,
                   3 + (uint64_t)i);
  bi_fx_unhold(hold);
  {
    static const char garbage[] = "not a forest";
    bi_files_open("index-forest", "lshk");
    snprintf(path_ok, sizeof path_ok, "%s/ok.lshk", dir);
    snprintf(path_own, sizeof path_own, "%s/own.lshk", dir);
    bi_fx_need(lshk_index_save(live, path_ok), "lshk_index_save");
    bi_fx_need(lshk_index_save(own, path_own), "lshk_index_save");
    bi_files_fill(garbage, sizeof garbage, path_own);
  }
  {
    lshk_forest_params d = lshk_index_params_default().forest;
    BI_EXPECT(lshk_index_params_default,
              d.trees == 8 && d.leaf_size == 64 && d.seed == 1 &&
                  d.normalize_rows == 1 && d.reserved == 0);
  }

#define FN lshk_index_build
  BI_BASELINE(FN);
  BI_ACCEPT(FN, a.pv.forest = lshk_index_params_default().forest);
  BI_ACCEPT(FN, a.p = &a.big.p);
  BI_ACCEPT(FN, a.rows = 2; a.pv.forest.leaf_size = 2);
  BI_ACCEPT(FN, a.pv.forest.normalize_rows = 0); /* raw rows */
  BI_ACCEPT(FN, a.rows = 2; a.pv.forest.leaf_size = 2;
            a.pv.forest.normalize_rows = 0);
  BI_ACCEPT(FN, a.pv.storage = LSHK_STORAGE_F32);
  BI_ACCEPT(FN, a.bias = a.bv); /* ignored by the sets, scored by the index */
  BI_ACCEPT(FN, a.pv.forest.trees = 4096; a.rows = 2;
            a.pv.forest.leaf_size = 2);
  BI_ACCEPT(FN, a.wv[FWS - 1] = NAN); /* the stride gap is not W */
  /* the forest reads only its own knobs */
  BI_ACCEPT(FN, a.pv.lsh.bits_per_table = 0; a.pv.ivf.iters = 0;
            a.pv.graph.m = 0);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.out = NULL);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.w = NULL);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.out = BI_MISALIGN(lshk_index *, &a.outv));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.w = BI_MISALIGN(const float, a.wv));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.p = BI_MISALIGN(const lshk_index_params, &a.pv));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.rows = 1);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.rows = 0);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.dim = 0);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.w_stride = FD - 1);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.forest.trees = 0);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.forest.trees = 4097);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.forest.leaf_size = 1);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.forest.leaf_size = 0);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.forest.normalize_rows = 2);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.pv.forest.normalize_rows = UINT32_MAX);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.forest.reserved = 1);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.forest.normalize_rows = 1;
          a.pv.forest.reserved = UINT32_MAX);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.big.p.forest.reserved = 3;
          a.p = &a.big.p);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.ivf.reserved = 1);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.graph.reserved = 1);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.struct_size = 0);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.pv.struct_size = (uint32_t)sizeof(lshk_index_params) - 1);
  /* the forest ranks by cosine with f32 rows: F32 or BORROWED_F32 only */
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.storage = LSHK_STORAGE_BF16);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.storage = LSHK_STORAGE_F16);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.storage = LSHK_STORAGE_I8);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.storage = 5);
  /* the forest splits the rows themselves: no transform, planes or weights */
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.pv.transform = LSHK_TRANSFORM_BIAS_AUG);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.transform = LSHK_TRANSFORM_MIPS);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.lsh.planes = a.planes;
          a.pv.lsh.planes_len = 4 * 3 * FD);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.ivf.row_weights = a.rwv;
          a.pv.ivf.n_weights = FR);
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.wv[(FR - 1) * FWS + FD - 1] = NAN);
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.wv[0] = INFINITY);
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.wv[1] = 3e38f);
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.bias = a.bv; a.bv[FR - 1] = NAN);
  BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.rows = SIZE_MAX);
  BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.w_stride = SIZE_MAX / 2);
#undef FN

#define FN lshk_index_free
  BI_BASELINE(FN); /* NULL */
  BI_CASE(FN, LSHK_STATUS_INVALID_HANDLE, a.idx = FX->idx_freed);
  BI_CASE(FN, LSHK_STATUS_INVALID_HANDLE, a.idx = (lshk_index *)(void *)FX->tb);
  BI_CASE(FN, LSHK_STATUS_INVALID_HANDLE, a.idx = BI_GARBAGE(lshk_index));
  BI_CASE(FN, LSHK_STATUS_INVALID_HANDLE, a.idx = BI_MISALIGN(lshk_index, live));
#undef FN

#define FN lshk_index_describe
  BI_BASELINE(FN);
  BI_FOREST_CASES(FN, idx, const lshk_index);
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
              lshk_index_describe(live, &v) == LSHK_STATUS_OK &&
                  v.source == LSHK_SOURCE_FOREST && v.tables == 3 &&
                  v.storage == LSHK_STORAGE_BORROWED_F32 && v.rows == FR &&
                  v.dim == FD);
  }

#define FN lshk_index_candidates
  BI_BASELINE(FN);
  BI_ACCEPT(FN, a.nx = 0);
  BI_ACCEPT(FN, a.qpv.forest.set_size = 1);
  BI_ACCEPT(FN, a.qpv.forest.set_size = 0); /* at least one class (or k) */
  BI_ACCEPT(FN, a.k = 2);                   /* at least k classes */
  BI_ACCEPT(FN, a.ids_len = SIZE_MAX / 8);
  BI_ACCEPT(FN, a.idx = own);
  BI_ACCEPT(FN, a.x_stride = FD);
  BI_ACCEPT(FN, a.xv[FWS - 1] = NAN); /* the stride gap is not x */
  /* the forest reads only its own knobs */
  BI_ACCEPT(FN, a.qpv.lsh.probes = UINT32_MAX; a.qpv.ivf.nprobe = 0;
            a.qpv.graph.ef = 0);
  /* the other sources' sets */
  BI_ACCEPT(FN, a.idx = FX->idx; a.qpv.lsh.max_candidates = FQ);
  BI_ACCEPT(FN, a.idx = FX->idx_ivf; a.k = 2);
  BI_ACCEPT(FN, a.idx = FX->idx_graph; a.k = 2; a.qpv.graph.ef = 2);
  BI_FOREST_CASES(FN, idx, const lshk_index);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.x = NULL);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.ids = NULL);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.offsets = NULL);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.needed = NULL);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.qpv.forest.confidence = 1.5f);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.qpv.forest.confidence = -0.25f);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.qpv.forest.confidence = NAN);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.qpv.forest.confidence = INFINITY);
  BI_ACCEPT(FN, a.qpv.forest.confidence = 1.0f);
  BI_ACCEPT(FN, a.qpv.forest.confidence = 0.5f);
  BI_ACCEPT(FN, a.qpv.threads = 3);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.qpv.struct_size = 0);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.qp = BI_MISALIGN(const lshk_query_params, &a.qpv));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.x_stride = FD - 1);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.x = BI_MISALIGN(const float, a.xv));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.ids = BI_MISALIGN(uint32_t, a.ib));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.offsets = BI_MISALIGN(size_t, a.ob));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.needed = BI_MISALIGN(size_t, &a.nb));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, o_.n = 0;
          a.ids = (uint32_t *)(void *)a.xv; bi_out(&o_, a.xv, sizeof a.xv));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.needed = a.ob + 1);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.idx = FX->idx;
          a.qpv.lsh.probes = UINT32_MAX); /* an LSH index reads its knobs */
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.xv[(FXN - 1) * FWS + FD - 1] = NAN);
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.xv[0] = 3e38f);
  BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.nx = SIZE_MAX);
  BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.x_stride = SIZE_MAX / 2);
  BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.ids_len = SIZE_MAX);
  BI_CASE(FN, LSHK_STATUS_BUFFER_TOO_SMALL, a.ids_len = FXN * FQ - 1; o_.n = 2);
  BI_CASE(FN, LSHK_STATUS_BUFFER_TOO_SMALL, a.ids_len = 0; a.ids = NULL;
          o_.n = 2);
#undef FN

#define FN lshk_index_query
  BI_BASELINE(FN);
  BI_ACCEPT(FN, a.qpv.forest.set_size = 0); /* at least k classes */
  BI_ACCEPT(FN, a.qp = NULL);
  BI_ACCEPT(FN, a.idx = own);
  BI_FOREST_CASES(FN, idx, const lshk_index);
  BI_ACCEPT(FN, a.qpv.forest.confidence = 0.9f);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.qpv.forest.confidence = 1.0001f);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.qpv.forest.confidence = -NAN;
          a.nq = 0; a.q = NULL);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.q_stride = FD - 1);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.out_scores = a.qv);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.out_ids = NULL);
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.qv[FWS + 2] = -INFINITY);
#undef FN

#define FN lshk_index_union
  BI_BASELINE(FN);
  BI_ACCEPT(FN, a.cap = 0);
  BI_ACCEPT(FN, a.out_counts = NULL);
  BI_ACCEPT(FN, a.count = 0; a.ids = NULL);
  BI_ACCEPT(FN, a.cap = SIZE_MAX);
  /* any source: the union needs only the rows */
  BI_ACCEPT(FN, a.idx = FX->idx);
  BI_ACCEPT(FN, a.idx = FX->idx_dw);
  BI_ACCEPT(FN, a.idx = FX->idx_ivf);
  BI_ACCEPT(FN, a.idx = FX->idx_graph);
  BI_FOREST_CASES(FN, idx, const lshk_index);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.ids = NULL);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.out_ids = NULL);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.needed = NULL);
  BI_CASE(FN, LSHK_STATUS_INDEX_OUT_OF_RANGE, a.iv[7] = FR);
  BI_CASE(FN, LSHK_STATUS_INDEX_OUT_OF_RANGE, a.iv[0] = UINT32_MAX);
  BI_CASE(FN, LSHK_STATUS_INDEX_OUT_OF_RANGE, a.idx = FX->idx_ivf;
          a.iv[3] = FR);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.ids = BI_MISALIGN(const uint32_t, a.iv));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.out_ids = BI_MISALIGN(uint32_t, a.ub));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.out_counts = BI_MISALIGN(uint32_t, a.cb));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.needed = BI_MISALIGN(size_t, &a.nb));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.out_ids = a.iv);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.out_counts = a.ub + 1);
  BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.count = SIZE_MAX);
  BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.out_len = SIZE_MAX);
  BI_CASE(FN, LSHK_STATUS_BUFFER_TOO_SMALL, a.out_len = 3; o_.n = 2);
  BI_CASE(FN, LSHK_STATUS_BUFFER_TOO_SMALL, a.out_len = 0; a.out_ids = NULL;
          a.out_counts = NULL; o_.n = 2);
#undef FN

#define FN lshk_index_rebuild
  BI_ACCEPT(FN, a.idx = pool[0]);
  BI_ACCEPT(FN, a.idx = pool[1]; a.new_seed = NULL);
  BI_ACCEPT(FN, a.idx = own);
  BI_FOREST_CASES(FN, idx, lshk_index);
  /* the other sources have no trees to rebuild */
  BI_CASE(FN, LSHK_STATUS_UNSUPPORTED, a.idx = FX->idx);
  BI_CASE(FN, LSHK_STATUS_UNSUPPORTED, a.idx = FX->idx_dw);
  BI_CASE(FN, LSHK_STATUS_UNSUPPORTED, a.idx = FX->idx_ivf);
  BI_CASE(FN, LSHK_STATUS_UNSUPPORTED, a.idx = FX->idx_graph);
  BI_CASE(FN, LSHK_STATUS_UNSUPPORTED, a.idx = FX->idx_ivf; a.new_seed = NULL);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.new_seed = BI_MISALIGN(const uint64_t, a.sv));
  /* the caller wrote values into its borrowed W that no query could use */
  wpool[2][FR * FD - 1] = NAN;
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.idx = pool[2]);
  wpool[2][FR * FD - 1] = INFINITY;
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.idx = pool[2]; a.new_seed = NULL);
  wpool[2][FR * FD - 1] = 3e38f;
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.idx = pool[2]);
  wpool[2][FR * FD - 1] = FX->w[FR * FD - 1];
  BI_ACCEPT(FN, a.idx = pool[2]);
#undef FN

#define FN lshk_index_save
  BI_BASELINE(FN);
  BI_ACCEPT(FN, a.idx = own);
  BI_FOREST_CASES(FN, idx, const lshk_index);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.path = NULL);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.path = "");
  BI_CASE(FN, LSHK_STATUS_IO_ERROR, a.path = "/nonexistent-dir-lshk/f.lshk");
  BI_CASE(FN, LSHK_STATUS_IO_ERROR, a.path = path_subdir);
  BI_CASE(FN, LSHK_STATUS_IO_ERROR, a.path = path_fifo);
#undef FN

#define FN lshk_index_load
  BI_BASELINE(FN);
  BI_ACCEPT(FN, a.w_stride = FWS);
  BI_ACCEPT(FN, a.path = path_own; a.w = NULL);
  BI_ACCEPT(FN, a.wnan[FWS - 1] = NAN; a.w = a.wnan); /* the stride gap */
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.path = NULL);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.out = NULL);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.path = "");
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.out = BI_MISALIGN(lshk_index *, &a.outv));
  BI_CASE(FN, LSHK_STATUS_IO_ERROR, a.path = "/nonexistent-dir-lshk/f.lshk");
  BI_CASE(FN, LSHK_STATUS_IO_ERROR, a.path = path_missing);
  BI_CASE(FN, LSHK_STATUS_IO_ERROR, a.path = path_fifo);
  BI_CASE(FN, LSHK_STATUS_BAD_FILE_FORMAT, a.path = path_garbage);
  BI_CASE(FN, LSHK_STATUS_BAD_FILE_FORMAT, a.path = path_empty);
  BI_CASE(FN, LSHK_STATUS_BAD_FILE_FORMAT, a.path = path_truncated);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.w = NULL);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.w = BI_MISALIGN(const float, wlive));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.w_stride = FD);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.path = path_own);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.path = path_own; a.w = NULL;
          a.w_stride = FWS);
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.wnan[(FR - 1) * FWS + FD - 1] = NAN;
          a.w = a.wnan);
#undef FN

  remove(path_ok);
  remove(path_own);
  bi_files_close();
  bi_fx_need(lshk_index_free(live), "lshk_index_free");
  bi_fx_need(lshk_index_free(own), "lshk_index_free");
  for (int i = 0; i < 4; i++)
    bi_fx_need(lshk_index_free(pool[i]), "lshk_index_free");
  bi_fx_teardown();
  return bi_summary("bad_input_index_forest");
}
