/* Bad-input matrix (issue 8), the training kernels (issue 14, item 1).
 * See bad_input.h for what a case asserts (status, this call's message,
 * no byte of any output written; for the row updates W itself is the
 * registered output, filled with the canary, which is a finite float).
 *
 * Functions covered here (tests/bad_input_coverage.rs checks that every
 * function of include/lshk.h is named in some bad_input_*.c):
 *   lshk_softmax_xent_csr lshk_softmax_xent_csr_isa
 *   lshk_gather_dq lshk_gather_dq_isa lshk_rows_update_sgd
 *   lshk_rows_update_sgd_isa
 *   lshk_adam_params_default lshk_adam_new lshk_adam_free
 *   lshk_adam_set_params lshk_adam_step */
#include "bad_input.h"

#define FX bi_fx()

static lshk_adam *adam_live;  /* UR x UD */
static lshk_adam *adam_freed; /* freed last: its slot stays FREED */

/* ---- lshk_softmax_xent_csr[_isa] ---------------------------------------- */
#define XN 7
#define XNB 3
typedef struct {
  float zv[XN + 1];
  float yv[XN + 1];
  size_t offv[XNB + 1];
  float lb[XNB + 1];
  float gb[XN + 1];
  lshk_isa isa;
  const float *logits;
  const float *targets;
  const size_t *offsets;
  size_t nb;
  uint32_t threads;
  float *loss;
  float *grad;
} bi_xe;
static void xe_init(bi_xe *a, bi_outs *o) {
  for (int i = 0; i < XN + 1; i++) {
    a->zv[i] = (float)(i % 4) - 1.5f;
    a->yv[i] = (i % 3 == 0) ? 1.0f : 0.0f;
  }
  a->offv[0] = 0;
  a->offv[1] = 3;
  a->offv[2] = 3;
  a->offv[3] = XN;
  a->isa = LSHK_ISA_SCALAR;
  a->logits = a->zv;
  a->targets = a->yv;
  a->offsets = a->offv;
  a->nb = XNB;
  a->threads = 2;
  a->loss = a->lb;
  a->grad = a->gb;
  bi_out(o, a->lb, sizeof a->lb);
  bi_out(o, a->gb, sizeof a->gb);
}
typedef bi_xe bi_args_lshk_softmax_xent_csr;
typedef bi_xe bi_args_lshk_softmax_xent_csr_isa;
#define bi_init_lshk_softmax_xent_csr xe_init
#define bi_init_lshk_softmax_xent_csr_isa xe_init
static lshk_status bi_call_lshk_softmax_xent_csr(bi_xe *a) {
  return lshk_softmax_xent_csr(a->logits, a->targets, a->offsets, a->nb,
                               a->threads, a->loss, a->grad);
}
static lshk_status bi_call_lshk_softmax_xent_csr_isa(bi_xe *a) {
  return lshk_softmax_xent_csr_isa(a->isa, a->logits, a->targets, a->offsets,
                                   a->nb, a->threads, a->loss, a->grad);
}
#define XE_CASES(FN)                                                           \
  do {                                                                         \
    BI_BASELINE(FN);                                                           \
    BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.logits = NULL);                    \
    BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.targets = NULL);                   \
    BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.offsets = NULL);                   \
    BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.loss = NULL);                      \
    BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.grad = NULL);                      \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,                                  \
            a.logits = BI_MISALIGN(const float, a.zv));                        \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,                                  \
            a.targets = BI_MISALIGN(const float, a.yv));                       \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,                                  \
            a.offsets = BI_MISALIGN(const size_t, a.offv));                    \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,                                  \
            a.loss = BI_MISALIGN(float, a.lb));                                \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,                                  \
            a.grad = BI_MISALIGN(float, a.gb));                                \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.offv[0] = 1);                  \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.offv[1] = 4; a.offv[2] = 3);   \
    BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.offv[XNB] = SIZE_MAX);            \
    BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.nb = SIZE_MAX);                   \
    BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.nb = SIZE_MAX / 4);               \
    BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.zv[4] = NAN);                        \
    BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.zv[XN - 1] = INFINITY);              \
    BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.zv[0] = -INFINITY);                  \
    BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.yv[2] = NAN);                        \
    BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.yv[5] = INFINITY);                   \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.yv[1] = -1.0f);                \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.yv[6] = -1e-30f);              \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,                                  \
            a.grad = a.zv + 1); /* partial overlap with logits */              \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.grad = a.yv);                  \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.loss = a.zv);                  \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.loss = a.gb + 2);              \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,                                  \
            a.loss = (float *)(void *)a.offv);                                 \
    BI_ACCEPT(FN, a.grad = a.zv); /* in place */                               \
    BI_ACCEPT(FN, a.threads = 0);                                              \
    BI_ACCEPT(FN, a.threads = 1000);                                           \
    BI_ACCEPT(FN, a.yv[0] = -0.0f);                                            \
    BI_CASE(FN, LSHK_STATUS_OK, a.nb = 0; a.offv[0] = 0; a.logits = NULL;      \
            a.targets = NULL; a.loss = NULL; a.grad = NULL);                   \
  } while (0)

