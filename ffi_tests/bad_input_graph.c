/* Bad-input matrix (issue 8), the FGD graph: lshk_graph_* (build, query,
 * save/load, accessors). See bad_input.h for what a case asserts. File
 * cases check that a refused save leaves no file (and no temporary file)
 * behind; the load cases cover missing, empty, garbage and truncated
 * files and an IVF file (and a graph file given to lshk_ivf_load).
 *
 * Functions covered here:
 *   lshk_graph_params_default lshk_graph_build lshk_graph_query
 *   lshk_graph_query_params_default lshk_graph_query_ex
 *   lshk_graph_save lshk_graph_load lshk_graph_shape
 *   lshk_graph_memory_bytes lshk_graph_free */
#define _POSIX_C_SOURCE 200809L
#include "bad_input_files.h"

#define FX bi_fx()
#define GR BI_FX_ROWS
#define GD BI_FX_DIM
#define GWS 9 /* a w_stride > dim */

static lshk_graph *g_live; /* f32, bias */
static lshk_graph *g_i8;   /* int8 storage, no bias */
static lshk_graph *g_freed;
static lshk_ivf *ivf_fx;

static char path_graph[300], path_ivf[300];


static lshk_graph *fx_graph(const float *bias, uint32_t storage) {
  lshk_graph_params p = lshk_graph_params_default();
  lshk_graph *h = NULL;
  p.m = 4;
  p.ef_construction = 16;
  p.storage = storage;
  p.threads = 1;
  bi_fx_need(lshk_graph_build(FX->w, bias, GR, GD, GD, &p, &h), "lshk_graph_build");
  return h;
}

