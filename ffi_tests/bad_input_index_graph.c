/* Bad-input matrix (issue 8), the graph source of the index (the FGD
 * graph, issue 16): lshk_index_build with p.source = LSHK_SOURCE_GRAPH
 * (its knobs p.graph), lshk_index_query with its knobs qp.graph (walk,
 * ef, rerank), candidates, save/load of graph indexes and the accessors on
 * a graph index; the LSH-only calls on it (UNSUPPORTED, nothing written).
 * See bad_input.h for what a case asserts. File cases check that a
 * refused save leaves no file (and no temporary file) behind; the load
 * cases cover missing, empty, garbage and truncated files (0.2 graph
 * files: bad_input_index_load02.c).
 *
 * Functions covered here:
 *   lshk_index_build lshk_index_query lshk_index_candidates
 *   lshk_index_save lshk_index_load lshk_index_describe
 *   lshk_index_memory_bytes lshk_index_free lshk_index_tables
 *   lshk_index_simhash lshk_index_train_iul */
#define _POSIX_C_SOURCE 200809L
#include "bad_input_files.h"

#define FX bi_fx()
#define GR BI_FX_ROWS
#define GD BI_FX_DIM
#define GWS 9 /* a w_stride > dim */

static lshk_index *g_live;     /* graph rows f32, bias, W copied (F32) */
static lshk_index *g_i8;       /* graph rows int8, no bias, W as BF16 */
static lshk_index *g_borrowed; /* borrows wb (stride GWS), bias */

static char path_graph[300], path_borrowed[300];
static float wb[GR * GWS]; /* the borrowed W of g_borrowed / path_borrowed */

static lshk_index *fx_graph(const float *w, size_t stride, const float *bias,
                            uint32_t graph_storage, uint32_t storage) {
  lshk_index_params p = lshk_index_params_default();
  lshk_index *h = NULL;
  p.source = LSHK_SOURCE_GRAPH;
  p.storage = storage;
  p.graph.m = 4;
  p.graph.ef_construction = 16;
  p.graph.storage = graph_storage;
  p.build_threads = 1;
  bi_fx_need(lshk_index_build(w, bias, GR, GD, stride, &p, &h),
             "lshk_index_build");
  return h;
}