/* ---- lshk_gather_dq[_isa] --------------------------------------------------
 * One argument block for both element types: dq_dtype picks the one the
 * next cases start from (w is a->wf or a->wh). */
#define DR 5
#define DD 6
#define DWS 7
#define DNB 3
#define DQS 8
#define DN 6
typedef struct {
  float wf[DR * DWS];
  uint16_t wh[DR * DWS];
  float gv[DN];
  uint32_t idv[DN];
  size_t offv[DNB + 1];
  float ob[(DNB - 1) * DQS + DD + 2];
  lshk_isa isa;
  uint32_t dtype;
  const void *w;
  size_t rows, dim, w_stride;
  const float *grad;
  const uint32_t *ids;
  const size_t *offsets;
  size_t nb;
  uint32_t threads;
  float *dq;
  size_t dq_stride;
} bi_dq;
static uint32_t dq_dtype;
static void dq_init(bi_dq *a, bi_outs *o) {
  int bf16 = dq_dtype == LSHK_STORAGE_BF16;
  for (int i = 0; i < DR * DWS; i++) {
    a->wf[i] = (float)(i % 5) * 0.5f - 1.0f;
    a->wh[i] = (uint16_t)(0x3F80 + (i % 9));
  }
  for (int i = 0; i < DN; i++) {
    a->gv[i] = 0.25f * (float)i - 0.5f;
    a->idv[i] = (uint32_t)((i * 3) % DR);
  }
  a->idv[2] = a->idv[1]; /* a duplicate */
  a->offv[0] = 0;
  a->offv[1] = 2;
  a->offv[2] = 2;
  a->offv[3] = DN;
  a->isa = LSHK_ISA_SCALAR;
  a->dtype = dq_dtype;
  a->w = bf16 ? (const void *)a->wh : (const void *)a->wf;
  a->rows = DR;
  a->dim = DD;
  a->w_stride = DWS;
  a->grad = a->gv;
  a->ids = a->idv;
  a->offsets = a->offv;
  a->nb = DNB;
  a->threads = 2;
  a->dq = a->ob;
  a->dq_stride = DQS;
  bi_out(o, a->ob, sizeof a->ob);
}
typedef bi_dq bi_args_lshk_gather_dq;
typedef bi_dq bi_args_lshk_gather_dq_isa;
#define bi_init_lshk_gather_dq dq_init
#define bi_init_lshk_gather_dq_isa dq_init
#define DQ_ARGS                                                                \
  a->dtype, a->w, a->rows, a->dim, a->w_stride, a->grad, a->ids, a->offsets,   \
      a->nb, a->threads, a->dq, a->dq_stride