/* ---- lshk_graph_build ---------------------------------------------------- */
typedef struct {
  float wv[GR * GWS];
  float bv[GR];
  lshk_graph_params pv;
  struct {
    lshk_graph_params p;
    unsigned char tail[48];
  } big; /* a caller with a newer, larger lshk_graph_params */
  const float *w;
  const float *bias;
  size_t rows, dim, w_stride;
  const lshk_graph_params *p;
  lshk_graph *outv;
  lshk_graph **out;
} bi_args_lshk_graph_build;
static void bi_init_lshk_graph_build(bi_args_lshk_graph_build *a, bi_outs *o) {
  for (int i = 0; i < GR * GWS; i++) a->wv[i] = (float)((i * 13) % 17) - 8.0f;
  for (int i = 0; i < GR; i++) a->bv[i] = 0.5f * (float)(i % 3);
  a->pv = lshk_graph_params_default();
  a->pv.m = 4;
  a->pv.ef_construction = 16;
  a->pv.threads = 1;
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
static lshk_status bi_call_lshk_graph_build(bi_args_lshk_graph_build *a) {
  lshk_graph *before = a->outv;
  lshk_status s = lshk_graph_build(a->w, a->bias, a->rows, a->dim, a->w_stride, a->p, a->out);
  if (s == LSHK_STATUS_OK && a->out != NULL && *a->out != before) lshk_graph_free(*a->out);
  return s;
}

/* ---- lshk_graph_query ---------------------------------------------------- */
#define QN 3
#define QK 4
#define QS 10
typedef struct {
  const lshk_graph *g;
  float qv[QN * QS];
  uint32_t ib[QN * QK + 2];
  float sb[QN * QK + 2];
  lshk_graph_stats st;
  struct {
    lshk_graph_stats s;
    unsigned char tail[40];
  } bigst; /* a caller with a newer, larger lshk_graph_stats */
  const float *q;
  size_t nq, q_stride;
  uint32_t k, ef;
  uint32_t *out_ids;
  float *out_scores;
  lshk_graph_stats *stats;
} bi_args_lshk_graph_query;
static void bi_init_lshk_graph_query(bi_args_lshk_graph_query *a, bi_outs *o) {
  for (int i = 0; i < QN * QS; i++) a->qv[i] = (float)((i * 7) % 9) - 4.0f;
  a->st.struct_size = (uint32_t)sizeof a->st;
  a->g = g_live;
  a->q = a->qv;
  a->nq = QN;
  a->q_stride = QS;
  a->k = QK;
  a->ef = 8;
  a->out_ids = a->ib;
  a->out_scores = a->sb;
  a->stats = &a->st;
  bi_out(o, a->ib, sizeof a->ib);
  bi_out(o, a->sb, sizeof a->sb);
  /* every field of the stats but the caller's struct_size */
  bi_out(o, &a->st.reserved, sizeof a->st - offsetof(lshk_graph_stats, reserved));
}
static lshk_status bi_call_lshk_graph_query(bi_args_lshk_graph_query *a) {
  return lshk_graph_query(a->g, a->q, a->nq, a->q_stride, a->k, a->ef, a->out_ids,
                          a->out_scores, a->stats);
}

/* ---- lshk_graph_query_ex (the query arguments of lshk_graph_query plus a
 * query-params struct; WALK_INT8 by default here) --------------------------- */
typedef struct {
  bi_args_lshk_graph_query b;
  lshk_graph_query_params pv;
  struct {
    lshk_graph_query_params p;
    unsigned char tail[24];
  } bigp; /* a caller with a newer, larger lshk_graph_query_params */
  const lshk_graph_query_params *p;
} bi_args_lshk_graph_query_ex;
static void bi_init_lshk_graph_query_ex(bi_args_lshk_graph_query_ex *a, bi_outs *o) {
  bi_init_lshk_graph_query(&a->b, o);
  a->pv = lshk_graph_query_params_default();
  a->pv.walk = LSHK_GRAPH_WALK_INT8;
  a->pv.ef = 8;
  a->bigp.p = a->pv;
  memset(a->bigp.tail, 0xA5, sizeof a->bigp.tail);
  a->bigp.p.struct_size = (uint32_t)sizeof a->bigp;
  a->p = &a->pv;
}
static lshk_status bi_call_lshk_graph_query_ex(bi_args_lshk_graph_query_ex *a) {
  return lshk_graph_query_ex(a->b.g, a->p, a->b.q, a->b.nq, a->b.q_stride, a->b.k,
                             a->b.out_ids, a->b.out_scores, a->b.stats);
}

/* ---- lshk_graph_save / lshk_graph_load ----------------------------------- */
typedef struct {
  const lshk_graph *g;
  const char *path;
} bi_args_lshk_graph_save;
static void bi_init_lshk_graph_save(bi_args_lshk_graph_save *a, bi_outs *o) {
  (void)o;
  a->g = g_live;
  a->path = path_new;
}
/* Also checks that a refused save created neither the file nor a
 * temporary file: -> PANIC (never a real outcome here) if it did. */
static lshk_status bi_call_lshk_graph_save(bi_args_lshk_graph_save *a) {
  int before = dir_entries();
  lshk_status s = lshk_graph_save(a->g, a->path);
  if (s == LSHK_STATUS_OK) {
    remove(path_new);
  } else if (file_exists(path_new) || dir_entries() != before) {
    fprintf(stderr, "lshk_graph_save left a file behind after failing\n");
    return LSHK_STATUS_PANIC;
  }
  return s;
}
typedef struct {
  const char *path;
  lshk_graph *outv;
  lshk_graph **out;
} bi_args_lshk_graph_load;
static void bi_init_lshk_graph_load(bi_args_lshk_graph_load *a, bi_outs *o) {
  a->path = path_graph;
  a->out = &a->outv;
  bi_out(o, &a->outv, sizeof a->outv);
}
static lshk_status bi_call_lshk_graph_load(bi_args_lshk_graph_load *a) {
  lshk_graph *before = a->outv;
  lshk_status s = lshk_graph_load(a->path, a->out);
  if (s == LSHK_STATUS_OK && a->out != NULL && *a->out != before) lshk_graph_free(*a->out);
  return s;
}

/* ---- accessors ----------------------------------------------------------- */
typedef struct {
  const lshk_graph *g;
  size_t v;
  size_t *out;
} bi_args_lshk_graph_memory_bytes;
static void bi_init_lshk_graph_memory_bytes(bi_args_lshk_graph_memory_bytes *a, bi_outs *o) {
  a->g = g_live;
  a->out = &a->v;
  bi_out(o, &a->v, sizeof a->v);
}
static lshk_status bi_call_lshk_graph_memory_bytes(bi_args_lshk_graph_memory_bytes *a) {
  return lshk_graph_memory_bytes(a->g, a->out);
}
typedef struct {
  const lshk_graph *g;
  size_t sv[2];
  size_t *rows, *dim;
} bi_args_lshk_graph_shape;
static void bi_init_lshk_graph_shape(bi_args_lshk_graph_shape *a, bi_outs *o) {
  a->g = g_live;
  a->rows = &a->sv[0];
  a->dim = &a->sv[1];
  bi_out(o, a->sv, sizeof a->sv);
}
static lshk_status bi_call_lshk_graph_shape(bi_args_lshk_graph_shape *a) {
  return lshk_graph_shape(a->g, a->rows, a->dim);
}
typedef struct {
  lshk_graph *g;
} bi_args_lshk_graph_free;
static void bi_init_lshk_graph_free(bi_args_lshk_graph_free *a, bi_outs *o) {
  (void)o;
  a->g = NULL;
}
static lshk_status bi_call_lshk_graph_free(bi_args_lshk_graph_free *a) {
  return lshk_graph_free(a->g);
}

#define BI_GRAPH_CASES(FN, FIELD, T) \
  BI_HANDLE_CASES(FN, FIELD, T, g_freed, (T *)NULL, g_live, bi_fx()->idx, ivf_fx)

/* ids of a fixed query on `h` (0 on failure). */
static uint64_t query_fingerprint(const lshk_graph *h) {
  bi_args_lshk_graph_query a;
  bi_outs o;
  uint64_t f = 1469598103934665603ull;
  memset(&a, 0, sizeof a);
  memset(&o, 0, sizeof o);
  bi_init_lshk_graph_query(&a, &o);
  a.g = h;
  if (bi_call_lshk_graph_query(&a) != LSHK_STATUS_OK) return 0;
  for (int i = 0; i < QN * QK; i++) f = (f ^ a.ib[i]) * 1099511628211ull;
  return f;
}

int main(void) {
  uint64_t fp;
  bi_fx_setup();
  g_live = fx_graph(FX->bias, LSHK_GRAPH_STORAGE_F32);
  g_i8 = fx_graph(NULL, LSHK_GRAPH_STORAGE_I8);
  g_freed = fx_graph(NULL, LSHK_GRAPH_STORAGE_F32);
  bi_fx_need(lshk_graph_free(g_freed), "lshk_graph_free");
  {
    lshk_ivf_params p = lshk_ivf_params_default();
    p.nlist = 4;
    p.borrow = 0;
    p.threads = 1;
    bi_fx_need(lshk_ivf_build(FX->w, NULL, GR, GD, GD, &p, &ivf_fx), "lshk_ivf_build");
  }
  fp = query_fingerprint(g_live);
  /* ---- files ---- */
  {
    static const char garbage[] = "this is not an lshk graph file, at all";
    bi_files_open("graph", "lshk");
    snprintf(path_graph, sizeof path_graph, "%s/g.lshk", dir);
    snprintf(path_ivf, sizeof path_ivf, "%s/ivf.lshk", dir);
    bi_fx_need(lshk_graph_save(g_live, path_graph), "lshk_graph_save");
    bi_fx_need(lshk_ivf_save(ivf_fx, path_ivf), "lshk_ivf_save");
    bi_files_fill(garbage, sizeof garbage, path_graph);
  }
  BI_EXPECT(lshk_graph_params_default,
            lshk_graph_params_default().struct_size == sizeof(lshk_graph_params) &&
                lshk_graph_params_default().m == 16 &&
                lshk_graph_params_default().storage == LSHK_GRAPH_STORAGE_F32 &&
                lshk_graph_params_default().reserved == 0);

#define FN lshk_graph_build
  BI_BASELINE(FN);
  BI_ACCEPT(FN, a.p = &a.big.p); /* larger struct_size, non-zero tail */
  BI_ACCEPT(FN, a.p = NULL; a.bias = NULL); /* defaults */
  BI_ACCEPT(FN, a.pv.storage = LSHK_GRAPH_STORAGE_BF16);
  BI_ACCEPT(FN, a.pv.storage = LSHK_GRAPH_STORAGE_I8);
  BI_ACCEPT(FN, a.pv.m = 2);
  BI_ACCEPT(FN, a.pv.m = 256);
  BI_ACCEPT(FN, a.pv.ef_construction = 1);
  BI_ACCEPT(FN, a.pv.threads = 64);
  BI_ACCEPT(FN, a.rows = 1);
  BI_ACCEPT(FN, a.wv[GWS - 1] = NAN); /* the stride gap is not W */
  BI_ACCEPT(FN, memset(a.wv, 0, sizeof a.wv); a.bias = NULL); /* all-zero rows */
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.w = NULL);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.out = NULL);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.out = BI_MISALIGN(lshk_graph *, &a.outv));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.w = BI_MISALIGN(const float, a.wv));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.bias = BI_MISALIGN(const float, a.bv));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.p = BI_MISALIGN(const lshk_graph_params, &a.pv));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.rows = 0);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.rows = 0; a.w = NULL);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.dim = 0);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.w_stride = GD - 1);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.w_stride = 0);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.struct_size = 0);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.pv.struct_size = (uint32_t)sizeof(lshk_graph_params) - 1);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.storage = 3);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.storage = UINT32_MAX);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.m = 0);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.m = 1);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.m = 257);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.m = UINT32_MAX);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.ef_construction = 0);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.reserved = 1);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.big.p.reserved = 7; a.p = &a.big.p);
  /* |[w; b]|^2 overflows f32 */
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.wv[0] = 3e38f; a.wv[1] = 3e38f);
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.wv[(GR - 1) * GWS + GD - 1] = NAN);
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.wv[0] = INFINITY);
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.bv[GR - 1] = NAN);
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.bv[3] = -INFINITY);
  BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.rows = SIZE_MAX);
  BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.w_stride = SIZE_MAX / 2);
  BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.dim = SIZE_MAX; a.w_stride = SIZE_MAX; a.rows = 2);