/* ---- lshk_index_build (graph source) ------------------------------------ */
typedef struct {
  float wv[GR * GWS];
  float bv[GR];
  float planes[4 * 3 * GD];
  uint32_t map[2 * 3 * 4];
  float rwv[GR];
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
  for (int i = 0; i < GR * GWS; i++) a->wv[i] = (float)((i * 13) % 17) - 8.0f;
  for (int i = 0; i < GR; i++) {
    a->bv[i] = 0.5f * (float)(i % 3);
    a->rwv[i] = 1.0f;
  }
  for (int i = 0; i < 4 * 3 * GD; i++) a->planes[i] = 1.0f;
  for (int i = 0; i < 2 * 3 * 4; i++) a->map[i] = (uint32_t)(i % GD);
  a->pv = lshk_index_params_default();
  a->pv.source = LSHK_SOURCE_GRAPH;
  a->pv.graph.m = 4;
  a->pv.graph.ef_construction = 16;
  a->pv.build_threads = 1;
  a->big.p = a->pv;
  a->big.p.struct_size = (uint32_t)sizeof a->big;
  memset(a->big.tail, 0xEE, sizeof a->big.tail);
  a->w = a->wv;
  a->bias = a->bv;
  a->rows = GR;
  a->dim = GD;
  a->w_stride = GWS;
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

/* ---- lshk_index_query (the graph knobs) --------------------------------- */
#define QN 3
#define QK 4
#define QS 10
typedef struct {
  const lshk_index *idx;
  float qv[QN * QS];
  lshk_query_params qpv;
  struct {
    lshk_query_params p;
    unsigned char tail[24];
  } big; /* a caller with a newer, larger lshk_query_params */
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
  a->qpv.graph.ef = 8;
  a->big.p = a->qpv;
  memset(a->big.tail, 0xA5, sizeof a->big.tail);
  a->big.p.struct_size = (uint32_t)sizeof a->big;
  a->st.struct_size = (uint32_t)sizeof a->st;
  a->idx = g_live;
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

/* ---- lshk_index_candidates (the pool's best, by the walk's score) ------- */
typedef struct {
  bi_args_lshk_index_query b;
  uint32_t cb[QN * 8 + 2];
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
  a->ids_len = QN * 8;
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
  a->idx = g_live;
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
  float wnan[GR * GWS];
  lshk_index *outv;
  lshk_index **out;
} bi_args_lshk_index_load;
static void bi_init_lshk_index_load(bi_args_lshk_index_load *a, bi_outs *o) {
  memcpy(a->wnan, wb, sizeof wb);
  a->path = path_graph;
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
  a->idx = g_live;
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
  a->idx = g_live;
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

/* ---- LSH-only calls on the graph index ---------------------------------- */
typedef struct {
  const lshk_index *idx;
  const lshk_tables *v;
  const lshk_tables **out;
} bi_args_lshk_index_tables;
static void bi_init_lshk_index_tables(bi_args_lshk_index_tables *a, bi_outs *o) {
  a->idx = g_live;
  a->out = &a->v;
  bi_out(o, (void *)&a->v, sizeof a->v);
}
static lshk_status bi_call_lshk_index_tables(bi_args_lshk_index_tables *a) {
  return lshk_index_tables(a->idx, a->out);
}

typedef struct {
  const lshk_index *idx;
  const lshk_simhash *v;
  const lshk_simhash **out;
} bi_args_lshk_index_simhash;
static void bi_init_lshk_index_simhash(bi_args_lshk_index_simhash *a,
                                       bi_outs *o) {
  a->idx = g_live;
  a->out = &a->v;
  bi_out(o, (void *)&a->v, sizeof a->v);
}
static lshk_status bi_call_lshk_index_simhash(bi_args_lshk_index_simhash *a) {
  return lshk_index_simhash(a->idx, a->out);
}

typedef struct {
  lshk_index *idx;
  float qv[2 * GD];
  size_t lo[3];
  uint32_t lv[2];
  lshk_iul_report rv[2];
} bi_args_lshk_index_train_iul;
static void bi_init_lshk_index_train_iul(bi_args_lshk_index_train_iul *a,
                                         bi_outs *o) {
  for (int i = 0; i < 2 * GD; i++) a->qv[i] = (float)(i % 5) - 2.0f;
  a->lo[0] = 0;
  a->lo[1] = 1;
  a->lo[2] = 2;
  a->lv[0] = 1;
  a->lv[1] = 2;
  a->idx = g_live;
  bi_out(o, a->rv, sizeof a->rv);
}
static lshk_status bi_call_lshk_index_train_iul(bi_args_lshk_index_train_iul *a) {
  return lshk_index_train_iul(a->idx, a->qv, 2, GD, a->lo, a->lv, NULL, a->rv, 2);
}

#define BI_GRAPH_CASES(FN, FIELD, T)                                           \
  BI_HANDLE_CASES(FN, FIELD, T, bi_fx()->idx_freed, (T *)NULL, g_live,        \
                  bi_fx()->tb, bi_fx()->sh)

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
  for (int i = 0; i < GR * GWS; i++) wb[i] = (float)((i * 29) % 31) - 15.0f;
  hold = bi_fx_hold();
  g_live = fx_graph(FX->w, GD, FX->bias, LSHK_STORAGE_F32, LSHK_STORAGE_F32);
  g_i8 = fx_graph(FX->w, GD, NULL, LSHK_STORAGE_I8, LSHK_STORAGE_BF16);
  g_borrowed = fx_graph(wb, GWS, FX->bias, LSHK_STORAGE_F32,
                        LSHK_STORAGE_BORROWED_F32);
  bi_fx_unhold(hold);
  fp = query_fingerprint(g_live);
  /* ---- files ---- */
  {
    static const char garbage[] = "this is not an lshk graph file, at all";
    bi_files_open("index-graph", "lshk");
    snprintf(path_graph, sizeof path_graph, "%s/g.lshk", dir);
    snprintf(path_borrowed, sizeof path_borrowed, "%s/borrowed.lshk", dir);
    bi_fx_need(lshk_index_save(g_live, path_graph), "lshk_index_save");
    bi_fx_need(lshk_index_save(g_borrowed, path_borrowed), "lshk_index_save");
    bi_files_fill(garbage, sizeof garbage, path_graph);
  }
  {
    lshk_index_params d = lshk_index_params_default();
    BI_EXPECT(lshk_index_params_default,
              d.graph.m == 16 && d.graph.ef_construction == 200 &&
                  d.graph.storage == LSHK_STORAGE_F32 && d.graph.reserved == 0);
  }

#define FN lshk_index_build
  BI_BASELINE(FN);
  BI_ACCEPT(FN, a.p = &a.big.p); /* larger struct_size, non-zero tail */
  BI_ACCEPT(FN, a.pv.graph = lshk_index_params_default().graph;
            a.bias = NULL); /* the graph's defaults */
  BI_ACCEPT(FN, a.pv.graph.storage = LSHK_STORAGE_BF16);
  BI_ACCEPT(FN, a.pv.graph.storage = LSHK_STORAGE_I8);
  BI_ACCEPT(FN, a.pv.storage = LSHK_STORAGE_I8;
            a.pv.graph.storage = LSHK_STORAGE_BF16);
  BI_ACCEPT(FN, a.pv.storage = LSHK_STORAGE_BORROWED_F32);
  BI_ACCEPT(FN, a.pv.storage = LSHK_STORAGE_F16);
  BI_ACCEPT(FN, a.pv.graph.m = 2);
  BI_ACCEPT(FN, a.pv.graph.m = 256);
  BI_ACCEPT(FN, a.pv.graph.ef_construction = 1);
  BI_ACCEPT(FN, a.pv.build_threads = 64);
  BI_ACCEPT(FN, a.rows = 1);
  BI_ACCEPT(FN, a.wv[GWS - 1] = NAN); /* the stride gap is not W */
  BI_ACCEPT(FN, memset(a.wv, 0, sizeof a.wv); a.bias = NULL); /* all-zero rows */
  /* the graph reads only its own knobs; SimHash ignores the graph's */
  BI_ACCEPT(FN, a.pv.lsh.bits_per_table = 0; a.pv.lsh.tables = 0;
            a.pv.ivf.iters = 0; a.pv.forest.leaf_size = 0);
  BI_ACCEPT(FN, a.pv.source = LSHK_SOURCE_SIMHASH; a.pv.graph.m = 0;
            a.pv.graph.ef_construction = 0);
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
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.w_stride = GD - 1);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.w_stride = 0);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.struct_size = 0);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.pv.struct_size = (uint32_t)sizeof(lshk_index_params) - 1);
  /* the graph's own rows: F32, BF16 or I8 only */
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.pv.graph.storage = LSHK_STORAGE_F16);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.pv.graph.storage = LSHK_STORAGE_BORROWED_F32);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.graph.storage = 5);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.graph.storage = UINT32_MAX);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.storage = 5);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.graph.m = 0);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.graph.m = 1);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.graph.m = 257);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.graph.m = UINT32_MAX);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.graph.ef_construction = 0);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.graph.reserved = 1);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.big.p.graph.reserved = 7;
          a.p = &a.big.p);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.ivf.reserved = 1);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.forest.reserved = 1);
  /* the graph has its own transform; no planes, maps or row weights */
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.pv.transform = LSHK_TRANSFORM_BIAS_AUG);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.transform = LSHK_TRANSFORM_MIPS);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.lsh.planes = a.planes;
          a.pv.lsh.planes_len = 4 * 3 * GD);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.lsh.dwta_map = a.map;
          a.pv.lsh.dwta_map_len = 2 * 3 * 4);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.ivf.row_weights = a.rwv;
          a.pv.ivf.n_weights = GR);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.storage = LSHK_STORAGE_F16;
          a.wv[3] = 70000.0f);
  /* |[w; b]|^2 overflows f32 */
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.wv[0] = 3e38f; a.wv[1] = 3e38f);
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.wv[(GR - 1) * GWS + GD - 1] = NAN);
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.wv[0] = INFINITY);
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.bv[GR - 1] = NAN);
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.bv[3] = -INFINITY);
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.bv[GR - 1] = INFINITY;
          a.pv.storage = LSHK_STORAGE_BORROWED_F32);
  BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.rows = SIZE_MAX);
  BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.w_stride = SIZE_MAX / 2);
  BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.dim = SIZE_MAX; a.w_stride = SIZE_MAX;
          a.rows = 2);