static lshk_status bi_call_lshk_gather_dq(bi_dq *a) {
  return lshk_gather_dq(DQ_ARGS);
}
static lshk_status bi_call_lshk_gather_dq_isa(bi_dq *a) {
  return lshk_gather_dq_isa(a->isa, DQ_ARGS);
}
/* The cases of one element type. */
#define DQ_CASES(FN, DTYPE)                                                    \
  do {                                                                         \
    dq_dtype = (DTYPE);                                                        \
    BI_BASELINE(FN);                                                           \
    BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.w = NULL);                         \
    BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.grad = NULL);                      \
    BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.ids = NULL);                       \
    BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.offsets = NULL);                   \
    BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.dq = NULL);                        \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.dim = 0);                      \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.w_stride = DD - 1);            \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.dq_stride = DD - 1);           \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.w_stride = 0);                 \
    BI_CASE(FN, LSHK_STATUS_INDEX_OUT_OF_RANGE, a.idv[4] = DR);                \
    BI_CASE(FN, LSHK_STATUS_INDEX_OUT_OF_RANGE, a.idv[0] = UINT32_MAX);        \
    BI_CASE(FN, LSHK_STATUS_INDEX_OUT_OF_RANGE, a.rows = 2);                   \
    BI_CASE(FN, LSHK_STATUS_INDEX_OUT_OF_RANGE, a.rows = 0);                   \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.offv[0] = 1);                  \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.offv[1] = 4; a.offv[2] = 3);   \
    BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.offv[DNB] = SIZE_MAX);            \
    BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.rows = SIZE_MAX);                 \
    BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.w_stride = SIZE_MAX / 2);         \
    BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.dq_stride = SIZE_MAX / 2);        \
    BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.nb = SIZE_MAX);                   \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.w = (const char *)a.w + 1);    \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,                                  \
            a.grad = BI_MISALIGN(const float, a.gv));                          \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,                                  \
            a.ids = BI_MISALIGN(const uint32_t, a.idv));                       \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,                                  \
            a.offsets = BI_MISALIGN(const size_t, a.offv));                    \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.dq = BI_MISALIGN(float, a.ob)); \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,                                  \
            a.dq = (float *)(void *)((char *)(uintptr_t)a.w)); /* w */         \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.dq = a.gv);                    \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,                                  \
            a.dq = (float *)(void *)a.idv);                                    \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,                                  \
            a.dq = (float *)(void *)a.offv);                                   \
    BI_ACCEPT(FN, a.threads = 0);                                              \
    BI_CASE(FN, LSHK_STATUS_OK, a.nb = 0; a.offv[0] = 0; a.dq = NULL;          \
            a.ids = NULL; a.grad = NULL);                                      \
  } while (0)

/* ---- row updates: lshk_rows_update_sgd[_isa], lshk_adam_step ------------ */
#define UR 6
#define UD 4
#define UWS 5
#define UNB 3
#define UQS 4
#define UN 7
typedef struct {
  float wb[UR * UWS];
  float qv[UNB * UQS];
  float gv[UN];
  uint32_t idv[UN];
  size_t offv[UNB + 1];
  lshk_isa isa;
  lshk_adam *adam;
  float *w;
  size_t rows, dim, w_stride;
  const float *q;
  size_t q_stride;
  const float *grad;
  const uint32_t *ids;
  const size_t *offsets;
  size_t nb;
  float lr;
  uint32_t threads;
} bi_up;
static void up_init(bi_up *a, bi_outs *o) {
  for (int i = 0; i < UNB * UQS; i++) a->qv[i] = (float)(i % 5) * 0.25f - 0.5f;
  for (int i = 0; i < UN; i++) {
    a->gv[i] = 0.125f * (float)i - 0.375f;
    a->idv[i] = (uint32_t)((i * 5) % UR);
  }
  a->idv[4] = a->idv[0]; /* a row in two samples */
  a->offv[0] = 0;
  a->offv[1] = 3;
  a->offv[2] = 3;
  a->offv[3] = UN;
  a->isa = LSHK_ISA_SCALAR;
  a->adam = adam_live;
  a->w = a->wb;
  a->rows = UR;
  a->dim = UD;
  a->w_stride = UWS;
  a->q = a->qv;
  a->q_stride = UQS;
  a->grad = a->gv;
  a->ids = a->idv;
  a->offsets = a->offv;
  a->nb = UNB;
  a->lr = 0.5f;
  a->threads = 2;
  bi_out(o, a->wb, sizeof a->wb); /* the canary is a finite float */
}
typedef bi_up bi_args_lshk_rows_update_sgd;
typedef bi_up bi_args_lshk_rows_update_sgd_isa;
typedef bi_up bi_args_lshk_adam_step;
#define bi_init_lshk_rows_update_sgd up_init
#define bi_init_lshk_rows_update_sgd_isa up_init
#define bi_init_lshk_adam_step up_init
#define UP_ARGS                                                                \
  a->w, a->rows, a->dim, a->w_stride, a->q, a->q_stride, a->grad, a->ids,      \
      a->offsets, a->nb
