/* Bad-input matrix (issue 8), the graph family of the index (issue 16):
 * lshk_index_build_ex (the graph's build parameters) and
 * lshk_index_query_ex (the graph's query parameters), and the LSH-only
 * calls on a graph index (INVALID_ARGUMENT, nothing written). See
 * bad_input.h for what a case asserts.
 *
 * Functions covered here:
 *   lshk_index_build_ex lshk_index_query_ex */
#include "bad_input.h"

#define GR 60 /* rows */
#define GD 8  /* dim */
#define GWS 11 /* a w_stride > dim */

static lshk_index *gidx; /* a graph-family index over GR x GD */

/* ---- lshk_index_build_ex ------------------------------------------------- */
typedef struct {
  float wv[GR * GWS];
  float bv[GR];
  lshk_index_params pv;
  lshk_graph_params gv;
  struct {
    lshk_graph_params p;
    unsigned char tail[40];
  } big;
  float planes[4 * 3 * GD];
  const float *w;
  const float *bias;
  size_t rows, dim, w_stride;
  const lshk_index_params *p;
  const lshk_graph_params *gp;
  lshk_index *outv;
  lshk_index **out;
} bi_args_lshk_index_build_ex;
static void bi_init_lshk_index_build_ex(bi_args_lshk_index_build_ex *a,
                                        bi_outs *o) {
  for (int i = 0; i < GR * GWS; i++) a->wv[i] = (float)((i * 13) % 17) - 8.0f;
  for (int i = 0; i < GR; i++) a->bv[i] = 0.5f * (float)(i % 3);
  for (int i = 0; i < 4 * 3 * GD; i++) a->planes[i] = 1.0f;
  a->pv = lshk_index_params_default();
  a->pv.family = LSHK_FAMILY_GRAPH;
  a->gv = lshk_graph_params_default();
  a->gv.m = 4;
  a->gv.ef_construction = 16;
  a->gv.threads = 1;
  a->big.p = a->gv;
  a->big.p.struct_size = (uint32_t)sizeof a->big;
  memset(a->big.tail, 0xEE, sizeof a->big.tail);
  a->w = a->wv;
  a->bias = a->bv;
  a->rows = GR;
  a->dim = GD;
  a->w_stride = GWS;
  a->p = &a->pv;
  a->gp = &a->gv;
  a->out = &a->outv;
  bi_out(o, &a->outv, sizeof a->outv);
}
static lshk_status bi_call_lshk_index_build_ex(bi_args_lshk_index_build_ex *a) {
  lshk_index *before = a->outv;
  lshk_status s = lshk_index_build_ex(a->w, a->bias, a->rows, a->dim,
                                      a->w_stride, a->p, a->gp, a->out);
  if (s == LSHK_STATUS_OK && a->out != NULL && *a->out != before)
    lshk_index_free(*a->out);
  return s;
}

/* ---- lshk_index_query_ex ------------------------------------------------- */
#define QN 3
#define QK 4
#define QS 10
typedef struct {
  const lshk_index *idx;
  float qv[QN * QS];
  lshk_gather_params gv;
  lshk_graph_query_params qpv;
  struct {
    lshk_graph_query_params p;
    unsigned char tail[16];
  } big;
  uint32_t ib[QN * QK + 2];
  float sb[QN * QK + 2];
  lshk_query_stats st;
  const float *q;
  size_t nq, q_stride;
  uint32_t k;
  const lshk_gather_params *g;
  const lshk_graph_query_params *gq;
  uint32_t *out_ids;
  float *out_scores;
  lshk_query_stats *stats;
} bi_args_lshk_index_query_ex;
static void bi_init_lshk_index_query_ex(bi_args_lshk_index_query_ex *a,
                                        bi_outs *o) {
  for (int i = 0; i < QN * QS; i++) a->qv[i] = (float)((i * 7) % 9) - 4.0f;
  a->gv = lshk_gather_params_default();
  a->qpv = lshk_graph_query_params_default();
  a->qpv.ef = 20;
  a->qpv.walk = LSHK_GRAPH_WALK_INT8;
  a->big.p = a->qpv;
  a->big.p.struct_size = (uint32_t)sizeof a->big;
  memset(a->big.tail, 0x11, sizeof a->big.tail);
  a->st.struct_size = (uint32_t)sizeof a->st;
  a->idx = gidx;
  a->q = a->qv;
  a->nq = QN;
  a->q_stride = QS;
  a->k = QK;
  a->g = &a->gv;
  a->gq = &a->qpv;
  a->out_ids = a->ib;
  a->out_scores = a->sb;
  a->stats = &a->st;
  bi_out(o, a->ib, sizeof a->ib);
  bi_out(o, a->sb, sizeof a->sb);
  bi_out(o, &a->st.queries,
         sizeof a->st - offsetof(lshk_query_stats, queries));
}
static lshk_status bi_call_lshk_index_query_ex(bi_args_lshk_index_query_ex *a) {
  return lshk_index_query_ex(a->idx, a->q, a->nq, a->q_stride, a->k, a->g,
                             a->gq, a->out_ids, a->out_scores, a->stats);
}

