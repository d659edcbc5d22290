/* Bad-input matrix (issue 8) for the LSH inclusion probabilities of a logQ
 * correction (issue 14): lshk_index_inclusion_prob, a SimHash-only call.
 * See bad_input.h for what a case asserts.
 *
 * Functions covered here:
 *   lshk_index_inclusion_prob */
#include "bad_input.h"

#define FX bi_fx()
#define IR BI_FX_ROWS
#define ID BI_FX_DIM
#define NQ 2
#define QS 10 /* query stride, > dim */
#define NI 5  /* candidates in all */

static lshk_index *labelled;

/* ---- lshk_index_inclusion_prob ------------------------------------------- */
typedef struct {
  const lshk_index *idx;
  _Alignas(8) float qv[NQ * QS];
  _Alignas(8) uint32_t idv[NI + 1];
  _Alignas(8) size_t ov[NQ + 1];
  _Alignas(8) uint32_t tv[NQ];
  _Alignas(8) double outv[NI + 1];
  const float *q;
  size_t nq;
  size_t q_stride;
  const uint32_t *ids;
  const size_t *offsets;
  const uint32_t *tables_used;
  double *out;
} bi_args_lshk_index_inclusion_prob;
static void bi_init_lshk_index_inclusion_prob(bi_args_lshk_index_inclusion_prob *a,
                                              bi_outs *o) {
  for (int i = 0; i < NQ * QS; i++) a->qv[i] = (float)((i * 5) % 9) / 4.0f - 1.0f;
  for (int j = 0; j < NI + 1; j++) a->idv[j] = (uint32_t)(j * 7 + 3) % IR;
  a->ov[0] = 0;
  a->ov[1] = 2;
  a->ov[2] = NI;
  a->tv[0] = BI_FX_L;
  a->tv[1] = 1;
  a->idx = FX->idx;
  a->q = a->qv;
  a->nq = NQ;
  a->q_stride = QS;
  a->ids = a->idv;
  a->offsets = a->ov;
  a->tables_used = a->tv;
  a->out = a->outv;
  bi_out(o, a->outv, sizeof a->outv);
}
static lshk_status bi_call_lshk_index_inclusion_prob(bi_args_lshk_index_inclusion_prob *a) {
  return lshk_index_inclusion_prob(a->idx, a->q, a->nq, a->q_stride, a->ids, a->offsets,
                                   a->tables_used, a->out);
}

int main(void) {
  bi_fx_setup();
  {
    lshk_index_params p = lshk_index_params_default();
    float q[4 * ID];
    size_t lo[5] = {0, 1, 2, 3, 4};
    uint32_t lv[4] = {1, 5, 9, 13};
    p.lsh.bits_per_table = BI_FX_K;
    p.lsh.tables = BI_FX_L;
    p.build_threads = 1;
    bi_fx_need(lshk_index_build(FX->w, FX->bias, IR, ID, ID, &p, &labelled),
               "lshk_index_build");
    for (int i = 0; i < 4 * ID; i++) q[i] = (float)((i * 5) % 9) - 4.0f;
    bi_fx_need(lshk_index_train_labels(labelled, q, 4, ID, lo, lv, NULL),
               "lshk_index_train_labels");
  }

#define FN lshk_index_inclusion_prob
  BI_BASELINE(FN);
  BI_ACCEPT(FN, a.tables_used = NULL);
  BI_ACCEPT(FN, a.q_stride = ID);
  BI_ACCEPT(FN, a.ov[1] = 0);
  BI_ACCEPT(FN, a.tv[0] = 0);
  BI_ACCEPT(FN, a.nq = 0; a.q = NULL; a.ids = NULL; a.out = NULL; a.tables_used = NULL);
  BI_ACCEPT(FN, a.nq = 1; a.ov[1] = 0; a.ids = NULL; a.out = NULL);
  BI_ACCEPT(FN, a.idx = FX->idx_pool[2]);
  BI_INDEX_CASES(FN, idx, const lshk_index);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.idx = FX->idx_dw);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.idx = labelled);
  /* a SimHash-only call: the sources without hash tables refuse it */
  BI_CASE(FN, LSHK_STATUS_UNSUPPORTED, a.idx = FX->idx_ivf);
  BI_CASE(FN, LSHK_STATUS_UNSUPPORTED, a.idx = FX->idx_graph);
  BI_CASE(FN, LSHK_STATUS_UNSUPPORTED, a.idx = FX->idx_forest);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.q = NULL);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.ids = NULL);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.offsets = NULL);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.out = NULL);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.offsets = NULL; a.nq = 0);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.q_stride = ID - 1);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.q_stride = 0);
  BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.q_stride = SIZE_MAX / 2);
  BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.nq = SIZE_MAX);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.ov[0] = 1);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.ov[1] = 6);
  BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.ov[2] = SIZE_MAX);
  BI_CASE(FN, LSHK_STATUS_INDEX_OUT_OF_RANGE, a.idv[NI - 1] = IR);
  BI_CASE(FN, LSHK_STATUS_INDEX_OUT_OF_RANGE, a.idv[0] = UINT32_MAX);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.tv[1] = BI_FX_L + 1);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.tv[0] = UINT32_MAX);
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.qv[QS + ID - 1] = NAN);
  BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.qv[0] = -INFINITY);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.q = BI_MISALIGN(const float, a.qv));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.ids = BI_MISALIGN(const uint32_t, a.idv));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.offsets = BI_MISALIGN(const size_t, a.ov));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.tables_used = BI_MISALIGN(const uint32_t, a.tv));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.out = BI_MISALIGN(double, a.outv));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.out = (double *)(void *)a.qv);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.out = (double *)(void *)a.idv);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.out = (double *)(void *)a.ov);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.out = (double *)(void *)a.tv);
#undef FN
  {
    /* A query equal to a row (no transform) shares its bucket in every
     * table (P = 1); 0 tables give 0; a zero query gives 1-(1-2^-K)^L. */
    float q[2 * ID];
    uint32_t ids[3] = {7, 7, 8};
    size_t offs[3] = {0, 2, 3};
    uint32_t tabs[2] = {BI_FX_L, 0};
    double out[3] = {-1.0, -1.0, -1.0};
    double miss = 1.0, pk = 1.0, pz, d;
    for (int b = 0; b < BI_FX_K; b++) pk *= 0.5;
    for (int t = 0; t < BI_FX_L; t++) miss *= 1.0 - pk;
    pz = 1.0 - miss; /* no libm: the harness does not link -lm */
    memcpy(q, &FX->w[7 * ID], ID * sizeof(float));
    memset(&q[ID], 0, ID * sizeof(float));
    BI_EXPECT(lshk_index_inclusion_prob,
              lshk_index_inclusion_prob(FX->idx, q, 2, ID, ids, offs, tabs, out) ==
                      LSHK_STATUS_OK &&
                  out[0] == 1.0 && out[1] == 1.0 && out[2] == 0.0);
    tabs[1] = BI_FX_L;
    BI_EXPECT(lshk_index_inclusion_prob,
              lshk_index_inclusion_prob(FX->idx, q, 2, ID, ids, offs, tabs, out) ==
                      LSHK_STATUS_OK &&
                  (d = out[2] - pz, d < 1e-15 && d > -1e-15));
  }

  bi_fx_need(lshk_index_free(labelled), "lshk_index_free");
  bi_fx_teardown();
  return bi_summary("bad_input_train_logq");
}