static lshk_status bi_call_lshk_rows_update_sgd(bi_up *a) {
  return lshk_rows_update_sgd(UP_ARGS, a->lr, a->threads);
}
static lshk_status bi_call_lshk_rows_update_sgd_isa(bi_up *a) {
  return lshk_rows_update_sgd_isa(a->isa, UP_ARGS, a->lr, a->threads);
}
static lshk_status bi_call_lshk_adam_step(bi_up *a) {
  return lshk_adam_step(a->adam, UP_ARGS, a->threads);
}
#define UP_CASES(FN)                                                           \
  do {                                                                         \
    BI_BASELINE(FN);                                                           \
    BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.w = NULL);                         \
    BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.q = NULL);                         \
    BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.grad = NULL);                      \
    BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.ids = NULL);                       \
    BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.offsets = NULL);                   \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.dim = 0);                      \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.w_stride = UD - 1);            \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.q_stride = UD - 1);            \
    BI_CASE(FN, LSHK_STATUS_INDEX_OUT_OF_RANGE, a.idv[6] = UR);                \
    BI_CASE(FN, LSHK_STATUS_INDEX_OUT_OF_RANGE, a.idv[0] = UINT32_MAX);        \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.offv[0] = 1);                  \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.offv[1] = 5; a.offv[2] = 4);   \
    BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.offv[UNB] = SIZE_MAX);            \
    BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.w_stride = SIZE_MAX / 2);         \
    BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.q_stride = SIZE_MAX / 2);         \
    BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.nb = SIZE_MAX);                   \
    BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.gv[3] = NAN);                        \
    BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.gv[UN - 1] = -INFINITY);             \
    BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.qv[UQS + 1] = INFINITY);             \
    BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.qv[0] = NAN);                        \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.w = BI_MISALIGN(float, a.wb)); \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,                                  \
            a.q = BI_MISALIGN(const float, a.qv));                             \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,                                  \
            a.grad = BI_MISALIGN(const float, a.gv));                          \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,                                  \
            a.ids = BI_MISALIGN(const uint32_t, a.idv));                       \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,                                  \
            a.offsets = BI_MISALIGN(const size_t, a.offv));                    \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.q = a.wb + 2); /* overlap */   \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.grad = a.wb);                  \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,                                  \
            a.ids = (const uint32_t *)(void *)(a.wb + (UR - 1) * UWS + UD - 1));          \
    BI_ACCEPT(FN, a.threads = 0);                                              \
    BI_ACCEPT(FN, a.threads = 1000);                                           \
    BI_CASE(FN, LSHK_STATUS_OK, a.nb = 0; a.q = NULL; a.grad = NULL;           \
            a.ids = NULL);                                                     \
  } while (0)
#define SGD_ISA_CASES(FN)                                                      \
  do {                                                                         \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.isa = 4);                      \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.isa = UINT32_MAX);             \
    BI_CASE_NO_AVX512(FN, LSHK_STATUS_UNSUPPORTED_ISA, a.isa = LSHK_ISA_AVX512); \
  } while (0)

/* ---- lshk_adam_new ------------------------------------------------------- */
typedef struct {
  size_t rows, dim;
  lshk_adam_params pv;
  struct {
    lshk_adam_params p;
    uint32_t tail[4];
  } big;
  const lshk_adam_params *params;
  lshk_adam *outv;
  lshk_adam **out;
} bi_args_lshk_adam_new;
static void bi_init_lshk_adam_new(bi_args_lshk_adam_new *a, bi_outs *o) {
  a->rows = 10;
  a->dim = 3;
  a->pv = lshk_adam_params_default();
  a->big.p = lshk_adam_params_default();
  a->big.p.struct_size = (uint32_t)sizeof a->big;
  a->big.tail[0] = 0xFFFFFFFFu;
  a->params = &a->pv;
  a->out = &a->outv;
  bi_out(o, &a->outv, sizeof a->outv);
}
static lshk_status bi_call_lshk_adam_new(bi_args_lshk_adam_new *a) {
  lshk_adam *before = a->outv;
  lshk_status s = lshk_adam_new(a->rows, a->dim, a->params, a->out);
  if (s == LSHK_STATUS_OK && a->out != NULL && *a->out != before)
    lshk_adam_free(*a->out);
  return s;
}