/* ---- LSH-only calls on the graph index ---------------------------------- */
typedef struct {
  const lshk_index *idx;
  const lshk_tables *v;
  const lshk_tables **out;
} bi_args_lshk_index_tables;
static void bi_init_lshk_index_tables(bi_args_lshk_index_tables *a, bi_outs *o) {
  a->idx = gidx;
  a->out = &a->v;
  bi_out(o, &a->v, sizeof a->v);
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
  a->idx = gidx;
  a->out = &a->v;
  bi_out(o, &a->v, sizeof a->v);
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
  a->idx = gidx;
  bi_out(o, a->rv, sizeof a->rv);
}
static lshk_status bi_call_lshk_index_train_iul(bi_args_lshk_index_train_iul *a) {
  return lshk_index_train_iul(a->idx, a->qv, 2, GD, a->lo, a->lv, NULL, a->rv, 2);
}

static uint64_t query_fingerprint(void) {
  bi_args_lshk_index_query_ex a;
  bi_outs o;
  uint64_t h = 1469598103934665603ull;
  memset(&a, 0, sizeof a);
  memset(&o, 0, sizeof o);
  bi_init_lshk_index_query_ex(&a, &o);
  if (bi_call_lshk_index_query_ex(&a) != LSHK_STATUS_OK) return 0;
  for (int i = 0; i < QN * QK; i++) h = (h ^ a.ib[i]) * 1099511628211ull;
  return h;
}

int main(void) {
  uint64_t fp;
  bi_fx_setup();
  {
    bi_args_lshk_index_build_ex a;
    bi_outs o;
    memset(&a, 0, sizeof a);
    memset(&o, 0, sizeof o);
    bi_init_lshk_index_build_ex(&a, &o);
    lshk_index *hold = NULL;
    /* Freed slots are reused: `hold` takes the fixture's freed index slot
     * and gives it back freed, so bi_fx()->idx_freed stays a freed handle
     * while gidx lives. */
    bi_fx_need(lshk_index_build_ex(a.w, a.bias, a.rows, a.dim, a.w_stride, a.p,
                                   a.gp, &hold),
               "lshk_index_build_ex");
    bi_fx_need(lshk_index_build_ex(a.w, a.bias, a.rows, a.dim, a.w_stride, a.p,
                                   a.gp, &gidx),
               "lshk_index_build_ex");
    bi_fx_need(lshk_index_free(hold), "lshk_index_free");
  }
  fp = query_fingerprint();

#define FN lshk_index_build_ex
  BI_BASELINE(FN);
  BI_ACCEPT(FN, a.gp = &a.big.p);
  BI_ACCEPT(FN, a.gp = NULL; a.bias = NULL);
  BI_ACCEPT(FN, a.pv.storage = LSHK_STORAGE_I8; a.gv.storage = LSHK_GRAPH_STORAGE_BF16);
  BI_ACCEPT(FN, a.pv.storage = LSHK_STORAGE_BORROWED_F32);
  BI_ACCEPT(FN, a.p = NULL; a.gv.m = 0); /* SimHash: gp checked, not used */
  BI_ACCEPT(FN, a.wv[GWS - 1] = NAN);   /* the stride gap is not W */
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.w = NULL);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.out = NULL);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.out = BI_MISALIGN(lshk_index *, &a.outv));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.w = BI_MISALIGN(const float, a.wv));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.gp = BI_MISALIGN(const lshk_graph_params, &a.gv));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.rows = 0);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.dim = 0);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.w_stride = GD - 1);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.gv.struct_size = 0);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.gv.struct_size = (uint32_t)sizeof(lshk_graph_params) - 1);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.struct_size = 0);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.family = 3);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.gv.storage = 3);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.gv.storage = UINT32_MAX);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.gv.reserved = 1);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.gv.m = 0);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.gv.m = 1);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.gv.m = 257);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.gv.ef_construction = 0);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.transform = LSHK_TRANSFORM_BIAS_AUG);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.transform = LSHK_TRANSFORM_MIPS);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.planes = a.planes;
          a.pv.planes_len = 4 * 3 * GD);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.storage = LSHK_STORAGE_F16;
          a.wv[3] = 70000.0f);
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.wv[(GR - 1) * GWS + GD - 1] = NAN);
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.bv[GR - 1] = INFINITY);
  BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.rows = SIZE_MAX);