#undef FN

#define FN lshk_index_query
  BI_BASELINE(FN);
  BI_GRAPH_CASES(FN, idx, const lshk_index);
  BI_ACCEPT(FN, a.qp = NULL); /* defaults: WALK_EXACT, ef 100 */
  BI_ACCEPT(FN, a.qp = &a.big.p); /* a larger struct: tail ignored */
  BI_ACCEPT(FN, a.stats = NULL; a.out_scores = NULL);
  BI_ACCEPT(FN, a.idx = g_i8);
  BI_ACCEPT(FN, a.idx = g_borrowed);
  BI_ACCEPT(FN, a.qpv.graph.walk = LSHK_GRAPH_WALK_INT8);
  BI_ACCEPT(FN, a.qpv.graph.walk = LSHK_GRAPH_WALK_INT8; a.idx = g_i8);
  BI_ACCEPT(FN, a.qpv.graph.ef = 1);          /* the pool is max(ef, k) */
  BI_ACCEPT(FN, a.qpv.graph.ef = UINT32_MAX); /* every row */
  BI_ACCEPT(FN, a.qpv.graph.rerank = 1);      /* at least k are re-scored */
  BI_ACCEPT(FN, a.qpv.graph.rerank = UINT32_MAX); /* the whole pool */
  BI_ACCEPT(FN, a.qpv.graph.walk = LSHK_GRAPH_WALK_INT8;
            a.qpv.graph.rerank = 1);
  BI_ACCEPT(FN, a.q_stride = GD);    /* no gap */
  BI_ACCEPT(FN, a.qv[QS - 1] = NAN); /* the stride gap is not q */
  /* the graph reads only its own knobs */
  BI_ACCEPT(FN, a.qpv.lsh.probes = 2; a.qpv.lsh.bits_per_table = 33;
            a.qpv.ivf.nprobe = 0; a.qpv.ivf.reach = NAN;
            a.qpv.forest.set_size = 0);
  /* and an LSH index ignores the graph's */
  BI_ACCEPT(FN, a.idx = FX->idx; a.qpv.graph.ef = 0);
  /* struct_size larger than known: accepted, the unknown tail untouched */
  BI_CASE(FN, LSHK_STATUS_OK, o_.n = 0;
          a.bigst.s.struct_size = (uint32_t)sizeof a.bigst;
          a.stats = &a.bigst.s; bi_out(&o_, a.bigst.tail, sizeof a.bigst.tail));
  BI_CASE(FN, LSHK_STATUS_OK, a.k = 0; o_.n = 2); /* stats still written */
  BI_CASE(FN, LSHK_STATUS_OK, a.k = 0; a.qpv.graph.walk = LSHK_GRAPH_WALK_INT8;
          o_.n = 2);
  BI_CASE(FN, LSHK_STATUS_OK, a.nq = 0; a.q = NULL; o_.n = 2);
  BI_CASE(FN, LSHK_STATUS_OK, a.nq = 0; a.q = NULL; a.out_ids = NULL;
          a.out_scores = NULL; a.stats = NULL);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.q = NULL);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.out_ids = NULL);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.k = 0; a.q = NULL);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.qpv.graph.ef = 0);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.qpv.graph.ef = 0;
          a.qpv.graph.walk = LSHK_GRAPH_WALK_INT8);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.qpv.graph.ef = 0; a.nq = 0;
          a.q = NULL);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.big.p.graph.ef = 0;
          a.qp = &a.big.p);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.qpv.graph.walk = 2);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.qpv.graph.walk = UINT32_MAX);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.qpv.graph.walk = 2;
          a.idx = FX->idx); /* checked whatever the source */
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.qpv.graph.reserved = 1);
  BI_ACCEPT(FN, a.qpv.threads = 3);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.qpv.forest.confidence = -0.5f);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.qpv.struct_size = 0);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.qpv.struct_size = (uint32_t)sizeof(lshk_query_params) - 1);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.qp = BI_MISALIGN(const lshk_query_params, &a.qpv));
  /* an LSH index reads its own knobs */
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.idx = FX->idx;
          a.qpv.lsh.probes = 1u << BI_FX_K);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.stats = (lshk_query_stats *)(void *)(a.sb + 2));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.stats = (lshk_query_stats *)(void *)(a.ib + 2));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.q_stride = GD - 1);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.q_stride = 0);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.st.struct_size = 0);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.st.struct_size = (uint32_t)sizeof(lshk_query_stats) - 1);
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.qv[QS * (QN - 1) + GD - 1] = NAN);
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.qv[0] = -INFINITY);
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.qv[0] = NAN;
          a.qpv.graph.walk = LSHK_GRAPH_WALK_INT8);
  /* finite, but the scores could overflow f32 */
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.qv[1] = 3e38f);
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.qv[0] = 3e38f;
          a.qpv.graph.walk = LSHK_GRAPH_WALK_INT8);
  BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.nq = SIZE_MAX);
  BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.nq = SIZE_MAX / 16; a.q_stride = GD;
          a.k = UINT32_MAX);
  BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.nq = 2; a.k = 1;
          a.q_stride = SIZE_MAX / 4);
  BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.nq = 2; a.k = 1;
          a.q_stride = SIZE_MAX / 4; a.qpv.graph.walk = LSHK_GRAPH_WALK_INT8);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.q = BI_MISALIGN(const float, a.qv));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.out_ids = BI_MISALIGN(uint32_t, a.ib));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.out_ids = BI_MISALIGN(uint32_t, a.ib);
          a.qpv.graph.walk = LSHK_GRAPH_WALK_INT8);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.out_scores = BI_MISALIGN(float, a.sb));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.stats = BI_MISALIGN(lshk_query_stats, &a.st));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.out_scores = (float *)(void *)a.ib);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.out_scores = (float *)(void *)(a.ib + QN * QK - 1));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.out_scores = a.qv);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.out_scores = a.qv;
          a.qpv.graph.walk = LSHK_GRAPH_WALK_INT8);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.out_ids = (uint32_t *)(void *)(a.qv + 2));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.out_ids = (uint32_t *)(void *)(a.sb + 1));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, o_.n = 0;
          a.out_ids = (uint32_t *)(void *)&a.qpv; /* over the params */
          bi_out(&o_, &a.qpv.lsh, sizeof a.qpv - offsetof(lshk_query_params, lsh)));