/* ---- lshk_adam_free ------------------------------------------------------ */
typedef struct {
  lshk_adam *adam;
} bi_args_lshk_adam_free;
static void bi_init_lshk_adam_free(bi_args_lshk_adam_free *a, bi_outs *o) {
  (void)o;
  a->adam = NULL;
}
static lshk_status bi_call_lshk_adam_free(bi_args_lshk_adam_free *a) {
  return lshk_adam_free(a->adam);
}

/* ---- lshk_adam_set_params ------------------------------------------------ */
typedef struct {
  lshk_adam *adam;
  lshk_adam_params pv;
  const lshk_adam_params *params;
} bi_args_lshk_adam_set_params;
static void bi_init_lshk_adam_set_params(bi_args_lshk_adam_set_params *a,
                                         bi_outs *o) {
  (void)o;
  a->adam = adam_live;
  a->pv = lshk_adam_params_default();
  a->pv.lr = 0.01f;
  a->params = &a->pv;
}
static lshk_status bi_call_lshk_adam_set_params(
    bi_args_lshk_adam_set_params *a) {
  return lshk_adam_set_params(a->adam, a->params);
}

/* Invalid Adam parameters, for lshk_adam_new and lshk_adam_set_params. */
#define ADAM_PARAM_CASES(FN)                                                   \
  do {                                                                         \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.struct_size = 0);           \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,                                  \
            a.pv.struct_size = (uint32_t)sizeof(lshk_adam_params) - 1);        \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,                                  \
            a.params = BI_MISALIGN(const lshk_adam_params, &a.pv));            \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.beta1 = 1.0f);              \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.beta1 = -0.5f);             \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.beta2 = NAN);               \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.beta2 = 2.0f);              \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.eps = 0.0f);                \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.eps = INFINITY);            \
    BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.pv.eps = -1e-8f);              \
    BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.pv.lr = NAN);                        \
    BI_CASE(FN, LSHK_STATUS_NON_FINITE, a.pv.lr = -INFINITY);                  \
  } while (0)