#undef FN

#define FN lshk_graph_query
  BI_BASELINE(FN);
  BI_GRAPH_CASES(FN, g, const lshk_graph);
  BI_ACCEPT(FN, a.stats = NULL; a.out_scores = NULL);
  BI_ACCEPT(FN, a.g = g_i8);
  BI_ACCEPT(FN, a.ef = 1);           /* the pool is max(ef, k) */
  BI_ACCEPT(FN, a.ef = UINT32_MAX); /* every row */
  BI_ACCEPT(FN, a.q_stride = GD);    /* no gap */
  BI_ACCEPT(FN, a.qv[QS - 1] = NAN); /* the stride gap is not q */
  /* struct_size larger than known: accepted, the unknown tail untouched */
  BI_CASE(FN, LSHK_STATUS_OK, o_.n = 0; a.bigst.s.struct_size = (uint32_t)sizeof a.bigst;
          a.stats = &a.bigst.s; bi_out(&o_, a.bigst.tail, sizeof a.bigst.tail));
  BI_CASE(FN, LSHK_STATUS_OK, a.k = 0; o_.n = 2); /* stats still written */
  BI_CASE(FN, LSHK_STATUS_OK, a.nq = 0; a.q = NULL; o_.n = 2);
  BI_CASE(FN, LSHK_STATUS_OK, a.nq = 0; a.q = NULL; a.out_ids = NULL; a.out_scores = NULL;
          a.stats = NULL);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.q = NULL);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.out_ids = NULL);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.k = 0; a.q = NULL);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.ef = 0);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.ef = 0; a.nq = 0; a.q = NULL);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.stats = (lshk_graph_stats *)(void *)(a.sb + 2));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.stats = (lshk_graph_stats *)(void *)(a.ib + 2));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.q_stride = GD - 1);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.q_stride = 0);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.st.struct_size = 0);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.st.struct_size = (uint32_t)sizeof(lshk_graph_stats) - 1);
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.qv[QS * (QN - 1) + GD - 1] = NAN);
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.qv[0] = -INFINITY);
  /* finite, but the scores could overflow f32 */
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.qv[1] = 3e38f);
  BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.nq = SIZE_MAX / 16; a.q_stride = GD;
          a.k = UINT32_MAX);
  BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.nq = 2; a.k = 1; a.q_stride = SIZE_MAX / 4);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.q = BI_MISALIGN(const float, a.qv));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.out_ids = BI_MISALIGN(uint32_t, a.ib));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.out_scores = BI_MISALIGN(float, a.sb));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.stats = BI_MISALIGN(lshk_graph_stats, &a.st));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.out_scores = (float *)(void *)a.ib);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.out_scores = (float *)(void *)(a.ib + QN * QK - 1));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.out_scores = a.qv);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.out_ids = (uint32_t *)(void *)(a.qv + 2));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.out_ids = (uint32_t *)(void *)(a.sb + 1));