#undef FN

#define FN lshk_index_candidates
  BI_BASELINE(FN);
  BI_GRAPH_CASES(FN, b.idx, const lshk_index);
  BI_ACCEPT(FN, a.b.qpv.graph.walk = LSHK_GRAPH_WALK_INT8);
  BI_ACCEPT(FN, a.b.qpv.graph.rerank = 2);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.b.qpv.graph.ef = 0);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.b.qpv.graph.walk = 2);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.b.qpv.graph.reserved = 1);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.b.q_stride = GD - 1);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.offsets = BI_MISALIGN(size_t, a.ob));
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.b.qv[1] = INFINITY);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.b.q = NULL);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.offsets = NULL);
  /* the pool holds ef ids: too few for them */
  BI_CASE(FN, LSHK_STATUS_BUFFER_TOO_SMALL, a.ids_len = QN; o_.n = 2);
#undef FN

#define FN lshk_index_save
  BI_BASELINE(FN);
  BI_ACCEPT(FN, a.idx = g_i8);
  BI_ACCEPT(FN, a.idx = g_borrowed);
  BI_GRAPH_CASES(FN, idx, const lshk_index);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.path = NULL);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.path = "");
  BI_CASE(FN, LSHK_STATUS_IO_ERROR, a.path = path_subdir); /* a directory */
  BI_CASE(FN, LSHK_STATUS_IO_ERROR, a.path = path_fifo);   /* not replaced */
  BI_CASE(FN, LSHK_STATUS_IO_ERROR, a.path = "/nonexistent-lshk-dir/x.lshk");