#undef FN

#define FN lshk_index_query_ex
  BI_BASELINE(FN);
  BI_INDEX_CASES(FN, idx, const lshk_index);
  BI_ACCEPT(FN, a.gq = &a.big.p);
  BI_ACCEPT(FN, a.gq = NULL; a.g = NULL; a.stats = NULL; a.out_scores = NULL);
  BI_ACCEPT(FN, a.gv.probes = 2);             /* LSH options: ignored */
  BI_ACCEPT(FN, a.qpv.rerank = 1);            /* at least k are re-scored */
  BI_ACCEPT(FN, a.qpv.ef = UINT32_MAX);       /* every row */
  BI_ACCEPT(FN, a.idx = bi_fx()->idx; a.g = NULL); /* SimHash: gq ignored */
  BI_CASE(FN, LSHK_STATUS_OK, a.k = 0; o_.n = 2); /* stats still written */
  BI_CASE(FN, LSHK_STATUS_OK, a.nq = 0; a.q = NULL; o_.n = 2);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.q = NULL);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.out_ids = NULL);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.qpv.ef = 0);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.qpv.walk = 2);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.qpv.walk = UINT32_MAX);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.qpv.struct_size = 0);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.qpv.struct_size = (uint32_t)sizeof(lshk_graph_query_params) - 1);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.gv.struct_size = 0);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.gq = BI_MISALIGN(const lshk_graph_query_params, &a.qpv));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.st.struct_size = 0);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.q_stride = GD - 1);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.idx = bi_fx()->idx;
          a.gv.probes = 1u << BI_FX_K); /* SimHash: g checked */
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.qv[(QN - 1) * QS + GD - 1] = NAN);
  BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.nq = SIZE_MAX);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.out_scores = (float *)(void *)a.ib); /* outputs overlap */
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.out_ids = (uint32_t *)(void *)(&a.qpv)); /* over the params */
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.out_ids = BI_MISALIGN(uint32_t, a.ib));
#undef FN

  /* LSH-only calls on a graph index. */
  BI_CASE(lshk_index_tables, LSHK_STATUS_INVALID_ARGUMENT, (void)a);
  BI_CASE(lshk_index_simhash, LSHK_STATUS_INVALID_ARGUMENT, (void)a);
  BI_CASE(lshk_index_train_iul, LSHK_STATUS_INVALID_ARGUMENT, (void)a);

  /* Refused calls left the index as built. */
  BI_EXPECT(lshk_index_query_ex, fp != 0 && query_fingerprint() == fp);

  bi_fx_need(lshk_index_free(gidx), "lshk_index_free");
  bi_fx_teardown();
  return bi_summary("bad_input_index_graph");
}