#undef FN

  BI_EXPECT(lshk_graph_query_params_default,
            lshk_graph_query_params_default().struct_size == sizeof(lshk_graph_query_params) &&
                lshk_graph_query_params_default().walk == LSHK_GRAPH_WALK_EXACT &&
                lshk_graph_query_params_default().ef == 100 &&
                lshk_graph_query_params_default().rerank == 0);

#define FN lshk_graph_query_ex
  BI_BASELINE(FN);
  BI_GRAPH_CASES(FN, b.g, const lshk_graph);
  BI_ACCEPT(FN, a.p = NULL);                       /* defaults: WALK_EXACT, ef 100 */
  BI_ACCEPT(FN, a.pv.walk = LSHK_GRAPH_WALK_EXACT);
  BI_ACCEPT(FN, a.b.g = g_i8);
  BI_ACCEPT(FN, a.pv.rerank = 1);                  /* at least k are re-scored */
  BI_ACCEPT(FN, a.pv.rerank = UINT32_MAX);         /* the whole pool */
  BI_ACCEPT(FN, a.pv.ef = UINT32_MAX);             /* every row */
  BI_ACCEPT(FN, a.b.stats = NULL; a.b.out_scores = NULL);
  BI_ACCEPT(FN, a.p = &a.bigp.p);                  /* a larger struct: tail ignored */
  BI_CASE(FN, LSHK_STATUS_OK, a.b.k = 0; o_.n = 2); /* stats still written */
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.walk = 2);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.walk = UINT32_MAX);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.ef = 0);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.ef = 0; a.pv.walk = LSHK_GRAPH_WALK_EXACT);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.struct_size = 0);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.pv.struct_size = (uint32_t)sizeof(lshk_graph_query_params) - 1);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.p = BI_MISALIGN(const lshk_graph_query_params, &a.pv));
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.b.q = NULL);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.b.out_ids = NULL);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.b.q_stride = GD - 1);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.b.st.struct_size = 0);
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.b.qv[0] = NAN);
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.b.qv[0] = 3e38f);
  BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.b.nq = 2; a.b.k = 1; a.b.q_stride = SIZE_MAX / 4);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.b.out_scores = a.b.qv);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.b.out_ids = BI_MISALIGN(uint32_t, a.b.ib));