#undef FN

#define FN lshk_index_load
  BI_BASELINE(FN);
  BI_ACCEPT(FN, a.w_stride = GD);
  BI_ACCEPT(FN, a.path = path_borrowed; a.w = wb);
  BI_ACCEPT(FN, a.path = path_borrowed; a.w = wb; a.w_stride = GWS);
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
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.w = wb);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.w_stride = GD + 1);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.path = path_borrowed);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.path = path_borrowed; a.w = wb;
          a.w_stride = GD);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.path = path_borrowed;
          a.w = BI_MISALIGN(const float, wb));
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.path = path_borrowed;
          a.wnan[(GR - 1) * GWS + GD - 1] = NAN; a.w = a.wnan);
#undef FN

#define FN lshk_index_memory_bytes
  BI_BASELINE(FN);
  BI_ACCEPT(FN, a.idx = g_i8);
  BI_ACCEPT(FN, a.idx = g_borrowed);
  BI_GRAPH_CASES(FN, idx, const lshk_index);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.out = NULL);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.out = BI_MISALIGN(size_t, &a.v));
#undef FN

#define FN lshk_index_describe
  BI_BASELINE(FN);
  BI_GRAPH_CASES(FN, idx, const lshk_index);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.out = NULL);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.out = BI_MISALIGN(lshk_index_info, &a.v));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.v.struct_size = 0);