int main(void) {
  bi_fx_setup();
  bi_fx_need(lshk_adam_new(UR, UD, NULL, &adam_live), "lshk_adam_new");
  bi_fx_need(lshk_adam_new(2, 2, NULL, &adam_freed), "lshk_adam_new");
  bi_fx_need(lshk_adam_free(adam_freed), "lshk_adam_free");

  {
    lshk_adam_params p = lshk_adam_params_default();
    BI_EXPECT(lshk_adam_params_default,
              p.struct_size == sizeof p && p.lr == 1e-3f && p.beta1 == 0.9f &&
                  p.beta2 == 0.999f && p.eps == 1e-8f);
  }

  XE_CASES(lshk_softmax_xent_csr);
  XE_CASES(lshk_softmax_xent_csr_isa);
  SGD_ISA_CASES(lshk_softmax_xent_csr_isa);

  DQ_CASES(lshk_gather_dq, LSHK_STORAGE_F32);
  DQ_CASES(lshk_gather_dq_isa, LSHK_STORAGE_F32);
  SGD_ISA_CASES(lshk_gather_dq_isa);
  DQ_CASES(lshk_gather_dq, LSHK_STORAGE_BF16);
  DQ_CASES(lshk_gather_dq_isa, LSHK_STORAGE_BF16);
  SGD_ISA_CASES(lshk_gather_dq_isa);
  /* a dtype other than F32 (or BORROWED_F32, which names f32 rows too) or
     BF16, refused before the buffers */
  dq_dtype = LSHK_STORAGE_F32;
  BI_CASE(lshk_gather_dq, LSHK_STATUS_INVALID_ARGUMENT,
          a.dtype = LSHK_STORAGE_F16);
  BI_CASE(lshk_gather_dq, LSHK_STATUS_INVALID_ARGUMENT,
          a.dtype = LSHK_STORAGE_I8);
  BI_CASE(lshk_gather_dq, LSHK_STATUS_INVALID_ARGUMENT, a.dtype = 5);
  BI_CASE(lshk_gather_dq, LSHK_STATUS_INVALID_ARGUMENT, a.dtype = UINT32_MAX);
  BI_CASE(lshk_gather_dq, LSHK_STATUS_INVALID_ARGUMENT,
          a.dtype = LSHK_STORAGE_F16; a.nb = 0; a.offv[0] = 0; a.dq = NULL;
          a.ids = NULL; a.grad = NULL);
  BI_CASE(lshk_gather_dq, LSHK_STATUS_INVALID_ARGUMENT,
          a.dtype = LSHK_STORAGE_I8; a.w = NULL);
  BI_CASE(lshk_gather_dq_isa, LSHK_STATUS_INVALID_ARGUMENT,
          a.dtype = LSHK_STORAGE_F16);
  BI_CASE(lshk_gather_dq_isa, LSHK_STATUS_INVALID_ARGUMENT, a.dtype = 5);
  BI_CASE(lshk_gather_dq_isa, LSHK_STATUS_INVALID_ARGUMENT,
          a.dtype = UINT32_MAX; a.isa = LSHK_ISA_PORTABLE);

  UP_CASES(lshk_rows_update_sgd);
  BI_CASE(lshk_rows_update_sgd, LSHK_STATUS_NON_FINITE, a.lr = NAN);
  BI_CASE(lshk_rows_update_sgd, LSHK_STATUS_NON_FINITE, a.lr = INFINITY);
  UP_CASES(lshk_rows_update_sgd_isa);
  SGD_ISA_CASES(lshk_rows_update_sgd_isa);

  UP_CASES(lshk_adam_step);
  BI_HANDLE_CASES(lshk_adam_step, adam, lshk_adam, adam_freed, (lshk_adam *)NULL,
                  adam_live, FX->sh, FX->tb);
  BI_CASE(lshk_adam_step, LSHK_STATUS_INVALID_ARGUMENT, a.rows = UR - 1);
  BI_CASE(lshk_adam_step, LSHK_STATUS_INVALID_ARGUMENT, a.dim = UD + 1;
          a.w_stride = UWS + 1; a.q_stride = UQS + 1);

#define FN lshk_adam_new
  BI_BASELINE(FN);
  ADAM_PARAM_CASES(FN);
  BI_CASE(FN, LSHK_STATUS_NULL_POINTER, a.out = NULL);
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT,
          a.out = BI_MISALIGN(lshk_adam *, &a.outv));
  BI_CASE(FN, LSHK_STATUS_INVALID_ARGUMENT, a.dim = 0);
  BI_CASE(FN, LSHK_STATUS_SIZE_OVERFLOW, a.rows = SIZE_MAX / 2);
  if (bi_huge_alloc_ok())
    BI_CASE(FN, LSHK_STATUS_ALLOCATION_FAILED, a.rows = (size_t)1 << 40);
  BI_ACCEPT(FN, a.params = NULL);
  BI_ACCEPT(FN, a.params = &a.big.p); /* larger struct_size */
  BI_ACCEPT(FN, a.rows = 0);
#undef FN

#define FN lshk_adam_set_params
  BI_BASELINE(FN);
  ADAM_PARAM_CASES(FN);
  BI_HANDLE_CASES(FN, adam, lshk_adam, adam_freed, (lshk_adam *)NULL,
                  adam_live, FX->sh, FX->tb);
  BI_ACCEPT(FN, a.params = NULL);
#undef FN

#define FN lshk_adam_free
  BI_BASELINE(FN); /* NULL: no-op */
  BI_CASE(FN, LSHK_STATUS_INVALID_HANDLE, a.adam = adam_freed);
  BI_CASE(FN, LSHK_STATUS_INVALID_HANDLE, a.adam = (lshk_adam *)(void *)FX->sh);
  BI_CASE(FN, LSHK_STATUS_INVALID_HANDLE,
          a.adam = (lshk_adam *)(void *)FX->idx);
  BI_CASE(FN, LSHK_STATUS_INVALID_HANDLE, a.adam = BI_GARBAGE(lshk_adam));
  BI_CASE(FN, LSHK_STATUS_INVALID_HANDLE,
          a.adam = BI_MISALIGN(lshk_adam, adam_live));
  BI_ACCEPT(FN, bi_fx_need(lshk_adam_new(3, 2, NULL, &a.adam), "new"));
#undef FN

  bi_fx_need(lshk_adam_free(adam_live), "lshk_adam_free");
  bi_fx_teardown();
  return bi_summary("bad_input_train");
}