#undef FN

#define FN lshk_graph_save
  BI_BASELINE(FN);
  BI_ACCEPT(FN, a.g = g_i8);
  BI_GRAPH_CASES(FN, g, const lshk_graph);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.path = NULL);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.path = "");
  BI_CASE(FN, LSHK_STATUS_IO_ERROR, a.path = path_subdir); /* a directory */
  BI_CASE(FN, LSHK_STATUS_IO_ERROR, a.path = path_fifo);   /* not replaced */
  BI_CASE(FN, LSHK_STATUS_IO_ERROR, a.path = "/nonexistent-lshk-dir/x.lshk");
#undef FN

#define FN lshk_graph_load
  BI_BASELINE(FN);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.path = NULL);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.out = NULL);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.out = BI_MISALIGN(lshk_graph *, &a.outv));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.path = "");
  BI_CASE(FN, LSHK_STATUS_IO_ERROR, a.path = path_missing);
  BI_CASE(FN, LSHK_STATUS_IO_ERROR, a.path = path_subdir);
  BI_CASE(FN, LSHK_STATUS_IO_ERROR, a.path = path_fifo); /* never blocks */
  BI_CASE(FN, LSHK_STATUS_BAD_FILE_FORMAT, a.path = path_empty);
  BI_CASE(FN, LSHK_STATUS_BAD_FILE_FORMAT, a.path = path_garbage);
  BI_CASE(FN, LSHK_STATUS_BAD_FILE_FORMAT, a.path = path_truncated);
  BI_CASE(FN, LSHK_STATUS_BAD_FILE_FORMAT, a.path = path_ivf);