#undef FN
  {
    lshk_index_info v;
    memset(&v, 0, sizeof v);
    v.struct_size = (uint32_t)sizeof v;
    BI_EXPECT(lshk_index_describe,
              lshk_index_describe(g_i8, &v) == LSHK_STATUS_OK &&
                  v.source == LSHK_SOURCE_GRAPH &&
                  v.storage == LSHK_STORAGE_BF16 && v.rows == GR &&
                  v.dim == GD && v.bits_per_table == 0 && v.nlist == 0);
  }

#define FN lshk_index_free
  BI_BASELINE(FN);
  BI_CASE(FN, LSHK_STATUS_INVALID_HANDLE, a.idx = FX->idx_freed);
  BI_CASE(FN, LSHK_STATUS_INVALID_HANDLE, a.idx = (lshk_index *)(void *)FX->tb);
  BI_CASE(FN, LSHK_STATUS_INVALID_HANDLE, a.idx = (lshk_index *)(void *)FX->sh);
  BI_CASE(FN, LSHK_STATUS_INVALID_HANDLE, a.idx = BI_GARBAGE(lshk_index));
  BI_CASE(FN, LSHK_STATUS_INVALID_HANDLE, a.idx = BI_MISALIGN(lshk_index, g_live));
#undef FN

  /* LSH-only calls on a graph index. */
  BI_CASE(lshk_index_tables, LSHK_STATUS_UNSUPPORTED, (void)a);
  BI_CASE(lshk_index_tables, LSHK_STATUS_UNSUPPORTED, a.idx = g_i8);
  BI_CASE(lshk_index_simhash, LSHK_STATUS_UNSUPPORTED, (void)a);
  BI_CASE(lshk_index_simhash, LSHK_STATUS_UNSUPPORTED, a.idx = g_borrowed);
  BI_CASE(lshk_index_train_iul, LSHK_STATUS_UNSUPPORTED, (void)a);
  BI_CASE(lshk_index_train_iul, LSHK_STATUS_UNSUPPORTED, a.idx = g_i8);

  /* Refused calls left the fixtures as built. */
  BI_EXPECT(lshk_index_query, fp != 0 && query_fingerprint(g_live) == fp);

  remove(path_graph);
  remove(path_borrowed);
  bi_files_close();
  bi_fx_need(lshk_index_free(g_live), "lshk_index_free");
  bi_fx_need(lshk_index_free(g_i8), "lshk_index_free");
  bi_fx_need(lshk_index_free(g_borrowed), "lshk_index_free");
  bi_fx_teardown();
  return bi_summary("bad_input_index_graph");
}