#undef FN

  /* A graph file is not an IVF file, nor a graph handle an IVF index. */
  {
    lshk_ivf *out = (lshk_ivf *)(uintptr_t)0x1230;
    bi_prime("lshk_ivf_load");
    BI_EXPECT(lshk_ivf_load, lshk_ivf_load(path_graph, NULL, 0, &out) ==
                                     LSHK_STATUS_BAD_FILE_FORMAT &&
                                 out == (lshk_ivf *)(uintptr_t)0x1230);
    BI_EXPECT(lshk_ivf_free, lshk_ivf_free((lshk_ivf *)(void *)g_live) ==
                                 LSHK_STATUS_INVALID_HANDLE);
  }

#define FN lshk_graph_memory_bytes
  BI_BASELINE(FN);
  BI_ACCEPT(FN, a.g = g_i8);
  BI_GRAPH_CASES(FN, g, const lshk_graph);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.out = NULL);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.out = BI_MISALIGN(size_t, &a.v));
#undef FN

#define FN lshk_graph_shape
  BI_BASELINE(FN);
  BI_GRAPH_CASES(FN, g, const lshk_graph);
  BI_ACCEPT(FN, a.rows = NULL; a.dim = NULL);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.rows = BI_MISALIGN(size_t, a.sv));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.dim = BI_MISALIGN(size_t, a.sv + 1));
#undef FN

#define FN lshk_graph_free
  BI_BASELINE(FN);
  BI_CASE(FN, LSHK_STATUS_INVALID_HANDLE, a.g = g_freed);
  BI_CASE(FN, LSHK_STATUS_INVALID_HANDLE, a.g = (lshk_graph *)(void *)FX->idx);
  BI_CASE(FN, LSHK_STATUS_INVALID_HANDLE, a.g = (lshk_graph *)(void *)ivf_fx);
  BI_CASE(FN, LSHK_STATUS_INVALID_HANDLE, a.g = BI_GARBAGE(lshk_graph));
  BI_CASE(FN, LSHK_STATUS_INVALID_HANDLE, a.g = BI_MISALIGN(lshk_graph, g_live));
#undef FN

  /* Refused calls left the fixtures as built. */
  BI_EXPECT(lshk_graph_query, fp != 0 && query_fingerprint(g_live) == fp);

  remove(path_graph);
  remove(path_ivf);
  bi_files_close();
  bi_fx_need(lshk_graph_free(g_live), "lshk_graph_free");
  bi_fx_need(lshk_graph_free(g_i8), "lshk_graph_free");
  bi_fx_need(lshk_ivf_free(ivf_fx), "lshk_ivf_free");
  bi_fx_teardown();
  return bi_summary("bad_input_graph");
}
